//! Agent-run records (API reference, "Agent runs (seed 003)").

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::mcp_server::McpServer;
use crate::usage::{Budget, UsageTotals};

/// Options for `agent_start` beyond the harness and prompt (`SpaceAgentOptions`, API reference
/// "Agent runs"). Unknown keys are refused (`INVALID_ARGUMENT` naming the key): a Node-style
/// `baseUrl` never vanishes silently.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SpaceAgentOptions {
    /// Names of provider key variables copied from the host's environment. Only names on the
    /// host's forwardable list are copied; a missing or refused one is reported in `notes`.
    pub env_from_host: Vec<String>,
    /// More environment for the agent. Stored 0600 in the run directory; every value of 8+
    /// characters is replaced by `[redacted]` in events, tails and logs.
    pub env: BTreeMap<String, String>,
    /// A repository to clone before the first turn: an `https`, `http`, `ssh` or `git` URL, or
    /// `user@host:path` (a path on the daemon's host or `file://` only where the operator allows
    /// local repositories; never a `<transport>::` helper such as `ext::`): cloned
    /// into a new folder of the working directory named after it (`.../repo.git` -> `repo`),
    /// where the agent then works. The folder must not exist or be empty (`INVALID_ARGUMENT`
    /// naming `options.repo` otherwise, as for a repository that cannot be read). Credentials
    /// in the URL (`https://user:token@host/...`) stay in the run's 0600 secrets: the stored
    /// options and the events show the URL without them.
    pub repo: Option<String>,
    /// The branch to check out before the first turn: of `repo`, or, without it, of the
    /// repository the working directory is in. An unknown branch is `INVALID_ARGUMENT` naming
    /// `options.branch`.
    pub branch: Option<String>,
    /// Working directory relative to the Space root; must stay inside it.
    pub cwd: Option<String>,
    /// Model name passed to the agent CLI.
    pub model: Option<String>,
    /// A custom model endpoint, in the wire its harness speaks (`agent_capabilities`
    /// `endpoint_wires`): Anthropic Messages for claude-code, OpenAI Responses for the Codex
    /// harnesses, OpenAI Chat Completions for opencode, Gemini `streamGenerateContent` for
    /// gemini-cli.
    pub base_url: Option<String>,
    /// Stop (resumably) once the prompt is answered: status `done` instead of `idle`.
    pub exit_when_idle: Option<bool>,
    /// Run as this persistent agent (restore its home first, save after every turn).
    pub home: Option<String>,
    /// MCP servers the agent's CLI connects to, each passed in that CLI's own config format:
    /// `{name, url, headers?}` (Streamable HTTP) or `{name, command, args?, env?}` (stdio).
    /// Their tools are allowed without prompts, like the CLI's own.
    pub mcp_servers: Vec<McpServer>,
    /// Give the agent spacesd's own tools (CodeSpace tools, agent runs) for this Space only, as
    /// the stdio MCP server `spaces` (`spacesd mcp --space <space>`): the model calls them as
    /// `mcp__spaces__read`, ...; a call naming another Space is refused. On by default; the name
    /// `spaces` is then reserved in `mcp_servers`. `false` leaves the server out.
    pub space_tools: Option<bool>,
    /// A name for people, shown by `agent list` and `agent status` (and their JSON as
    /// `label`): 1 to [`SpaceAgentOptions::LABEL_MAX`] characters on one line, no control
    /// characters (`INVALID_ARGUMENT` naming `options.label` otherwise). Not unique, not a key.
    pub label: Option<String>,
    /// Files for the agent, sent with the request (the daemon cannot read the caller's disk):
    /// each one is written to `<run dir>/files/<name>` before the first turn, and the first
    /// turn's prompt gets a last line naming their absolute paths. At most
    /// [`Attachment::MAX_BYTES`] each, decoded. `INVALID_ARGUMENT` naming `options.files[i]` for
    /// a file too big, a bad name, a name given twice or content that is not base64. The stored
    /// options (`agent_status`) keep the names, not the content.
    pub files: Vec<Attachment>,
    /// The most this run may spend (dollars, tokens, turns; [`Budget`]). Without it the
    /// operator's default for the Space applies (`config.json` `space_budgets`), if any.
    /// `INVALID_ARGUMENT` naming `options.budget.<field>` for a bad limit. Left out of the JSON
    /// when absent (a daemon older than budgets takes the options).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
}

impl SpaceAgentOptions {
    /// Longest `label`, in characters.
    pub const LABEL_MAX: usize = 80;
}

