"""spacesd driven by the official MCP Python SDK (PyPI `mcp`, pinned in requirements.txt).

Run by tests/tests/suite/mcp_sdk_clients.rs against a test daemon, over stdio (`--stdio BIN
--state-dir DIR`: the SDK spawns `BIN --state-dir DIR mcp`) or Streamable HTTP (`--http URL
--token TOKEN`: the daemon's `/mcp` on its TCP listener with the bearer token). For each protocol
mode (`legacy`: the initialize handshake, 2025-11-25; `auto`: the SDK's default, which probes
`server/discover` and adopts the newest revision the server offers) it lists the tools and runs
the seed's loop; then, given `--model-url`, it starts an agent run over MCP and follows its
events to `turn_ended`. Every step prints one line; any failed check raises, so the exit code is
non-zero and the traceback says which.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
import uuid
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


STARTED = time.monotonic()


def log(msg: str) -> None:
    print(f"[python-sdk +{time.monotonic() - STARTED:.2f}s] {msg}", flush=True)


class SdkWarnings(logging.Handler):
    """The SDK's own warnings (e.g. about an answer it did not expect), on stdout with the steps."""

    def emit(self, record: logging.LogRecord) -> None:
        log(f"SDK {record.levelname.lower()} ({record.name}): {record.getMessage()}")


logging.getLogger("mcp").addHandler(SdkWarnings(logging.WARNING))


def check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)


def ok(result: Any, name: str) -> dict[str, Any]:
    """The structured result of a successful call; its one text content is the same JSON."""
    check(not result.is_error, f"{name} was refused: {result.content}")
    sc = result.structured_content
    check(isinstance(sc, dict), f"{name}: structuredContent must be an object: {result}")
    check(len(result.content) == 1 and result.content[0].type == "text", f"{name}: one text content: {result}")
    check(json.loads(result.content[0].text) == sc, f"{name}: the text content is the structured JSON")
    return sc


def refused(result: Any, name: str) -> dict[str, Any]:
    """The wire error of a refusal: isError, no structuredContent, the error JSON as text."""
    check(result.is_error, f"{name} should be refused: {result}")
    check(result.structured_content is None, f"{name}: no structuredContent on an error: {result}")
    check(len(result.content) == 1 and result.content[0].type == "text", f"{name}: one text content: {result}")
    err = json.loads(result.content[0].text)
    check(isinstance(err.get("code"), str) and isinstance(err.get("message"), str), f"{name}: {{code, message}}: {err}")
    return err


