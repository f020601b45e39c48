"""The records of the seed's agent API (spec: AgentStartReport, AgentRunStatus, AgentActionReport,
SpaceAgentOptions). Each carries the contract's fields and ``.json``, the whole record as JSON."""

from __future__ import annotations

import json as _json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


def _dumps(value: Any) -> str:
    return _json.dumps(value, separators=(",", ":"))


@dataclass(frozen=True)
class AgentStartReport:
    """Result of Space.agent_start."""

    run_id: str
    agent: str
    space: str
    process_tag: str
    notes: List[str]
    json: str

    @classmethod
    def _from(cls, d: Dict[str, Any], text: Optional[str] = None) -> "AgentStartReport":
        return cls(d["run_id"], d["agent"], d["space"], d["process_tag"], list(d.get("notes", [])), text or _dumps(d))


@dataclass(frozen=True)
class AgentRunStatus:
    """One agent run's status. Read ``accepts_message``; never derive it from ``status``."""

    run_id: str
    agent: Optional[str]
    status: str
    reason: str
    phase: str
    result_text: Optional[str]
    accepts_message: bool
    output_tail: Optional[str]
    json: str
    #: The run's ``options.label``, if it was given one.
    label: Optional[str] = None
    #: The first turn's prompt on one line, secrets redacted, cut to 60 characters.
    prompt_excerpt: Optional[str] = None
    #: The Space the run belongs to.
    space: str = ""
    #: Turns started so far.
    turns: int = 0
    #: The CLI's session id (Claude session id, Codex thread id) once known.
    session_id: Optional[str] = None
    #: When the run was created, in ms since the Unix epoch.
    created_ms: int = 0
    #: What the run spent over its ended turns (the usage ledger): ``input_tokens``,
    #: ``cached_input_tokens``, ``output_tokens``, ``cost_usd``, ``cost_estimated``,
    #: ``cost_unknown_turns``, ``duration_ms`` (ms), ``tool_calls``, ``turns``.
    usage: Dict[str, Any] = field(default_factory=dict)
    #: The run's budget (``{"usd"?, "tokens"?, "turns"?}``), when it has one.
    budget: Optional[Dict[str, Any]] = None
    #: With status ``quota_waiting``: when the run continues by itself, Unix ms.
    resets_at_ms: Optional[int] = None

    @classmethod
    def _from(cls, d: Dict[str, Any], text: Optional[str] = None) -> "AgentRunStatus":
        # ``text``: the wire JSON as the daemon sent it, when the caller has it (no re-encoding).
        return cls(
            d["run_id"], d.get("agent"), d["status"], d["reason"], d["phase"], d.get("result_text"),
            bool(d["accepts_message"]), d.get("output_tail"), text or _dumps(d), d.get("label"), d.get("prompt_excerpt"),
            d.get("space", ""), int(d.get("turns", 0)), d.get("session_id"), int(d.get("created_ms", 0)),
            dict(d.get("usage") or {}), d.get("budget"), d.get("resets_at_ms"),
        )


@dataclass(frozen=True)
class AgentActionReport:
    """Result of Space.agent_message / agent_interrupt / agent_stop."""

    run_id: str
    ok: bool
    reason: str
    json: str

    @classmethod
    def _from(cls, d: Dict[str, Any], text: Optional[str] = None) -> "AgentActionReport":
        return cls(d["run_id"], bool(d["ok"]), d["reason"], text or _dumps(d))


@dataclass
class SpaceAgentOptions:
    """Options for Space.agent_start beyond the harness and prompt (only the fields set are sent)."""

    env_from_host: List[str] = field(default_factory=list)
    env: Dict[str, str] = field(default_factory=dict)
    repo: Optional[str] = None
    branch: Optional[str] = None
    cwd: Optional[str] = None
    model: Optional[str] = None
    base_url: Optional[str] = None
    exit_when_idle: Optional[bool] = None
    home: Optional[str] = None
    #: A name for people, shown by ``agent list`` and ``agent status`` (one line, at most 80 characters).
    label: Optional[str] = None
    #: Attachments, each ``{"name": ..., "content_base64": ...}`` (8 MiB or less decoded): written
    #: into the run's directory and named in the first prompt.
    files: List[Dict[str, str]] = field(default_factory=list)
    #: MCP servers for the agent's CLI, each ``{"name", "command", "args"?, "env"?}`` (stdio) or
    #: ``{"name", "url", "headers"?}`` (Streamable HTTP); docs/api.md, ``McpServer``.
    mcp_servers: List[Dict[str, Any]] = field(default_factory=list)
    #: Give the agent this Space's own tools as the MCP server ``spaces`` (default on).
    space_tools: Optional[bool] = None
    #: The most the run may spend: ``{"usd"?, "tokens"?, "turns"?}``; at it, turns end
    #: ``budget_reached`` until ``agent_budget`` raises it.
    budget: Optional[Dict[str, Any]] = None

    def _wire(self) -> Dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None and v != [] and v != {}}

    @property
    def json(self) -> str:
        """The options as the JSON the daemon receives."""
        return _dumps(self._wire())
