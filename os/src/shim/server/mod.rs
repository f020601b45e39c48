//! The shim process: `spacesd shim DIR` (see the [module doc](super) for its part in a run).
//!
//! Everything happens on one thread in one loop (`Shim::run`) that owns all state: output
//! lines from the two reader tasks, SIGCHLD (reaping every child that reaches it: the agent
//! and, as a subreaper, every orphaned descendant), SIGTERM (a stop), requests from control
//! connections, and the drain and sync timers.
//!
//! An idle shim sleeps until something happens (issue 30: a thousand idle runs cost no CPU):
//! no timer of the loop runs for its own sake. The sync is armed by a write to the journal, the
//! look at the tree's CPU demand ([`Demoter`]) by the journal's growth (output, a turn) and it
//! stops once the tree was quiet for a while, the orphan check only while no control
//! connection is open (a daemon follows every live shim it knows). Ending a tree walks `/proc`
//! only for what its process group and cgroup did not take with them: "is the tree gone?" is
//! the shim's own children (a subreaper), not a scan of the host.

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitid, waitpid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::net::{UnixListener, UnixStream};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::journal::{journal_path, JournalWriter, Kind, SYNC_EVERY};
use super::lines::LineReader;
use super::output::OutputWriter;
use super::own::sandbox_helper;
use super::protocol::{InputStop, Launch, OutputMode, RawRecord, Record, Reply, Request, ShimSpec, Stream, PROTOCOL};
use super::{socket_path, spare, tree};
use crate::process::cgroup::{Cgroup, Plan};
use crate::process::demote::{self, Demoter};
use crate::process::feed::{write_all, WriteStop};
use crate::process::prepared::{Prepared, Started};
use crate::process::{self, pty, read_output, OutputSink, SpawnSpec, StdinSpec, StdioSpec};
use crate::redact::RedactStream;
use crate::redact::Redactor;

/// A line to the shim's log (its stderr, `shim.log`), never a panic when it cannot be written
/// (`eprintln!` panics, and on a full disk the log cannot be written).
macro_rules! say {
    ($($arg:tt)*) => { crate::disk::say(format_args!($($arg)*)) };
}

mod conn;
mod ending;
mod io;
mod start;

use conn::accept;
use io::{line_readers, raw_reader};

/// Grace for what is left of the tree after the agent exited (tools it left behind).
const LEFTOVER_GRACE: Duration = Duration::from_millis(500);
/// How often the shim checks that its journal still exists; a shim whose run directory was
/// removed ends its tree and exits instead of waiting forever for an acknowledgement.
const ORPHAN_CHECK: Duration = Duration::from_secs(5);
/// Most output lines written to the journal with one `write(2)` (those already read).
const MAX_LINES_PER_WRITE: usize = 256;
/// How long a stopped tree whose process group lives on has to go before the shim walks `/proc`
/// for what left the group (a group that is gone while the tree is not: at once).
const SCAN_AFTER: Duration = Duration::from_millis(500);

