//! A run's secrets: its environment (`options.env` plus forwarded host keys) and its MCP servers
//! with their env and header values. They live only in the run directory, 0600 (`env.json`,
//! `mcp_servers.json`), and in the actor's memory; the runs table stores names with
//! `[redacted]` values. Every value of 8+ characters is redacted from the run's output.
//!
//! The daemon's own secrets are redacted too, from every run and command ([`host_secrets`]):
//! the values of its environment's forwardable variables and of names that look secret
//! (`*_KEY`, `*_TOKEN`, `*SECRET*`, `*PASSWORD*`, `*PASSWD*`, `*CREDENTIAL*`, so
//! `AWS_SECRET_ACCESS_KEY` too), secret-looking `exec_env` values, the operator's bearer token,
//! and each caller token once it has been presented (the daemon keeps only their hashes, so it
//! cannot know one before). Redaction happens where output is first written: the shim replaces
//! them in journal lines and output files ([`spaces_os::shim::Launch::redact`]), and the
//! run's redactor again in events, tails and `output.log`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::RwLock;

use spaces_os::redact::Redactor;
use spaces_sdk::McpServer;

use crate::error::Result;

const ENV_FILE: &str = "env.json";
const MCP_FILE: &str = "mcp_servers.json";
const REPO_FILE: &str = "repo_url";
/// The first turn's text as the agent gets it (not redacted): see [`save_first_prompt`].
const PROMPT_FILE: &str = "prompt";

/// Keep the first turn's `text` in `run_dir` (0600), written before `agent_start` answers: a
/// daemon killed before the turn's agent started starts it after the restart
/// ([`super::recover`]). Not fsynced: a `kill -9` of the daemon loses nothing the kernel holds
/// (a power loss in that moment costs the turn, which then ends `crashed`).
pub fn save_first_prompt(run_dir: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(run_dir.join(PROMPT_FILE))?;
    file.write_all(text.as_bytes())
}

/// The first turn's text kept by [`save_first_prompt`]; `None` for a run from before it.
pub fn first_prompt(run_dir: &Path) -> Option<String> {
    std::fs::read_to_string(run_dir.join(PROMPT_FILE)).ok()
}

/// What a run's agent gets that must never be stored in clear outside its run directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSecrets {
    /// The agent's own environment.
    pub env: BTreeMap<String, String>,
    /// The caller's MCP servers, secrets included.
    pub mcp_servers: Vec<McpServer>,
    /// `options.repo` as given, when it carries credentials (`https://user:token@host/...`):
    /// the stored options keep it without them, the clone uses this.
    pub repo_url: Option<String>,
}

impl RunSecrets {
    /// Write both files (0600, atomically) into `run_dir`; no MCP file when there are no servers.
    pub fn save(&self, run_dir: &Path) -> Result<()> {
        spaces_store::fsutil::write_private(&run_dir.join(ENV_FILE), &serde_json::to_vec(&self.env)?)?;
        if !self.mcp_servers.is_empty() {
            spaces_store::fsutil::write_private(&run_dir.join(MCP_FILE), &serde_json::to_vec(&self.mcp_servers)?)?;
        }
        if let Some(url) = &self.repo_url {
            spaces_store::fsutil::write_private(&run_dir.join(REPO_FILE), url.as_bytes())?;
        }
        Ok(())
    }

    /// Read them back; a missing file is empty (runs from before MCP servers have none).
    /// Errors: a file that exists but cannot be read ([`spaces_store::Error::Io`], naming it)
    /// or does not parse: never "no secrets", which would mean nothing is redacted.
    pub fn load(run_dir: &Path) -> Result<Self> {
        let mut secrets = RunSecrets::default();
        if let Some(bytes) = read_if_there(&run_dir.join(ENV_FILE))? {
            secrets.env = serde_json::from_slice(&bytes)?;
        }
        if let Some(bytes) = read_if_there(&run_dir.join(MCP_FILE))? {
            secrets.mcp_servers = serde_json::from_slice(&bytes)?;
        }
        secrets.repo_url = read_if_there(&run_dir.join(REPO_FILE))?
            .map(String::from_utf8)
            .transpose()
            .map_err(|e| spaces_store::Error::Damaged(format!("{REPO_FILE} is not UTF-8: {e}")))?;
        Ok(secrets)
    }

