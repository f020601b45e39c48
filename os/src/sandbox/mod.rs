//! The sandbox around every agent run and command (issue 28; docs/operations.md, "Security
//! model").
//!
//! Two levels ([`Level`]): bubblewrap's namespaces (below), or, where bubblewrap cannot make a
//! sandbox, Landlock applied by the helper itself ([`landlock`], which says what that level
//! does not give). Three parts, in the order a start goes through them:
//! - **The daemon** builds a [`Policy`] per tree ([`Host::policy`]): what is writable (the Space
//!   root unless the Space is read-only, the run's home), what is read-only on top of the
//!   host's read-only view (the CLI install, files the harness wrote), what is hidden (the
//!   state dir, the token file, the other Spaces' roots, `/run`), the run's own API directory
//!   ([`API_DIR`] inside), whether the network is open, and the process ceiling.
//! - **The shim** turns it into a command line ([`command`]): bubblewrap's ([`bwrap::command`])
//!   ending in the daemon's own command with `sandbox-exec` ([`enter`]) and the program, or at
//!   the Landlock level the helper alone, carrying the policy ([`landlock::command`]).
//! - **Inside**, [`enter::main`] resets the signals the shim kept away from bubblewrap, sets the
//!   process ceiling inside the user namespace, at the Landlock level drops root's capabilities
//!   and applies the ruleset, loads the seccomp filter ([`seccomp`], with `no_new_privs`) and
//!   execs the program.
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
pub mod landlock;
pub mod probe;
pub mod seccomp;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// Where a run's own API directory is mounted inside its sandbox (read-write): the daemon
/// listens on `API_DIR/spacesd.sock` for that run alone, so `spacesd --state-dir /run/spaces` reaches it.
pub const API_DIR: &str = "/run/spaces";

/// Where a run's home is mounted inside its sandbox (read-write), the agent's `HOME`: the same
/// path on every host and in every run, so what a CLI writes into its home about itself
/// (Codex keeps absolute paths of its session files) still holds after the home moves.
pub const HOME_DIR: &str = "/run/home";

/// The socket file inside [`API_DIR`].
pub const API_SOCKET: &str = "spacesd.sock";

/// The host folders a bubblewrap sandbox replaces with its own empty tmpfs: nothing of the
/// host's is seen there, except what the policy binds on top (the Space, the read-only binds)
/// and the sandbox's own [`HOME_DIR`] and [`API_DIR`].
pub const PRIVATE_DIRS: [&str; 3] = ["/tmp", "/dev/shm", "/run"];

/// The environment variable naming the fd on which a sandbox's program finds its stdout
/// (`StdioSpec::Pipes` under bubblewrap: `crate::process::spawn`); the sandbox's helper moves it to fd 1 and removes
/// the variable before the program starts ([`enter`]).
///
/// Why: bubblewrap's outer process and its init in the sandbox keep fds 0-2 open for as long as
/// the sandbox lives. Were the program's stdout bubblewrap's fd 1, a program that closes its
/// output and runs on (case R42) would never be seen at EOF. Bubblewrap closes every other fd
/// it inherited in both of its own processes and passes them on to the program, so the
/// program's stdout goes there; bubblewrap's own fd 1 is `/dev/null` (its messages go to
/// stderr, which stays the program's stderr).
pub const STDOUT_APART_ENV: &str = "SPACES_SANDBOX_STDOUT_FD";

/// The signals a stop, an interrupt or a closed terminal sends: every child starts with them at
/// their default action (a daemon started in the background may have inherited them ignored),
/// except bubblewrap, which the shim starts with them ignored, and whose helper resets them.
pub const IGNORED_SIGNALS: [i32; 4] = [nix::libc::SIGHUP, nix::libc::SIGINT, nix::libc::SIGQUIT, nix::libc::SIGTERM];

/// Errors of the sandbox.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The sandbox asked for cannot be made on this host (bubblewrap not installed, user
    /// namespaces off; no Landlock in the kernel): the message says which and how to fix it. A
    /// retry does not help.
    #[error("no sandbox on this host: {0}")]
    Unavailable(String),
    /// `sandbox-exec` was given arguments it does not take (a bug: the shim writes them).
    #[error("sandbox-exec: {0}")]
    Usage(String),
    /// A step inside the sandbox failed before the program's exec: which, and the OS reason.
    #[error("sandbox-exec: cannot {what}: {source}")]
    Enter { what: &'static str, source: std::io::Error },
    /// The program itself could not be started (not found, not executable): which, and why.
    /// Exit 127, as a shell says of a command it cannot run.
    #[error("sandbox-exec: cannot start {program}: {source}")]
    Start { program: String, source: std::io::Error },
}