/// Run the shim in `dir`: read the [`Launch`] (a [`ShimSpec`] and its output mode) from stdin, start the agent, answer on stdout
/// with one [`Reply`] line (ok and the agent's pid, or why it could not start), then serve until
/// the tree is gone and the daemon has acknowledged the whole journal. Returns the exit code.
pub fn main(dir: &Path) -> i32 {
    // Started by `process::spawn_self_starting`: nothing ran between the daemon's fork and exec.
    // Nothing inherited beyond stdio is the shim's to hold (issue 28); before `own_session`,
    // which marks every fd close-on-exec.
    crate::process::close_inherited_fds();
    if let Err(e) = crate::process::own_session() {
        return ready(Err(format!("cannot start a session of its own: {e}")));
    }
    // A spare makes its program's cgroup and child now, before its launch comes.
    let made = spare::Made::from_env();
    let mut input = String::new();
    let spec = match std::io::stdin().read_to_string(&mut input) {
        Ok(_) => serde_json::from_str::<Launch>(&input).map_err(|e| format!("the shim spec on stdin is not valid: {e}")),
        Err(e) => Err(format!("cannot read the shim spec from stdin: {e}")),
    };
    let launch = match spec {
        Ok(l) if l.spec.protocol == PROTOCOL => l,
        Ok(l) => {
            return ready(Err(format!(
                "shim protocol version {} is not supported: this spacesd speaks version {PROTOCOL}",
                l.spec.protocol
            )))
        }
        Err(why) => return ready(Err(why)),
    };
    let dir = launch.dir.clone().unwrap_or_else(|| dir.to_owned());
    if let Err(e) = std::env::set_current_dir(&dir) {
        return ready(Err(format!("cannot enter the shim directory {}: {e}", dir.display())));
    }
    // The shim's one thread carries every line of its agent and every message to it: a short
    // slice, as the daemon's threads ([`crate::process::priority::ask_short_slice`]).
    crate::process::priority::ask_short_slice();
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return ready(Err(format!("no runtime: {e}"))),
    };
    rt.block_on(async move {
        let redactor = Redactor::new(launch.redact);
        let made = match made {
            Some(made) => made.adopt(launch.cgroup.as_ref()),
            None => launch.cgroup.as_ref().map(Plan::create).transpose().map(|c| (c, None)),
        };
        let (cgroup, child) = match made {
            Ok(made) => made,
            Err(why) => return ready(Err(format!("cannot make the process's cgroup: {why}"))),
        };
        let first = (launch.stdin_first, launch.stdin_close);
        let code =
            match Shim::start(&dir, launch.spec, launch.output, (launch.nice, launch.sandbox), redactor, (cgroup.clone(), child), first)
                .await
            {
                Ok(shim) => shim.run().await,
                Err(why) => ready(Err(why)),
            };
        // The Landlock level's temporary directory goes with its tree.
        let _ = std::fs::remove_dir_all(dir.join(crate::sandbox::landlock::TMP_DIR));
        // Whatever is left of the tree goes with its cgroup.
        if let Some(cgroup) = cgroup {
            if !cgroup.remove() {
                say!("cannot remove the cgroup {:?}; still in it: {:?}", cgroup.dirs(), cgroup.pids());
            }
        }
        code
    })
}

/// Answer the daemon on stdout, once; then stdout and stderr go to `shim.log`.
fn ready(result: Result<i32, String>) -> i32 {
    let reply = match &result {
        Ok(pid) => Reply { ok: true, protocol: PROTOCOL, pid: *pid, ..Reply::default() },
        Err(why) => Reply::refuse(why.clone()),
    };
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{}", serde_json::to_string(&reply).unwrap_or_default());
    let _ = out.flush();
    i32::from(result.is_err())
}

fn log_to(dir: &Path) {
    if let Ok(log) = std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(dir.join("shim.log")) {
        let _ = nix::unistd::dup2_stdout(&log);
        let _ = nix::unistd::dup2_stderr(&log);
    }
}

enum Output {
    Line(Stream, super::lines::Line),
    /// Lines mode: the stream reached EOF.
    Eof(Stream),
    /// Raw mode: the output files hold `total` bytes now.
    Raw(u64),
    /// Raw mode: the output is complete ([`RawRecord::Eof`]).
    RawEof {
        total: u64,
        cut: bool,
    },
}

/// What a control connection's `Watch` reports: the journal's and the output's lengths.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Ends {
    journal: u64,
    out: u64,
}

/// Raw mode: where input goes, and the unterminated line a canonical terminal holds.
#[derive(Clone)]
struct RawInput {
    fd: Arc<AsyncFd<OwnedFd>>,
    tty: bool,
    carried: Arc<tokio::sync::Mutex<usize>>,
}

/// A control request and where its reply goes.
type Asked = (Request, oneshot::Sender<Reply>);

