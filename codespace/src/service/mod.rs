//! The CodeSpace tool service: one entry point per tool of the API reference ("CodeSpace
//! execution layer"), shared by every transport (HTTP `POST /v1/tools/{name}`, the MCP tools, the CLI and both SDKs).
//!
//! Each tool is a typed async method taking its request and returning its result, both from
//! `spaces_sdk::tools` (`read(ReadRequest) -> ReadResult`, ...), or a [`crate::error::Error`] that the
//! transport turns into the wire error. A request's `work_id` is handled around the method by
//! [`CodeSpace::coordinated`]. The daemon's operation table is the untyped door over the same
//! methods: it decodes the JSON arguments with `spaces_sdk::decode` (unknown keys refused), runs
//! the tool coordinated, and encodes the result or the error.
//!
//! Theory of operation. A tool call names a workspace (a registered Space, looked up through a
//! [`WorkspaceRegistry`] the daemon provides) and is checked against its policy before anything
//! happens:
//! - read-only workspaces answer `read`/`find` only (`UNAUTHORIZED` for mutations);
//! - with approvals `confirm`, `apply_patch` (not a `check_only` preview) and `exec_command`
//!   return `APPROVAL_REQUIRED` with an `approval_id` instead of running; `operation_resume`
//!   runs the held call once, after re-checking policy (the `approvals` module);
//! - one live command occupies its workspace: `apply_patch` and a second `exec_command` get
//!   `WORKSPACE_BUSY` while `read`/`find` keep working. A per-workspace gate makes the busy check
//!   and the spawn (or the patch commit) one step, so a command never starts mid-commit.
//!
//! Files go through [`crate::fs::Root`] (confinement at open time), patches through the pure
//! engine ([`spaces_v4a`]) and the ledger ([`crate::ledger`]: the row is written before the
//! commit, so a crash leaves `unknown`, never a silent re-apply), commands through
//! [`crate::exec::Processes`], coordination through [`crate::steer::Steering`].
//!
//! Blocking work (file I/O, SQLite) runs on tokio's blocking pool; every method is async.

mod approvals;
mod commands;
mod coordination;
mod files;
mod info;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spaces_sdk::{Approvals, SpaceNetwork};

use crate::error::{Error, Result};
use crate::exec::{ExecLimits, Processes, ShimSetup};
use crate::fs::Root;
use crate::ledger::Ledger;
use crate::steer::Steering;

/// A workspace as the service needs it: the registered Space's name (`workspace_id`), root and
/// policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspacePolicy {
    pub workspace_id: String,
    pub root: PathBuf,
    pub read_only: bool,
    pub approvals: Approvals,
    /// The Space's network: `none` gives each command a network namespace of its own, which
    /// only the sandbox makes (commands are refused without one: [`Error::NetworkUnenforced`]).
    pub network: SpaceNetwork,
}

/// Where workspaces come from (the daemon's Space registry).
pub trait WorkspaceRegistry: Send + Sync + 'static {
    /// The workspace `workspace_id`, or `None` when no such Space is registered. Errors: the
    /// registry could not be read ([`Error::Registry`]).
    fn workspace(&self, workspace_id: &str) -> Result<Option<WorkspacePolicy>>;

    /// The sandbox a command of `ws` starts in (`spaces_os::sandbox`), `None` for none (the
    /// default: a registry that knows no sandbox). Errors: the registry could not be read.
    fn sandbox(&self, ws: &WorkspacePolicy) -> Result<Option<spaces_os::sandbox::Policy>> {
        let _ = ws;
        Ok(None)
    }
}

/// Operator settings for commands (`exec_command`): the environment every command gets and its
/// time limit. Clients cannot change either.
#[derive(Debug, Clone)]
pub struct ExecSettings {
    /// The complete environment of a command (nothing else is inherited). `TERM` is added for a
    /// PTY when missing.
    pub env: BTreeMap<String, String>,
    /// Time limit of one command; at the limit its process group is ended (`termination:
    /// timeout`). `None`: no limit.
    pub timeout: Option<Duration>,
    /// Retention and grace numbers of the process table.
    pub limits: ExecLimits,
    /// `NAME=value` added to every command's environment and inherited by its descendants, so
    /// that [`CodeSpace::end_leftovers`] can find the commands an earlier process of this host
    /// left running (the daemon was SIGKILLed). `None`: no marker.
    pub host_marker: Option<String>,
    /// Start commands under shims (`spacesd shim`), so that they survive the daemon and the
    /// next one re-adopts them ([`CodeSpace::adopt_commands`]). `None`: commands are children
    /// of this process and end with it.
    pub shims: Option<ShimSetup>,
}

