//! The process table: ids to handles, one live process per owner, eviction of exited handles.

use std::collections::{BTreeSet, HashMap};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::sync::oneshot;

use super::handle::{Handle, Io};
use super::io;
use super::shimmed::{self, ShimSetup};
use super::{spawn, ExecLimits, ExecSpec};
use super::{DispatchStatus, ExecCommandResult, ProcessStatus, ReadProcessResult, Termination};
use crate::error::{Error, Result};
use spaces_os::process::feed::{self, WriteStop};
use spaces_os::process::pty;

struct Inner {
    limits: ExecLimits,
    /// How commands are started under shims; `None`: spawned directly (they end with us).
    shims: Option<ShimSetup>,
    handles: Mutex<Table>,
}

/// Every handle by id, and which of them are known to have exited, oldest exit first. Every
/// lookup evicts first ([`Table::evict`]); keeping the exits in order makes that look at the
/// running handles and the oldest exits only, not at every handle: a `read_process` long-poll
/// loop against a table full of exited handles (256 by default) otherwise paid a lock of each,
/// and a sort of them all, per read (measured in docs/benchmarks.md, "`read_process` draining a
/// fast producer").
#[derive(Default)]
struct Table {
    handles: HashMap<String, Arc<Handle>>,
    /// Ids not yet seen exited.
    running: Vec<String>,
    /// Ids seen exited, by exit time (then id): eviction order.
    exited: BTreeSet<(Instant, String)>,
}

impl Table {
    fn insert(&mut self, id: String, handle: Arc<Handle>) {
        match handle.exit() {
            Some(exit) => {
                self.exited.insert((exit.at, id.clone()));
            }
            None => self.running.push(id.clone()),
        }
        if let Some(old) = self.handles.insert(id.clone(), handle) {
            // Ids are fresh uuids; should one repeat, the old handle's place in the order goes.
            if let Some(exit) = old.exit() {
                self.exited.remove(&(exit.at, id));
            }
        }
    }

    fn get(&self, id: &str) -> Option<&Arc<Handle>> {
        self.handles.get(id)
    }

    fn values(&self) -> impl Iterator<Item = &Arc<Handle>> {
        self.handles.values()
    }

    /// Drop exited handles older than `keep_exited_for`, then the oldest exits beyond
    /// `keep_exited_max`. Running handles are never dropped. Cost: one look at each running
    /// handle, plus one step per handle dropped.
    fn evict(&mut self, limits: &ExecLimits, now: Instant) {
        let (handles, exited) = (&self.handles, &mut self.exited);
        self.running.retain(|id| match handles.get(id) {
            Some(h) => match h.exit() {
                Some(exit) => {
                    exited.insert((exit.at, id.clone()));
                    false
                }
                None => true,
            },
            None => false,
        });
        // Exits in order of age: the expired ones come first, then the oldest beyond the cap.
        while let Some((at, _)) = self.exited.first() {
            let expired = now.duration_since(*at) >= limits.keep_exited_for;
            if !expired && self.exited.len() <= limits.keep_exited_max {
                break;
            }
            if let Some((_, id)) = self.exited.pop_first() {
                if let Some(h) = self.handles.remove(&id) {
                    forget(&h);
                }
            }
        }
    }
}

/// The processes of one host: start them, read them, write to them, stop them. Cheap to clone
/// (shared state inside). See the module doc for the lifetime of handles.
#[derive(Clone)]
pub struct Processes {
    inner: Arc<Inner>,
}

fn not_found(id: &str) -> Error {
    Error::ProcessNotFound { process_id: id.to_owned() }
}

/// An unexpected OS failure (`action`) on process `id`'s fds.
fn os_failure(id: &str, action: &'static str, source: impl Into<std::io::Error>) -> Error {
    Error::ProcessIo { process_id: id.to_owned(), action, source: source.into() }
}

impl Processes {
    /// An empty table with `limits`.
    pub fn new(limits: ExecLimits) -> Processes {
        Processes { inner: Arc::new(Inner { limits, shims: None, handles: Mutex::new(Table::default()) }) }
    }