/// One file of `options.files`: a plain file name and its bytes in standard base64 (RFC 4648,
/// with or without padding). The CLI's `--file PATH` reads and encodes a file of the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Attachment {
    /// The file's name in the run's `files` folder: 1-255 bytes, no `/`, `\` or NUL, not `.`
    /// or `..`, unique among the run's files.
    pub name: String,
    /// The file's bytes, base64 (empty in the stored options of a run).
    #[serde(default)]
    pub content_base64: String,
}

impl Attachment {
    /// Largest file, bytes (8 MiB), decoded.
    pub const MAX_BYTES: usize = 8 * 1024 * 1024;
}

/// `agent_start`: start a run of `agent` in Space `space` with the first turn's `prompt`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentStartRequest {
    /// The Space (its registered name) to run in.
    pub space: String,
    /// Harness id: `claude-code`, `openai-codex` (Codex on `codex app-server`),
    /// `openai-codex-exec` (Codex on `exec --json`), `opencode` or `gemini-cli` (see
    /// `agent_capabilities`).
    pub agent: String,
    /// The first turn's text; must not be empty.
    pub prompt: String,
    /// Also expose the run so an operator can watch it live.
    #[serde(default)]
    pub show: Option<bool>,
    /// Options beyond the harness and prompt.
    #[serde(default)]
    pub options: Option<SpaceAgentOptions>,
    /// An idempotency key the caller chose for this start: 1 to 128 ASCII letters, digits, `-`,
    /// `_`, `.` or `:` (a UUID fits; `INVALID_ARGUMENT` naming `request_id` otherwise), scoped to
    /// the Space and kept as long as the run it started. A repeat with the same key and the same
    /// request answers the first report (same `run_id`) and starts nothing; the same key with
    /// another request is `OPERATION_KEY_CONFLICT`. The SDKs and the CLI send a fresh UUID when
    /// none is given.
    #[serde(default)]
    pub request_id: Option<String>,
    /// The caller's trace context (W3C `traceparent`, `00-<trace id>-<span id>-<flags>`): the
    /// run's spans join that trace under that span (issue 33). Also taken from the HTTP header
    /// `traceparent` and MCP `_meta.traceparent`. `INVALID_ARGUMENT` naming it when malformed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

/// Longest `message_id` / `request_id` ([`AgentMessageRequest::message_id`],
/// [`AgentStartRequest::request_id`]), bytes: each an ASCII letter, digit, `-`, `_`, `.` or `:`,
/// so a UUID, a ULID or `job-42:try` fits.
pub const IDEMPOTENCY_KEY_MAX: usize = 128;

/// Names one run of a Space: `agent_interrupt`, `agent_stop`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentRunRequest {
    /// The Space the run belongs to.
    pub space: String,
    /// The run (`run-` + hex), as `agent_start` returned it.
    pub run_id: String,
}

/// `agent_status`: one run's status with the last `tail` lines of its output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentStatusRequest {
    /// The Space the run belongs to.
    pub space: String,
    /// The run (`run-` + hex).
    pub run_id: String,
    /// Lines of raw output in `output_tail` (default 40, at most 10,000; 0 for none).
    #[serde(default)]
    pub tail: Option<u32>,
}

impl AgentStatusRequest {
    /// Default `tail`, lines.
    pub const TAIL_DEFAULT: u32 = 40;
    /// Largest `tail`, lines (larger values are clamped).
    pub const TAIL_MAX: u32 = 10_000;

    /// `tail` with its default applied and clamped to [`Self::TAIL_MAX`].
    pub fn tail_lines(&self) -> u32 {
        self.tail.unwrap_or(Self::TAIL_DEFAULT).min(Self::TAIL_MAX)
    }
}

/// `agent_events`: the run's events after `cursor`, optionally waiting for new ones.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentEventsRequest {
    /// The Space the run belongs to.
    pub space: String,
    /// The run (`run-` + hex).
    pub run_id: String,
    /// Seq of the last event the caller has; 0 (the default) reads from the start. A cursor
    /// past the run's last event is refused (`INVALID_ARGUMENT` naming the last cursor).
    #[serde(default)]
    pub cursor: Option<u64>,
    /// Page size: default 100, clamped to 1..=1000.
    #[serde(default)]
    pub max: Option<u32>,
    /// Long-poll: when no event follows `cursor`, wait up to this many ms for one (default 0,
    /// clamped to 60,000).
    #[serde(default)]
    pub wait_ms: Option<u64>,
    /// Include each event's original harness line as `raw`.
    #[serde(default)]
    pub raw: Option<bool>,
}

