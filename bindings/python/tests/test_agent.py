"""The real Claude Code CLI against the scripted model, through the SDK: start, follow to
`turn_ended`, a follow-up, an interrupted long turn, another follow-up, stop."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import os
import time
from typing import Any, Dict, List, Tuple

import pytest

from spaces import AgentActionReport, AgentRunStatus, AgentStartReport, ConflictError, Space, SpaceAgentOptions, Spaces

TURN_TIMEOUT = 120


async def follow_to_turn_end(space: Space, run_id: str, turn: int, cursor: int) -> Tuple[Dict[str, Any], int, List[Dict[str, Any]]]:
    """Follows the run from `cursor` until `turn` ends; returns that event, the cursor after it, and all events seen."""
    seen: List[Dict[str, Any]] = []
    async def go():
        nonlocal cursor
        while True:
            async for ev in space.agent_follow(run_id, cursor=cursor):
                seen.append(ev)
                cursor = ev["seq"]
                if ev["kind"] == "turn_ended" and ev["turn"] == turn:
                    return ev
            await asyncio.sleep(0.1)  # not running and caught up before the turn began: look again
    ev = await asyncio.wait_for(go(), TURN_TIMEOUT)
    return ev, cursor, seen


async def settled(space: Space, run_id: str) -> AgentRunStatus:
    """The status once the run takes a follow-up again."""
    deadline = time.monotonic() + TURN_TIMEOUT
    while True:
        st = await space.agent_status(run_id)
        if st.accepts_message or time.monotonic() > deadline:
            return st
        await asyncio.sleep(0.1)


async def test_claude_code_run_through_the_sdk(spaces: Spaces, space: Space, model_url: str, claude_ready: None) -> None:
    caps = json.loads(await spaces.agent_capabilities())
    claude = next(h for h in caps["harnesses"] if h["id"] == "claude-code")
    assert claude["ready"] and claude["can_interrupt"], claude
    assert "turn_ended" in caps["event_kinds"]

    started = await space.agent_start("claude-code", "Say hello, please.", options=SpaceAgentOptions(base_url=model_url, label="greeter"))
    assert isinstance(started, AgentStartReport)
    assert started.run_id and started.agent == "claude-code" and started.space == "demo" and started.process_tag
    assert isinstance(started.notes, list)
    assert json.loads(started.json)["run_id"] == started.run_id

    ended, cursor, seen = await follow_to_turn_end(space, started.run_id, 1, 0)
    assert ended["stop_reason"] == "end_turn", seen
    kinds = [e["kind"] for e in seen]
    assert "turn_started" in kinds and "message" in kinds, kinds
    st = await settled(space, started.run_id)
    assert st.accepts_message and st.status == "idle", st

    # The follow iterator reads the daemon's event stream (SSE): from 0 it gets every event of
    # the settled turn once, in order, and ends on its own (the run is idle); from a cursor in
    # the middle it gets exactly the rest.
    follow = space.agent_follow(started.run_id)
    assert follow.transport == "unopened"
    everything = [e async for e in follow]
    assert follow.transport == "sse", follow.transport
    assert [e["seq"] for e in everything] == list(range(1, len(everything) + 1)), everything
    assert follow.cursor == everything[-1]["seq"] and everything[: len(seen)] == seen
    # Each answer once: the streamed pieces are their own kind (`message_delta`), not `message`.
    answers = [e["text"] for e in everything if e["kind"] == "message"]
    assert answers == [st.result_text], everything
    pieces = "".join(e["text"] for e in everything if e["kind"] == "message_delta")
    assert st.result_text.startswith(pieces), (pieces, st.result_text)
    middle = everything[len(everything) // 2]["seq"]
    rest = space.agent_follow(started.run_id, cursor=middle)
    assert [e async for e in rest] == everything[middle:] and rest.transport == "sse"
    assert st.label == "greeter" and st.prompt_excerpt == "Say hello, please.", st
    assert [r.label for r in await space.agent_list() if r.run_id == started.run_id] == ["greeter"]

    # The run's own `spaces` MCP server (space_tools, on by default) is this package's daemon
    # command, not the interpreter alone: it must start and answer as spacesd's MCP server.
    # Written to the run's API directory, which its sandbox shows at /run/spaces.
    mcp_config = json.loads((spaces.state_dir / "runs" / started.run_id / "api" / "claude-mcp.json").read_text())
    server = mcp_config["mcpServers"]["spaces"]
    assert server["command"] == sys.executable and server["args"][:3] == ["-m", "spaces._daemon", "mcp"], server
    probe = subprocess.run([server["command"], *server["args"], "--help"], capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0 and "--space" in probe.stdout, probe
    assert st.result_text == "Hello from the scripted model.", st

    # Issue 34: the turn's diff comes before its end, and agent_diff answers through the SDK.
    diffs = [e for e in everything if e["kind"] == "turn_diff"]
    assert [d["turn"] for d in diffs] == [1] and diffs[0]["files"] == [], diffs
    assert kinds.index("turn_diff") < kinds.index("turn_ended"), kinds
    diff = await space.agent_diff(run_id=started.run_id, turn=1)
    assert (diff["from_turn"], diff["to_turn"], diff["files"], diff["diff"]) == (0, 1, [], ""), diff

    # The raw page as the seed returns it: JSON text.
    page = json.loads(await space.agent_events(started.run_id, cursor=0, max=2))
    assert set(page) >= {"events", "cursor", "caught_up", "status"} and len(page["events"]) == 2

    # Follow-up: a slow turn, interrupted mid-stream.
    sent = await space.agent_message(started.run_id, "Now talk slowly.")
    assert isinstance(sent, AgentActionReport) and sent.ok and sent.run_id == started.run_id, sent
    deadline = time.monotonic() + TURN_TIMEOUT
    while not any(e["kind"] == "turn_started" and e["turn"] == 2 for e in json.loads(await space.agent_events(started.run_id, cursor=cursor, max=1000))["events"]):
        assert time.monotonic() < deadline, "turn 2 never started"
        await asyncio.sleep(0.1)
    await asyncio.sleep(2.0)  # the CLI is streaming the slow answer (60 chunks, 0.5 s apart) by now
    interrupted = await space.agent_interrupt(started.run_id)
    assert interrupted.ok, (interrupted, json.loads(await space.agent_events(started.run_id, cursor=cursor, max=1000)))
    ended, cursor, seen = await follow_to_turn_end(space, started.run_id, 2, cursor)
    assert ended["stop_reason"] == "interrupted", seen
    st = await settled(space, started.run_id)
    assert st.accepts_message and st.status == "idle", st

    # The session goes on after the interrupt.
    went_on = await space.agent_message(started.run_id, "Go on.", message_id="py-turn-3")
    assert went_on.ok, went_on
    # The same message_id again (a retry): the first report, nothing delivered twice; with another
    # text it is refused naming the key.
    again = await space.agent_message(started.run_id, "Go on.", message_id="py-turn-3")
    assert json.loads(again.json) == json.loads(went_on.json), (again, went_on)
    with pytest.raises(ConflictError) as e:
        await space.agent_message(started.run_id, "Something else.", message_id="py-turn-3")
    assert e.value.code == "OPERATION_KEY_CONFLICT" and e.value.field == "message_id", e.value
    ended, cursor, _ = await follow_to_turn_end(space, started.run_id, 3, cursor)
    assert ended["stop_reason"] == "end_turn"
    st = await settled(space, started.run_id)
    assert st.result_text == "after the interrupt", st

    # The usage ledger through the SDK: a row per ended turn (the interrupted one too), summing
    # to the totals the status carries; a budget set through the client's operator method.
    usage = await space.agent_usage(run_id=started.run_id, turns=True)
    assert usage["totals"] == st.usage and st.usage["turns"] == 3 and st.usage["input_tokens"] > 0, (usage, st)
    assert sum(t["input_tokens"] for t in usage["turns"]) == st.usage["input_tokens"], usage
    assert [t["stop_reason"] for t in usage["turns"]] == ["end_turn", "interrupted", "end_turn"], usage
    budget = await spaces.agent_budget(space="demo", run_id=started.run_id, budget={"turns": 10})
    assert budget["budget"] == {"turns": 10} and "reached" not in budget and budget["usage"] == st.usage, budget
    assert (await space.agent_status(started.run_id)).budget == {"turns": 10}

    runs = await space.agent_list()
    assert [r.run_id for r in runs] == [started.run_id] and all(isinstance(r, AgentRunStatus) for r in runs)

    stopped = await space.agent_stop(started.run_id)
    assert stopped.ok, stopped
    st = await space.agent_status(started.run_id, tail=5)
    assert st.status == "stopped", st
    # Followed to the end: the run no longer runs, so the iterator ends on its own.
    tail = [e async for e in space.agent_follow(started.run_id, cursor=cursor)]
    assert all(e["seq"] > cursor for e in tail)


async def test_a_persistent_agent_through_the_sdk(spaces: Spaces, space: Space, model_url: str, claude_ready: None) -> None:
    """A run as persistent agent `py-helper`, stopped; `persistent_agent_send` then starts a fresh
    run with its home restored (API reference: `Spaces.persistent_agent_send(name, text)`)."""
    options = SpaceAgentOptions(base_url=model_url, home="py-helper")
    started = await space.agent_start("claude-code", "Remember the word heron.", options=options)
    ended, _, seen = await follow_to_turn_end(space, started.run_id, 1, 0)
    assert ended["stop_reason"] == "end_turn", seen
    await space.agent_stop(started.run_id)
    deadline = time.monotonic() + 30
    while True:  # the stop saves the home once more, then frees the agent
        try:
            sent = await spaces.persistent_agent_send(name="py-helper", text="Which word?")
            break
        except Exception as e:  # LEASE_HELD until the stopped run has let go
            assert getattr(e, "code", None) == "LEASE_HELD" and time.monotonic() < deadline, e
            await asyncio.sleep(0.2)
    assert sent["started"] and sent["restored"] and sent["run_id"] != started.run_id, sent
    ended, _, seen = await follow_to_turn_end(space, sent["run_id"], 1, 0)
    assert ended["stop_reason"] == "end_turn", seen
    assert any(e["kind"] == "notice" and "restored from snapshot" in (e.get("summary") or "") for e in seen), seen
    homes = await spaces.home_list()
    assert any(h["name"] == "py-helper" and h["run_id"] == sent["run_id"] for h in homes), homes
    await space.agent_stop(sent["run_id"])
