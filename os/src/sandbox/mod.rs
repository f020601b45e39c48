//! The sandbox around every agent run and command (issue 28; docs/operations.md, "Security
//! model").
//!
//! Three parts, in the order a start goes through them:
//! - **The daemon** builds a [`Policy`] per tree ([`Host::policy`]): what is writable (the Space
//!   root unless the Space is read-only, the run's home), what is read-only on top of the
//!   host's read-only view (the CLI install, files the harness wrote), what is hidden (the
//!   state dir, the token file, the other Spaces' roots, `/run`), the run's own API directory
//!   ([`API_DIR`] inside), whether the network is open, and the process ceiling.
//! - **The shim** turns it into a bubblewrap command line ([`command`]) that ends in the daemon's
//!   own command with `sandbox-exec` ([`enter`]) and the program.
//! - **Inside**, [`enter::main`] resets the signals the shim kept away from bubblewrap, sets the
//!   process ceiling inside the user namespace, loads the seccomp filter ([`seccomp`], with
//!   `no_new_privs`) and execs the program.
//!
//! Why a helper inside and not bubblewrap alone: bubblewrap's outer process shares the
//! program's process group and would die of the SIGINT/SIGTERM a stop, an interrupt or a
//! terminal's Ctrl-C sends that group, leaving the program running unseen. The shim starts
//! bubblewrap with those signals ignored ([`IGNORED_SIGNALS`]), and the helper gives the program
//! their default action back. A program killed by signal N makes bubblewrap exit 128 + N: the
//! shim reports it as that signal ([`signal_of_exit`]).
//!
//! The pid namespace's init is bubblewrap's; when the program exits, bubblewrap reports at once
//! and what the program left running goes on inside the namespace until it ends or its tree is
//! ended, exactly as without the sandbox. Killing the namespace's init (a stop's SIGKILL to the
//! group) ends every process in it.

pub mod bwrap;
pub mod enter;
pub mod probe;
pub mod seccomp;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

pub use bwrap::command;

/// Where a run's own API directory is mounted inside its sandbox (read-write): the daemon
/// listens on `API_DIR/spacesd.sock` for that run alone, so `spacesd --state-dir /run/spaces` reaches it.
pub const API_DIR: &str = "/run/spaces";

/// Where a run's home is mounted inside its sandbox (read-write), the agent's `HOME`: the same
/// path on every host and in every run, so what a CLI writes into its home about itself
/// (Codex keeps absolute paths of its session files) still holds after the home moves.
pub const HOME_DIR: &str = "/run/home";

/// The socket file inside [`API_DIR`].
pub const API_SOCKET: &str = "spacesd.sock";

/// The signals a stop, an interrupt or a closed terminal sends: every child starts with them at
/// their default action (a daemon started in the background may have inherited them ignored),
/// except bubblewrap, which the shim starts with them ignored, and whose helper resets them.
pub const IGNORED_SIGNALS: [i32; 4] = [nix::libc::SIGHUP, nix::libc::SIGINT, nix::libc::SIGQUIT, nix::libc::SIGTERM];

/// Errors of the sandbox.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bubblewrap cannot make a sandbox on this host (not installed, user namespaces off): the
    /// message says which and how to fix it. A retry does not help.
    #[error("no sandbox on this host: {0}")]
    Unavailable(String),
    /// `sandbox-exec` was given arguments it does not take (a bug: the shim writes them).
    #[error("sandbox-exec: {0}")]
    Usage(String),
    /// A step inside the sandbox failed before the program's exec: which, and the OS reason.
    #[error("sandbox-exec: cannot {what}: {source}")]
    Enter { what: &'static str, source: std::io::Error },
}

/// How trees are contained on this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Bubblewrap namespaces + seccomp + `no_new_privs` (+ a process ceiling when not root).
    Bubblewrap,
    /// No sandbox: the operator turned it off (`SPACES_SANDBOX=off`). Every process of a run
    /// or command can do what the daemon's uid can, operator's socket and token included.
    Off,
}

impl Level {
    /// The name `workspace_info`, `agent_capabilities` and the runs' notes use.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Bubblewrap => "bubblewrap",
            Level::Off => "off",
        }
    }
}