struct Shim {
    dir: PathBuf,
    spec: ShimSpec,
    pid: i32,
    journal: JournalWriter,
    end_tx: watch::Sender<Ends>,
    output_rx: mpsc::UnboundedReceiver<Output>,
    asked_rx: mpsc::UnboundedReceiver<Asked>,
    stdin: Option<mpsc::UnboundedSender<Vec<u8>>>,
    /// Raw mode only: the input fd (`None` once stopped).
    raw: Option<RawInput>,
    raw_mode: bool,
    /// Raw mode: the agent was reaped (the output reader starts its drain).
    exited_tx: watch::Sender<bool>,
    eofs: u8,
    /// Lines mode: the agent's stdout reached EOF ([`Record::Eof`]).
    out_closed: bool,
    exit: Option<(Option<i32>, Option<i32>)>,
    exit_written: bool,
    drain_deadline: Option<Instant>,
    dropped_lines: u64,
    /// The journal could not take output ([`Record::Fault`] written): lines are dropped.
    fault: bool,
    done: bool,
    acked: u64,
    /// What journal lines are redacted with.
    redactor: Redactor,
    /// The tree's cgroup, when the host has cgroups: ending the tree ends everything in it.
    cgroup: Option<Cgroup>,
    /// The process is bubblewrap around the program (`crate::sandbox`).
    sandboxed: bool,
    /// Lowers the agent's tree once it proves CPU-hungry.
    demoter: Demoter,
}

impl Shim {
    /// Serve until the tree is gone and the journal acknowledged; returns the exit code.
    async fn run(mut self) -> i32 {
        let (Ok(mut sigchld), Ok(mut sigterm), Ok(_sighup), Ok(_sigint)) = (
            signal(SignalKind::child()),
            signal(SignalKind::terminate()),
            // Handled (ignored): the shim is not stopped by a hangup or an interrupt.
            signal(SignalKind::hangup()),
            signal(SignalKind::interrupt()),
        ) else {
            say!("cannot handle signals; ending the agent");
            self.stop(Duration::ZERO).await;
            return 1;
        };
        // The loop's timers, each armed only by what it is for (see the module doc).
        let (mut sync_at, mut demote_at, mut orphan_at) = (None, None, None);
        let mut seen_end = 0;
        self.reap();
        loop {
            self.progress().await;
            if self.done && self.acked >= self.journal.end() {
                let _ = std::fs::remove_file(socket_path(&self.dir));
                return 0;
            }
            let now = Instant::now();
            if self.journal.end() != seen_end {
                seen_end = self.journal.end();
                sync_at.get_or_insert(now + SYNC_EVERY);
                if demote_at.is_none() && self.demoter.wake() {
                    demote_at = Some(now);
                }
            }
            // Open control connections other than the listener's: a daemon follows this shim.
            if self.end_tx.receiver_count() > 1 {
                orphan_at = None;
            } else {
                orphan_at.get_or_insert(now + ORPHAN_CHECK);
            }
            tokio::select! {
                Some(out) = self.output_rx.recv() => {
                    // The lines already read go to the journal in one write, with one wake-up.
                    self.journal.hold();
                    self.on_output(out);
                    for _ in 1..MAX_LINES_PER_WRITE {
                        match self.output_rx.try_recv() {
                            Ok(out) => self.on_output(out),
                            Err(_) => break,
                        }
                    }
                    match self.journal.release() {
                        Ok(end) => self.end_tx.send_modify(|e| e.journal = end),
                        Err(e) => self.journal_fault(&e),
                    }
                }
                _ = sigchld.recv() => self.reap(),
                _ = sigterm.recv() => {
                    self.stop(Duration::from_secs(3)).await;
                }
                Some((req, reply)) = self.asked_rx.recv() => match req {
                    Request::Input { data, timeout_ms } => self.on_input(data, timeout_ms, reply),
                    req => {
                        let answer = self.on_request(req).await;
                        let _ = reply.send(answer);
                    }
                },
                // The loop's next `progress` sees the deadline passed (and clears it).
                _ = sleep_until(self.drain_deadline) => {}
                _ = sleep_until(sync_at) => {
                    sync_at = None;
                    // On the sync thread: the loop goes on reading the agent meanwhile.
                    let _ = self.journal.sync_soon();
                }
                _ = sleep_until(demote_at) => {
                    self.demoter.look();
                    demote_at = self.demoter.watching().then(|| Instant::now() + demote::WINDOW);
                }
                _ = sleep_until(orphan_at) => {
                    orphan_at = None;
                    if !journal_path(&self.dir).exists() {
                        // The run's directory was removed: nobody will ever read this journal.
                        say!("the journal is gone; ending the agent and exiting");
                        self.stop(Duration::from_secs(1)).await;
                        return 0;
                    }
                }
            }
        }
    }