impl ExecSettings {
    /// The default clean environment: `PATH=/usr/local/bin:/usr/bin:/bin`, `HOME` (the daemon's),
    /// `LANG=C.UTF-8`; 30 minutes time limit; default process-table limits.
    pub fn with_defaults() -> ExecSettings {
        let mut env = BTreeMap::new();
        env.insert("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned());
        if let Some(home) = std::env::var_os("HOME") {
            env.insert("HOME".to_owned(), home.to_string_lossy().into_owned());
        }
        env.insert("LANG".to_owned(), "C.UTF-8".to_owned());
        ExecSettings { env, timeout: Some(Duration::from_secs(30 * 60)), limits: ExecLimits::default(), host_marker: None, shims: None }
    }
}

/// The CodeSpace service of one host. Cheap to clone.
#[derive(Clone)]
pub struct CodeSpace {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Arc<dyn WorkspaceRegistry>,
    ledger: Ledger,
    steering: Steering,
    processes: Processes,
    exec: ExecSettings,
    /// Per-workspace gate: busy check + spawn, and busy check + patch commit, are one step.
    gates: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl CodeSpace {
    /// Opens the ledger and the steering store in `db` (SQLite, created if missing) and starts an
    /// empty process table. Errors: the database cannot be opened ([`Error::Db`]).
    pub fn open(db: &Path, registry: Arc<dyn WorkspaceRegistry>, exec: ExecSettings) -> Result<CodeSpace> {
        let ledger = Ledger::open(db)?;
        let steering = Steering::open(db)?;
        let processes = match &exec.shims {
            Some(setup) => Processes::with_shims(exec.limits.clone(), setup.clone()),
            None => Processes::new(exec.limits.clone()),
        };
        Ok(CodeSpace { inner: Arc::new(Inner { registry, ledger, steering, processes, exec, gates: Mutex::new(HashMap::new()) }) })
    }

    /// Re-adopts the commands an earlier daemon on this state left under shims (see
    /// [`Processes::adopt`]): their ids, cursors, exits and time limits carry on. Call it once
    /// at start-up, before [`CodeSpace::end_leftovers`] and before any command runs. Returns
    /// how many were found.
    pub async fn adopt_commands(&self) -> usize {
        self.inner.processes.adopt().await
    }

    /// Ends every process carrying the host marker that no adopted shim holds (commands an
    /// earlier daemon spawned directly, or whose shim was killed): SIGTERM, the table's grace,
    /// SIGKILL. Call it once at start-up, after [`CodeSpace::adopt_commands`] and before any
    /// command runs. Returns the pids signalled and any survivors.
    pub async fn end_leftovers(&self) -> spaces_os::process::KillReport {
        let Some(marker) = &self.inner.exec.host_marker else { return spaces_os::process::KillReport::default() };
        let grace = self.inner.exec.limits.grace;
        // The adopted commands' shims: registered when each was re-adopted (a spare shim's
        // environment cannot name its tree: it is started before it has one), and, for a shim
        // started fresh whose reconnection failed, by its environment (one scan for all).
        let tags: std::collections::HashSet<String> = self.inner.processes.shim_tags().into_iter().collect();
        let mut shims: Vec<i32> = tags.iter().flat_map(|tag| spaces_os::process::held::roots_of(tag)).collect();
        if !tags.is_empty() {
            shims.extend(
                spaces_os::process::alive_with_env(spaces_os::process::TAG_ENV)
                    .into_iter()
                    .filter(|(_, tag)| tag.strip_prefix("shim/").is_some_and(|t| tags.contains(t)))
                    .map(|(pid, _)| pid),
            );
        }
        shims.sort_unstable();
        shims.dedup();
        if shims.is_empty() {
            return spaces_os::process::kill_tree(None, marker, grace).await;
        }
        // Each look finds the marked processes first, then what the shims hold now: a command
        // under an adopted shim keeps starting children during the grace (a shell loop's
        // `sleep`s), and one started after an earlier look is held all the same. Looking at the
        // shims' trees second means nothing marked and held can fall between the two looks.
        let leftovers = || -> Vec<i32> {
            let marked = spaces_os::process::alive_with_marker(marker);
            if marked.is_empty() {
                return marked;
            }
            let held: std::collections::HashSet<i32> = spaces_os::shim::tree::descendants_of(&shims).into_iter().collect();
            marked.into_iter().filter(|p| !held.contains(p)).collect()
        };
        end_pids(leftovers, grace).await
    }

    /// The process table.
    pub fn processes(&self) -> &Processes {
        &self.inner.processes
    }

    /// The workspace `id`. Errors: `WORKSPACE_NOT_FOUND`.
    fn workspace(&self, id: &str) -> Result<WorkspacePolicy> {
        self.inner.registry.workspace(id)?.ok_or_else(|| Error::WorkspaceNotFound { workspace_id: id.to_owned() })
    }

    /// The root of `ws`: the directory at its registered path, opened for this call
    /// ([`Root::open_bound`]). Nothing is held between calls, so a folder renamed away and
    /// replaced by another at that path is the new one from the next call on, and the renamed
    /// folder is never touched again (case R43). Errors: `WORKSPACE_NOT_FOUND` (nothing at the
    /// path: removed or renamed), `SYMLINK_REJECTED` (a symlink now at the path or on its way),
    /// `PATH_NOT_DIRECTORY`, `FILE_OPERATION_FAILED`.
    fn root(&self, ws: &WorkspacePolicy) -> Result<Arc<Root>> {
        Ok(Arc::new(Root::open_bound(&ws.root)?))
    }

    /// The gate of the directory tree `root`. Keyed by the root's canonical path, not the
    /// workspace name, so two Spaces registered on one directory share one gate and one
    /// "a command is running" slot.
    fn gate(&self, root: &Root) -> Arc<tokio::sync::Mutex<()>> {
        let mut gates = self.inner.gates.lock().unwrap_or_else(|p| p.into_inner());
        gates.entry(owner(root)).or_default().clone()
    }

    /// The live command occupying `root`, if any.
    fn live_in(&self, root: &Root) -> Option<String> {
        self.inner.processes.live_for(&owner(root))
    }
}

/// The owner of a command in the process table: its workspace root's canonical path.
fn owner(root: &Root) -> String {
    root.path().display().to_string()
}

/// `UNAUTHORIZED` for a mutation in a read-only workspace.
fn refuse_read_only(ws: &WorkspacePolicy, tool: &'static str) -> Error {
    Error::ReadOnly { workspace_id: ws.workspace_id.clone(), tool }
}

/// True when a command of `ws` could not be kept off the network: its network is `none` and
/// this host runs commands without a sandbox (`spaces_os::sandbox`).
fn network_unenforced(ws: &WorkspacePolicy) -> bool {
    ws.network == SpaceNetwork::None && spaces_os::sandbox::level() == spaces_os::sandbox::Level::Off
}

/// `WORKSPACE_BUSY` naming the live process.
fn busy(ws: &str, process_id: &str) -> Error {
    Error::WorkspaceBusy { workspace_id: ws.to_owned(), process_id: process_id.to_owned(), approval_id: None }
}

/// Runs blocking `f` on the blocking pool. A panic there is [`Error::TaskFailed`] (`INTERNAL`).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f).await?
}

/// SIGTERM to every pid `find` returns, up to `grace` for them to go, then SIGKILL to what
/// `find` still returns (looking again each round: they may fork meanwhile).
async fn end_pids(find: impl Fn() -> Vec<i32>, grace: Duration) -> spaces_os::process::KillReport {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let mut report = spaces_os::process::KillReport::default();
    let signal = |sig: Signal, report: &mut spaces_os::process::KillReport| {
        let pids = find();
        for pid in &pids {
            let _ = kill(Pid::from_raw(*pid), sig);
            if !report.signalled.contains(pid) {
                report.signalled.push(*pid);
            }
        }
        pids.is_empty()
    };
    if signal(Signal::SIGTERM, &mut report) {
        return report;
    }
    let deadline = tokio::time::Instant::now() + grace;
    while tokio::time::Instant::now() < deadline && !find().is_empty() {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    for _ in 0..20 {
        if signal(Signal::SIGKILL, &mut report) {
            return report;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    report.survivors = find();
    report
}
