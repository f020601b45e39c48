//! A run's secrets: its environment (`options.env` plus forwarded host keys) and its MCP servers
//! with their env and header values. They live only in the run directory, 0600 (`env.json`,
//! `mcp_servers.json`), and in the actor's memory; the runs table stores names with
//! `[redacted]` values. Every value of 8+ characters is redacted from the run's output.

use std::collections::BTreeMap;
use std::path::Path;

use spaces_harnesses::Redactor;
use spaces_sdk::McpServer;

use crate::error::Result;

const ENV_FILE: &str = "env.json";
const MCP_FILE: &str = "mcp_servers.json";

/// What a run's agent gets that must never be stored in clear outside its run directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSecrets {
    /// The agent's own environment.
    pub env: BTreeMap<String, String>,
    /// The caller's MCP servers, secrets included.
    pub mcp_servers: Vec<McpServer>,
}

impl RunSecrets {
    /// Write both files (0600, atomically) into `run_dir`; no MCP file when there are no servers.
    pub fn save(&self, run_dir: &Path) -> Result<()> {
        crate::fsutil::write_private(&run_dir.join(ENV_FILE), &serde_json::to_vec(&self.env)?)?;
        if !self.mcp_servers.is_empty() {
            crate::fsutil::write_private(&run_dir.join(MCP_FILE), &serde_json::to_vec(&self.mcp_servers)?)?;
        }
        Ok(())
    }

    /// Read them back; a missing file is empty (runs from before MCP servers have none).
    /// Errors: a file that exists but does not parse.
    pub fn load(run_dir: &Path) -> Result<Self> {
        let mut secrets = RunSecrets::default();
        if let Ok(bytes) = std::fs::read(run_dir.join(ENV_FILE)) {
            secrets.env = serde_json::from_slice(&bytes)?;
        }
        if let Ok(bytes) = std::fs::read(run_dir.join(MCP_FILE)) {
            secrets.mcp_servers = serde_json::from_slice(&bytes)?;
        }
        Ok(secrets)
    }

    /// A redactor for every secret value: env values, MCP env values and header values (and the
    /// token of an `Authorization: Bearer <token>` style value on its own).
    pub fn redactor(&self) -> Redactor {
        let mut values: Vec<String> = self.env.values().cloned().collect();
        for server in &self.mcp_servers {
            for v in server.secret_values() {
                values.push(v.to_owned());
                if let Some((_, token)) = v.split_once(' ') {
                    values.push(token.trim().to_owned());
                }
            }
        }
        Redactor::new(values)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use serde_json::json;

    use super::*;

    #[test]
    fn saved_0600_loaded_back_and_redacted() {
        let dir = tempfile::tempdir().unwrap();
        let secrets = RunSecrets {
            env: [("API_KEY".to_owned(), "env-secret-1".to_owned())].into(),
            mcp_servers: serde_json::from_value(json!([
                {"name": "e", "command": "c", "env": {"TOKEN": "mcp-env-secret"}},
                {"name": "h", "url": "http://h", "headers": {"Authorization": "Bearer header-token-9"}}
            ]))
            .unwrap(),
        };
        secrets.save(dir.path()).unwrap();
        for f in [ENV_FILE, MCP_FILE] {
            let mode = std::fs::metadata(dir.path().join(f)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{f}");
        }
        assert_eq!(RunSecrets::load(dir.path()).unwrap(), secrets);
        let r = secrets.redactor();
        assert_eq!(
            r.apply("env-secret-1 mcp-env-secret Bearer header-token-9 and header-token-9 alone"),
            "[redacted] [redacted] [redacted] and [redacted] alone"
        );
    }

    #[test]
    fn a_run_without_files_has_no_secrets() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(RunSecrets::load(dir.path()).unwrap(), RunSecrets::default());
        RunSecrets::default().save(dir.path()).unwrap();
        assert!(!dir.path().join(MCP_FILE).exists());
    }
}
