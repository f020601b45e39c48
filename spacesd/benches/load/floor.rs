//! The ingest floor: the least work any daemon of this design can do for the bench's ingest,
//! measured on the same machine, with the same fake agents, in the same rounds.
//!
//! Issue 12 asks for ≥ 200k events/s. This pipeline does only what the guarantees require and
//! nothing of what makes `spacesd` a service, with every shortcut in its favour:
//! - **agents**: the bench's own fake agent, `count` lines of 1.6 KB each, as in the ingest phase;
//! - **journal** (the shim's part): a thread per agent (not a process: no address-space switch)
//!   reads its stdout 64 KiB at a time and appends every whole line read, prefixed `o|`, to the
//!   agent's journal file with **one** `write(2)` per read (the shim: one per batch of the lines
//!   its reader task handed over, each line checked as UTF-8 first), so a daemon crash loses
//!   nothing; it tells the ingest side the new end over a channel (the shim: a socket);
//! - **ingest** (the daemon's part): one thread per CPU takes every journal end it was told of,
//!   reads each journal's new bytes, parses each line with a typed, borrowing parse of the fields
//!   an event needs (the daemon parses each line into a `serde_json::Value`: a typed read was
//!   tried and taken back, docs/benchmarks.md, session 14), writes one small event
//!   JSON per line, and compresses the events and the raw lines with zstd level 1 into a chunk
//!   per journal per wake-up, of at most 128 lines (the daemon's batches: at most 128 lines or
//!   48 KiB);
//! - **writer**: one thread inserts the chunks into a plain rowid table of a WAL database
//!   (`synchronous=NORMAL`), one transaction per wake-up.
//!
//! It has no HTTP, no run actors, no redaction, no `output.log`, no readers to wake, no fsync
//! and no cgroups. Its events/s is therefore an upper bound for `spacesd` on this machine. It
//! counts the journal lines committed (`count` + 2 per agent); the daemon's figure counts every
//! event read back (a few more per run: the turn's start, its prompt, its end), under 0.5 % apart.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use serde::Deserialize;

/// Lines per chunk, as the daemon's batches under load.
const CHUNK_LINES: usize = 128;

/// Events per second (journal lines committed), from the first agent's spawn to the last
/// chunk's commit, for `agents` fake agents of `lines` lines each.
pub fn events_per_s(agents: usize, lines: u64) -> f64 {
    let tmp = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let (to_writer, chunks) = mpsc::channel::<Chunk>();
    let writer = std::thread::spawn({
        let db = tmp.path().join("floor.db");
        move || write_chunks(&db, chunks)
    });
    let mut lanes = Vec::new();
    let mut to_lanes = Vec::new();
    for _ in 0..cpus {
        let (tx, rx) = mpsc::channel::<(usize, u64)>();
        to_lanes.push(tx);
        let to_writer = to_writer.clone();
        let dir = tmp.path().to_owned();
        lanes.push(std::thread::spawn(move || ingest(&dir, rx, to_writer)));
    }
    drop(to_writer);
    let started = Instant::now();
    let mut shims = Vec::new();
    for i in 0..agents {
        let cwd = tmp.path().join(format!("agent-{i}"));
        std::fs::create_dir(&cwd).unwrap();
        let mut child = Command::new(&exe)
            .args(["--input-format", "stream-json"])
            .current_dir(&cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let prompt = format!("mode=noisy count={lines} tag=floor{i}");
        let msg = serde_json::json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": prompt}]}});
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{msg}").unwrap();
        drop(stdin); // the agent ends after its turn
        let stdout = child.stdout.take().unwrap();
        let tell = to_lanes[i % cpus].clone();
        let journal = tmp.path().join(format!("journal-{i}"));
        shims.push(std::thread::spawn(move || {
            shim(stdout, &journal, |end| tell.send((i, end)).unwrap());
            child.wait().unwrap();
        }));
    }
    drop(to_lanes);
    for s in shims {
        s.join().unwrap();
    }
    let mut total = 0;
    for l in lanes {
        total += l.join().unwrap();
    }
    writer.join().unwrap();
    total as f64 / started.elapsed().as_secs_f64()
}

/// Journals `out`'s whole lines, one `write(2)` per read; calls `tell` with each new end.
fn shim(mut out: impl Read, journal: &Path, tell: impl Fn(u64)) {
    let mut file = std::fs::OpenOptions::new().create_new(true).append(true).open(journal).unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut have = 0;
    let mut rec = Vec::with_capacity(70 * 1024);
    let mut end = 0u64;
    loop {
        let n = out.read(&mut buf[have..]).unwrap();
        if n == 0 {
            break;
        }
        have += n;
        rec.clear();
        let mut at = 0;
        while let Some(nl) = memchr::memchr(b'\n', &buf[at..have]) {
            rec.extend_from_slice(b"o|");
            rec.extend_from_slice(&buf[at..=at + nl]);
            at += nl + 1;
        }
        buf.copy_within(at..have, 0);
        have -= at;
        if !rec.is_empty() {
            file.write_all(&rec).unwrap();
            end += rec.len() as u64;
            tell(end);
        }
    }
    assert_eq!(have, 0, "the fake agent ends every line, and none is longer than the buffer");
}

/// The two fields of a harness line the event needs, borrowed where the JSON has no escapes.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow, rename = "type")]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    message: Option<Message<'a>>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    content: Vec<Content<'a>>,
}

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(borrow, default)]
    text: Option<std::borrow::Cow<'a, str>>,
}

