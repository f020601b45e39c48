//! Agent-run records (API reference, "Agent runs (seed 003)").

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Options for `agent_start` beyond the harness and prompt (`SpaceAgentOptions`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SpaceAgentOptions {
    /// Names of provider key variables copied from the host's environment. Only names on the
    /// host's forwardable list are copied; a missing or refused one is reported in `notes`.
    pub env_from_host: Vec<String>,
    /// More environment for the agent. Stored 0600 in the run directory; every value of 8+
    /// characters is replaced by `[redacted]` in events, tails and logs.
    pub env: BTreeMap<String, String>,
    pub repo: Option<String>,
    pub branch: Option<String>,
    /// Working directory relative to the Space root; must stay inside it.
    pub cwd: Option<String>,
    pub model: Option<String>,
    /// A custom model endpoint (Anthropic Messages for claude-code, OpenAI Responses for codex).
    pub base_url: Option<String>,
    /// Stop (resumably) once the prompt is answered: status `done` instead of `idle`.
    pub exit_when_idle: Option<bool>,
    /// Run as this persistent agent (restore its home first, save after every turn).
    pub home: Option<String>,
}

/// Body of `POST /v1/spaces/{space}/agents` (`Space.agent_start`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentStartRequest {
    /// Harness id, e.g. `claude-code`.
    pub agent: String,
    /// The first turn's text; must not be empty.
    pub prompt: String,
    #[serde(default)]
    pub show: Option<bool>,
    #[serde(default)]
    pub options: Option<SpaceAgentOptions>,
}

/// Result of `agent_start`. Returned as soon as the run is launched, never after the turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentStartReport {
    pub run_id: String,
    pub agent: String,
    pub space: String,
    /// Process tag of the first turn (`agent/<run_id>/turn-1`).
    pub process_tag: String,
    /// Preparation steps that could not be completed (missing forwarded keys, ...).
    pub notes: Vec<String>,
}

/// Coarse run state (`status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Running,
    Idle,
    Done,
    Failed,
    Crashed,
    Stopped,
    Unknown,
}

impl Status {
    /// Every status, in contract order.
    pub const ALL: [Status; 7] = [
        Status::Running,
        Status::Idle,
        Status::Done,
        Status::Failed,
        Status::Crashed,
        Status::Stopped,
        Status::Unknown,
    ];

    /// Wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Idle => "idle",
            Status::Done => "done",
            Status::Failed => "failed",
            Status::Crashed => "crashed",
            Status::Stopped => "stopped",
            Status::Unknown => "unknown",
        }
    }

    /// Parse the wire spelling; unknown text is [`Status::Unknown`].
    pub fn parse(s: &str) -> Status {
        Status::ALL.into_iter().find(|v| v.as_str() == s).unwrap_or(Status::Unknown)
    }
}

/// Finer run state (`phase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Installing,
    Starting,
    Working,
    Waiting,
    Exited,
    Failed,
    Crashed,
    Unknown,
}

impl Phase {
    /// Wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Installing => "installing",
            Phase::Starting => "starting",
            Phase::Working => "working",
            Phase::Waiting => "waiting",
            Phase::Exited => "exited",
            Phase::Failed => "failed",
            Phase::Crashed => "crashed",
            Phase::Unknown => "unknown",
        }
    }

    /// Parse the wire spelling; unknown text is [`Phase::Unknown`].
    pub fn parse(s: &str) -> Phase {
        [
            Phase::Installing,
            Phase::Starting,
            Phase::Working,
            Phase::Waiting,
            Phase::Exited,
            Phase::Failed,
            Phase::Crashed,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
        .unwrap_or(Phase::Unknown)
    }
}

/// One run's status (`AgentRunStatus`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStatus {
    pub run_id: String,
    pub agent: Option<String>,
    pub space: String,
    pub status: Status,
    /// One human sentence saying why.
    pub reason: String,
    pub phase: Phase,
    /// The last finished turn's final answer.
    pub result_text: Option<String>,
    /// The server's rule: true when idle, crashed or failed; false mid-turn and when stopped.
    pub accepts_message: bool,
    /// The last `tail` lines (default 40) of the agent's raw output, redacted.
    pub output_tail: Option<String>,
    /// Number of turns started so far.
    pub turns: u32,
    /// Harness session id (Claude session id, Codex thread id) once known.
    pub session_id: Option<String>,
    /// Unix ms when the run was created.
    pub created_ms: u64,
}

/// Body of `POST /v1/runs/{run_id}/message` (`agent_message`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentMessageRequest {
    pub text: String,
    #[serde(default)]
    pub force: Option<bool>,
}

/// Result of `agent_message`, `agent_interrupt`, `agent_stop` (`AgentActionReport`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionReport {
    pub run_id: String,
    /// Delivered (message), interrupted (interrupt) or stopped with nothing left alive (stop).
    pub ok: bool,
    /// One human sentence saying what happened.
    pub reason: String,
}

/// A registered Space: a name, a root directory and its policy. The name is the CodeSpace
/// `workspace_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpaceRecord {
    pub name: String,
    pub root: String,
    /// Read-only: `read`/`find` only; no `apply_patch`, no `exec_command`, no agent runs.
    #[serde(default)]
    pub read_only: bool,
    /// Approval policy for mutations (`apply_patch`, `exec_command`): `off` (default) runs them
    /// at once; `confirm` holds each one (`APPROVAL_REQUIRED`) until granted and resumed.
    #[serde(default)]
    pub approvals: Approvals,
}

/// The operator's approval setting of a Space (API reference, "Approvals"). Not a client grant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Approvals {
    /// Allowed mutations run immediately; only `approval_create` opens a hold.
    #[default]
    Off,
    /// Allowed mutations return `APPROVAL_REQUIRED` with an `approval_id` instead of running.
    Confirm,
}

impl Approvals {
    /// `off | confirm`.
    pub fn as_str(self) -> &'static str {
        match self {
            Approvals::Off => "off",
            Approvals::Confirm => "confirm",
        }
    }
}
