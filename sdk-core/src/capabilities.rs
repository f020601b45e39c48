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
    /// Harness id (`claude-code`, `openai-codex`, `openai-codex-app-server`, `opencode`,
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
    /// How follow-ups work (e.g. `stdin-stream`, `resume-per-turn`).
    pub followups: String,
    /// Facts worth knowing: pinned version, operator binary override in use, ...
    pub notes: Vec<String>,
    /// The binary that will be launched, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<String>,
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
