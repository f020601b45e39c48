//! The shim process: `spacesd shim DIR` (see the [module doc](super) for its part in a run).
//!
//! Everything happens on one thread in one loop ([`Shim::run`]) that owns all state: output
//! lines from the two reader tasks, SIGCHLD (reaping every child that reaches it: the agent
//! and, as a subreaper, every orphaned descendant), SIGTERM (a stop), requests from control
//! connections, and the drain and sync timers.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::net::{UnixListener, UnixStream};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::journal::{journal_path, JournalWriter, SYNC_EVERY};
use super::lines::LineReader;
use super::protocol::{Record, Reply, Request, ShimSpec, Stream, PROTOCOL};
use super::{socket_path, tree};
use crate::process::{self, SpawnSpec, StdinSpec, StdioSpec};

/// Grace for what is left of the tree after the agent exited (tools it left behind).
const LEFTOVER_GRACE: Duration = Duration::from_millis(500);
/// How often the shim checks that its journal still exists; a shim whose run directory was
/// removed ends its tree and exits instead of waiting forever for an acknowledgement.
const ORPHAN_CHECK: Duration = Duration::from_secs(5);

/// Run the shim in `dir`: read the [`ShimSpec`] from stdin, start the agent, answer on stdout
/// with one [`Reply`] line (ok and the agent's pid, or why it could not start), then serve until
/// the tree is gone and the daemon has acknowledged the whole journal. Returns the exit code.
pub fn main(dir: &Path) -> i32 {
    let mut input = String::new();
    let spec = match std::io::stdin().read_to_string(&mut input) {
        Ok(_) => serde_json::from_str::<ShimSpec>(&input).map_err(|e| format!("the shim spec on stdin is not valid: {e}")),
        Err(e) => Err(format!("cannot read the shim spec from stdin: {e}")),
    };
    let spec = match spec {
        Ok(s) if s.protocol == PROTOCOL => s,
        Ok(s) => {
            return ready(Err(format!(
                "shim protocol version {} is not supported: this spacesd speaks version {PROTOCOL}",
                s.protocol
            )))
        }
        Err(why) => return ready(Err(why)),
    };
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return ready(Err(format!("no runtime: {e}"))),
    };
    rt.block_on(async move {
        match Shim::start(dir, spec).await {
            Ok(shim) => shim.run().await,
            Err(why) => ready(Err(why)),
        }
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
    Eof,
}

/// A control request and where its reply goes.
type Asked = (Request, oneshot::Sender<Reply>);

struct Shim {
    dir: PathBuf,
    spec: ShimSpec,
    pid: i32,
    journal: JournalWriter,
    end_tx: watch::Sender<u64>,
    output_rx: mpsc::UnboundedReceiver<Output>,
    asked_rx: mpsc::UnboundedReceiver<Asked>,
    stdin: Option<mpsc::UnboundedSender<Vec<u8>>>,
    eofs: u8,
    exit: Option<(Option<i32>, Option<i32>)>,
    exit_written: bool,
    drain_deadline: Option<Instant>,
    dropped_lines: u64,
    done: bool,
    acked: u64,
}

impl Shim {
    /// Become a subreaper, open the journal and the socket, start the agent.
    async fn start(dir: &Path, spec: ShimSpec) -> Result<Shim, String> {
        nix::sys::prctl::set_child_subreaper(true).map_err(|e| format!("cannot become a child subreaper: {e}"))?;
        let mut journal = JournalWriter::create(dir).map_err(|e| format!("cannot create the journal in {}: {e}", dir.display()))?;
        let sock = socket_path(dir);
        let _ = std::fs::remove_file(&sock);
        let listener = UnixListener::bind(&sock).map_err(|e| format!("cannot listen on {}: {e}", sock.display()))?;
        let stdin = if spec.stdin_pipe { StdinSpec::Pipe } else { StdinSpec::Null };
        let spawn = SpawnSpec {
            argv: spec.argv.clone(),
            cwd: spec.cwd.clone(),
            env: spec.env.clone(),
            markers: spec.markers.clone(),
            tag: spec.tag.clone(),
            stdio: StdioSpec::Pipes { stdin },
        };
        let spawned = process::spawn(&spawn).map_err(|e| e.to_string())?;
        let pid = spawned.pid;
        // The loop reaps with waitpid(-1): tokio must never reap this child behind its back.
        std::mem::forget(spawned.child);
        journal
            .append(&Record::Start { protocol: PROTOCOL, gen: spec.gen, turn: spec.turn, pid })
            .map_err(|e| format!("cannot write the journal: {e}"))?;
        let (output_tx, output_rx) = mpsc::unbounded_channel();
        let readers = (|| -> std::io::Result<_> {
            let out = pipe::Receiver::from_owned_fd(spawned.output)?;
            let err = spawned.stderr.map(pipe::Receiver::from_owned_fd).transpose()?;
            let input = spawned.stdin.map(pipe::Sender::from_owned_fd).transpose()?;
            Ok((out, err, input))
        })();
        let (out, err, input) = readers.map_err(|e| {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
            format!("cannot read the agent's output: {e}")
        })?;
        tokio::spawn(read_lines(out, Stream::Out, spec.max_line_bytes, output_tx.clone()));
        let eofs = match err {
            Some(err) => {
                tokio::spawn(read_lines(err, Stream::Err, spec.max_line_bytes, output_tx));
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
        let (end_tx, _) = watch::channel(journal.end());
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
            stdin,
            eofs,
            exit: None,
            exit_written: false,
            drain_deadline: None,
            dropped_lines: 0,
            done: false,
            acked: 0,
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
            eprintln!("cannot handle signals; ending the agent");
            self.stop(Duration::ZERO).await;
            return 1;
        };
        let mut sync = tokio::time::interval(SYNC_EVERY);
        let mut orphan_check = tokio::time::interval(ORPHAN_CHECK);
        self.reap();
        loop {
            self.progress().await;
            if self.done && self.acked >= self.journal.end() {
                let _ = std::fs::remove_file(socket_path(&self.dir));
                return 0;
            }
            tokio::select! {
                Some(out) = self.output_rx.recv() => self.on_output(out),
                _ = sigchld.recv() => self.reap(),
                _ = sigterm.recv() => {
                    self.stop(Duration::from_secs(3)).await;
                }
                Some((req, reply)) = self.asked_rx.recv() => {
                    let answer = self.on_request(req).await;
                    let _ = reply.send(answer);
                }
                _ = sleep_until(self.drain_deadline) => self.drain_deadline = None,
                _ = sync.tick() => {
                    let _ = self.journal.sync();
                }
                _ = orphan_check.tick() => {
                    if !journal_path(&self.dir).exists() {
                        // The run's directory was removed: nobody will ever read this journal.
                        eprintln!("the journal is gone; ending the agent and exiting");
                        self.stop(Duration::from_secs(1)).await;
                        return 0;
                    }
                }
            }
        }
    }

    fn record(&mut self, record: &Record) {
        match self.journal.append(record) {
            Ok(end) => {
                self.end_tx.send_replace(end);
            }
            Err(e) => eprintln!("journal write failed: {e}"),
        }
    }

    fn on_output(&mut self, out: Output) {
        match out {
            Output::Line(_, _) if self.exit_written => self.dropped_lines += 1,
            Output::Line(s, line) => self.record(&Record::Line { s, l: line.text, cut: line.cut }),
            Output::Eof => self.eofs += 1,
        }
    }

    /// Reap every child that has exited (the agent, and orphans reparented to this subreaper).
    fn reap(&mut self) {
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid.as_raw() == self.pid => self.exit = Some((Some(code), None)),
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid.as_raw() == self.pid => {
                    self.exit = Some((None, Some(sig as i32)))
                }
                Ok(WaitStatus::StillAlive) | Err(_) => return,
                Ok(_) => {}
            }
        }
    }

    /// After the agent exited: its output drained (or the drain timed out), write the exit;
    /// then end what is left of the tree and write that everything is gone.
    async fn progress(&mut self) {
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

    /// SIGTERM to the agent's group and every descendant, `grace`, then SIGKILL until none is
    /// left (looking again each round: tools may fork meanwhile). Returns every pid signalled;
    /// reaps as it goes.
    async fn end_tree(&mut self, grace: Duration) -> Vec<i32> {
        let me = std::process::id() as i32;
        let _ = killpg(Pid::from_raw(self.pid), Signal::SIGTERM);
        let mut signalled = tree::signal_all(me, Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && !tree::descendants(me).is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
            self.reap();
        }
        for _ in 0..50 {
            if tree::descendants(me).is_empty() {
                break;
            }
            let _ = killpg(Pid::from_raw(self.pid), Signal::SIGKILL);
            for pid in tree::signal_all(me, Signal::SIGKILL) {
                if !signalled.contains(&pid) {
                    signalled.push(pid);
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            self.reap();
        }
        self.reap();
        signalled.sort_unstable();
        signalled
    }

    /// A stop: end the whole tree now; the exit and `Done` follow through [`Self::progress`].
    async fn stop(&mut self, grace: Duration) -> Vec<i32> {
        self.stdin = None;
        self.end_tree(grace).await;
        tree::descendants(std::process::id() as i32)
    }

    async fn on_request(&mut self, req: Request) -> Reply {
        let mut reply = Reply { ok: true, protocol: PROTOCOL, pid: self.pid, ..Reply::default() };
        match req {
            Request::Hello { .. } | Request::Watch | Request::Status => {}
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
        }
        reply.pid = self.pid;
        reply.end = self.journal.end();
        reply.exit = self.exit;
        reply.done = self.done;
        reply
    }
}

async fn read_lines(reader: pipe::Receiver, stream: Stream, max: usize, tx: mpsc::UnboundedSender<Output>) {
    let mut lines = LineReader::new(BufReader::with_capacity(64 * 1024, reader), max);
    while let Some(line) = lines.next().await {
        if tx.send(Output::Line(stream, line)).is_err() {
            return;
        }
    }
    let _ = tx.send(Output::Eof);
}

async fn accept(listener: UnixListener, asked: mpsc::UnboundedSender<Asked>, end: watch::Receiver<u64>) {
    while let Ok((conn, _)) = listener.accept().await {
        tokio::spawn(serve(conn, asked.clone(), end.clone()));
    }
}

/// One control connection: a `Hello` first, then requests in order; `Watch` turns it into a
/// stream of journal lengths.
async fn serve(conn: UnixStream, asked: mpsc::UnboundedSender<Asked>, mut end: watch::Receiver<u64>) {
    let (read, mut write) = conn.into_split();
    let mut lines = BufReader::new(read).lines();
    let mut greeted = false;
    while let Ok(Some(line)) = lines.next_line().await {
        let reply = match serde_json::from_str::<Request>(&line) {
            Err(e) => Reply::refuse(format!("not a request of shim protocol {PROTOCOL}: {e}")),
            Ok(Request::Hello { protocol }) if protocol != PROTOCOL => Reply::refuse(format!(
                "shim protocol version {protocol} is not supported: this shim speaks version {PROTOCOL}"
            )),
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
                        let n = *end.borrow_and_update();
                        if write.write_all(format!("{{\"end\":{n}}}\n").as_bytes()).await.is_err() {
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
