//! The program's ends as the loop uses them: a reader task per output stream and a writer task
//! for stdin (lines mode), or one raw reader into the output file (raw mode).

use super::*;

/// The process's ends as the loop uses them, and how many output streams are at EOF from the
/// start.
pub(super) struct Io {
    /// Lines mode: the writer task's queue to the stdin pipe.
    pub(super) stdin: Option<mpsc::UnboundedSender<Vec<u8>>>,
    /// Raw mode: where input goes.
    pub(super) raw: Option<RawInput>,
    pub(super) eofs: u8,
}

/// Lines mode: a reader task per output stream (stdout, stderr) and a writer task for stdin.
pub(super) fn line_readers(
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
pub(super) fn raw_reader(
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
