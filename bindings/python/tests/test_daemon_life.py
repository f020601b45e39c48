"""A daemon the SDK started ends when its last client is gone (``close()``, the end of an
``async with``, or the process exiting), once no turn is in flight; ``keep_daemon=True`` keeps it
(issue 32). Each test has a state dir (and so a daemon) of its own."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

from conftest import SCRIPTED_MODEL, daemon_pids, kill_daemons
from spaces import Spaces

#: The daemon waits this long with no client (spacesd's unused::GRACE) before it ends.
GRACE_S = 3
#: How long a test waits for a daemon to end, well past GRACE_S on a busy machine.
END_TIMEOUT_S = 30


@pytest.fixture
def state() -> Iterator[Path]:
    # Not pytest's tmp_path: a Unix socket path must stay under 108 bytes.
    d = Path(tempfile.mkdtemp(prefix="spaces-life-"))
    yield d / "state"
    kill_daemons(d / "state")
    shutil.rmtree(d, ignore_errors=True)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (not yet reaped by this process's reaper thread) has ended too.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


async def ends(pid: int) -> bool:
    deadline = time.monotonic() + END_TIMEOUT_S
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


async def test_the_daemon_ends_after_the_last_client_closes(state: Path) -> None:
    first = Spaces(state_dir=state)
    await first.list_spaces()
    pid = first.daemon_pid
    assert pid is not None, "the first client started the daemon"
    async with Spaces(state_dir=state) as second:
        await second.list_spaces()
        assert second.daemon_pid is None, "the second client found it answering"
        first.close()
        await asyncio.sleep(GRACE_S + 1.5)
        assert alive(pid), "the second client still holds the daemon"
    assert await ends(pid), "the daemon outlived its last client"
    assert not (state / "spacesd.hold").exists(), "the hold socket is removed at exit"
    assert "no client has held this daemon" in (state / "spacesd.log").read_text()
    # A later call starts a daemon again.
    await first.list_spaces()
    assert first.daemon_pid is not None and first.daemon_pid != pid


def script(state: Path, keep: bool) -> int:
    """A script that makes one call and exits without closing; returns the daemon's pid."""
    code = (
        "import asyncio, sys, spaces\n"
        "async def main():\n"
        f"    s = spaces.Spaces(state_dir=sys.argv[1], keep_daemon={keep})\n"
        "    await s.list_spaces()\n"
        "    print(s.daemon_pid)\n"
        "asyncio.run(main())\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(state)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


async def test_a_script_that_exits_lets_its_daemon_go(state: Path) -> None:
    pid = script(state, keep=False)
    assert await ends(pid), "the daemon outlived the script that started it"


async def test_keep_daemon_keeps_it_running_after_the_script(state: Path) -> None:
    pid = script(state, keep=True)
    await asyncio.sleep(GRACE_S + 2)
    assert alive(pid), "keep_daemon=True: the daemon runs on after the script"
    assert daemon_pids(state) == [pid]


async def test_keep_daemon_keeps_one_another_client_started(state: Path) -> None:
    first = Spaces(state_dir=state)
    await first.list_spaces()
    pid = first.daemon_pid
    assert pid is not None
    keeper = Spaces(state_dir=state, keep_daemon=True)
    await keeper.list_spaces()
    first.close()
    keeper.close()
    await asyncio.sleep(GRACE_S + 2)
    assert alive(pid), "a client asked to keep it: it runs on"


async def test_a_turn_in_flight_keeps_the_daemon_until_it_ends(state: Path, claude_ready: None) -> None:
    # A model of its own whose answer takes about 6 s, streamed in pieces.
    script_file = state.parent / "model.json"
    script_file.write_text(json.dumps({
        "replies": [{"slow_text": {"text": "slow answer that must arrive whole", "chunks": 12, "delay_ms": 500}}],
        "fallback": {"text": "done"},
    }))
    model = subprocess.Popen([str(SCRIPTED_MODEL), "--wire", "anthropic", "--script", str(script_file)],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert model.stdout is not None
        url = model.stdout.readline().decode().split()[-1]
        proj = state.parent / "proj"
        proj.mkdir()
        spaces = Spaces(state_dir=state)
        await spaces.add_space("life", proj)
        space = spaces.space("life")
        run = await space.agent_start("claude-code", "answer slowly", options={"base_url": url})
        pid = spaces.daemon_pid
        assert pid is not None
        spaces.close()
        await asyncio.sleep(GRACE_S + 1)
        assert alive(pid), "the turn is still in flight: the daemon waits for it"
        assert await ends(pid), "the daemon did not end after the turn"
        # The next daemon reads the turn as it ended: whole, not cut by the exit.
        async with Spaces(state_dir=state) as again:
            status = await again.space("life").agent_status(run.run_id)
            assert status.status in ("idle", "done"), status
            assert status.result_text == "slow answer that must arrive whole", status
    finally:
        model.terminate()
        model.wait(timeout=10)


async def test_first_calls_made_together_start_one_daemon(state: Path) -> None:
    spaces = Spaces(state_dir=state)
    await asyncio.gather(*(spaces.list_spaces() for _ in range(5)))
    assert spaces.daemon_pid is not None
    assert daemon_pids(state) == [spaces.daemon_pid]


async def test_of_two_daemons_started_at_once_one_serves_and_is_held(state: Path) -> None:
    command = [sys.executable, "-m", "spaces._daemon", "--state-dir", str(state), "serve", "--exit-when-unused"]
    state.mkdir(parents=True)
    procs = [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(2)]
    try:
        deadline = time.monotonic() + END_TIMEOUT_S
        while sum(p.poll() is None for p in procs) != 1 or not (state / "spacesd.sock").exists():
            assert time.monotonic() < deadline, "want exactly one daemon left serving"
            await asyncio.sleep(0.1)
        async with Spaces(state_dir=state) as spaces:
            await spaces.list_spaces()
            assert spaces._hold is not None, "the daemon left serving owns the hold socket"
        loser = next(p for p in procs if p.poll() is not None)
        assert loser.stderr is not None and b"another spacesd" in loser.stderr.read()
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=10)


async def test_an_mcp_server_of_the_cli_holds_the_daemon_too(state: Path) -> None:
    spaces = Spaces(state_dir=state)
    await spaces.list_spaces()
    pid = spaces.daemon_pid
    assert pid is not None
    # `spacesd mcp` (here the package's own entry point) on stdio, kept open.
    mcp = subprocess.Popen([sys.executable, "-m", "spaces._daemon", "--state-dir", str(state), "mcp"],
                           stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await asyncio.sleep(1)
        spaces.close()
        await asyncio.sleep(GRACE_S + 2)
        assert alive(pid), "the MCP server holds the daemon"
    finally:
        assert mcp.stdin is not None
        mcp.stdin.close()
        mcp.wait(timeout=30)
    assert await ends(pid), "the daemon outlived its last client, the MCP server"
