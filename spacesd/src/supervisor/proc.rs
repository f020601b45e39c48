//! One live agent process of a run: spawned through the codespace process layer, its stdout and
//! stderr read line by line, its stdin fed by a writer task, its exit awaited. Everything the
//! process does arrives at the run actor as [`ProcEvent`]s on one channel, tagged with the
//! process generation so late events of an old process are never mistaken for the current one.

use std::os::unix::process::ExitStatusExt;

use spaces_codespace::process::{self, SpawnSpec};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::sync::mpsc;

/// Which output stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Something a process did.
#[derive(Debug)]
pub enum ProcEvent {
    /// One line (without `\n`; an unterminated last line is delivered at EOF).
    Line { stream: Stream, line: String },
    /// An EOF or the exit of process generation `gen`.
    End { gen: u64, end: ProcEnd },
}

/// How a process's output or life ended.
#[derive(Debug)]
pub enum ProcEnd {
    /// The stream reached EOF.
    Eof(Stream),
    /// The process exited (code or signal).
    Exited { code: Option<i32>, signal: Option<i32> },
}

/// Handle on a live process held by the actor.
#[derive(Debug)]
pub struct LiveProc {
    pub gen: u64,
    pub pid: i32,
    /// Sender to the stdin writer task; dropping it closes the child's stdin.
    pub stdin: Option<mpsc::UnboundedSender<Vec<u8>>>,
    pub exit: Option<(Option<i32>, Option<i32>)>,
    pub stdout_eof: bool,
    pub stderr_eof: bool,
}

impl LiveProc {
    /// True when the exit and both EOFs have been seen: the process is completely drained.
    pub fn finished(&self) -> bool {
        self.exit.is_some() && self.stdout_eof && self.stderr_eof
    }
}

/// Longest line kept whole, in bytes; longer lines are split (never dropped).
const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// Spawn `spec` (its stdio must be pipes) and start its reader, writer and waiter tasks, which
/// report to `events`.
pub fn start(
    spec: &SpawnSpec,
    gen: u64,
    initial_stdin: Option<Vec<u8>>,
    events: mpsc::UnboundedSender<ProcEvent>,
) -> spaces_codespace::Result<LiveProc> {
    let spawned = process::spawn(spec)?;
    let pid = spawned.pid;
    let mut child = spawned.child;
    let pipes = (|| -> std::io::Result<_> {
        let stdout = pipe::Receiver::from_owned_fd(spawned.output)?;
        let stderr = spawned.stderr.map(pipe::Receiver::from_owned_fd).transpose()?;
        let stdin = spawned.stdin.map(pipe::Sender::from_owned_fd).transpose()?;
        Ok((stdout, stderr, stdin))
    })();
    let (stdout, stderr, stdin) = match pipes {
        Ok(pipes) => pipes,
        Err(source) => {
            // Nobody would read it: end it now (tokio reaps the dropped child).
            let _ = child.start_kill();
            let program = spec.argv.first().cloned().unwrap_or_default();
            return Err(spaces_codespace::Error::SpawnFailed { program, source });
        }
    };
    tokio::spawn(read_lines(stdout, gen, Stream::Stdout, events.clone()));
    // Combined output has no stderr stream of its own: it is at EOF from the start.
    let stderr_eof = match stderr {
        Some(stderr) => {
            tokio::spawn(read_lines(stderr, gen, Stream::Stderr, events.clone()));
            false
        }
        None => true,
    };
    let stdin = stdin.map(|mut pipe| {
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        if let Some(first) = initial_stdin {
            let _ = tx.send(first);
        }
        tokio::spawn(async move {
            while let Some(bytes) = rx.recv().await {
                // write_all handles partial writes; a closed pipe ends the writer.
                if pipe.write_all(&bytes).await.is_err() || pipe.flush().await.is_err() {
                    break;
                }
            }
        });
        tx
    });
    tokio::spawn(async move {
        let (code, signal) = match child.wait().await {
            Ok(status) => (status.code(), status.signal()),
            Err(_) => (None, None),
        };
        let _ = events.send(ProcEvent::End { gen, end: ProcEnd::Exited { code, signal } });
    });
    Ok(LiveProc { gen, pid, stdin, exit: None, stdout_eof: false, stderr_eof })
}

async fn read_lines<R: AsyncRead + Unpin>(
    reader: R,
    gen: u64,
    stream: Stream,
    events: mpsc::UnboundedSender<ProcEvent>,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        // A read error ends the stream like EOF (the exit is reported separately).
        let n = (&mut reader).take(MAX_LINE_BYTES as u64).read_until(b'\n', &mut buf).await.unwrap_or_default();
        if n == 0 {
            break;
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        let line = String::from_utf8_lossy(&buf).into_owned();
        if events.send(ProcEvent::Line { stream, line }).is_err() {
            return;
        }
    }
    let _ = events.send(ProcEvent::End { gen, end: ProcEnd::Eof(stream) });
}