    /// A redactor for every secret value of the run ([`Self::named_values`]): env values, MCP
    /// env values and header values (and the token of an `Authorization: Bearer <token>` style
    /// value on its own), the repository URL's credentials, the daemon's own secrets.
    pub fn redactor(&self) -> Redactor {
        // Also the whole `user:token`, as git may print it.
        let userinfo = self.repo_url.as_deref().and_then(userinfo).map(str::to_owned);
        Redactor::new(self.named_values().into_iter().map(|(_, v)| v).chain(userinfo))
    }
}

impl RunSecrets {
    /// Every secret value of the run with what to call it (never the value): its environment's
    /// values by variable name (`options.env`, forwarded provider keys), MCP server secrets, the
    /// repository URL's credentials, and the daemon's own secrets. Values too short to redact
    /// are left out by the redactor and by the save's scan alike.
    pub fn named_values(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for server in &self.mcp_servers {
            for v in server.secret_values() {
                out.push((format!("a secret of MCP server {:?}", server.name()), v.to_owned()));
                if let Some((_, token)) = v.split_once(' ') {
                    out.push((format!("a secret of MCP server {:?}", server.name()), token.trim().to_owned()));
                }
            }
        }
        // The repository URL's credentials (`user:token@`), should git print them.
        if let Some(userinfo) = self.repo_url.as_deref().and_then(userinfo) {
            out.extend(userinfo.split(':').map(|p| ("the repository URL's credentials".to_owned(), p.to_owned())));
        }
        out.extend(host_secrets().into_iter().map(|v| ("a secret of the daemon".to_owned(), v)));
        out
    }

    /// What a save of the run's persistent home refuses to store: every value of
    /// [`Self::named_values`] in each spelling the redactor knows (as written, JSON-escaped).
    pub fn refused_in_home(&self) -> Vec<spaces_volumes::SecretValue> {
        let mut out = Vec::new();
        for (name, value) in self.named_values() {
            for spelling in Redactor::new([value]).spellings() {
                out.push(spaces_volumes::SecretValue { name: name.clone(), value: spelling.as_bytes().to_vec() });
            }
        }
        out
    }
}

/// The daemon's own secret values (see the module doc).
static HOST: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Whether a variable named `name` holds a secret by its name.
pub fn looks_secret(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    n.ends_with("_KEY") || n.ends_with("_TOKEN") || ["SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"].iter().any(|s| n.contains(s))
}

/// Learn the daemon's secrets from its environment and configuration (at `serve` start).
pub fn learn_host_secrets(cfg: &crate::config::Config) {
    let from_env = std::env::vars().filter(|(k, _)| cfg.forwardable_env.contains(k) || looks_secret(k)).map(|(_, v)| v);
    let from_exec = cfg.exec_env.iter().filter(|(k, _)| looks_secret(k)).map(|(_, v)| v.clone());
    for v in from_env.chain(from_exec) {
        learn_secret(&v);
    }
}

/// Learn one more secret value (a token); values under 8 characters are not redacted.
pub fn learn_secret(value: &str) {
    if value.chars().count() < spaces_os::redact::REDACT_MIN_LEN {
        return;
    }
    let mut host = HOST.write().unwrap_or_else(|p| p.into_inner());
    if !host.iter().any(|v| v == value) {
        host.push(value.to_owned());
    }
}