    /// An empty table with `limits` whose commands [`Processes::start`] starts under shims
    /// (`setup`), so that they outlive this process and a later one re-adopts them
    /// ([`Processes::adopt`]).
    pub fn with_shims(limits: ExecLimits, setup: ShimSetup) -> Processes {
        Processes { inner: Arc::new(Inner { limits, shims: Some(setup), handles: Mutex::new(Table::default()) }) }
    }

    /// Whether commands run under shims (they survive this process).
    pub fn shimmed(&self) -> bool {
        self.inner.shims.is_some()
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        let mut table = self.inner.handles.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        table.evict(&self.inner.limits, Instant::now());
        table
    }

    fn get(&self, id: &str) -> Result<Arc<Handle>> {
        self.table().get(id).cloned().ok_or_else(|| not_found(id))
    }

    /// `exec_command`: start `spec` and return `{process_id: "proc-<uuid>", dispatch_status:
    /// confirmed}`. Errors: `INVALID_COMMAND` (empty argv or program), `PROCESS_SPAWN_FAILED`
    /// (with the OS reason), `WORKSPACE_BUSY` (the owner has a live process), `INTERNAL` when
    /// called outside a tokio runtime.
    pub fn exec(&self, spec: ExecSpec) -> Result<ExecCommandResult> {
        let rt = tokio::runtime::Handle::try_current()?;
        let mut table = self.table();
        if let Some(busy) = live(&table, &spec.owner) {
            return Err(Error::WorkspaceBusy { workspace_id: spec.owner, process_id: busy, approval_id: None });
        }
        let id = format!("proc-{}", uuid::Uuid::new_v4());
        let mut spec = spec;
        if spec.tag.is_empty() {
            spec.tag = format!("exec/{id}");
        }
        if spec.sandbox.is_some() {
            let program = spec.argv.first().cloned().unwrap_or_default();
            let why = "a sandboxed command needs a shim, and this host starts commands without one";
            return Err(Error::SpawnFailed { program, source: std::io::Error::other(why) });
        }
        let _enter = rt.enter(); // AsyncFd and the child's reaper register with this runtime
        let spawned = spawn::spawn(&spec)?;
        spaces_os::process::held::hold(spawned.pid, &spec.tag);
        if !spec.tty {
            // Best effort: a pipe the kernel will not widen keeps its 64 KiB.
            let _ = spaces_os::process::widen_pipe(&spawned.output, io::OUTPUT_PIPE_BYTES);
        }
        let output = Arc::new(watch_fd(&id, spawned.output)?);
        let (input, master) = match spawned.stdin {
            Some(fd) => (Arc::new(watch_fd(&id, fd)?), None),
            None => (output.clone(), Some(output.clone())),
        };
        let limits = &self.inner.limits;
        let handle = Arc::new(Handle::new(id.clone(), &spec, spawned.pid, limits.retained_bytes, Io::Direct { input, master }));
        let (exited_tx, exited_rx) = oneshot::channel();
        rt.spawn(io::reap(handle.clone(), spawned.child, exited_tx));
        rt.spawn(io::collect(handle.clone(), output, exited_rx, limits.drain_after_exit));
        if let Some(limit) = spec.timeout {
            rt.spawn(io::time_limit(handle.clone(), limit, limits.grace));
        }
        table.insert(id.clone(), handle);
        Ok(ExecCommandResult { process_id: id, dispatch_status: DispatchStatus::Confirmed })
    }

    /// `exec_command` as the host runs it: under a shim when the table has a [`ShimSetup`]
    /// (the command survives this process), else as [`Processes::exec`]. The caller serializes
    /// starts per owner (the service's workspace gate): the busy check and the insert are not
    /// one step here. Errors: as [`Processes::exec`]; `PROCESS_SPAWN_FAILED` also when the shim
    /// could not start.
    pub async fn start(&self, spec: ExecSpec) -> Result<ExecCommandResult> {
        let Some(setup) = &self.inner.shims else { return self.exec(spec) };
        if spec.argv.first().is_none_or(|p| p.is_empty()) {
            return Err(Error::EmptyCommand);
        }
        if let Some(busy) = self.live_for(&spec.owner) {
            return Err(Error::WorkspaceBusy { workspace_id: spec.owner, process_id: busy, approval_id: None });
        }
        let id = format!("proc-{}", uuid::Uuid::new_v4());
        let mut spec = spec;
        if spec.tag.is_empty() {
            spec.tag = format!("exec/{id}");
        }
        let limits = &self.inner.limits;
        let (record, client) = shimmed::start(setup, &id, &spec, limits.retained_bytes, limits.drain_after_exit).await?;
        let pid = client.pid();
        self.insert_shimmed(&record, setup.dir.join(&id), pid, Some(client), spec.timeout);
        Ok(ExecCommandResult { process_id: id, dispatch_status: DispatchStatus::Confirmed })
    }

