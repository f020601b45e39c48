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

use std::collections::BTreeMap;
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

/// What a sandbox enters through (`... sandbox-exec -- PROGRAM`): the small
/// `spaces-sandbox-exec` beside this shim's executable when it is there (it starts in a
/// fraction of a millisecond), else the daemon's own command ([`own_command`]: `spacesd`, or a
/// binding's interpreter and script).
pub(crate) fn sandbox_helper() -> Vec<String> {
    let small = std::env::current_exe().ok().and_then(|exe| Some(exe.parent()?.join(SANDBOX_HELPER))).filter(|p| p.is_file());
    match small {
        Some(path) => vec![path.display().to_string()],
        None => own_command(),
    }
}

/// The file name of the small helper a shim enters each sandbox through, when it stands beside
/// the shim's executable (`spacesd/src/bin/spaces-sandbox-exec.rs`).
pub const SANDBOX_HELPER: &str = "spaces-sandbox-exec";

/// The command that started this shim, without its `shim DIR`: the daemon's own command.
fn own_command() -> Vec<String> {
    let mut args: Vec<String> = std::env::args().collect();
    args.truncate(args.len().saturating_sub(2));
    if let Some(first) = args.first_mut() {
        // A relative argv[0] would not be found from the program's working directory.
        if let Ok(exe) = std::env::current_exe() {
            if !first.contains('/') || std::path::Path::new(first.as_str()).is_relative() {
                *first = exe.display().to_string();
            }
        }
    }
    args
}