    /// Raw mode: write `data` in a task of its own (a full pipe must not stop the loop) and
    /// reply when it is written or stopped (see [`Request::Input`]).
    fn on_input(&mut self, data: Vec<u8>, timeout_ms: u64, reply: oneshot::Sender<Reply>) {
        let Some(input) = self.raw.clone() else {
            let mut answer = Reply::refuse(if self.raw_mode { "the process's input is closed" } else { "not a raw-mode shim" });
            answer.written = Some(0);
            answer.stop = Some(if self.exit.is_some() { InputStop::Exited } else { InputStop::Closed });
            let _ = reply.send(answer);
            return;
        };
        let mut exited = self.exited_tx.subscribe();
        let pid = self.pid;
        tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_millis(timeout_ms);
            let mut answer = Reply { ok: true, protocol: PROTOCOL, pid, written: Some(0), ..Reply::default() };
            let Ok(mut carried) = tokio::time::timeout_at(deadline, input.carried.lock()).await else {
                answer.stop = Some(InputStop::Timeout);
                let _ = reply.send(answer);
                return;
            };
            let canonical = input.tty && pty::is_canonical(input.fd.get_ref().as_fd()).unwrap_or(false);
            if canonical {
                let (longest, _) = pty::longest_line(*carried, &data);
                if longest > pty::MAX_CANON_LINE {
                    answer.stop = Some(InputStop::LineTooLong);
                    answer.longest = Some(longest);
                    let _ = reply.send(answer);
                    return;
                }
            }
            let mut written = 0;
            let result = tokio::select! {
                r = write_all(&input.fd, &data, &mut written, deadline) => r,
                _ = exited.wait_for(|e| *e) => Err(WriteStop::Failed(std::io::Error::other("the process exited"))),
            };
            *carried = if canonical { pty::longest_line(*carried, &data[..written]).1 } else { 0 };
            answer.written = Some(written as u64);
            match result {
                Ok(()) => {}
                Err(_) if *exited.borrow() => answer.stop = Some(InputStop::Exited),
                Err(WriteStop::TimedOut) => answer.stop = Some(InputStop::Timeout),
                Err(WriteStop::Failed(e)) if e.raw_os_error() == Some(nix::libc::EPIPE) => answer.stop = Some(InputStop::Closed),
                Err(WriteStop::Failed(e)) => {
                    answer.stop = Some(InputStop::Failed);
                    answer.error = Some(e.to_string());
                }
            }
            let _ = reply.send(answer);
        });
    }

    /// A record of the shim's own, written into the room the journal keeps for it.
    fn record(&mut self, record: &impl serde::Serialize) {
        let appended = self.journal.append(record, Kind::Own);
        self.appended(appended);
    }

    /// A whole output line, journaled in its plain form ([`Record::write_plain`]); a cut one
    /// as its record. After a [`Record::Fault`] output lines are dropped (counted).
    fn record_line(&mut self, s: Stream, text: &str, cut: Option<u64>) {
        if self.fault {
            self.dropped_lines += 1;
            return;
        }
        let appended = match cut {
            None => self.journal.append_line(s, text),
            Some(_) => self.journal.append(&Record::Line { s, l: text.to_owned(), cut }, Kind::Output),
        };
        match appended {
            Ok(end) => self.appended(Ok(end)),
            Err(e) => {
                self.dropped_lines += 1;
                self.journal_fault(&e);
            }
        }
    }

    /// The journal could not take output (`e`: no room for it, or a failed write): said once,
    /// in a [`Record::Fault`] naming the disk when it is full; the output that follows is not
    /// journaled. The daemon decides what becomes of the agent.
    fn journal_fault(&mut self, e: &std::io::Error) {
        self.end_tx.send_modify(|ends| ends.journal = self.journal.end());
        if self.fault {
            return;
        }
        self.fault = true;
        let journal = journal_path(&self.dir);
        let text = if crate::disk::is_full(e) {
            format!(
                "no space left on device: the disk of the run's journal {} is full ({e}); the agent's output is no longer recorded",
                journal.display()
            )
        } else {
            format!("cannot write the run's journal {} ({e}); the agent's output is no longer recorded", journal.display())
        };
        say!("{text}");
        self.record(&Record::Fault { text });
    }

    fn appended(&mut self, appended: std::io::Result<u64>) {
        match appended {
            // While held, the length is told once the records are written (the loop).
            Ok(_) if self.journal.holding() => {}
            Ok(end) => {
                self.end_tx.send_modify(|e| e.journal = end);
            }
            Err(e) => say!("journal write failed: {e}"),
        }
    }

    fn on_output(&mut self, out: Output) {
        match out {
            Output::Line(_, _) if self.exit_written => self.dropped_lines += 1,
            Output::Line(s, line) => {
                let l = if self.redactor.is_empty() { line.text } else { self.redactor.apply(&line.text) };
                self.record_line(s, &l, line.cut);
            }
            Output::Eof(s) => {
                self.eofs += 1;
                if s == Stream::Out {
                    self.out_closed = true;
                }
                // After the exit nothing more is journaled but `Done`.
                if !self.exit_written {
                    self.record(&Record::Eof { s });
                }
            }
            Output::Raw(total) => self.end_tx.send_modify(|e| e.out = total),
            Output::RawEof { total, cut } => {
                self.end_tx.send_modify(|e| e.out = total);
                self.record(&RawRecord::Eof { total, cut });
                let _ = self.journal.sync();
                self.eofs += 1;
            }
        }
    }

    async fn on_request(&mut self, req: Request) -> Reply {
        let mut reply = Reply { ok: true, protocol: PROTOCOL, pid: self.pid, ..Reply::default() };
        match req {
            Request::Hello { .. } => reply.tag = Some(self.spec.tag.clone()),
            Request::Watch | Request::Status => {}
            Request::Stdin { data, turn } => {
                if let Some(turn) = turn {
                    self.record(&Record::Turn { turn });
                }
                match &self.stdin {
                    Some(tx) if tx.send(data.into_bytes()).is_ok() => {}
                    _ => {
                        self.record(&Record::Note { text: "the agent's stdin is closed; input not delivered".into() });
                        reply = Reply::refuse("the agent's stdin is closed");
                    }
                }
            }
            Request::CloseStdin => self.stdin = None,
            Request::Signal { signal } => match Signal::try_from(signal) {
                Ok(sig) => {
                    let _ = killpg(Pid::from_raw(self.pid), sig);
                }
                Err(_) => reply = Reply::refuse(format!("{signal} is not a signal")),
            },
            Request::Stop { grace_ms } => reply.survivors = self.stop(Duration::from_millis(grace_ms)).await,
            Request::Ack { offset } => self.acked = self.acked.max(offset),
            Request::Input { .. } => reply = Reply::refuse("input is answered by on_input"),
            Request::Resize { rows, cols } => match &self.raw {
                Some(RawInput { fd, tty: true, .. }) if self.exit.is_none() => {
                    if let Err(e) = pty::resize(fd.get_ref().as_fd(), rows, cols) {
                        reply = Reply::refuse(format!("cannot resize the terminal: {e}"));
                    }
                }
                Some(RawInput { tty: true, .. }) | None if self.raw_mode => reply = Reply::refuse("the process is not running"),
                _ => reply = Reply::refuse("the process has no terminal"),
            },
        }
        reply.out = self.end_tx.borrow().out;
        reply.pid = self.pid;
        reply.end = self.journal.end();
        reply.exit = self.exit;
        reply.done = self.done;
        reply.out_closed = self.out_closed;
        reply
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending::<()>().await,
    }
}
