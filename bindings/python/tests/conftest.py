"""Fixtures of the Python SDK's suite: a clean state dir whose daemon the SDK itself starts (and
this suite kills at the end: it is detached by design), a Space, and the test kit's
`scripted-model` serving a scripted Anthropic conversation on 127.0.0.1 for the real Claude Code
CLI (installed by `spacesd tools install` into $SPACES_TOOLS_DIR)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator, List

import pytest

from spaces import Spaces

REPO = Path(__file__).resolve().parents[3]
SCRIPTED_MODEL = Path(os.environ.get("SPACES_SCRIPTED_MODEL", REPO / "target/debug/scripted-model"))

#: What the scripted model answers, in order (then the fallback): turn 1, a slow turn 2 that the
#: test interrupts, turn 3.
SCRIPT = {
    "replies": [
        {"text": "Hello from the scripted model."},
        {"slow_text": {"text": "a very long answer that will be cut", "chunks": 60, "delay_ms": 500}},
        {"text": "after the interrupt"},
    ],
    "fallback": {"text": "done"},
}


def daemon_pids(state_dir: Path) -> List[int]:
    """Pids of daemons serving `state_dir` (a unique temp path), found by their command line."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        # `serve`: not the sandboxes of its runs and commands, whose command lines name both.
        if b"spaces._daemon" in argv and str(state_dir).encode() in argv and b"serve" in argv:
            pids.append(int(proc.name))
    return pids


def kill_daemons(state_dir: Path) -> None:
    """Ends the detached daemons of `state_dir`: SIGTERM, then SIGKILL after 5 s."""
    pids = daemon_pids(state_dir)
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while daemon_pids(state_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in daemon_pids(state_dir):
        os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def root() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="spaces-pytest-"))
    yield d
    kill_daemons(d / "state")
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def spaces(root: Path) -> Spaces:
    state = root / "state"
    assert not state.exists(), "the suite starts from a clean state dir"
    return Spaces(state_dir=state)


@pytest.fixture(scope="session")
async def space(spaces: Spaces, root: Path):
    proj = root / "proj"
    proj.mkdir()
    (proj / "notes.txt").write_text("one\ntwo\n")
    record = await spaces.add_space("demo", proj)
    assert record["name"] == "demo" and record["root"] == str(proj)
    return spaces.space("demo")


@pytest.fixture(scope="session")
def model_url(root: Path) -> Iterator[str]:
    assert SCRIPTED_MODEL.is_file(), f"no {SCRIPTED_MODEL}: run `cargo build -p spaces-testkit --bins` (scripts/test does)"
    script = root / "model.json"
    script.write_text(json.dumps(SCRIPT))
    log = open(root / "model.log", "wb")
    proc = subprocess.Popen([str(SCRIPTED_MODEL), "--wire", "anthropic", "--script", str(script)],
                            stdout=subprocess.PIPE, stderr=log)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    assert line.startswith("listening on "), f"scripted-model did not start: {line!r}"
    yield line.split()[-1]
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


@pytest.fixture(scope="session")
def claude_ready() -> None:
    tools = Path(os.environ.get("SPACES_TOOLS_DIR", REPO / ".tools"))
    assert (tools / "claude-code").is_dir(), f"Claude Code is not installed in {tools}: run scripts/test (spacesd tools install)"