    /// Put a shim-held command in the table and start its follower (and its time limit).
    fn insert_shimmed(
        &self,
        record: &shimmed::HandleRecord,
        dir: std::path::PathBuf,
        pid: i32,
        client: Option<spaces_os::shim::ShimClient>,
        limit: Option<Duration>,
    ) {
        let limits = &self.inner.limits;
        let handle = Arc::new(shimmed::handle(record, dir.clone(), pid, client, limits.retained_bytes));
        shimmed::catch_up(&handle, &dir, record.segment_bytes, limits.retained_bytes);
        tokio::spawn(shimmed::follow(handle.clone(), dir, record.segment_bytes, limits.retained_bytes, limits.grace));
        if let Some(limit) = limit {
            tokio::spawn(io::time_limit(handle.clone(), limit, limits.grace));
        }
        self.table().insert(record.process_id.clone(), handle);
    }

    /// Re-adopt the commands an earlier process of this host left under shims: each keeps its
    /// id, its cursors (its output is read from the shim's files), its exit, and the rest of
    /// its time limit. Call once at start-up, before any command starts. Returns how many
    /// were found (running or exited); 0 without a [`ShimSetup`].
    pub async fn adopt(&self) -> usize {
        let Some(setup) = &self.inner.shims else { return 0 };
        let found = shimmed::find(&setup.dir).await;
        let n = found.len();
        for f in found {
            let limit = shimmed::time_left(&f.record);
            self.insert_shimmed(&f.record, f.dir, f.pid, f.client, limit);
        }
        n
    }

    /// The tags of the commands held by shims, running or exited (their shims may still hold
    /// descendants).
    pub fn shim_tags(&self) -> Vec<String> {
        self.table().values().filter(|h| matches!(h.io, Io::Shim { .. })).map(|h| h.tag.clone()).collect()
    }

    /// `read_process{process_id, cursor?}`: output from `cursor` (default 0). With `wait`, waits
    /// up to that long for new bytes or the end of collection (long poll). Errors:
    /// `PROCESS_NOT_FOUND`, `INVALID_ARGUMENT` (cursor past the output).
    pub async fn read(&self, id: &str, cursor: Option<u64>, wait: Option<Duration>) -> Result<ReadProcessResult> {
        self.get(id)?.read(cursor.unwrap_or(0), wait).await
    }

    /// `process_status{process_id}`. Errors: `PROCESS_NOT_FOUND`.
    pub fn status(&self, id: &str) -> Result<ProcessStatus> {
        Ok(self.get(id)?.status())
    }

