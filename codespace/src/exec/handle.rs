//! One process handle: its output ring, its exit record, and the operations on them.
//!
//! State sits behind a std mutex held only for short, non-async sections; every change bumps a
//! `watch` counter so readers can long-poll and stoppers can await the exit without sleeping.

use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::sync::watch;

use super::ring::OutputRing;
use super::{ProcessState, ProcessStatus, ReadProcessResult, Termination};
use crate::error::{Error, Result};
use spaces_os::process::kill_tree;
use spaces_os::shim::ShimClient;

/// How the process ended.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ExitRecord {
    pub termination: Termination,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub at: Instant,
}

#[derive(Debug)]
struct State {
    ring: OutputRing,
    finished: bool,
    /// Collection stopped at the drain deadline, not at EOF: an incomplete character at the end
    /// was cut by us, not printed so by the program, and is never shown.
    cut_short: bool,
    exit: Option<ExitRecord>,
    /// Why we are stopping it, recorded before the first signal.
    cause: Option<Termination>,
    /// A shim journaled that every process of the tree is gone (or the shim itself is gone).
    tree_done: bool,
}

impl State {
    /// The `eof` of `read_process` and `process_status` (before the cursor test): collection
    /// finished *and* the process was reaped. The output pipe closes a moment before the exit
    /// is recorded (and a program may close it and run on), so `finished` alone would tell a
    /// caller "done" while the process still occupies its workspace and the next
    /// `exec_command` there answers `WORKSPACE_BUSY`. A read waiting at the end is woken by
    /// the exit as by new bytes.
    fn ended(&self) -> bool {
        self.finished && self.exit.is_some()
    }
}

/// How a process is held.
pub(crate) enum Io {
    /// Spawned by this process: our ends of its stdio.
    Direct {
        /// Where `write_stdin` writes: the stdin pipe or the PTY master.
        input: Arc<AsyncFd<OwnedFd>>,
        /// The PTY master (same fd as `input`), `None` in pipe mode.
        master: Option<Arc<AsyncFd<OwnedFd>>>,
    },
    /// Held by a shim in raw mode (`dir`: its directory, which outlives this daemon).
    Shim {
        /// `None` when no shim answered at re-adoption (its files are still read).
        client: Option<Arc<ShimClient>>,
        dir: PathBuf,
        tty: bool,
    },
}

impl Io {
    /// Whether the process has a terminal.
    pub fn tty(&self) -> bool {
        match self {
            Io::Direct { master, .. } => master.is_some(),
            Io::Shim { tty, .. } => *tty,
        }
    }
}

/// A process started by `exec`.
pub(crate) struct Handle {
    pub id: String,
    pub owner: String,
    /// The workspace it runs for (`process_status.workspace_id`).
    pub workspace_id: String,
    pub tag: String,
    pub pid: i32,
    /// How the process is held: directly, or by its shim.
    pub io: Io,
    /// Serializes writers; holds the length of the unterminated line written so far (PTY).
    pub write_lock: tokio::sync::Mutex<usize>,
    state: Mutex<State>,
    changed: watch::Sender<u64>,
    /// `read` calls waiting for output past their cursor right now.
    waiting: AtomicUsize,
}

