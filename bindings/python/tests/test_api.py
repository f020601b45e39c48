"""The package's shape: the SDK started the daemon, records carry the contract's fields, stubs match
the native module and the catalogue, the README example runs as written, and a waiting call
holds neither the event loop nor the GIL."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import spaces
import spaces as spaces_module
from spaces import CATALOGUE, AgentActionReport, AgentRunStatus, AgentStartReport, Space, SpaceAgentOptions, Spaces, _native
from spaces._stubgen import main as stubgen

from conftest import REPO, daemon_pids, kill_daemons

#: The records' fields as the contract (spec/003, "record" tables) lists them.
CONTRACT = {
    AgentStartReport: ["run_id", "agent", "space", "process_tag", "notes", "json"],
    AgentRunStatus: ["run_id", "agent", "status", "reason", "phase", "result_text", "accepts_message", "output_tail", "json",
                     "label", "prompt_excerpt", "space", "turns", "session_id", "created_ms", "usage", "budget", "resets_at_ms"],
    AgentActionReport: ["run_id", "ok", "reason", "json"],
    SpaceAgentOptions: ["env_from_host", "env", "repo", "branch", "cwd", "model", "base_url", "exit_when_idle", "home", "label",
                        "files", "mcp_servers", "space_tools", "budget"],
}


async def test_the_sdk_started_the_daemon_detached(spaces: Spaces, space: Space) -> None:
    assert spaces.daemon_pid is not None, "the first call started the daemon of the clean state dir"
    assert daemon_pids(spaces.state_dir) == [spaces.daemon_pid]
    assert os.getsid(spaces.daemon_pid) == spaces.daemon_pid, "in a session of its own"
    assert (spaces.state_dir / "spacesd.sock").exists()
    # A second client of the same state dir finds it and starts nothing.
    other = Spaces(state_dir=spaces.state_dir)
    assert [s["name"] for s in await other.list_spaces()] == ["demo"]
    assert other.daemon_pid is None


def test_records_carry_the_contract_fields() -> None:
    for record, fields in CONTRACT.items():
        assert [f.name for f in dataclasses.fields(record)] == fields, record
    assert isinstance(SpaceAgentOptions.json, property)  # the three reports have `json` as a field
    opts = SpaceAgentOptions(base_url="http://127.0.0.1:1", exit_when_idle=True)
    assert json.loads(opts.json) == {"base_url": "http://127.0.0.1:1", "exit_when_idle": True}


async def test_record_fields_match_the_wire(space: Space) -> None:
    # Every field but `json` is a key of the record's wire JSON, with the same value.
    await space.agent_list()  # the Space answers
    st = AgentRunStatus._from({"run_id": "r", "agent": None, "space": "demo", "status": "idle", "reason": "x",
                               "phase": "waiting", "accepts_message": True, "turns": 1, "created_ms": 1,
                               "label": "nightly", "prompt_excerpt": "Fix it", "usage": {"turns": 1, "input_tokens": 3}})
    wire = json.loads(st.json)
    for f in [f for f in CONTRACT[AgentRunStatus] if f != "json"]:
        assert getattr(st, f) == wire.get(f), f


def test_every_operation_is_a_method_and_every_method_async() -> None:
    for op in CATALOGUE:
        owner = Space if spaces._client.on_space(op) else Spaces
        method = getattr(owner, op["name"])
        assert inspect.iscoroutinefunction(method), op["name"]
    for name in ["agent_start", "agent_status", "agent_events", "agent_message", "agent_interrupt", "agent_stop", "agent_list",
                 "read", "find", "apply_patch", "exec_command", "read_process"]:
        assert inspect.iscoroutinefunction(getattr(Space, name)), name
    for name in ["add_space", "list_spaces", "agent_capabilities"]:
        assert inspect.iscoroutinefunction(getattr(Spaces, name)), name
    assert inspect.signature(Space.agent_follow).return_annotation in ("AgentFollow", spaces.AgentFollow)
    assert hasattr(spaces.AgentFollow, "__anext__") and hasattr(spaces.AgentFollow, "transport")
    # The seed's signatures, each with its idempotency key last (optional: the client sends one).
    assert list(inspect.signature(Space.agent_start).parameters) == ["self", "agent", "prompt", "show", "options", "request_id", "traceparent"]
    assert list(inspect.signature(Space.agent_message).parameters) == ["self", "run_id", "text", "force", "message_id", "traceparent"]


def test_stubs_match_the_catalogue_and_the_native_module() -> None:
    assert stubgen(["--check"]) == 0, "bindings/python/python/spaces/__init__.pyi is stale: run `python -m spaces._stubgen`"
    stub = (Path(spaces.__file__).parent / "_native.pyi").read_text()
    declared = set(re.findall(r"^(?:class|def) (\w+)", stub, re.M)) | set(re.findall(r"^(\w+) = \w+$", stub, re.M))
    exported = {n for n in dir(_native) if not n.startswith("_")}
    assert declared == exported
    for cls in ["NativeClient", "NativeFollow"]:
        block = re.search(rf"^class {cls}:\n((?:    .*\n|\n)*)", stub, re.M)
        assert block, cls
        methods = set(re.findall(r"^    def (\w+)", block.group(1), re.M))
        assert methods == {n for n in dir(getattr(_native, cls)) if not n.startswith("_")}, cls
    assert (Path(spaces.__file__).parent / "py.typed").exists()


async def test_a_waiting_call_holds_neither_the_loop_nor_the_gil(space: Space) -> None:
    proc = await space.exec_command(command=["sleep", "5"])
    ticks = 0
    spins = 0
    stop = threading.Event()

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    def spinner() -> None:
        nonlocal spins
        while not stop.is_set():
            spins += 1

    task = asyncio.create_task(ticker())
    thread = threading.Thread(target=spinner)
    thread.start()
    t0 = time.monotonic()
    await space.read_process(process_id=proc["process_id"], cursor=0, wait_ms=1000)
    waited = time.monotonic() - t0
    stop.set()
    thread.join()
    task.cancel()
    await space.terminate_process(process_id=proc["process_id"])
    assert waited >= 0.9, waited
    assert ticks >= 40, f"the loop ticked {ticks} times in {waited:.2f} s"
    assert spins >= 100_000, f"a Python thread ran {spins} loops in {waited:.2f} s"


def test_the_readme_example_runs_as_written() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Python SDK", 1)[1]
    example = re.search(r"```python\n(.*?)```", section, re.S)
    assert example, "a ```python block in README.md's Python SDK section"
    code = example.group(1)
    assert len(code.strip().splitlines()) <= 12
    with tempfile.TemporaryDirectory() as tmp:
        state, proj = Path(tmp) / "state", Path(tmp) / "proj"
        proj.mkdir()
        (proj / "hello.txt").write_text("hi\n")
        env = dict(os.environ, SPACES_HOME=str(state))
        try:
            out = subprocess.run([sys.executable, "-c", code], cwd=proj, env=env, capture_output=True, text=True, timeout=60)
        finally:
            kill_daemons(state)
        assert out.returncode == 0, out.stderr
        assert "hello.txt" in out.stdout, out.stdout


def test_a_forked_child_is_refused_not_hung(spaces: Spaces) -> None:
    # The parent's tokio runtime is running (earlier tests called through it); its threads are not
    # in the child, so the SDK refuses there with a clear error instead of hanging.
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            asyncio.run(spaces.list_spaces())
            code = 1
        except spaces_module.CuaError as e:
            code = 0 if "FORKED" in str(e) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