    /// `write_stdin{process_id, data}`: writes every byte, waiting while the pipe or terminal is
    /// full, but at most [`ExecLimits::stdin_timeout`] in total (waiting for an earlier writer
    /// included), so a process that stopped reading never hangs the caller (case E15).
    ///
    /// Errors: `PROCESS_NOT_FOUND`; `PROCESS_NOT_RUNNING` naming how it ended (case P9, also when
    /// it exits mid-write) or when it closed its input; `TIMEOUT`
    /// ([`Error::StdinTimeout`]) when the bound passed, saying how many bytes of how many were
    /// written: the process keeps running, and the write counts as interrupted (inspect its
    /// partial effects); `INVALID_ARGUMENT` for a line longer than 4095 bytes to a PTY in
    /// canonical mode, which the kernel would cut silently (case E13).
    pub async fn write_stdin(&self, id: &str, data: &[u8]) -> Result<()> {
        let h = self.get(id)?;
        if let Some(exit) = h.exit() {
            return Err(h.not_running(&exit));
        }
        let waited = self.inner.limits.stdin_timeout;
        let deadline = tokio::time::Instant::now() + waited;
        let timed_out = |written| Error::StdinTimeout { process_id: id.to_owned(), written, total: data.len(), waited };
        let Ok(mut carried) = tokio::time::timeout_at(deadline, h.write_lock.lock()).await else {
            return Err(timed_out(0));
        };
        let (input, master) = match &h.io {
            Io::Direct { input, master } => (input, master),
            Io::Shim { client, .. } => {
                let Some(shim) = client else {
                    h.exited().await;
                    return Err(h.exit().map(|e| h.not_running(&e)).unwrap_or_else(|| not_found(id)));
                };
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                return self.write_through_shim(&h, shim, data, left, waited).await;
            }
        };
        let canonical = match master {
            Some(m) => pty::is_canonical(m.as_fd()).map_err(|e| os_failure(id, "reading the terminal mode", e))?,
            None => false,
        };
        if canonical {
            let (longest, _) = pty::longest_line(*carried, data);
            if longest > pty::MAX_CANON_LINE {
                return Err(Error::LineTooLong { longest, max: pty::MAX_CANON_LINE });
            }
        }
        let mut written = 0;
        let result = tokio::select! {
            r = feed::write_all(input, data, &mut written, deadline) => r,
            _ = h.exited() => Err(WriteStop::Failed(std::io::Error::other("the process exited"))),
        };
        // What went through is in the terminal: its unterminated line goes on from there.
        *carried = if canonical { pty::longest_line(*carried, &data[..written]).1 } else { 0 };
        let stop = match result {
            Ok(()) => return Ok(()),
            Err(stop) => stop,
        };
        if let Some(exit) = h.exit() {
            return Err(h.not_running(&exit));
        }
        Err(match stop {
            WriteStop::TimedOut => timed_out(written),
            WriteStop::Failed(e) if e.raw_os_error() == Some(nix::libc::EPIPE) => {
                Error::StdinClosed { process_id: id.to_owned(), written, total: data.len() }
            }
            WriteStop::Failed(source) => Error::StdinFailed { process_id: id.to_owned(), written, total: data.len(), source },
        })
    }

    /// [`Processes::write_stdin`] through the shim holding the process: the shim writes with
    /// the time `left` and answers how far it got.
    async fn write_through_shim(
        &self,
        h: &Handle,
        shim: &spaces_os::shim::ShimClient,
        data: &[u8],
        left: Duration,
        waited: Duration,
    ) -> Result<()> {
        use spaces_os::shim::InputStop;
        let id = &h.id;
        let reply = match shim.input(data.to_vec(), left).await {
            Ok(reply) => reply,
            Err(why) => {
                // The shim refused (input closed, process gone) or is gone itself.
                if h.exit().is_none() {
                    let _ = tokio::time::timeout(Duration::from_secs(5), h.exited()).await;
                }
                return Err(match h.exit() {
                    Some(exit) => h.not_running(&exit),
                    None => {
                        Error::StdinFailed { process_id: id.clone(), written: 0, total: data.len(), source: std::io::Error::other(why) }
                    }
                });
            }
        };
        let written = reply.written.unwrap_or(0) as usize;
        match reply.stop {
            None => Ok(()),
            Some(InputStop::Timeout) => Err(Error::StdinTimeout { process_id: id.clone(), written, total: data.len(), waited }),
            Some(InputStop::LineTooLong) => Err(Error::LineTooLong { longest: reply.longest.unwrap_or(0), max: pty::MAX_CANON_LINE }),
            Some(InputStop::Exited) => {
                // The shim journaled the exit before it answered: the follower reads it next.
                let _ = tokio::time::timeout(Duration::from_secs(5), h.exited()).await;
                Err(match h.exit() {
                    Some(exit) => h.not_running(&exit),
                    None => Error::StdinClosed { process_id: id.clone(), written, total: data.len() },
                })
            }
            Some(InputStop::Closed) => Err(Error::StdinClosed { process_id: id.clone(), written, total: data.len() }),
            Some(InputStop::Failed) => Err(Error::StdinFailed {
                process_id: id.clone(),
                written,
                total: data.len(),
                source: std::io::Error::other(reply.error.unwrap_or_default()),
            }),
        }
    }

