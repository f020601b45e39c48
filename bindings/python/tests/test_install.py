"""The wheel scripts/dist builds, installed into a fresh venv under /tmp as a user would: its
daemon starts and runs a command in a Space. The sandbox hides /tmp from every command, so the
venv and the package must be shown to the sandbox's helper (SPACES_SELF_PATHS): a new-user trial
found every command failing for an SDK installed there. The wheel is read from $SPACES_DIST_DIR
(scripts/test sets it), else <repo>/dist."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from conftest import REPO, kill_daemons

SCRIPT = """
import asyncio, sys
from spaces import Spaces

async def main():
    async with Spaces(state_dir=sys.argv[1]) as spaces:
        await spaces.add_space("t", sys.argv[2])
        space = spaces.space("t")
        proc = await space.exec_command(command=["sh", "-c", "echo hello from $PWD"])
        out, cursor = "", 0
        while True:
            page = await space.read_process(process_id=proc["process_id"], cursor=cursor, wait_ms=2000)
            out, cursor = out + page["chunk"], page["cursor"]
            if page["eof"]:
                break
        print(out.strip())

asyncio.run(main())
"""


def test_the_wheel_installed_in_a_venv_under_tmp_runs_commands() -> None:
    dist = Path(os.environ.get("SPACES_DIST_DIR", REPO / "dist"))
    wheels = sorted(dist.glob("spaces-*.whl"))
    assert len(wheels) == 1, f"want one spaces-*.whl in {dist}: run scripts/dist (scripts/test does)"
    root = Path(tempfile.mkdtemp(prefix="spaces-inst-"))
    try:
        venv, space, state = root / "v", root / "p", root / "s"
        space.mkdir()
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        subprocess.run([str(venv / "bin/pip"), "install", "--quiet", "--no-index", "--no-deps", str(wheels[0])],
                       check=True, timeout=120)
        out = subprocess.run([str(venv / "bin/python"), "-c", SCRIPT, str(state), str(space)],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == f"hello from {space}", (out.stdout, out.stderr)
    finally:
        kill_daemons(root / "s")
        shutil.rmtree(root, ignore_errors=True)