impl AgentEventsRequest {
    /// Default `max`, events.
    pub const MAX_DEFAULT: u32 = 100;
    /// Largest `max`, events.
    pub const MAX_LIMIT: u32 = 1000;
    /// Largest `wait_ms`, ms.
    pub const WAIT_MS_LIMIT: u64 = 60_000;

    /// `max` with its default applied and clamped to 1..=[`Self::MAX_LIMIT`].
    pub fn page_size(&self) -> u32 {
        self.max.unwrap_or(Self::MAX_DEFAULT).clamp(1, Self::MAX_LIMIT)
    }

    /// `wait_ms` with its default (0) applied and clamped to [`Self::WAIT_MS_LIMIT`].
    pub fn wait_ms_clamped(&self) -> u64 {
        self.wait_ms.unwrap_or(0).min(Self::WAIT_MS_LIMIT)
    }
}

/// `agent_message`: the next turn of a run (queued mid-turn; `force` interrupts first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentMessageRequest {
    /// The Space the run belongs to.
    pub space: String,
    /// The run (`run-` + hex).
    pub run_id: String,
    /// The follow-up's text; must not be empty.
    pub text: String,
    /// Mid-turn, do not queue behind the running turn: on a harness that can steer
    /// (`agent_capabilities` `supports.steer`: `openai-codex`, `turn/steer`) the running turn
    /// takes the message; on the others the turn is interrupted and the message runs next.
    #[serde(default)]
    pub force: Option<bool>,
    /// An idempotency key the caller chose for this message: 1 to 128 ASCII letters, digits,
    /// `-`, `_`, `.` or `:` (a UUID fits; `INVALID_ARGUMENT` naming `message_id` otherwise),
    /// scoped to the run and kept as long as the run. A repeat with the same key, `text` and
    /// `force` answers the first report and delivers nothing again (a retry after a lost
    /// answer); the same key with another `text` or `force` is `OPERATION_KEY_CONFLICT`. The
    /// SDKs and the CLI send a fresh UUID when none is given.
    #[serde(default)]
    pub message_id: Option<String>,
    /// The caller's trace context (W3C `traceparent`): the turn this message starts links to
    /// it (the run's spans stay in the run's own trace). Also taken from the HTTP header
    /// `traceparent` and MCP `_meta.traceparent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

/// `agent_list`: every run of a Space, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentListRequest {
    /// The Space whose runs to list.
    pub space: String,
}

/// A request with no arguments (`agent_capabilities`, `space_list`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// `space_add`: register a Space (a name, an existing directory, a policy).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpaceAddRequest {
    /// The Space's name (1-64 letters, digits, `-`, `_`, `.`); it is the CodeSpace
    /// `workspace_id`.
    pub name: String,
    /// An existing directory on this host (absolute, or relative to the daemon's cwd).
    pub root: String,
    /// Read-only: `read`/`find` only; no `apply_patch`, no `exec_command`, no agent runs.
    #[serde(default)]
    pub read_only: bool,
    /// Approval policy for mutations: `off` (default) or `confirm`.
    #[serde(default)]
    pub approvals: Approvals,
    /// Network of the Space's agents and commands: `enabled` (default: agents must reach their
    /// model provider) or `none` (a network namespace of their own, loopback only).
    #[serde(default)]
    pub network: SpaceNetwork,
    /// Replace an existing registration of this name whose root or policy differs (without
    /// it such a change is refused).
    #[serde(default)]
    pub replace: bool,
}

/// Result of `agent_start` (`AgentStartReport`). Returned as soon as the run is launched, never
/// after the turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Running,
    /// Waiting for a turn slot: the host or the Space runs as many turns as its operator
    /// allows (`reason` gives the place); the turn starts, in order, when one frees.
    Queued,
    /// The provider refused the last turn for a rate or usage limit: the run continues the
    /// session by itself at `resets_at_ms` (a message sent meanwhile runs at once instead).
    QuotaWaiting,
    Idle,
    Done,
    Failed,
    Crashed,
    Stopped,
    Unknown,
}

impl Status {
    /// Every status, in contract order.
    pub const ALL: [Status; 9] = [
        Status::Running,
        Status::Queued,
        Status::QuotaWaiting,
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
            Status::Queued => "queued",
            Status::QuotaWaiting => "quota_waiting",
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Cloning `repo` / checking out `branch` before the first turn (progress in `notice` events).
    Preparing,
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
            Phase::Preparing => "preparing",
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
        [Phase::Preparing, Phase::Installing, Phase::Starting, Phase::Working, Phase::Waiting, Phase::Exited, Phase::Failed, Phase::Crashed]
            .into_iter()
            .find(|v| v.as_str() == s)
            .unwrap_or(Phase::Unknown)
    }
}