/// What one tree may see and do. Built by the daemon, carried to the shim in its launch.
/// Paths are absolute; mount order is: `hidden` (shallowest first), then `readonly`, then
/// `writable`, then the API directory, so a path listed later shows through one hidden
/// earlier (a Space root inside a hidden folder, the CLI install inside the state dir).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// The bubblewrap program (absolute, found by [`probe::find`]).
    pub bwrap: PathBuf,
    /// Read-write at the same path: the Space root (unless read-only), the run's home.
    #[serde(default)]
    pub writable: Vec<PathBuf>,
    /// Read-only at the same path (a read-only Space root, the CLI install, harness files).
    #[serde(default)]
    pub readonly: Vec<PathBuf>,
    /// Replaced by an empty directory (a file: by an empty file): the state dir, the token
    /// file, other Spaces' roots. `/run` and `/tmp` are always private.
    #[serde(default)]
    pub hidden: Vec<PathBuf>,
    /// Mounted read-write at [`API_DIR`]: the run's own API socket's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_dir: Option<PathBuf>,
    /// Mounted read-write at [`HOME_DIR`]: the run's home.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<PathBuf>,
    /// `false`: a network namespace of its own (loopback only; no provider reachable).
    #[serde(default = "yes")]
    pub network: bool,
    /// Most processes (and threads) of the sandbox's user at once inside its user namespace
    /// (`RLIMIT_NPROC`, set after the namespace exists so it counts only the sandbox's own).
    /// Only a non-root daemon gets one (root trees have cgroups, and `RLIMIT_NPROC` does not
    /// bind root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_processes: Option<u64>,
    /// Make a user namespace (a non-root daemon must; root need not).
    #[serde(default)]
    pub user_namespace: bool,
    /// The sandbox ends when the process that started bubblewrap does (`--die-with-parent`):
    /// for the daemon's own short commands (its `git`). A shim's tree does not set it: what a
    /// command leaves running is waited for (or ended) by the shim, as without a sandbox.
    #[serde(default)]
    pub die_with_parent: bool,
}

fn yes() -> bool {
    true
}

/// The host's part of every policy, set once at the daemon's start ([`init`]).
#[derive(Debug, Clone)]
pub struct Host {
    pub level: Level,
    /// The bubblewrap program ([`probe::find`]); empty when [`Level::Off`].
    pub bwrap: PathBuf,
    /// Hidden from every tree: the state dir, the token file.
    pub hidden: Vec<PathBuf>,
    /// Read-only in every tree (shown through a hidden folder): the CLI installs, the daemon's
    /// own program (the helper and the `spaces` MCP server run it).
    pub readonly: Vec<PathBuf>,
    /// The process ceiling of a non-root daemon's trees ([`Policy::max_processes`]).
    pub max_processes: Option<u64>,
}

/// What one tree is, for [`Host::policy`].
#[derive(Debug, Clone)]
pub struct Tree<'a> {
    /// The Space's root and whether the Space is read-only.
    pub root: &'a Path,
    pub read_only: bool,
    /// Other Spaces' roots (hidden unless inside `root`).
    pub other_roots: Vec<PathBuf>,
    /// More read-only paths (files the harness wrote, the agent's binary).
    pub readonly: Vec<PathBuf>,
    /// The run's API directory ([`API_DIR`] inside).
    pub api_dir: Option<PathBuf>,
    /// The run's home ([`HOME_DIR`] inside).
    pub home: Option<PathBuf>,
    pub network: bool,
}

impl Host {
    /// The policy of `tree`, or `None` when the sandbox is off.
    pub fn policy(&self, tree: Tree<'_>) -> Option<Policy> {
        if self.level == Level::Off {
            return None;
        }
        let mut hidden = self.hidden.clone();
        hidden.extend(tree.other_roots.into_iter().filter(|r| !r.starts_with(tree.root)));
        hidden.sort_by_key(|p| p.components().count());
        // A path inside one hidden already is gone with it (and its name with it).
        let mut kept: Vec<PathBuf> = Vec::new();
        for path in hidden {
            if !kept.iter().any(|k| path.starts_with(k)) {
                kept.push(path);
            }
        }
        let hidden = kept;
        let mut readonly = self.readonly.clone();
        readonly.extend(tree.readonly);
        let mut writable = Vec::new();
        if tree.read_only {
            readonly.push(tree.root.to_path_buf());
        } else {
            writable.push(tree.root.to_path_buf());
        }
        let root = nix::unistd::geteuid().is_root();
        Some(Policy {
            bwrap: self.bwrap.clone(),
            writable,
            readonly,
            hidden,
            api_dir: tree.api_dir,
            home: tree.home,
            network: tree.network,
            max_processes: if root { None } else { self.max_processes },
            user_namespace: !root,
            die_with_parent: false,
        })
    }
}

static HOST: OnceLock<Host> = OnceLock::new();

/// Set this process's sandbox host, once (later calls change nothing). Returns the level in
/// force.
pub fn init(host: Host) -> Level {
    HOST.get_or_init(|| host).level
}

/// The host set by [`init`], if any.
pub fn host() -> Option<&'static Host> {
    HOST.get()
}

/// The level in force: [`Level::Off`] until [`init`].
pub fn level() -> Level {
    HOST.get().map_or(Level::Off, |h| h.level)
}

/// The signal a sandboxed program died of, from bubblewrap's exit code (`128 + N`, as a shell
/// reports it); `None` for a plain exit code.
pub fn signal_of_exit(code: i32) -> Option<i32> {
    (129..=128 + 64).contains(&code).then_some(code - 128)
}