    /// `process_resize{process_id, rows, cols}`: sets the PTY size; the program gets SIGWINCH
    /// (case P8). Errors: `PROCESS_NOT_FOUND`, `PROCESS_NOT_TTY` (pipe mode),
    /// `PROCESS_NOT_RUNNING`, `INVALID_ARGUMENT` (zero rows or cols).
    pub async fn resize(&self, id: &str, rows: u16, cols: u16) -> Result<()> {
        let h = self.get(id)?;
        if !h.io.tty() {
            return Err(Error::ProcessNotTty { process_id: id.to_owned() });
        }
        if let Some(exit) = h.exit() {
            return Err(h.not_running(&exit));
        }
        if rows == 0 || cols == 0 {
            return Err(Error::invalid("rows and cols must both be at least 1"));
        }
        match &h.io {
            Io::Direct { master: Some(master), .. } => {
                pty::resize(master.as_fd(), rows, cols).map_err(|e| os_failure(id, "resizing the terminal", e))
            }
            Io::Shim { client: Some(shim), .. } => shim.resize(rows, cols).await.map_err(|why| match h.exit() {
                Some(exit) => h.not_running(&exit),
                None => os_failure(id, "resizing the terminal", std::io::Error::other(why)),
            }),
            _ => Err(os_failure(id, "resizing the terminal", std::io::Error::other("no shim holds the process"))),
        }
    }

    /// `terminate_process{process_id}`: SIGTERM to the whole process group (and tagged
    /// descendants), grace, SIGKILL; returns once the child is reaped; the termination reads
    /// `terminated`. On an exited process it ends leftover descendants and changes nothing
    /// else. Errors: `PROCESS_NOT_FOUND`.
    pub async fn terminate(&self, id: &str) -> Result<()> {
        self.get(id)?.terminate(Termination::Terminated, self.inner.limits.grace).await;
        Ok(())
    }

    /// Ends every running process (as [`Processes::terminate`], all at once) and returns how
    /// many there were: what a daemon shutdown does (`lifetime.gateway_shutdown: terminate`).
    pub async fn terminate_all(&self) -> usize {
        let running: Vec<Arc<Handle>> = self.table().values().filter(|h| h.exit().is_none()).cloned().collect();
        let grace = self.inner.limits.grace;
        let stops = running.iter().map(|h| h.terminate(Termination::Terminated, grace));
        futures_util::future::join_all(stops).await;
        running.len()
    }

    /// The id of a running process of `owner`, if any (the `WORKSPACE_BUSY` check).
    pub fn live_for(&self, owner: &str) -> Option<String> {
        live(&self.table(), owner)
    }

    /// Wait until the process was reaped and return its status. Errors: `PROCESS_NOT_FOUND`.
    pub async fn wait_exit(&self, id: &str) -> Result<ProcessStatus> {
        let h = self.get(id)?;
        h.exited().await;
        Ok(h.status())
    }
}

/// Register an fd we own with the current runtime's reactor.
fn watch_fd(id: &str, fd: OwnedFd) -> Result<AsyncFd<OwnedFd>> {
    // SAFETY: an `OwnedFd` stays open and keeps its raw fd for as long as the `AsyncFd` owns it.
    unsafe { AsyncFd::register(fd) }.map_err(|e| os_failure(id, "watching a process fd", e))
}

/// A running process of `owner`: only the handles not yet seen exited are looked at (the table
/// was just swept, [`Processes::table`]).
fn live(table: &Table, owner: &str) -> Option<String> {
    table.running.iter().filter_map(|id| table.handles.get(id)).find(|h| h.owner == owner && h.exit().is_none()).map(|h| h.id.clone())
}

/// An evicted handle of a shim-held command: its directory goes (the shim, seeing its journal
/// gone, ends what is left of its tree and exits).
fn forget(h: &Handle) {
    if let Io::Shim { dir, .. } = &h.io {
        let _ = std::fs::remove_dir_all(dir);
    }
}