/// What each path `policy` mounts or hides is now: its (device, inode), `None` where nothing
/// is. A sandbox binds what was at a path when it was made; a warm sandbox
/// ([`crate::shim::spare`]) is used only while every path still names the same file, so a Space
/// folder renamed and replaced (case R43) or another Space's root swapped is never seen through
/// a sandbox made before the change.
pub fn identity(policy: &Policy) -> Vec<Option<(u64, u64)>> {
    use std::os::unix::fs::MetadataExt;
    let paths = policy.writable.iter().chain(&policy.readonly).chain(&policy.hidden).chain(&policy.api_dir).chain(&policy.home);
    paths.map(|p| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))).collect()
}

/// How trees are contained on this host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Bubblewrap namespaces + seccomp + `no_new_privs` (+ a process ceiling when not root).
    /// The default of a [`Policy`] that does not say (the strongest).
    #[default]
    Bubblewrap,
    /// Landlock + seccomp + `no_new_privs`, applied by the helper without namespaces, where
    /// bubblewrap cannot make a sandbox or the operator chose it ([`landlock`]); what the
    /// kernel gives of it is in [`Host::landlock`].
    Landlock,
    /// No sandbox: the operator turned it off (`SPACES_SANDBOX=off`). Every process of a run
    /// or command can do what the daemon's uid can, operator's socket and token included.
    Off,
}

impl Level {
    /// The name `workspace_info`, `agent_capabilities` and the runs' notes use.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Bubblewrap => "bubblewrap",
            Level::Landlock => "landlock",
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
    /// How the tree is confined: [`Level::Bubblewrap`] (the default of a policy that does not
    /// say) or [`Level::Landlock`].
    #[serde(default)]
    pub level: Level,
    /// The bubblewrap program (absolute, found by [`probe::find`]); empty at the Landlock level.
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
    /// Mounted read-write at [`HOME_DIR`]: the run's home. At the Landlock level, nothing is
    /// mounted: `api_dir` and `home` are writable where they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<PathBuf>,
    /// Landlock level: the tree's private temporary directory, writable, its `TMPDIR` (the shim
    /// makes one in its own directory, [`landlock::TMP_DIR`], and removes it when it ends).
    /// Bubblewrap gives every tree a private `/tmp` instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmp: Option<PathBuf>,
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
    /// The level every tree gets.
    pub level: Level,
    /// The bubblewrap program ([`probe::find`]); empty when [`Level::Off`].
    pub bwrap: PathBuf,
    /// Hidden from every tree: the state dir, the token file.
    pub hidden: Vec<PathBuf>,
    /// Read-only in every tree (shown through a hidden folder): the CLI installs, the daemon's
    /// own program (the helper and the `spaces` MCP server run it).
    pub readonly: Vec<PathBuf>,
    /// The process ceiling of a non-root daemon's trees ([`Policy::max_processes`]); bubblewrap
    /// only (without a user namespace `RLIMIT_NPROC` would count every process of the uid).
    pub max_processes: Option<u64>,
    /// What the Landlock probe reached at start ([`landlock::Reached`]), at that level.
    pub landlock: Option<landlock::Reached>,
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
        let bubblewrap = self.level == Level::Bubblewrap;
        Some(Policy {
            level: self.level,
            bwrap: self.bwrap.clone(),
            writable,
            readonly,
            hidden,
            api_dir: tree.api_dir,
            home: tree.home,
            tmp: None,
            network: tree.network,
            max_processes: if root || !bubblewrap { None } else { self.max_processes },
            user_namespace: !root && bubblewrap,
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

/// The command line that runs `argv` in `cwd` under `policy`, entering through `helper` (the
/// daemon's own command; `sandbox-exec` is appended): bubblewrap's ([`bwrap::command`]) or the
/// helper's alone at the Landlock level ([`landlock::command`]; the caller sets `cwd`). Errors:
/// [`Error::Unavailable`] for a path bubblewrap cannot mount (not UTF-8).
pub fn command(policy: &Policy, helper: &[String], argv: &[String], cwd: &Path) -> Result<Vec<String>, Error> {
    match policy.level {
        Level::Landlock => landlock::command(policy, helper, argv),
        _ => bwrap::command(policy, helper, argv, cwd),
    }
}

/// What the Landlock level reached at start, when it is the level in force.
pub fn landlock_reached() -> Option<landlock::Reached> {
    HOST.get().filter(|h| h.level == Level::Landlock).and_then(|h| h.landlock)
}

/// The signal a sandboxed program died of, from bubblewrap's exit code (`128 + N`, as a shell
/// reports it); `None` for a plain exit code.
pub fn signal_of_exit(code: i32) -> Option<i32> {
    (129..=128 + 64).contains(&code).then_some(code - 128)
}
