//! The daemon's side of a shim: start one ([`ShimClient::spawn`]), reconnect to one after a
//! restart ([`ShimClient::connect`]), send it requests, and follow its journal ([`follow`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, Mutex};

use super::error::{Error, Result};
use super::journal::JournalReader;
use super::protocol::{Launch, OutputMode, Record, Reply, Request, ShimSpec, PROTOCOL};
use super::waiting::Waiting;
use super::{socket_path, spare};
use crate::process;

/// Longest wait for a new shim to say it started the agent (it may be an interpreter that
/// loads the daemon's library first).
const READY_TIMEOUT: Duration = Duration::from_secs(30);

struct Conn {
    lines: Lines<BufReader<OwnedReadHalf>>,
    write: OwnedWriteHalf,
    /// The shim's pid, from the socket's peer credentials.
    shim_pid: Option<i32>,
}

/// The read buffer of a connection to a shim: its replies are short lines (a longer one is
/// read in pieces all the same). Every live run holds two such connections in the daemon; at
/// the default 8 KiB they were 16 KB of each idle run's memory (issue 30).
const CONN_BUFFER_BYTES: usize = 512;

impl Conn {
    async fn open(dir: &Path) -> Result<(Conn, Reply)> {
        let socket = socket_path(dir);
        let stream = UnixStream::connect(&socket).await.map_err(|source| Error::NoShim { socket, source })?;
        let shim_pid = stream.peer_cred().ok().and_then(|c| c.pid());
        let (read, write) = stream.into_split();
        let mut conn = Conn { lines: BufReader::with_capacity(CONN_BUFFER_BYTES, read).lines(), write, shim_pid };
        let hello = conn.ask(&Request::Hello { protocol: PROTOCOL }).await?;
        if !hello.ok {
            return Err(Error::Refused(hello.error.unwrap_or_else(|| "the shim refused the connection".into())));
        }
        Ok((conn, hello))
    }

