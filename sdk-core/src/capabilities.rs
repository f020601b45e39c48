//! `agent_capabilities` (API reference, `Spaces.agent_capabilities`).

use serde::{Deserialize, Serialize};

/// What this host's harnesses are and can do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Capabilities {
    /// Protocol name and version of this API, e.g. `"spaces/1"`.
    pub protocol: String,
    /// Every run status, in contract order.
    pub statuses: Vec<String>,
    /// Every event kind, in contract order.
    pub event_kinds: Vec<String>,
    pub harnesses: Vec<HarnessCapabilities>,
    /// Host environment variable names a run may copy with `env_from_host`.
    pub forwardable_env: Vec<String>,
    /// Where persistent agents' homes are kept on this host (`spacesd serve --volume`).
    pub volume: crate::home::VolumeCapabilities,
    /// What holds every process of a run (and of a command): a cgroup per run with its
    /// limits, or the run's shim (a subreaper).
    pub process_containment: crate::tools::ProcessContainment,
    /// The sandbox every run and command starts in: `bubblewrap` (namespaces, seccomp, a
    /// process ceiling; docs/operations.md "Security model"), `landlock` (where bubblewrap
    /// cannot make one: Landlock and seccomp without namespaces, weaker; each run's notes say
    /// how), or `none` when the operator turned it off (`SPACES_SANDBOX=off`). A daemon from before the sandbox reports nothing
    /// (read as `none`).
    #[serde(default = "no_sandbox")]
    pub sandbox: String,
}

fn no_sandbox() -> String {
    "none".to_owned()
}

/// One harness as this host sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HarnessCapabilities {
    /// Harness id (`claude-code`, `openai-codex`, `openai-codex-exec`, `opencode`,
    /// `gemini-cli`).
    pub id: String,
    pub name: String,
    /// True when the CLI is installed (or an operator binary is set) and can be launched now.
    pub ready: bool,
    pub installed_version: Option<String>,
    /// Whether a provider key is available to the agent: `ok`, `missing`, or `unknown` when the
    /// daemon cannot tell (e.g. the CLI keeps its own login).
    pub auth: AuthState,
    /// Provider key variables this harness reads.
    pub keys: Vec<String>,
    /// Model endpoint wire protocols accepted by `base_url` (e.g. `anthropic-messages`).
    pub endpoint_wires: Vec<String>,
    pub can_interrupt: bool,
    /// How follow-ups work: `stdin-stream` (Claude Code), `app-server` (`turn/start` in the same
    /// process), `exec-resume` (a new process per turn), `acp` (`session/prompt`).
    pub followups: String,
    /// Facts worth knowing: pinned version, operator binary override in use, ...
    pub notes: Vec<String>,
    /// The binary that will be launched, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<String>,
    /// The protocol spoken with the CLI on its stdio: `claude-stream-json`,
    /// `codex-app-server` (JSON-RPC), `codex-exec-jsonl` (one process per turn) or `acp` (the
    /// Agent Client Protocol). Empty from a daemon that predates it.
    #[serde(default)]
    pub wire: String,
    /// The pinned version of the CLI (`installed_version` says what is installed).
    #[serde(default)]
    pub pinned_version: String,
    /// What runs of this harness can do (docs/harnesses.md). All false from a daemon that
    /// predates it.
    #[serde(default)]
    pub supports: HarnessSupports,
}

/// What runs of one harness can do, as this daemon drives its CLI
/// (`HarnessCapabilities.supports`; docs/harnesses.md, "What each harness supports").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HarnessSupports {
    /// A `force` message mid-turn joins the running turn (Codex `turn/steer`) instead of
    /// interrupting it and running next.
    pub steer: bool,
    /// A new process of the run continues the CLI's session (after `exit_when_idle`, a crash,
    /// a restored home); false: it starts a fresh session and says so in a `notice`.
    pub resume: bool,
    /// `agent_fork` forks the run's session natively at a turn (Claude Code
    /// `--fork-session`, Codex app-server `thread/fork`); false: a fork starts a fresh session.
    /// Every run can be forked; its folder comes from the checkpoint either way.
    pub fork: bool,
    /// `agent_rewind` takes the conversation back to a turn natively (Claude Code
    /// `--resume-session-at`, Codex app-server `thread/fork`); false: a rewound run's next turn
    /// starts a fresh session. The folder rewinds on every harness.
    #[serde(default)]
    pub rewind: bool,
    /// Turns report token usage (`usage` events).
    pub usage: bool,
    /// The CLI asks before tool calls; the run's policy answers and `permission` events show it.
    pub permission_requests: bool,
    /// Answers stream in as `message_delta` pieces before the whole `message`.
    pub message_deltas: bool,
}

/// Whether a harness has credentials (`HarnessCapabilities.auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthState {
    /// A provider key the harness reads is set in the daemon's environment.
    Ok,
    /// No provider key is set and the daemon knows the CLI needs one.
    Missing,
    /// The daemon cannot tell (the CLI may have its own stored login).
    Unknown,
}
