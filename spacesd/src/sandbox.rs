//! The daemon's side of the sandbox every run and command starts in (`spaces_os::sandbox`;
//! docs/operations.md, "Security model").
//!
//! At start ([`init`]): find bubblewrap and make one sandbox with it, or refuse to serve with
//! the fix named, unless the operator turned the sandbox off (`SPACES_SANDBOX=off`, or
//! `"sandbox": false` in `config.json`). What every tree is kept from: the state dir, the token
//! file, a local volume (the paths the store protects, [`crate::store::Store::protected`]).
//! What every tree sees read-only even inside a hidden folder: the CLI installs (the tools dir)
//! and the daemon's own program (the sandbox's helper, a run's `spaces` MCP server).
//!
//! Per tree ([`policy`]): its Space's root writable, every other Space's root hidden, plus what
//! the caller adds (read-only paths, a run's home and its API directory).

use std::path::{Path, PathBuf};

use spaces_os::sandbox::{self, Host, Level, Policy, Tree};

use crate::config::Config;
use crate::store::Store;

/// Sets up the sandbox of this daemon: returns the level in force. Errors: bubblewrap is
/// missing or cannot make a sandbox here, and the operator did not turn the sandbox off (the
/// message names both fixes).
pub fn init(cfg: &Config, store: &Store) -> anyhow::Result<Level> {
    if !cfg.sandbox {
        eprintln!(
            "spacesd: the sandbox is OFF (SPACES_SANDBOX=off): every agent and command runs as this daemon's uid with its \
             state dir, token and other Spaces in reach; each run's notes say so"
        );
        return Ok(sandbox::init(Host { level: Level::Off, bwrap: PathBuf::new(), hidden: Vec::new(), readonly: Vec::new(), max_processes: None }));
    }
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    let bwrap = sandbox::probe::find(&path)?;
    let root = nix::unistd::geteuid().is_root();
    sandbox::probe::check(&bwrap, !root)?;
    let mut readonly = vec![absolute(&cfg.tools_dir)];
    if let Ok(command) = crate::supervisor::self_command() {
        readonly.extend(command.iter().map(PathBuf::from).filter(|p| p.is_absolute() && p.exists()));
    }
    // The small helper shims start in each sandbox, beside the daemon's executable.
    if let Some(dir) = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf)) {
        readonly.push(dir.join(spaces_os::shim::server::SANDBOX_HELPER));
    }
    let hidden = store.protected().iter().map(|p| absolute(p)).collect();
    Ok(sandbox::init(Host { level: Level::Bubblewrap, bwrap, hidden, readonly, max_processes: cfg.process_limits().pids_max }))
}

/// The policy of a tree of Space `space` (`root`, `read_only`) with `extra` paths, every other
/// registered Space hidden; `None` when the sandbox is off. Errors: the Space registry cannot
/// be read.
pub fn policy(store: &Store, root: &Path, read_only: bool, extra: Extra) -> crate::error::Result<Option<Policy>> {
    let Some(host) = sandbox::host() else { return Ok(None) };
    if host.level == Level::Off {
        return Ok(None);
    }
    let other_roots = store
        .space_list()?
        .into_iter()
        .map(|s| PathBuf::from(s.root))
        .filter(|r| r != root)
        .collect();
    Ok(host.policy(Tree {
        root,
        read_only,
        other_roots,
        readonly: extra.readonly,
        api_dir: extra.api_dir,
        home: extra.home,
        network: true,
    }))
}

/// What a tree has besides its Space ([`policy`]).
#[derive(Debug, Default)]
pub struct Extra {
    pub readonly: Vec<PathBuf>,
    pub api_dir: Option<PathBuf>,
    /// The run's home, mounted at `spaces_os::sandbox::HOME_DIR`.
    pub home: Option<PathBuf>,
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).or_else(|_| std::path::absolute(p)).unwrap_or_else(|_| p.to_path_buf())
}