    async fn ask(&mut self, req: &Request) -> Result<Reply> {
        let mut line = serde_json::to_vec(req)?;
        line.push(b'\n');
        self.write.write_all(&line).await.map_err(Error::Gone)?;
        match self.lines.next_line().await {
            Ok(Some(line)) => serde_json::from_str(&line).map_err(|source| Error::Unreadable { line, source }),
            Ok(None) => Err(Error::Gone(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the shim closed the connection"))),
            Err(e) => Err(Error::Gone(e)),
        }
    }
}

/// A connection to one shim.
pub struct ShimClient {
    dir: PathBuf,
    pid: i32,
    conn: Mutex<Option<Conn>>,
}

impl ShimClient {
    /// Start a shim in `dir` (created by the caller, 0700) with `command` (the daemon's own
    /// command line; `shim DIR` is appended) and environment `env`, hand it `spec` on its
    /// stdin, and wait until it started the agent. Errors: the shim could not start, or it
    /// could not start the agent (its reason, e.g. the program was not found).
    pub async fn spawn(command: &[String], env: BTreeMap<String, String>, dir: &Path, spec: &ShimSpec) -> Result<ShimClient> {
        Self::launch(
            command,
            env,
            dir,
            &Launch {
                spec: spec.clone(),
                output: OutputMode::Lines,
                redact: Vec::new(),
                cgroup: crate::process::cgroup::plan(&spec.tag),
                nice: crate::process::priority::agent_nice(),
                dir: None,
                sandbox: None,
                stdin_first: None,
                stdin_close: false,
            },
        )
        .await
    }

    /// [`Self::spawn`] with an output mode: `launch.output` says how the shim keeps the output
    /// (raw bytes for `exec_command`). Errors: as [`Self::spawn`].
    pub async fn launch(command: &[String], env: BTreeMap<String, String>, dir: &Path, launch: &Launch) -> Result<ShimClient> {
        let tag = &launch.spec.tag;
        // A spare did not know its directory: the launch names it (a fresh shim has it already).
        let json = serde_json::to_vec(&Launch { dir: Some(dir.to_owned()), ..launch.clone() })?;
        let hand_and_reply = async {
            let mut handed = None;
            // A launch in a bubblewrap sandbox can take a warm sandbox made for its policy
            // ([`spare`], "Warm sandboxes"): a command's (one output stream, no terminal), or an
            // agent's whose stdin is a pipe (stdout and stderr apart).
            let split = match launch.output {
                OutputMode::Raw { tty: None, .. } => Some(false),
                OutputMode::Lines if launch.spec.stdin_pipe => Some(true),
                _ => None,
            };
            let warm = launch
                .sandbox
                .as_ref()
                .filter(|p| p.level == crate::sandbox::Level::Bubblewrap)
                .and_then(|policy| split.map(|split| (policy, split)));
            if let Some(shim) = spare::take(command, &env, warm) {
                // Before the shim has its spec (and so before the program starts): whatever
                // the tree does from its first instruction on is known to be the tree's.
                process::held::hold(shim.pid, tag);
                let pid = shim.pid;
                match shim.hand(&json).await {
                    Ok(shim) => handed = Some(shim),
                    // The spare is gone (it read nothing): a fresh shim takes its place.
                    Err(e) => tracing::warn!("the spare shim {pid} is gone ({e}); starting a fresh one"),
                }
            }
            let shim = match handed {
                Some(shim) => shim,
                None => {
                    let shim = Waiting::start(command, env, dir, format!("shim/{tag}"))?;
                    process::held::hold(shim.pid, tag);
                    shim.hand(&json).await?
                }
            };
            shim.reply().await
        };
        let reply =
            tokio::time::timeout(READY_TIMEOUT, hand_and_reply).await.map_err(|_| Error::Timeout { secs: READY_TIMEOUT.as_secs() })??;
        if !reply.ok {
            return Err(Error::Refused(reply.error.unwrap_or_else(|| "the shim could not start the agent".into())));
        }
        Self::connect(dir).await
    }

    /// Connect to the live shim in `dir`. Errors: no shim answers there (it is gone), or it
    /// speaks another protocol version (the reason names both versions).
    pub async fn connect(dir: &Path) -> Result<ShimClient> {
        let (conn, hello) = Conn::open(dir).await?;
        if let (Some(tag), Some(shim)) = (&hello.tag, conn.shim_pid) {
            process::held::hold(shim, tag);
        }
        Ok(ShimClient { dir: dir.to_owned(), pid: hello.pid, conn: Mutex::new(Some(conn)) })
    }

    /// The agent's pid (= its process group and session).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Send `req` and return the reply (reconnecting once if the connection broke). Errors:
    /// the shim is gone, or refused the request (its reason).
    pub async fn request(&self, req: Request) -> Result<Reply> {
        let mut conn = self.conn.lock().await;
        for attempt in 0..2 {
            if conn.is_none() {
                *conn = Some(Conn::open(&self.dir).await?.0);
            }
            let Some(c) = conn.as_mut() else { continue };
            match c.ask(&req).await {
                Ok(reply) if reply.ok => return Ok(reply),
                Ok(reply) => return Err(Error::Refused(reply.error.unwrap_or_else(|| "refused".into()))),
                Err(e) if attempt == 1 => return Err(e),
                Err(_) => *conn = None,
            }
        }
        Err(Error::Gone(std::io::Error::new(std::io::ErrorKind::NotConnected, "no connection")))
    }

    /// Write `data` to the agent's stdin; with `turn`, the journal first records that turn.
    pub async fn stdin(&self, data: String, turn: Option<u32>) -> Result<()> {
        self.request(Request::Stdin { data, turn }).await.map(drop)
    }

    /// The shim's state (the agent's pid, the journal's length, its exit once known, whether
    /// its stdout is closed). Errors: the shim is gone.
    pub async fn status(&self) -> Result<Reply> {
        self.request(Request::Status).await
    }

    /// Close the agent's stdin.
    pub async fn close_stdin(&self) -> Result<()> {
        self.request(Request::CloseStdin).await.map(drop)
    }

    /// Send `signal` to the agent's process group.
    pub async fn signal(&self, signal: i32) -> Result<()> {
        self.request(Request::Signal { signal }).await.map(drop)
    }

    /// End every process the shim holds (SIGTERM, `grace`, SIGKILL); returns the survivors
    /// (empty when the stop reached everything).
    pub async fn stop(&self, grace: Duration) -> Result<Vec<i32>> {
        Ok(self.request(Request::Stop { grace_ms: grace.as_millis() as u64 }).await?.survivors)
    }

    /// Raw mode: write `data` to the process's input, for at most `timeout` (see
    /// [`Request::Input`]), on a connection of its own so that a write waiting for a full pipe
    /// never holds up a stop. Returns the shim's reply: `written`, and `stop` when it stopped
    /// early. Errors: the shim is gone, or refused (not running, no input).
    pub async fn input(&self, data: Vec<u8>, timeout: Duration) -> Result<Reply> {
        let (mut conn, _) = Conn::open(&self.dir).await?;
        let reply = conn.ask(&Request::Input { data, timeout_ms: timeout.as_millis() as u64 }).await?;
        if reply.ok || reply.stop.is_some() {
            Ok(reply)
        } else {
            Err(Error::Refused(reply.error.unwrap_or_else(|| "refused".into())))
        }
    }

    /// Raw mode with a PTY: set its size. Errors: the shim is gone, or refused (no terminal,
    /// not running, the ioctl failed).
    pub async fn resize(&self, rows: u16, cols: u16) -> Result<()> {
        self.request(Request::Resize { rows, cols }).await.map(drop)
    }

    /// Tell the shim everything up to `offset` is stored; a shim whose tree is gone then exits.
    pub async fn ack(&self, offset: u64) -> Result<()> {
        self.request(Request::Ack { offset }).await.map(drop)
    }

    /// Wait until the shim in `dir` has exited (its `Watch` stream closes), at most `timeout`.
    /// Returns at once when no shim answers there.
    pub async fn wait_gone(dir: &Path, timeout: Duration) {
        let Ok((mut conn, _)) = Conn::open(dir).await else { return };
        if !conn.ask(&Request::Watch).await.is_ok_and(|r| r.ok) {
            return;
        }
        let _ = tokio::time::timeout(timeout, async { while let Ok(Some(_)) = conn.lines.next_line().await {} }).await;
    }
}

/// Wake-ups from a shim's `Watch` stream: one per growth of its journal or output.
pub struct Watcher {
    lines: Lines<BufReader<OwnedReadHalf>>,
    _write: OwnedWriteHalf,
}

impl Watcher {
    /// Open the `Watch` stream of the shim in `dir`; `None` when no shim answers there.
    pub async fn open(dir: &Path) -> Option<Watcher> {
        let (mut conn, _) = Conn::open(dir).await.ok()?;
        match conn.ask(&Request::Watch).await {
            Ok(reply) if reply.ok => Some(Watcher { lines: conn.lines, _write: conn.write }),
            _ => None,
        }
    }

    /// Wait for the next growth, at most `timeout`. False once the shim is gone (the stream
    /// closed); true on a growth or when the timeout passed.
    pub async fn next(&mut self, timeout: Duration) -> bool {
        match tokio::time::timeout(timeout, self.lines.next_line()).await {
            Ok(Ok(Some(_))) | Err(_) => true,
            Ok(_) => false,
        }
    }
}

/// What a journal follower reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Followed {
    /// A record and the journal offset just past it.
    Record(Record, u64),
    /// The shim is gone and the journal ends without [`Record::Done`]: the shim was killed (or
    /// the host restarted) and nothing more will come.
    Gone,
}

/// Records a follower holds ready for its receiver; past that it stops reading the journal
/// until the receiver takes some (the journal on disk is the buffer, not the daemon's memory).
pub const FOLLOW_QUEUE: usize = 256;
/// Most journal bytes a follower reads at a time.
const FOLLOW_READ_BYTES: u64 = 256 * 1024;

/// Follow the journal in `dir` from byte `from` (a record boundary): every record is sent in
/// order, woken by the shim's `Watch` stream: every growth of the journal is told on it, and it
/// closes when the shim exits, so an idle run's follower sleeps (issue 30). The channel holds
/// [`FOLLOW_QUEUE`] records: a receiver slower than the agent's output holds the follower back,
/// and memory stays bounded whatever the agent prints. Ends after [`Record::Done`], or with
/// [`Followed::Gone`] once the shim is gone and the journal has nothing more, or when the
/// receiver is dropped.
pub fn follow(dir: PathBuf, from: u64) -> mpsc::Receiver<Followed> {
    let (tx, rx) = mpsc::channel(FOLLOW_QUEUE);
    tokio::spawn(async move {
        let mut watch = match Conn::open(&dir).await {
            Ok((mut conn, _)) => match conn.ask(&Request::Watch).await {
                // The write half is kept: dropping it would shut the connection's write side,
                // which the shim takes as its follower gone.
                Ok(reply) if reply.ok => Some((conn.lines, conn.write)),
                _ => None,
            },
            Err(_) => None,
        };
        let mut reader = match JournalReader::open(&dir, from) {
            Ok(r) => r.with_read_limit(FOLLOW_READ_BYTES),
            Err(_) => {
                let _ = tx.send(Followed::Gone).await;
                return;
            }
        };
        // Sends everything the journal holds now and hands the reader back; `None` once done or
        // the receiver is gone. A follower behind its journal (its last read took many records)
        // parses the next part on the bulk lane, below the daemon's priority, while its runtime
        // worker goes on with other tasks (see `crate::process::bulk::spawn`).
        async fn catch_up(mut reader: JournalReader, tx: &mpsc::Sender<Followed>) -> Option<JournalReader> {
            let mut behind = false;
            loop {
                let records;
                (reader, records) = if behind {
                    crate::process::bulk::spawn(move || {
                        let records = reader.read_new();
                        (reader, records)
                    })
                    .await
                } else {
                    let records = reader.read_new();
                    (reader, records)
                };
                let records = records.unwrap_or_default();
                behind = records.len() >= crate::process::bulk::BULK_MIN_ITEMS;
                if records.is_empty() {
                    return Some(reader);
                }
                for (record, end) in records {
                    let done = matches!(record, Record::Done { .. });
                    if tx.send(Followed::Record(record, end)).await.is_err() || done {
                        return None;
                    }
                }
            }
        }
        loop {
            let Some(caught_up) = catch_up(reader, &tx).await else { return };
            reader = caught_up;
            let alive = match watch.as_mut() {
                Some((lines, _)) => matches!(lines.next_line().await, Ok(Some(_))),
                None => false,
            };
            if !alive {
                // The shim is gone: whatever it wrote is on disk now.
                if catch_up(reader, &tx).await.is_some() {
                    let _ = tx.send(Followed::Gone).await;
                }
                return;
            }
        }
    });
    rx
}
