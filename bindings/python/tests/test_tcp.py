"""`Spaces(url=..., token=...)` reaches a daemon over TCP with its bearer token; a wrong token is refused."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from spaces import CuaError, Spaces


async def test_remote_daemon_over_tcp() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        state, log = Path(tmp) / "state", Path(tmp) / "daemon.log"
        with open(log, "wb") as out:
            daemon = subprocess.Popen([sys.executable, "-m", "spaces._daemon", "--state-dir", str(state), "serve",
                                       "--tcp", "127.0.0.1:0"], stdout=out, stderr=out)
        try:
            deadline = time.monotonic() + 30
            while not (m := re.search(r"listening on (http://\S+) \(operator's bearer token in (\S+)\)", log.read_text())):
                assert daemon.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
            url, token = m.group(1), Path(m.group(2)).read_text().strip()
            remote = Spaces(url=url, token=token)
            # A Space may not contain the state dir: it gets a folder of its own.
            root = Path(tmp) / "work"
            root.mkdir()
            (root / "notes.log").write_text("far away\n")
            await remote.add_space("far", str(root))
            assert [s["name"] for s in await remote.list_spaces()] == ["far"]
            assert "notes.log" in str(await remote.space("far").find(glob="*.log"))
            with pytest.raises(CuaError) as e:
                await Spaces(url=url, token="wrong").list_spaces()
            assert e.value.code == "UNAUTHORIZED"
        finally:
            daemon.terminate()
            daemon.wait(timeout=10)