async def call(c: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return ok(await c.call_tool(name, args), name)


async def list_tools(c: Client, expected: list[str]) -> None:
    tools = (await c.list_tools()).tools
    names = [t.name for t in tools]
    check(sorted(names) == sorted(expected), f"tool names: got {sorted(names)}, want {sorted(expected)}")
    for t in tools:
        check(t.input_schema.get("type") == "object", f"{t.name}: inputSchema of type object: {t.input_schema}")
        check(t.output_schema is not None and t.output_schema.get("type") == "object", f"{t.name}: outputSchema of type object")
        check(bool(t.description), f"{t.name}: a description")
    by = {t.name: t for t in tools}
    check("path" in by["read"].input_schema["properties"], "read takes a path")
    check(by["read"].annotations is not None and by["read"].annotations.read_only_hint is True, "read is read-only")
    check(by["terminate_process"].annotations.destructive_hint is True, "terminate_process is destructive")
    log(f"tools/list: {len(tools)} tools, each with an object inputSchema and outputSchema")


async def drain(c: Client, process_id: str) -> str:
    """A process's output, read with read_process from cursor 0 until eof."""
    out, cursor = "", 0
    deadline = time.monotonic() + 30
    while True:
        r = await call(c, "read_process", {"process_id": process_id, "cursor": cursor, "wait_ms": 2000})
        out += r["chunk"]
        cursor = r["cursor"]
        if r["eof"]:
            return out
        check(time.monotonic() < deadline, f"no eof within 30 s; output so far: {out!r}")


async def wait_exited(c: Client, process_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        st = await call(c, "process_status", {"process_id": process_id})
        if st["state"] == "exited":
            return st
        check(time.monotonic() < deadline, f"process did not exit: {st}")
        await asyncio.sleep(0.05)


async def seed_loop(c: Client, space: str, root: Path, tag: str) -> None:
    """Read, preview, apply, read back, run, collect output, cancel a wait on a long command and
    end it, recover the patch by its key; and a refusal."""
    path = f"py-{tag}.txt"
    (root / path).write_text("hi\n")
    first = await call(c, "read", {"workspace_id": space, "path": path})
    check(first["content"] == "hi\n", f"read: {first}")
    v1 = first["version"]
    log(f"read {path}: version {v1[:19]}...")

    patch = f"*** Begin Patch\n*** Update File: {path}\n@@\n-hi\n+hello\n*** End Patch\n"
    preview = await call(c, "apply_patch", {"workspace_id": space, "patch": patch, "expected_versions": {path: v1}, "check_only": True})
    check(preview["status"] == "checked", f"preview: {preview}")
    check((root / path).read_text() == "hi\n", "a preview writes nothing")
    log("apply_patch check_only: checked, nothing written")

    key = f"py-{tag}-{uuid.uuid4()}"
    applied = await call(c, "apply_patch", {"workspace_id": space, "patch": patch, "expected_versions": {path: v1}, "operation_key": key})
    check(applied["status"] == "applied", f"apply: {applied}")
    log(f"apply_patch with operation_key: applied as {applied['operation_id']}")

    back = await call(c, "read", {"workspace_id": space, "path": path})
    check(back["content"] == "hello\n", f"read back: {back}")
    check(back["version"] != v1 and back["version"] == applied["changes"][0]["after_version"], f"a new version: {back} vs {applied}")
    log("read back: the new content and its new version")

    run = await call(c, "exec_command", {"workspace_id": space, "command": ["sh", "-c", "echo hello"]})
    check(run["dispatch_status"] == "confirmed", f"exec_command: {run}")
    out = await drain(c, run["process_id"])
    check(out == "hello\n", f"output: {out!r}")
    st = await wait_exited(c, run["process_id"])
    check(st["exit_code"] == 0, f"exit: {st}")
    log("exec_command + read_process until eof: 'hello\\n', exit 0")

    long = await call(c, "exec_command", {"workspace_id": space, "command": ["sleep", "30"]})
    pid = long["process_id"]
    # A read_process wait blocked on it, with a progress callback, cancelled by the client (the SDK
    # sends notifications/cancelled) once the first progress notification arrived.
    ticks: list[float] = []
    ticked = anyio.Event()

    async def progress(value: float, total: float | None, message: str | None) -> None:
        ticks.append(value)
        ticked.set()

    async def blocked_wait() -> None:
        await c.call_tool("read_process", {"process_id": pid, "cursor": 0, "wait_ms": 30000}, progress_callback=progress)

    t0 = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(blocked_wait)
        with anyio.fail_after(10):
            await ticked.wait()
        tg.cancel_scope.cancel()
    check(time.monotonic() - t0 < 10, "cancelled within 10 s")
    t1 = time.monotonic()
    st = await call(c, "process_status", {"process_id": pid})
    check(time.monotonic() - t1 < 2, "the next call is served at once after the cancel")
    check(st["state"] == "running", f"sleep 30 outlives the cancelled wait: {st}")
    log(f"read_process wait on sleep 30: progress {ticks}, cancelled by the client; the command still runs")
    check((await call(c, "terminate_process", {"process_id": pid}))["ok"] is True, "terminate_process ok")
    st = await wait_exited(c, pid)
    check(st["termination"] == "terminated", f"process_status after terminate_process: {st}")
    log("sleep 30 ended by terminate_process: termination 'terminated'")

    status = await call(c, "operation_status", {"operation_key": key})
    check(status["status"] == "applied" and status["operation_id"] == applied["operation_id"], f"operation_status: {status}")
    log("operation_status by operation_key: the applied patch")

    err = refused(await c.call_tool("read", {"workspace_id": space, "path": "missing.txt"}), "read")
    check(err["code"] == "FILE_NOT_FOUND", f"refusal code: {err}")
    err = refused(await c.call_tool("read", {"workspace_id": space, "paht": "x.txt"}), "read")
    check(err["code"] == "INVALID_ARGUMENT" and "path" in err["message"], f"a misspelt key: {err}")
    log("refusals: isError results carrying FILE_NOT_FOUND and INVALID_ARGUMENT")

    spaces = await call(c, "space_list", {})
    check(any(s["name"] == space for s in spaces["items"]), f"space_list wraps its array under items: {spaces}")


async def agent_run(c: Client, space: str, agent: str, model_url: str, expect_text: str) -> None:
    """agent_start against the scripted model, then agent_events long-polls to turn_ended."""
    started = await call(c, "agent_start", {"space": space, "agent": agent, "prompt": "Say hello, please.",
                                            "options": {"base_url": model_url}})
    run_id = started["run_id"]
    log(f"agent_start: {run_id}")
    cursor, kinds = 0, []
    deadline = time.monotonic() + 120
    ended = None
    while ended is None:
        check(time.monotonic() < deadline, f"no turn_ended within 120 s; events: {kinds}")
        page = await call(c, "agent_events", {"space": space, "run_id": run_id, "cursor": cursor, "wait_ms": 10000})
        for e in page["events"]:
            kinds.append(e["kind"])
            if e["kind"] == "turn_ended":
                ended = e
                break
        cursor = page["cursor"]
    check(ended.get("stop_reason") == "end_turn", f"turn_ended: {ended}")
    check("turn_started" in kinds, f"events: {kinds}")
    log(f"agent_events to turn_ended (end_turn): {kinds}")
    deadline = time.monotonic() + 30
    while True:
        st = await call(c, "agent_status", {"space": space, "run_id": run_id})
        if st["status"] != "running":
            break
        check(time.monotonic() < deadline, f"run still running: {st}")
        await asyncio.sleep(0.1)
    check(st["result_text"] == expect_text, f"agent_status result_text: {st}")
    runs = await call(c, "agent_list", {"space": space})
    check(any(r["run_id"] == run_id for r in runs["items"]), f"agent_list: {runs}")
    stop = await call(c, "agent_stop", {"space": space, "run_id": run_id})
    check(stop["ok"] is True, f"agent_stop: {stop}")
    log(f"agent_status: {st['status']}, result_text {st['result_text']!r}; agent_stop ok")


def connect(args: argparse.Namespace, mode: str, http: httpx2.AsyncClient | None) -> Client:
    if args.stdio:
        params = StdioServerParameters(command=args.stdio, args=["--state-dir", args.state_dir, "mcp"])
        return Client(params, mode=mode)
    return Client(streamable_http_client(args.http, http_client=http), mode=mode)


async def main() -> None:
    p = argparse.ArgumentParser()
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--stdio", metavar="SPACESD", help="spawn SPACESD --state-dir DIR mcp")
    how.add_argument("--http", metavar="URL", help="Streamable HTTP endpoint")
    p.add_argument("--state-dir")
    p.add_argument("--token", help="bearer token for --http")
    p.add_argument("--space", required=True)
    p.add_argument("--root", required=True, type=Path, help="the Space's directory")
    p.add_argument("--expect-tools", required=True, help="comma-separated tool names")
    p.add_argument("--modes", default="legacy,auto")
    p.add_argument("--model-url")
    p.add_argument("--agent", default="claude-code")
    p.add_argument("--expect-text")
    args = p.parse_args()
    if args.stdio and not args.state_dir:
        p.error("--stdio needs --state-dir")
    expected = args.expect_tools.split(",")
    log(f"sdk mcp=={version('mcp')} on Python {sys.version.split()[0]}")
    transport = "stdio" if args.stdio else "http"
    http = None
    if args.http:
        # Timeouts as the SDK's own default client: long-polls stay well inside the read timeout.
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {args.token}"}, timeout=httpx2.Timeout(30, read=300))
    try:
        modes = args.modes.split(",")
        for i, mode in enumerate(modes):
            async with connect(args, mode, http) as c:
                log(f"{transport} mode={mode}: connected, protocol {c.protocol_version}, server {c.server_info.name if c.server_info else None}")
                await list_tools(c, expected)
                await seed_loop(c, args.space, args.root, f"{transport}-{mode}")
                if args.model_url and i == len(modes) - 1:
                    await agent_run(c, args.space, args.agent, args.model_url, args.expect_text)
    finally:
        if http is not None:
            await http.aclose()
    log("PASS")


if __name__ == "__main__":
    asyncio.run(main())
