//! The daemon's side of the CodeSpace service: registered Spaces are its workspaces (the Space
//! name is the `workspace_id`), and the operator's command settings come from [`Config`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use spaces_codespace::exec::ShimSetup;
use spaces_codespace::service::{CodeSpace, ExecSettings, WorkspacePolicy, WorkspaceRegistry};
use spaces_store::Store;

use crate::config::Config;

/// Spaces in the daemon's store, as CodeSpace workspaces.
struct SpaceRegistry {
    store: Arc<Store>,
}

impl WorkspaceRegistry for SpaceRegistry {
    fn workspace(&self, workspace_id: &str) -> spaces_codespace::Result<Option<WorkspacePolicy>> {
        let space = self.store.space_get(workspace_id).map_err(|e| spaces_codespace::Error::Registry(Box::new(e)))?;
        Ok(space.map(|s| WorkspacePolicy {
            workspace_id: s.name,
            root: PathBuf::from(s.root),
            read_only: s.read_only,
            approvals: s.approvals,
            network: s.network,
        }))
    }

    /// A command's sandbox: its Space's root writable, every other Space and the daemon's state
    /// hidden, its own network namespace for a `network: none` Space
    /// ([`crate::sandbox::policy`]). Commands get no API socket.
    fn sandbox(&self, ws: &WorkspacePolicy) -> spaces_codespace::Result<Option<spaces_os::sandbox::Policy>> {
        crate::sandbox::policy(&self.store, &ws.root, ws.read_only, ws.network, crate::sandbox::Extra::default())
            .map_err(|e| spaces_codespace::Error::Registry(Box::new(e)))
    }
}

/// `SPACES_HOST=<host id>`: carried by every command this daemon starts, so the next daemon on
/// the same state dir ends the ones a SIGKILL left behind. The id is opaque (the first 16 hex
/// digits of the SHA-256 of the state dir's path): a child must not learn where the state dir,
/// and so the token file, lives from its environment (issue 15).
pub fn host_marker(cfg: &Config) -> String {
    format!("SPACES_HOST={}", host_id(&cfg.state_dir))
}

/// The opaque id of the daemon of `state_dir` (see [`host_marker`]); also starts the names of
/// its cgroups (`.../spaces/<id>-<tree>`).
pub fn host_id(state_dir: &std::path::Path) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(state_dir.as_os_str().as_encoded_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// `<state dir>/exec`: one directory per `exec_command` held by a shim (see
/// `spaces_codespace::exec`, "Commands held by shims").
pub fn exec_dir(cfg: &Config) -> PathBuf {
    cfg.state_dir.join("exec")
}

/// Opens the CodeSpace service of this daemon: ledger, approvals and steering in
/// `<state dir>/codespace.db`; commands get the default clean environment plus the operator's
/// `exec_env`, and the `exec_timeout_ms` limit, and run under shims (this daemon's own command,
/// `spacesd shim DIR`, in [`exec_dir`]) so they survive the daemon; when the daemon cannot
/// name its own command, commands are its children and end with it (logged). Errors: the
/// database cannot be opened.
pub fn open(cfg: &Config, store: Arc<Store>) -> spaces_codespace::Result<CodeSpace> {
    let mut exec = ExecSettings::with_defaults();
    exec.env.extend(cfg.exec_env.clone());
    exec.host_marker = Some(host_marker(cfg));
    exec.timeout = match cfg.exec_timeout_ms {
        0 => None,
        ms => Some(Duration::from_millis(ms)),
    };
    exec.shims = match crate::config::self_command() {
        Ok(command) => Some(ShimSetup {
            command,
            env: crate::supervisor::shim_env(),
            dir: exec_dir(cfg),
            secrets: crate::supervisor::command_redactions,
        }),
        Err(e) => {
            eprintln!("spacesd: commands will not survive the daemon: cannot tell how to run spacesd shim ({e})");
            None
        }
    };
    CodeSpace::open(&cfg.state_dir.join("codespace.db"), Arc::new(SpaceRegistry { store }), exec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_marker_names_no_path() {
        let id = host_id(std::path::Path::new("/srv/spaces-state"));
        assert_eq!(id.len(), 16, "{id}");
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        assert_ne!(host_id(std::path::Path::new("/srv/other")), id, "two state dirs, two ids");
    }
}
