//! The daemon's side of the CodeSpace service: registered Spaces are its workspaces (the Space
//! name is the `workspace_id`), and the operator's command settings come from [`Config`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use spaces_codespace::service::{CodeSpace, ExecSettings, WorkspacePolicy, WorkspaceRegistry};

use crate::config::Config;
use crate::store::Store;

/// Spaces in the daemon's store, as CodeSpace workspaces.
struct SpaceRegistry {
    store: Arc<Store>,
}

impl WorkspaceRegistry for SpaceRegistry {
    fn workspace(&self, workspace_id: &str) -> spaces_codespace::Result<Option<WorkspacePolicy>> {
        let space =
            self.store.space_get(workspace_id).map_err(|e| spaces_codespace::Error::Registry(Box::new(e)))?;
        Ok(space.map(|s| WorkspacePolicy {
            workspace_id: s.name,
            root: PathBuf::from(s.root),
            read_only: s.read_only,
            approvals: s.approvals,
        }))
    }
}

/// `SPACES_HOST=<state dir>`: carried by every command this daemon starts, so the next daemon on
/// the same state dir ends the ones a SIGKILL left behind.
pub fn host_marker(cfg: &Config) -> String {
    format!("SPACES_HOST={}", cfg.state_dir.display())
}

/// Opens the CodeSpace service of this daemon: ledger, approvals and steering in
/// `<state dir>/codespace.db`; commands get the default clean environment plus the operator's
/// `exec_env`, and the `exec_timeout_ms` limit. Errors: the database cannot be opened.
pub fn open(cfg: &Config, store: Arc<Store>) -> spaces_codespace::Result<CodeSpace> {
    let mut exec = ExecSettings::with_defaults();
    exec.env.extend(cfg.exec_env.clone());
    exec.host_marker = Some(host_marker(cfg));
    exec.timeout = match cfg.exec_timeout_ms {
        0 => None,
        ms => Some(Duration::from_millis(ms)),
    };
    CodeSpace::open(&cfg.state_dir.join("codespace.db"), Arc::new(SpaceRegistry { store }), exec)
}