/// One `read` waiting for output, counted in [`Handle::waiting`] until it stops waiting
/// (answered, timed out, or its future dropped).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn start(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Handle {
    /// The handle `id` of a process started from `spec` (its owner, workspace and tag).
    pub fn new(id: String, spec: &super::ExecSpec, pid: i32, retained: usize, io: Io) -> Self {
        let state = State { ring: OutputRing::new(retained), finished: false, cut_short: false, exit: None, cause: None, tree_done: false };
        Self {
            id,
            owner: spec.owner.clone(),
            workspace_id: spec.workspace_id.clone(),
            tag: spec.tag.clone(),
            pid,
            io,
            write_lock: tokio::sync::Mutex::new(0),
            state: Mutex::new(state),
            changed: watch::channel(0).0,
            waiting: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the ring half-written in a way that
        // matters to readers; keep serving rather than propagate the poison.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Append collected output. Returns whether a `read` was waiting for output (this push
    /// woke it).
    pub fn push(&self, bytes: &[u8]) -> bool {
        self.lock().ring.push(bytes);
        // Counted before the wake-up: a reader that starts waiting after it sees these bytes.
        let woke = self.waiting.load(Ordering::SeqCst) > 0;
        self.bump();
        woke
    }

    /// Output up to `offset` is lost (a shim's files no longer hold it): the window restarts
    /// empty at `offset`. Push at least the window plus 3 bytes after it, so that the window
    /// starts on a character boundary again (case R36).
    pub fn skip_to(&self, offset: u64) {
        self.lock().ring.skip_to(offset);
        self.bump();
    }

    /// Bytes collected so far (the ring's total).
    pub fn total(&self) -> u64 {
        self.lock().ring.total()
    }

    /// Collection finished: at EOF (`cut_short` false) or at the drain deadline (true).
    pub fn finish(&self, cut_short: bool) {
        {
            let mut st = self.lock();
            st.finished = true;
            st.cut_short = cut_short;
        }
        self.bump();
    }

    /// Record the reaped child's status. A stop we asked for wins over the raw status.
    pub fn record_exit(&self, status: std::io::Result<ExitStatus>) {
        {
            let mut st = self.lock();
            let (termination, exit_code, signal) = match (st.cause, status) {
                (Some(cause), _) => (cause, None, None),
                (None, Ok(s)) => match (s.code(), s.signal()) {
                    (Some(code), _) => (Termination::Exited, Some(code), None),
                    (None, Some(sig)) => (Termination::Signaled, None, Some(sig)),
                    (None, None) => (Termination::Unknown, None, None),
                },
                (None, Err(_)) => (Termination::Unknown, None, None),
            };
            st.exit = Some(ExitRecord { termination, exit_code, signal, at: Instant::now() });
        }
        self.bump();
    }

    /// Record an exit a shim journaled: its code, or the signal that killed it (both `None`:
    /// unknown, the shim is gone). A stop we asked for wins, as in [`Self::record_exit`].
    /// Later calls change nothing.
    pub fn record_exit_parts(&self, code: Option<i32>, signal: Option<i32>) {
        {
            let mut st = self.lock();
            if st.exit.is_some() {
                return;
            }
            let (termination, exit_code, signal) = match (st.cause, code, signal) {
                (Some(cause), _, _) => (cause, None, None),
                (None, Some(code), _) => (Termination::Exited, Some(code), None),
                (None, None, Some(sig)) => (Termination::Signaled, None, Some(sig)),
                (None, None, None) => (Termination::Unknown, None, None),
            };
            st.exit = Some(ExitRecord { termination, exit_code, signal, at: Instant::now() });
        }
        self.bump();
    }

    /// Every process of the tree is gone (its shim said so, or the shim is gone).
    pub fn mark_tree_done(&self) {
        self.lock().tree_done = true;
        self.bump();
    }

    /// Resolves once nothing of the command is left: the child was reaped and, under a shim,
    /// every descendant too (what it left in the background included). A time limit waits for
    /// this, not for the exit alone, so a background leftover is ended at the limit.
    pub async fn settled(&self) {
        let direct = matches!(self.io, Io::Direct { .. });
        let mut rx = self.changed.subscribe();
        loop {
            {
                let st = self.lock();
                if st.exit.is_some() && (direct || st.tree_done) {
                    return;
                }
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Whether collection finished.
    pub fn finished(&self) -> bool {
        self.lock().finished
    }

    /// The exit record, if the child was reaped.
    pub fn exit(&self) -> Option<ExitRecord> {
        self.lock().exit
    }

    /// Resolves once the child was reaped.
    pub async fn exited(&self) {
        let mut rx = self.changed.subscribe();
        while self.exit().is_none() {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// `process_status`.
    pub fn status(&self) -> ProcessStatus {
        let st = self.lock();
        ProcessStatus {
            process_id: self.id.clone(),
            workspace_id: self.workspace_id.clone(),
            state: if st.exit.is_some() { ProcessState::Exited } else { ProcessState::Running },
            termination: st.exit.map(|e| e.termination),
            exit_code: st.exit.and_then(|e| e.exit_code),
            signal: st.exit.and_then(|e| e.signal),
            output_total: st.ring.total(),
            output_retained_from: st.ring.retained_from(),
            eof: st.ended(),
        }
    }

    /// `read_process` from `cursor`; with `wait`, waits up to that long for bytes past the
    /// cursor or the end of collection. `INVALID_ARGUMENT` for a cursor past the output.
    pub async fn read(&self, cursor: u64, wait: Option<Duration>) -> Result<ReadProcessResult> {
        let deadline = wait.map(|w| tokio::time::Instant::now() + w);
        let mut rx = self.changed.subscribe();
        loop {
            let (mut answer, fresh, bytes) = {
                let st = self.lock();
                if cursor > st.ring.total() {
                    return Err(Error::invalid(format!(
                        "cursor {cursor} is past the output of {} ({} bytes so far); pass the cursor a previous read_process returned",
                        self.id,
                        st.ring.total()
                    )));
                }
                // An incomplete last character waits while more may come; after EOF it is
                // what the program printed; after a cut it is ours and never shown.
                let r = st.ring.read_from(cursor, !st.finished || st.cut_short);
                let end = st.ring.total() - if st.cut_short { st.ring.incomplete_tail() as u64 } else { 0 };
                let eof = st.ended() && r.next >= end;
                let fresh = !r.bytes.is_empty() || eof || r.skipped;
                let answer = ReadProcessResult {
                    process_id: self.id.clone(),
                    cursor: r.next,
                    chunk: String::new(),
                    eof,
                    output_lost: st.ring.retained_from() > 0,
                    retained_from: st.ring.retained_from(),
                };
                (answer, fresh, r.bytes)
            };
            // Text is made after the lock is released (the collector keeps pushing meanwhile),
            // without a copy when the bytes are valid UTF-8 (nearly always).
            answer.chunk = String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
            match ((answer, fresh), deadline) {
                ((answer, true), _) | ((answer, false), None) => return Ok(answer),
                ((answer, false), Some(deadline)) => {
                    let _waiting = Waiting::start(&self.waiting);
                    match tokio::time::timeout_at(deadline, rx.changed()).await {
                        Ok(Ok(())) => continue,
                        _ => return Ok(answer),
                    }
                }
            }
        }
    }

    /// The typed answer for input or resize sent to an exited process (case P9).
    pub fn not_running(&self, exit: &ExitRecord) -> Error {
        let how = match (exit.termination, exit.exit_code, exit.signal) {
            (Termination::Exited, Some(code), _) => format!("exited with code {code}"),
            (Termination::Signaled, _, Some(sig)) => format!("was killed by signal {sig}"),
            (Termination::Timeout, _, _) => "was stopped by its time limit".to_owned(),
            (Termination::Terminated, _, _) => "was terminated".to_owned(),
            _ => "exited (status unknown)".to_owned(),
        };
        Error::ProcessNotRunning { process_id: self.id.clone(), how }
    }

    /// Stop the process: SIGTERM to its group and tagged descendants, `grace`, SIGKILL; returns
    /// once the child is reaped. `cause` is what the termination will read. On an exited
    /// process this only ends leftover descendants (by tag) and keeps the recorded termination.
    pub async fn terminate(&self, cause: Termination, grace: Duration) {
        let running = {
            let mut st = self.lock();
            if st.exit.is_none() && st.cause.is_none() {
                st.cause = Some(cause);
            }
            st.exit.is_none()
        };
        let marker = spaces_os::process::tag_marker(&self.tag);
        let mut group = running.then_some(self.pid);
        if let Io::Shim { client: Some(shim), .. } = &self.io {
            // The shim ends every process it holds (its subreaper tree) and journals the exit;
            // the leader is reaped by then, so its pid is no longer ours to signal.
            if shim.stop(grace).await.is_ok() {
                group = None;
            }
        }
        // Once the leader is reaped its pid may be reused, so its group is signalled only while
        // it is ours; leftovers are then found by tag.
        kill_tree(group, &marker, grace).await;
        self.exited().await;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn handle() -> Arc<Handle> {
        let spec = super::super::ExecSpec {
            argv: Vec::new(),
            cwd: PathBuf::new(),
            env: BTreeMap::new(),
            tty: false,
            tty_size: None,
            owner: "owner".to_owned(),
            workspace_id: "ws".to_owned(),
            timeout: None,
            tag: "tag".to_owned(),
            sandbox: None,
        };
        let io = Io::Shim { client: None, dir: PathBuf::new(), tty: false };
        Arc::new(Handle::new("proc-test".to_owned(), &spec, 1, 64, io))
    }

    async fn until_waiting(h: &Handle, n: usize) {
        let wait = async {
            while h.waiting.load(Ordering::SeqCst) != n {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), wait).await.expect("the read never started waiting");
    }

    #[tokio::test]
    async fn a_push_tells_whether_a_read_was_waiting_for_it() {
        let h = handle();
        assert!(!h.push(b"a"), "nobody reads");
        let reader = tokio::spawn({
            let h = h.clone();
            async move { h.read(1, Some(Duration::from_secs(30))).await }
        });
        until_waiting(&h, 1).await;
        assert!(h.push(b"b"), "the long poll was waiting");
        let r = reader.await.unwrap().unwrap();
        assert_eq!((r.chunk.as_str(), r.cursor), ("b", 2));
        assert_eq!(h.waiting.load(Ordering::SeqCst), 0, "answered: no longer waiting");

        // A long poll given up by its caller (its future dropped) stops counting too.
        let gave_up = tokio::time::timeout(Duration::from_millis(50), h.read(2, Some(Duration::from_secs(30)))).await;
        assert!(gave_up.is_err());
        assert_eq!(h.waiting.load(Ordering::SeqCst), 0);
        assert!(!h.push(b"c"));
        // A read without a wait never counts.
        assert_eq!(h.read(3, None).await.unwrap().chunk, "");
        assert!(!h.push(b"d"));
    }
}