/// One run's status (`AgentRunStatus`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// The run's `options.label`, if it was given one.
    #[serde(default)]
    pub label: Option<String>,
    /// The first turn's prompt on one line, with the run's secret values redacted, cut to
    /// [`RunStatus::PROMPT_EXCERPT_MAX`] characters (a cut one ends with `…`). `None` for a run
    /// recorded by a `spacesd` older than this field.
    #[serde(default)]
    pub prompt_excerpt: Option<String>,
    /// What the run spent over its ended turns (the usage ledger; `agent_usage` has each turn).
    #[serde(default)]
    pub usage: UsageTotals,
    /// The run's budget, when it has one (`options.budget`, the Space's default, or
    /// `agent_budget`). A run at it says so in `reason` and takes no turn (`accepts_message`
    /// false) until the budget is raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    /// With status `quota_waiting`: when the run continues by itself, Unix time in ms (the
    /// provider's reset when the CLI gave one, else the daemon's bounded backoff).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at_ms: Option<u64>,
}

impl RunStatus {
    /// Longest `prompt_excerpt`, in characters (the `…` of a cut one included).
    pub const PROMPT_EXCERPT_MAX: usize = 60;
}

/// `text` on one line (runs of whitespace, newlines included, become one space), cut to `max`
/// characters with `…` as the last one when it is longer.
pub fn excerpt(text: &str, max: usize) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() <= max {
        one
    } else {
        format!("{}…", one.chars().take(max.saturating_sub(1)).collect::<String>())
    }
}

/// Result of `agent_message`, `agent_interrupt`, `agent_stop` (`AgentActionReport`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ActionReport {
    pub run_id: String,
    /// Delivered (message), interrupted (interrupt) or stopped with nothing left alive (stop).
    pub ok: bool,
    /// One human sentence saying what happened.
    pub reason: String,
}

/// A registered Space: a name, a root directory and its policy. The name is the CodeSpace
/// `workspace_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// Network of the Space's agents and commands: `enabled` (default) or `none` (a network
    /// namespace of their own, loopback only).
    #[serde(default)]
    pub network: SpaceNetwork,
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

/// The operator's network setting of a Space (`space_add`'s `network`; API reference, "Words":
/// a Space's policy includes its network). Not a client grant: no request can change it.
///
/// `workspace_info` reports it as `network.policy` in the contract's words: `enabled` is
/// `enabled`, `none` is `restricted` (with `enforcement: enforced` while the sandbox is on).
/// The registration says `none`, not `restricted`, because that is exactly what it gives: no
/// network at all, not a filtered one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SpaceNetwork {
    /// Agents and commands reach the network as the host does (the default: an agent must
    /// reach its model provider).
    #[default]
    Enabled,
    /// Agents and commands start in a network namespace of their own: loopback only, no host
    /// address, no provider (at the sandbox's Landlock level: no TCP). A run's own API socket (`/run/spaces`, a Unix socket) still works.
    /// A daemon without a sandbox (`SPACES_SANDBOX=off`) cannot enforce it and refuses to run
    /// anything in such a Space (`UNAUTHORIZED`).
    None,
}

impl SpaceNetwork {
    /// `enabled | none`.
    pub fn as_str(self) -> &'static str {
        match self {
            SpaceNetwork::Enabled => "enabled",
            SpaceNetwork::None => "none",
        }
    }

    /// True for `enabled`.
    pub fn is_enabled(self) -> bool {
        self == SpaceNetwork::Enabled
    }
}

/// `space_remove`: unregister a Space and delete its runs' history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpaceRemoveRequest {
    /// The Space's name.
    pub name: String,
    /// Stop its live runs (running or idle) first; without it, live runs refuse the removal.
    #[serde(default)]
    pub force: Option<bool>,
}

/// What `space_remove` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpaceRemoveReport {
    pub name: String,
    /// Live runs stopped first (`force`).
    pub stopped: Vec<String>,
    /// Runs whose rows, events and run directories were deleted.
    pub runs_removed: u64,
}

/// `agent_prune`: delete the Space's finished runs older than `older_than_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentPruneRequest {
    pub space: String,
    /// Runs created more than this many ms ago (e.g. 604800000 for 7 days).
    pub older_than_ms: u64,
}

/// The runs `agent_prune` or `agent_remove` deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunsRemovedReport {
    pub space: String,
    /// Their ids.
    pub removed: Vec<String>,
}