/// The whole environment a program started by `spawn` gets: its variables, its markers and
/// its tag (as `process::spawn` sets them), for a warm sandbox's order.
fn program_env(spawn: &SpawnSpec) -> BTreeMap<String, String> {
    let mut env = spawn.env.clone();
    env.extend(spawn.markers.iter().cloned());
    env.insert(process::TAG_ENV.to_owned(), spawn.tag.clone());
    env
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
    /// Become a subreaper, open the journal and the socket, start the agent.
    async fn start(
        dir: &Path,
        spec: ShimSpec,
        mode: OutputMode,
        (nice, sandbox): (i32, Option<crate::sandbox::Policy>),
        redactor: Redactor,
        held: (Option<Cgroup>, Option<spare::Child>),
        (stdin_first, stdin_close): (Option<String>, bool),
    ) -> Result<Shim, String> {
        let (cgroup, child) = held;
        nix::sys::prctl::set_child_subreaper(true).map_err(|e| format!("cannot become a child subreaper: {e}"))?;
        let mut journal = JournalWriter::create(dir).map_err(|e| format!("cannot create the journal in {}: {e}", dir.display()))?;
        let sock = socket_path(dir);
        let _ = std::fs::remove_file(&sock);
        let listener = UnixListener::bind(&sock).map_err(|e| format!("cannot listen on {}: {e}", sock.display()))?;
        let stdin = if spec.stdin_pipe { StdinSpec::Pipe } else { StdinSpec::Null };
        let (stdio, writer) = match mode {
            OutputMode::Lines => (StdioSpec::Pipes { stdin }, None),
            OutputMode::Raw { tty, segment_bytes } => {
                let writer = OutputWriter::create(dir, segment_bytes)
                    .map_err(|e| format!("cannot create the output file in {}: {e}", dir.display()))?;
                let stdio = match tty {
                    Some((rows, cols)) => StdioSpec::Pty { rows, cols },
                    None => StdioSpec::Combined { stdin: StdinSpec::Pipe },
                };
                (stdio, Some(writer))
            }
        };
        // At the Landlock level the tree gets a private temporary directory here (bubblewrap
        // gives a private `/tmp`), removed when the shim ends ([`run`]).
        let mut sandbox = sandbox;
        let mut env = spec.env.clone();
        if let Some(policy) = sandbox.as_mut().filter(|p| p.level == crate::sandbox::Level::Landlock) {
            let tmp = dir.join(crate::sandbox::landlock::TMP_DIR);
            std::fs::create_dir_all(&tmp)
                .and_then(|()| std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o700)))
                .map_err(|e| format!("cannot make the sandbox's temporary directory {}: {e}", tmp.display()))?;
            env.insert("TMPDIR".to_owned(), tmp.display().to_string());
            policy.tmp = Some(tmp);
        }
        // Bubblewrap's outer process stands between the shim and the program (see `sandboxed`).
        let bubblewrap = sandbox.as_ref().is_some_and(|p| p.level == crate::sandbox::Level::Bubblewrap);
        // In a sandbox, the program is bubblewrap, which ends in `sandbox-exec` and the program
        // (at the Landlock level: `sandbox-exec` alone).
        let argv = match &sandbox {
            Some(policy) => crate::sandbox::command(policy, &sandbox_helper(), &spec.argv, &spec.cwd).map_err(|e| e.to_string())?,
            None => spec.argv.clone(),
        };
        let spawn = SpawnSpec {
            argv,
            cwd: spec.cwd.clone(),
            env,
            markers: spec.markers.clone(),
            tag: spec.tag.clone(),
            stdio,
            cgroups: cgroup.as_ref().map(Cgroup::dirs).unwrap_or_default(),
            // The agent starts at the daemon's priority; `demoter` lowers its tree to `nice`
            // once it proves CPU-hungry.
            nice: 0,
            sandboxed: bubblewrap,
        };
        // A spare's child, waiting in the cgroup already (or joining it now); a terminal, or
        // whatever went wrong with it, goes the usual way (the child is killed and reaped).
        let prepared = match child {
            Some(child) if child.warm.is_some() => {
                // A warm sandbox, for this very policy (every path of it still the file it
                // was) and a command's output only, in its cgroup already: its helper execs
                // the program; anything else drops it.
                let fits = child.joined
                    && bubblewrap
                    && child.warm == sandbox
                    && matches!(spawn.stdio, StdioSpec::Combined { stdin: StdinSpec::Pipe })
                    && sandbox.as_ref().is_some_and(|p| crate::sandbox::identity(p) == child.seen);
                let order = crate::sandbox::enter::Order { argv: spec.argv.clone(), cwd: spec.cwd.clone(), env: program_env(&spawn) };
                fits.then(|| {
                    child
                        .prepared
                        .start_warm(&order)
                        .map_err(|e| say!("spare shim: the warm sandbox could not start the program ({e}); starting it the usual way"))
                        .ok()
                })
                .flatten()
            }
            Some(child) if Prepared::fits(&spawn.stdio) => child
                .prepared
                .start(&spawn, child.joined)
                .map_err(|e| say!("spare shim: the prepared child could not start the program ({e}); starting it the usual way"))
                .ok(),
            _ => None,
        };
        let spawned = match prepared {
            Some(started) => started,
            None => {
                let spawned = process::spawn(&spawn).map_err(|e| e.to_string())?;
                // The loop reaps with waitpid(-1): tokio must never reap this child behind its back.
                std::mem::forget(spawned.child);
                Started { pid: spawned.pid, output: spawned.output, stderr: spawned.stderr, stdin: spawned.stdin }
            }
        };
        let pid = spawned.pid;
        journal
            .append(&Record::Start { protocol: PROTOCOL, gen: spec.gen, turn: spec.turn, pid }, Kind::Own)
            .map_err(|e| format!("cannot write the journal: {e}"))?;
        let (output_tx, output_rx) = mpsc::unbounded_channel();
        let (exited_tx, exited_rx) = watch::channel(false);
        let io = match writer {
            Some(writer) => {
                let drain = Duration::from_millis(spec.drain_ms);
                let writer = (writer, RedactStream::new(redactor.clone()));
                raw_reader((spawned.output, spawned.stdin), writer, exited_rx, drain, output_tx)
            }
            None => line_readers((spawned.output, spawned.stderr, spawned.stdin), spec.max_line_bytes, output_tx),
        }
        .map_err(|e| {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
            format!("cannot read the process's output: {e}")
        })?;
        // The launch's first input (a turn's prompt), then EOF if asked: from the shim itself, so
        // it reaches the agent whatever becomes of the daemon.
        let mut io = io;
        if let (Some(tx), Some(first)) = (&io.stdin, stdin_first) {
            let _ = tx.send(first.into_bytes());
        }
        if stdin_close {
            io.stdin = None;
        }
        let (end_tx, _) = watch::channel(Ends { journal: journal.end(), out: 0 });
        let (asked_tx, asked_rx) = mpsc::unbounded_channel();
        tokio::spawn(accept(listener, asked_tx, end_tx.subscribe()));
        ready(Ok(pid));
        log_to(dir);
        Ok(Shim {
            dir: dir.to_owned(),
            spec,
            pid,
            journal,
            end_tx,
            output_rx,
            asked_rx,
            stdin: io.stdin,
            raw_mode: io.raw.is_some(),
            raw: io.raw,
            exited_tx,
            eofs: io.eofs,
            out_closed: false,
            exit: None,
            exit_written: false,
            drain_deadline: None,
            dropped_lines: 0,
            fault: false,
            done: false,
            acked: 0,
            redactor,
            cgroup,
            demoter: Demoter::new(std::process::id() as i32, nice),
            sandboxed: bubblewrap,
        })
    }

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

    /// Reap every child that has exited (the agent, and orphans reparented to this subreaper).
    fn reap(&mut self) {
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                // Bubblewrap reports a program killed by signal N as exit 128 + N.
                Ok(WaitStatus::Exited(pid, code)) if pid.as_raw() == self.pid => {
                    self.exit = match crate::sandbox::signal_of_exit(code).filter(|_| self.sandboxed) {
                        Some(sig) => Some((None, Some(sig))),
                        None => Some((Some(code), None)),
                    }
                }
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid.as_raw() == self.pid => self.exit = Some((None, Some(sig as i32))),
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(_) => {}
            }
        }
        // Raw mode: the exit is journaled the moment the process is reaped, even while a
        // descendant still holds the output open (as `exec_command` reports it).
        if let (true, false, Some((code, signal))) = (self.raw_mode, self.exit_written, self.exit) {
            self.record(&Record::Exit { code, signal });
            self.exit_written = true;
            let _ = self.journal.sync();
            self.exited_tx.send_replace(true);
        }
    }

    /// After the agent exited: its output drained (or the drain timed out), write the exit;
    /// then end what is left of the tree and write that everything is gone.
    async fn progress(&mut self) {
        if self.raw_mode {
            // Exit and output are journaled; the tree is not ended but waited for.
            if self.exit_written && self.eofs >= 2 && !self.done && self.tree_gone() {
                self.record(&Record::Done { killed: Vec::new(), dropped_lines: 0 });
                let _ = self.journal.sync();
                self.done = true;
            }
            return;
        }
        let Some((code, signal)) = self.exit else { return };
        if self.exit_written {
            return;
        }
        if self.eofs < 2 {
            match self.drain_deadline {
                None => {
                    self.drain_deadline = Some(Instant::now() + Duration::from_millis(self.spec.drain_ms));
                    return;
                }
                Some(d) if Instant::now() < d => return,
                Some(_) => {}
            }
        }
        self.drain_deadline = None;
        // Lines already read belong before the exit.
        while let Ok(out) = self.output_rx.try_recv() {
            self.on_output(out);
        }
        self.record(&Record::Exit { code, signal });
        self.exit_written = true;
        let _ = self.journal.sync();
        let killed = self.end_tree(LEFTOVER_GRACE).await;
        self.record(&Record::Done { killed, dropped_lines: self.dropped_lines });
        let _ = self.journal.sync();
        self.done = true;
    }

    /// No process of the tree is left: the shim has no child (as a subreaper, every live
    /// descendant has a live ancestor among them; a zombie counts until [`Self::reap`]ed), and
    /// nothing is in its cgroup. No walk of `/proc`: its cost would be the host's, and a
    /// thousand shims stopping together each walked it every 20 ms (issue 30).
    fn tree_gone(&self) -> bool {
        let no_child =
            matches!(waitid(Id::All, WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT), Err(nix::errno::Errno::ECHILD));
        no_child && self.cgroup.as_ref().is_none_or(|c| c.pids().is_empty())
    }

    /// SIGTERM to the agent's group and everything in the cgroup, then to every descendant
    /// found in one walk of `/proc` (what left the group, with no cgroup to hold it) once the
    /// group is gone and the tree is not, or the tree has not gone [`SCAN_AFTER`] later (at
    /// once when the agent exited: leftovers, listed). A tree that goes with its group costs no
    /// walk: a thousand stops at once each walked a `/proc` of thousands of processes (issue
    /// 30). Then `grace`, then SIGKILL until none is left (looking again each round: tools may
    /// fork meanwhile). Returns every pid signalled by name; reaps as it goes.
    async fn end_tree(&mut self, grace: Duration) -> Vec<i32> {
        let me = std::process::id() as i32;
        self.reap();
        if self.tree_gone() {
            return Vec::new();
        }
        let _ = killpg(Pid::from_raw(self.pid), Signal::SIGTERM);
        let mut signalled = Vec::new();
        if let Some(cgroup) = &self.cgroup {
            signalled.extend(cgroup.signal(Signal::SIGTERM));
        }
        let start = Instant::now();
        let scan_at = if self.exit.is_some() { start } else { start + SCAN_AFTER };
        let (deadline, mut scanned) = (start + grace, false);
        loop {
            self.reap();
            if self.tree_gone() || Instant::now() >= deadline {
                break;
            }
            // Signal 0 to a group fails once no member is left (its zombies count until reaped).
            let group_gone = killpg(Pid::from_raw(self.pid), None).is_err();
            if !scanned && (group_gone || Instant::now() >= scan_at) {
                signalled.extend(tree::signal_all(me, Signal::SIGTERM));
                scanned = true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for _ in 0..50 {
            if self.tree_gone() {
                break;
            }
            let _ = killpg(Pid::from_raw(self.pid), Signal::SIGKILL);
            let mut killed = tree::signal_all(me, Signal::SIGKILL);
            if let Some(cgroup) = &self.cgroup {
                killed.extend(cgroup.kill());
            }
            for pid in killed {
                if !signalled.contains(&pid) {
                    signalled.push(pid);
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            self.reap();
        }
        self.reap();
        signalled.sort_unstable();
        signalled.dedup();
        signalled
    }

    /// A stop: end the whole tree now; the exit and `Done` follow through [`Self::progress`].
    async fn stop(&mut self, grace: Duration) -> Vec<i32> {
        self.stdin = None;
        self.raw = None;
        self.end_tree(grace).await;
        if self.tree_gone() {
            return Vec::new();
        }
        let mut left = tree::descendants(std::process::id() as i32);
        left.extend(self.cgroup.as_ref().map(Cgroup::pids).unwrap_or_default());
        left.sort_unstable();
        left.dedup();
        left
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

/// The process's ends as the loop uses them, and how many output streams are at EOF from the
/// start.
struct Io {
    /// Lines mode: the writer task's queue to the stdin pipe.
    stdin: Option<mpsc::UnboundedSender<Vec<u8>>>,
    /// Raw mode: where input goes.
    raw: Option<RawInput>,
    eofs: u8,
}

/// Lines mode: a reader task per output stream (stdout, stderr) and a writer task for stdin.
fn line_readers(
    (output, stderr, stdin): (OwnedFd, Option<OwnedFd>, Option<OwnedFd>),
    max_line_bytes: usize,
    tx: mpsc::UnboundedSender<Output>,
) -> std::io::Result<Io> {
    let out = pipe::Receiver::from_owned_fd(output)?;
    let err = stderr.map(pipe::Receiver::from_owned_fd).transpose()?;
    let input = stdin.map(pipe::Sender::from_owned_fd).transpose()?;
    tokio::spawn(read_lines(out, Stream::Out, max_line_bytes, tx.clone()));
    let eofs = match err {
        Some(err) => {
            tokio::spawn(read_lines(err, Stream::Err, max_line_bytes, tx));
            0
        }
        None => 1,
    };
    let stdin = input.map(|mut pipe| {
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        tokio::spawn(async move {
            while let Some(bytes) = rx.recv().await {
                if pipe.write_all(&bytes).await.is_err() {
                    break;
                }
            }
        });
        tx
    });
    Ok(Io { stdin, raw: None, eofs })
}

/// Raw mode: one reader task copies the output (combined pipe or PTY master) into the output
/// files; input goes to the same PTY master or the stdin pipe.
fn raw_reader(
    (output, stdin): (OwnedFd, Option<OwnedFd>),
    writer: (OutputWriter, RedactStream),
    exited: watch::Receiver<bool>,
    drain: Duration,
    tx: mpsc::UnboundedSender<Output>,
) -> std::io::Result<Io> {
    // SAFETY: an `OwnedFd` stays open and keeps its raw fd for as long as the `AsyncFd` owns it.
    let register = |fd: OwnedFd| unsafe { AsyncFd::register(fd) }.map(Arc::new);
    let output = register(output)?;
    let (input, tty) = match stdin {
        Some(fd) => (register(fd)?, false),
        None => (output.clone(), true),
    };
    tokio::spawn(read_raw(output, writer, exited, drain, tx));
    Ok(Io { stdin: None, raw: Some(RawInput { fd: input, tty, carried: Arc::default() }), eofs: 1 })
}

async fn read_lines(reader: pipe::Receiver, stream: Stream, max: usize, tx: mpsc::UnboundedSender<Output>) {
    let mut lines = LineReader::new(BufReader::with_capacity(64 * 1024, reader), max);
    while let Some(line) = lines.next().await {
        if tx.send(Output::Line(stream, line)).is_err() {
            return;
        }
    }
    let _ = tx.send(Output::Eof(stream));
}

/// Raw mode: copy the output into the output files until EOF, or until `drain` after the
/// process was reaped (the rule of [`read_output`]; cut short: `cut`), reporting the growing
/// total; the newest segment is synced every [`SYNC_EVERY`] and at the end.
async fn read_raw(
    fd: Arc<AsyncFd<OwnedFd>>,
    (writer, redact): (OutputWriter, RedactStream),
    mut exited: watch::Receiver<bool>,
    drain: Duration,
    tx: mpsc::UnboundedSender<Output>,
) {
    let reaped = async move {
        let _ = exited.wait_for(|e| *e).await;
    };
    let mut sink = RawSink { writer, tx, redact, fresh: false };
    let cut = read_output(&fd, reaped, drain, Some(SYNC_EVERY), process::READ_BUF, &mut sink).await;
    let held = sink.redact.flush();
    sink.write(&held);
    let _ = sink.writer.sync();
    let _ = sink.tx.send(Output::RawEof { total: sink.writer.total(), cut });
}

/// The output files as a place [`read_output`] writes to: each chunk redacted, appended and its
/// new total reported to the loop. The redaction holds back the tail that could start a secret
/// until more comes, or until a tick passes with nothing new (the output paused).
struct RawSink {
    writer: OutputWriter,
    tx: mpsc::UnboundedSender<Output>,
    redact: RedactStream,
    /// Bytes came since the last tick.
    fresh: bool,
}

impl RawSink {
    fn write(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        match self.writer.append(bytes) {
            Ok(total) => {
                let _ = self.tx.send(Output::Raw(total));
            }
            Err(e) => say!("output write failed: {e}"),
        }
    }
}

impl OutputSink for RawSink {
    fn push(&mut self, bytes: &[u8]) {
        let ready = self.redact.push(bytes);
        self.write(&ready);
        self.fresh = true;
    }

    fn tick(&mut self) {
        if !std::mem::take(&mut self.fresh) {
            let held = self.redact.flush();
            self.write(&held);
        }
        let _ = self.writer.sync_soon();
    }
}

async fn accept(listener: UnixListener, asked: mpsc::UnboundedSender<Asked>, end: watch::Receiver<Ends>) {
    while let Ok((conn, _)) = listener.accept().await {
        let (asked, end) = (asked.clone(), end.clone());
        tokio::spawn(async move {
            serve(conn, asked.clone(), end).await;
            // The connection's receiver is dropped: wake the loop, whose orphan check arms when
            // no connection is left (the reply goes nowhere).
            let _ = asked.send((Request::Status, oneshot::channel().0));
        });
    }
}

/// One control connection: a `Hello` first, then requests in order; `Watch` turns it into a
/// stream of journal lengths.
async fn serve(conn: UnixStream, asked: mpsc::UnboundedSender<Asked>, mut end: watch::Receiver<Ends>) {
    let (read, mut write) = conn.into_split();
    let mut lines = BufReader::new(read).lines();
    let mut greeted = false;
    while let Ok(Some(line)) = lines.next_line().await {
        let reply = match serde_json::from_str::<Request>(&line) {
            Err(e) => Reply::refuse(format!("not a request of shim protocol {PROTOCOL}: {e}")),
            Ok(Request::Hello { protocol }) if protocol != PROTOCOL => {
                Reply::refuse(format!("shim protocol version {protocol} is not supported: this shim speaks version {PROTOCOL}"))
            }
            Ok(req) if !greeted && !matches!(req, Request::Hello { .. }) => Reply::refuse("say hello first"),
            Ok(req) => {
                let watch = matches!(req, Request::Watch);
                greeted = true;
                let (tx, rx) = oneshot::channel();
                if asked.send((req, tx)).is_err() {
                    return;
                }
                let Ok(reply) = rx.await else { return };
                if watch {
                    let _ = send(&mut write, &reply).await;
                    loop {
                        let Ends { journal, out } = *end.borrow_and_update();
                        if write.write_all(format!("{{\"end\":{journal},\"out\":{out}}}\n").as_bytes()).await.is_err() {
                            return;
                        }
                        if end.changed().await.is_err() {
                            return;
                        }
                    }
                }
                reply
            }
        };
        let refused = !reply.ok && !greeted;
        if send(&mut write, &reply).await.is_err() || refused {
            return;
        }
    }
}

async fn send(write: &mut tokio::net::unix::OwnedWriteHalf, reply: &Reply) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(reply).map_err(std::io::Error::other)?;
    line.push(b'\n');
    write.write_all(&line).await
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending::<()>().await,
    }
}
