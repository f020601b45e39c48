//! The persistent agent's record kept in every snapshot of its home (the snapshot's `meta`):
//! what a host needs to start the agent's next run without the caller repeating it
//! (`persistent_agent_send`): the harness, the Space (by name: another host has its own folder
//! under the same name), the working directory within it, the CLI's session to resume, and the
//! run options that carry no secret. `env` values are never kept (they are secrets); names in
//! `env_from_host` are, and each host forwards its own values.

use serde::{Deserialize, Serialize};
use spaces_sdk::SpaceAgentOptions;

/// The record. Unknown fields are ignored, so an older daemon reads a newer record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentMeta {
    /// Harness id (`claude-code`, `openai-codex`, `opencode`, ...).
    pub agent: String,
    /// The Space's name.
    pub space: String,
    /// Working directory relative to the Space root (`None`: the root).
    pub cwd: Option<String>,
    /// The CLI's session (Claude session id, Codex thread id) the next run resumes.
    pub session_id: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub env_from_host: Vec<String>,
    pub space_tools: Option<bool>,
    pub exit_when_idle: Option<bool>,
    /// The run that saved it.
    pub run_id: String,
}

impl AgentMeta {
    /// The record of a run of `agent` in `space` with `options`.
    pub fn of_run(agent: &str, space: &str, run_id: &str, session_id: Option<&str>, options: &SpaceAgentOptions) -> Self {
        AgentMeta {
            agent: agent.to_owned(),
            space: space.to_owned(),
            cwd: options.cwd.clone(),
            session_id: session_id.map(str::to_owned),
            model: options.model.clone(),
            base_url: options.base_url.clone(),
            env_from_host: options.env_from_host.clone(),
            space_tools: options.space_tools,
            exit_when_idle: options.exit_when_idle,
            run_id: run_id.to_owned(),
        }
    }

    /// Read it back from a snapshot's `meta`; a snapshot without one (an imported archive) gives
    /// the default (no agent, no Space).
    pub fn from_value(v: &serde_json::Value) -> Self {
        serde_json::from_value(v.clone()).unwrap_or_default()
    }

    /// As a snapshot's `meta`.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// The options of the agent's next run as persistent agent `home`.
    pub fn options(&self, home: &str) -> SpaceAgentOptions {
        SpaceAgentOptions {
            env_from_host: self.env_from_host.clone(),
            cwd: self.cwd.clone(),
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            exit_when_idle: self.exit_when_idle,
            home: Some(home.to_owned()),
            space_tools: self.space_tools,
            ..SpaceAgentOptions::default()
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_run_record_round_trips_and_keeps_no_env_values() {
        let options = SpaceAgentOptions {
            env: [("TOKEN".to_owned(), "secret-value-1".to_owned())].into(),
            env_from_host: vec!["ANTHROPIC_API_KEY".into()],
            cwd: Some("sub".into()),
            base_url: Some("http://127.0.0.1:9".into()),
            ..SpaceAgentOptions::default()
        };
        let meta = AgentMeta::of_run("claude-code", "proj", "run-1", Some("s-1"), &options);
        let v = meta.to_value();
        assert!(!v.to_string().contains("secret-value-1"), "{v}");
        let back = AgentMeta::from_value(&v);
        assert_eq!(back, meta);
        let next = back.options("helper");
        assert_eq!(next.home.as_deref(), Some("helper"));
        assert_eq!(next.cwd.as_deref(), Some("sub"));
        assert!(next.env.is_empty());
        assert_eq!(AgentMeta::from_value(&serde_json::json!({"agent": "x", "later": 1})).agent, "x");
    }
}