/// The daemon's secret values learned so far.
pub fn host_secrets() -> Vec<String> {
    HOST.read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Every spelling the shim of a command redacts (the daemon's secrets, JSON-escaped forms
/// too): what `spaces_codespace::exec::ShimSetup::secrets` asks for.
pub fn command_redactions() -> Vec<String> {
    Redactor::new(host_secrets()).spellings().to_vec()
}

/// The bytes of `path`, `None` when it does not exist. Errors: any other read failure, with
/// the path in the message.
fn read_if_there(path: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(std::io::Error::new(e.kind(), format!("{}: {e}", path.display())).into()),
    }
}

/// The `user:password` (or `user`, or `token`) of a `scheme://userinfo@host/...` URL, if any.
pub(super) fn userinfo(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    authority.rsplit_once('@').map(|(info, _)| info).filter(|i| !i.is_empty())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use serde_json::json;

    use super::*;

    /// An `env.json` that is there but cannot be read is an error naming it, never "no
    /// secrets" (which would redact nothing).
    #[test]
    fn an_unreadable_secrets_file_is_an_error_naming_it_not_an_empty_set() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should be: reading it fails for root too.
        std::fs::create_dir(dir.path().join(ENV_FILE)).unwrap();
        let err = RunSecrets::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains(ENV_FILE), "{err}");
        // Missing files are still an empty set.
        std::fs::remove_dir(dir.path().join(ENV_FILE)).unwrap();
        assert_eq!(RunSecrets::load(dir.path()).unwrap(), RunSecrets::default());
    }

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
            repo_url: Some("https://bob:repo-token-77@git.example/o/r.git".into()),
        };
        secrets.save(dir.path()).unwrap();
        for f in [ENV_FILE, MCP_FILE, REPO_FILE] {
            let mode = std::fs::metadata(dir.path().join(f)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{f}");
        }
        assert_eq!(RunSecrets::load(dir.path()).unwrap(), secrets);
        let r = secrets.redactor();
        assert_eq!(
            r.apply("env-secret-1 mcp-env-secret Bearer header-token-9 and header-token-9 alone"),
            "[redacted] [redacted] [redacted] and [redacted] alone"
        );
        assert_eq!(r.apply("fatal: https://bob:repo-token-77@git.example"), "fatal: https://[redacted]@git.example");
    }

    #[test]
    fn secret_names_are_told_by_their_shape() {
        for name in
            ["ANTHROPIC_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "client_secret", "GOOGLE_APPLICATION_CREDENTIALS"]
        {
            assert!(looks_secret(name), "{name}");
        }
        for name in ["PATH", "HOME", "KEYBOARD", "TOKENIZERS_PARALLELISM", "SPACES_TOOLS_DIR"] {
            assert!(!looks_secret(name), "{name}");
        }
    }

    #[test]
    fn a_home_save_refuses_every_secret_of_the_run_in_every_spelling_by_name() {
        learn_secret("daemon-secret-for-homes-1");
        let secrets = RunSecrets {
            env: [("API_KEY".to_owned(), "quote\"and/slash-1".to_owned()), ("SHORT".to_owned(), "tiny".to_owned())].into(),
            mcp_servers: serde_json::from_value(
                json!([{"name": "h", "url": "http://h", "headers": {"Authorization": "Bearer header-token-9"}}]),
            )
            .unwrap(),
            repo_url: Some("https://bob:repo-token-77@git.example/o/r.git".into()),
        };
        let refused = secrets.refused_in_home();
        let has = |name: &str, value: &str| refused.iter().any(|s| s.name == name && s.value == value.as_bytes());
        assert!(has("API_KEY", "quote\"and/slash-1"));
        assert!(has("API_KEY", "quote\\\"and/slash-1"), "the JSON spelling");
        assert!(has("API_KEY", "quote\\\"and\\/slash-1"), "the JSON spelling with an escaped slash");
        assert!(has("a secret of MCP server \"h\"", "header-token-9"));
        assert!(has("the repository URL's credentials", "repo-token-77"));
        assert!(has("a secret of the daemon", "daemon-secret-for-homes-1"));
        assert!(!refused.iter().any(|s| s.name == "SHORT"), "values under 8 characters are not secrets here either");
    }

    #[test]
    fn a_run_without_files_has_no_secrets() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(RunSecrets::load(dir.path()).unwrap(), RunSecrets::default());
        RunSecrets::default().save(dir.path()).unwrap();
        assert!(!dir.path().join(MCP_FILE).exists());
    }
}