struct Chunk {
    run: usize,
    first_seq: u64,
    last_seq: u64,
    bodies: Vec<u8>,
    raws: Vec<u8>,
}

/// Where an ingest thread stands in one journal.
struct Journal {
    file: File,
    /// Bytes read so far.
    read_to: u64,
    /// The seq of the last line read (lines count from 1; 0 before the first).
    seq: u64,
}

/// Reads the journals it is told about and sends their lines as chunks; returns the lines read.
fn ingest(dir: &Path, told: mpsc::Receiver<(usize, u64)>, to_writer: mpsc::Sender<Chunk>) -> u64 {
    let mut zstd = zstd::bulk::Compressor::new(1).unwrap();
    let mut journals: HashMap<usize, Journal> = HashMap::new();
    let (mut buf, mut bodies, mut raws) = (Vec::new(), Vec::new(), Vec::new());
    let mut total = 0;
    while let Ok(first) = told.recv() {
        // Every end told so far, the newest per journal: one read and one chunk run per wake-up.
        let mut ends: HashMap<usize, u64> = HashMap::new();
        for (run, end) in std::iter::once(first).chain(told.try_iter()) {
            let e = ends.entry(run).or_default();
            *e = (*e).max(end);
        }
        for (run, end) in ends {
            let j = journals.entry(run).or_insert_with(|| Journal {
                file: File::open(dir.join(format!("journal-{run}"))).unwrap(),
                read_to: 0,
                seq: 0,
            });
            if end <= j.read_to {
                continue;
            }
            buf.resize((end - j.read_to) as usize, 0);
            j.file.read_exact_at(&mut buf, j.read_to).unwrap();
            j.read_to = end;
            let mut first = j.seq + 1;
            for line in buf.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                let raw = &line[2..];
                let parsed: Line = serde_json::from_slice(raw).unwrap();
                let text = parsed.message.as_ref().and_then(|m| m.content.first()).and_then(|c| c.text.as_deref()).unwrap_or("");
                j.seq += 1;
                let event = Event { seq: j.seq, kind: if parsed.kind == "assistant" { "message" } else { "system" }, text };
                framed(&mut bodies, |out| serde_json::to_writer(out, &event).unwrap());
                framed(&mut raws, |out| out.extend_from_slice(raw));
                total += 1;
                if j.seq + 1 - first == CHUNK_LINES as u64 {
                    send(&to_writer, &mut zstd, run, (first, j.seq), &mut bodies, &mut raws);
                    first = j.seq + 1;
                }
            }
            if !bodies.is_empty() {
                send(&to_writer, &mut zstd, run, (first, j.seq), &mut bodies, &mut raws);
            }
        }
    }
    total
}

/// Appends what `write` writes to `out`, after its length as a little-endian `u32`.
fn framed(out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    write(out);
    let len = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
}

/// Sends the lines `first_seq..=last_seq` of journal `run` (their framed `bodies` and `raws`,
/// compressed) to the writer, and empties both buffers for the next chunk.
fn send(
    to: &mpsc::Sender<Chunk>,
    zstd: &mut zstd::bulk::Compressor,
    run: usize,
    (first_seq, last_seq): (u64, u64),
    bodies: &mut Vec<u8>,
    raws: &mut Vec<u8>,
) {
    let chunk = Chunk { run, first_seq, last_seq, bodies: zstd.compress(bodies).unwrap(), raws: zstd.compress(raws).unwrap() };
    bodies.clear();
    raws.clear();
    to.send(chunk).unwrap();
}

/// The event a line becomes (the daemon's has more fields, most of them absent).
#[derive(serde::Serialize)]
struct Event<'a> {
    seq: u64,
    kind: &'a str,
    text: &'a str,
}

/// Inserts chunks, one transaction per wake-up, until every sender is gone.
fn write_chunks(db: &Path, chunks: mpsc::Receiver<Chunk>) {
    let mut conn = rusqlite::Connection::open(db).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    conn.execute_batch("CREATE TABLE chunks (run INTEGER NOT NULL, first_seq INTEGER NOT NULL, last_seq INTEGER NOT NULL, bodies BLOB NOT NULL, raws BLOB NOT NULL)").unwrap();
    conn.execute_batch("CREATE UNIQUE INDEX chunks_by_run ON chunks (run, first_seq)").unwrap();
    while let Ok(first) = chunks.recv() {
        let tx = conn.transaction().unwrap();
        {
            let mut stmt =
                tx.prepare_cached("INSERT INTO chunks (run, first_seq, last_seq, bodies, raws) VALUES (?1, ?2, ?3, ?4, ?5)").unwrap();
            for c in std::iter::once(first).chain(chunks.try_iter()) {
                stmt.execute(rusqlite::params![c.run as i64, c.first_seq as i64, c.last_seq as i64, c.bodies, c.raws]).unwrap();
            }
        }
        tx.commit().unwrap();
    }
}
