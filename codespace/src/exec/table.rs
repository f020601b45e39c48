//! The process table: ids to handles, one live process per owner, eviction of exited handles.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::sync::oneshot;

use super::handle::Handle;
use super::{DispatchStatus, ExecCommandResult, ProcessStatus, ReadProcessResult, Termination};
use super::io::{self, WriteStop};
use super::{spawn, ExecLimits, ExecSpec};
use crate::process::pty;
use crate::{Error, Result};

struct Inner {
    limits: ExecLimits,
    handles: Mutex<HashMap<String, Arc<Handle>>>,
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
        Processes { inner: Arc::new(Inner { limits, handles: Mutex::new(HashMap::new()) }) }
    }

    fn table(&self) -> MutexGuard<'_, HashMap<String, Arc<Handle>>> {
        let mut table = self.inner.handles.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        evict(&mut table, &self.inner.limits, Instant::now());
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
            return Err(Error::WorkspaceBusy {
                workspace_id: spec.owner,
                process_id: busy,
                approval_id: None,
            });
        }
        let id = format!("proc-{}", uuid::Uuid::new_v4());
        let mut spec = spec;
        if spec.tag.is_empty() {
            spec.tag = format!("exec/{id}");
        }
        let _enter = rt.enter(); // AsyncFd and the child's reaper register with this runtime
        let spawned = spawn::spawn(&spec)?;
        let output = Arc::new(watch_fd(&id, spawned.output)?);
        let (input, master) = match spawned.stdin {
            Some(fd) => (Arc::new(watch_fd(&id, fd)?), None),
            None => (output.clone(), Some(output.clone())),
        };
        let limits = &self.inner.limits;
        let handle = Arc::new(Handle::new(
            id.clone(),
            &spec,
            spawned.pid,
            limits.retained_bytes,
            input,
            master,
        ));
        let (exited_tx, exited_rx) = oneshot::channel();
        rt.spawn(io::reap(handle.clone(), spawned.child, exited_tx));
        rt.spawn(io::collect(handle.clone(), output, exited_rx, limits.drain_after_exit));
        if let Some(limit) = spec.timeout {
            rt.spawn(io::time_limit(handle.clone(), limit, limits.grace));
        }
        table.insert(id.clone(), handle);
        Ok(ExecCommandResult { process_id: id, dispatch_status: DispatchStatus::Confirmed })
    }

    /// `read_process{process_id, cursor?}`: output from `cursor` (default 0). With `wait`, waits
    /// up to that long for new bytes or the end of collection (long poll). Errors:
    /// `PROCESS_NOT_FOUND`, `INVALID_ARGUMENT` (cursor past the output).
    pub async fn read(
        &self,
        id: &str,
        cursor: Option<u64>,
        wait: Option<Duration>,
    ) -> Result<ReadProcessResult> {
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
        let timed_out = |written| Error::StdinTimeout {
            process_id: id.to_owned(),
            written,
            total: data.len(),
            waited,
        };
        let Ok(mut carried) = tokio::time::timeout_at(deadline, h.write_lock.lock()).await else {
            return Err(timed_out(0));
        };
        let canonical = match &h.master {
            Some(m) => pty::is_canonical(m.as_fd())
                .map_err(|e| os_failure(id, "reading the terminal mode", e))?,
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
            r = io::write_all(&h.input, data, &mut written, deadline) => r,
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
            WriteStop::Failed(source) => Error::StdinFailed {
                process_id: id.to_owned(),
                written,
                total: data.len(),
                source,
            },
        })
    }

    /// `process_resize{process_id, rows, cols}`: sets the PTY size; the program gets SIGWINCH
    /// (case P8). Errors: `PROCESS_NOT_FOUND`, `PROCESS_NOT_TTY` (pipe mode),
    /// `PROCESS_NOT_RUNNING`, `INVALID_ARGUMENT` (zero rows or cols).
    pub fn resize(&self, id: &str, rows: u16, cols: u16) -> Result<()> {
        let h = self.get(id)?;
        let Some(master) = &h.master else {
            return Err(Error::ProcessNotTty { process_id: id.to_owned() });
        };
        if let Some(exit) = h.exit() {
            return Err(h.not_running(&exit));
        }
        if rows == 0 || cols == 0 {
            return Err(Error::invalid("rows and cols must both be at least 1"));
        }
        pty::resize(master.as_fd(), rows, cols).map_err(|e| os_failure(id, "resizing the terminal", e))
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

fn live(table: &HashMap<String, Arc<Handle>>, owner: &str) -> Option<String> {
    table.values().find(|h| h.owner == owner && h.exit().is_none()).map(|h| h.id.clone())
}

/// Drop exited handles older than `keep_exited_for`, then the oldest exits beyond
/// `keep_exited_max`. Running handles are never dropped.
fn evict(table: &mut HashMap<String, Arc<Handle>>, limits: &ExecLimits, now: Instant) {
    table.retain(|_, h| h.exit().is_none_or(|e| now.duration_since(e.at) < limits.keep_exited_for));
    if table.len() <= limits.keep_exited_max {
        return; // fewer handles than the cap, so fewer exited ones too: the common case
    }
    let mut exited: Vec<(Instant, String)> =
        table.values().filter_map(|h| h.exit().map(|e| (e.at, h.id.clone()))).collect();
    if exited.len() > limits.keep_exited_max {
        exited.sort();
        for (_, id) in exited.iter().take(exited.len() - limits.keep_exited_max) {
            table.remove(id);
        }
    }
}
