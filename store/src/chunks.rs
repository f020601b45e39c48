//! The chunk format of `event_chunks` rows (see [`crate::events`], "Chunked rows"): a batch of
//! events prepared off the writer thread ([`prepare`]: bodies as JSON lines and raw lines framed
//! by their length, each zstd-compressed) and read back ([`unpack_bodies`], [`unpack_raws`]); and
//! the one-time conversion of a database of one row per event to chunks ([`migrate_to_chunks`]).
//! Pure over a connection: nothing here knows the [`crate::Store`].

use rusqlite::params;
use spaces_codespace::sqlite::now_ms;
use spaces_harnesses::EventDraft;
use spaces_sdk::Event;

use crate::error::{Error, Result};

/// A batch ready for the writer: its events (seq left 0, numbered at insert), their bodies one
/// per line compressed, and their raw lines compressed (`None` when no event has one).
pub(crate) struct Chunk {
    pub(crate) events: Vec<Event>,
    pub(crate) bodies_z: Vec<u8>,
    pub(crate) raws_z: Option<Vec<u8>>,
    /// Bytes of the bodies and raw lines before compression: the batch's weight in the writer's
    /// queue. Compressed, a noisy batch of 1.6 KB lines is about as small as a quiet run's one
    /// line, and would go ahead with the small jobs, in groups of hundreds (`crate::writer`).
    pub(crate) row_bytes: usize,
}

/// zstd level for bodies and raw lines: the fastest; a batch's lines are alike and compress well
/// even so.
const RAW_LEVEL: i32 = 1;

/// The chunk of `drafts`: bodies as JSON lines (seq 0, set when read) and the raw lines, each
/// compressed.
pub(crate) fn prepare(drafts: Vec<EventDraft>) -> Result<Chunk> {
    let ts_ms = now_ms();
    let mut bodies = Vec::new();
    let mut raws: Vec<Option<String>> = Vec::with_capacity(drafts.len());
    let mut events = Vec::with_capacity(drafts.len());
    for d in drafts {
        let event = Event {
            seq: 0,
            ts_ms,
            turn: d.turn,
            kind: d.kind,
            category: d.category,
            text: d.text,
            tool_id: d.tool_id,
            tool_title: d.tool_title,
            tool_kind: d.tool_kind,
            tool_status: d.tool_status,
            stop_reason: d.stop_reason,
            summary: d.summary,
            usage: d.usage,
            files: d.files,
            raw: None,
        };
        if !events.is_empty() {
            bodies.push(b'\n');
        }
        // serde_json escapes every newline inside a string: one event, one line.
        serde_json::to_writer(&mut bodies, &event)?;
        raws.push(d.raw);
        events.push(event);
    }
    let raws_z = pack_raws(&raws)?;
    let row_bytes = bodies.len() + raws.iter().map(|r| r.as_ref().map_or(0, String::len)).sum::<usize>();
    for (event, raw) in events.iter_mut().zip(raws) {
        event.raw = raw;
    }
    Ok(Chunk { events, bodies_z: pack(&bodies)?, raws_z, row_bytes })
}

/// The bodies of a chunk as stored: a BLOB is [`prepare`]'s zstd of the JSON lines, TEXT the lines
/// themselves (a chunk from before compression). Errors: `Damaged` for anything else, a payload
/// that does not decompress, or one that is not UTF-8.
pub(crate) fn unpack_bodies(stored: rusqlite::types::ValueRef<'_>) -> Result<String> {
    use rusqlite::types::ValueRef;
    let damaged = |what: &str| Error::Damaged(format!("a chunk's event bodies {what}"));
    match stored {
        ValueRef::Text(text) => String::from_utf8(text.to_vec()).map_err(|_| damaged("are not UTF-8")),
        ValueRef::Blob(z) => {
            let bytes = zstd::stream::decode_all(z).map_err(|_| damaged("do not decompress"))?;
            String::from_utf8(bytes).map_err(|_| damaged("are not UTF-8"))
        }
        _ => Err(damaged("are neither text nor compressed")),
    }
}
thread_local! {
    /// This thread's zstd context for bodies and raw lines, made once: a context costs hundreds of KiB to
    /// set up, more than compressing one short batch (it was a third of the daemon's CPU under
    /// load when made per line).
    static PACKER: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> = const { std::cell::RefCell::new(None) };
}

fn pack(bytes: &[u8]) -> Result<Vec<u8>> {
    PACKER.with(|packer| {
        let mut packer = packer.borrow_mut();
        let packer = match packer.as_mut() {
            Some(p) => p,
            None => packer.insert(zstd::bulk::Compressor::new(RAW_LEVEL)?),
        };
        Ok(packer.compress(bytes)?)
    })
}

/// First byte of a framed `raws_z` payload ([`pack_raws`]). A payload from before the framing is
/// a JSON array and starts with `[`.
pub(crate) const FRAMED: u8 = 1;
/// A frame's length that stands for "this event has no raw line".
const NO_RAW: u32 = u32::MAX;

/// `raws_z` of a chunk: its events' raw lines, compressed; `None` when no event has one.
///
/// The payload is [`FRAMED`], then one frame per event: a little-endian `u32` length and that
/// many bytes of UTF-8, or [`NO_RAW`] for an event without a raw line. Raw lines are JSON
/// printed by the agent: written as a JSON array, every quote of every line was escaped and
/// unescaped again (measured: five times the cost of compressing them).
pub(crate) fn pack_raws(raws: &[Option<String>]) -> Result<Option<Vec<u8>>> {
    if raws.iter().all(Option::is_none) {
        return Ok(None);
    }
    let bytes: usize = raws.iter().map(|r| 4 + r.as_ref().map_or(0, String::len)).sum();
    let mut framed = Vec::with_capacity(1 + bytes);
    framed.push(FRAMED);
    for raw in raws {
        match raw {
            Some(line) => {
                let len = u32::try_from(line.len())
                    .ok()
                    .filter(|l| *l != NO_RAW)
                    .ok_or_else(|| std::io::Error::other("a raw line of 4 GiB or more"))?;
                framed.extend_from_slice(&len.to_le_bytes());
                framed.extend_from_slice(line.as_bytes());
            }
            None => framed.extend_from_slice(&NO_RAW.to_le_bytes()),
        }
    }
    Ok(Some(pack(&framed)?))
}

/// The raw lines of a chunk (`raws_z`, framed by [`pack_raws`], or a JSON array from before the
/// framing): one entry per event, `None` for an event without one. Errors: `Damaged` for a
/// payload that is neither.
pub(crate) fn unpack_raws(z: &[u8]) -> Result<Vec<Option<String>>> {
    let payload = zstd::stream::decode_all(z)?;
    let damaged = || Error::Damaged("a chunk's raw lines are cut short or not UTF-8".into());
    match payload.first() {
        Some(&FRAMED) => {
            let mut rest = &payload[1..];
            let mut out = Vec::new();
            while !rest.is_empty() {
                let (len, tail) = rest.split_first_chunk::<4>().ok_or_else(damaged)?;
                let len = u32::from_le_bytes(*len);
                if len == NO_RAW {
                    out.push(None);
                    rest = tail;
                    continue;
                }
                let (line, tail) = tail.split_at_checked(len as usize).ok_or_else(damaged)?;
                out.push(Some(std::str::from_utf8(line).map_err(|_| damaged())?.to_owned()));
                rest = tail;
            }
            Ok(out)
        }
        Some(b'[') => Ok(serde_json::from_slice(&payload)?),
        _ => Err(Error::Damaged("a chunk's raw lines are in no known format".into())),
    }
}

/// One chunk row: `(run_id, first_seq, last_seq, bodies, raws_z)`.
pub(crate) const INSERT_CHUNK: &str = "INSERT INTO event_chunks (run_id, first_seq, last_seq, bodies, raws_z) VALUES (?1, ?2, ?3, ?4, ?5)";

/// Events per chunk when older rows are converted (a live batch is at most about this many).
const MIGRATED_CHUNK: usize = 128;

/// Takes a database with an `events` table (one row per event) to chunked rows, in one
/// transaction: a state dir made by an older `spacesd` keeps every event, seq and raw line.
/// Either older shape is read: lean rows (`raw_z`, zstd of one line) or the first (`WITHOUT
/// ROWID`, `raw` as text). Each run's events become chunks of up to [`MIGRATED_CHUNK`].
pub(crate) fn migrate_to_chunks(conn: &rusqlite::Connection) -> Result<()> {
    let column =
        |name: &str| -> Result<bool> { Ok(conn.prepare("SELECT 1 FROM pragma_table_info('events') WHERE name = ?1")?.exists([name])?) };
    if !column("seq")? {
        return Ok(());
    }
    let compressed = column("raw_z")?;
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let copied = copy_to_chunks(conn, compressed);
    match copied {
        Ok(n) => {
            conn.execute_batch("DROP TABLE events; COMMIT;")?;
            tracing::info!("state database: {n} events moved to chunked rows");
            Ok(())
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// The copy of [`migrate_to_chunks`]; returns how many events it copied.
fn copy_to_chunks(conn: &rusqlite::Connection, compressed: bool) -> Result<u64> {
    let mut read = conn.prepare(if compressed {
        "SELECT run_id, seq, body, raw_z FROM events ORDER BY run_id, seq"
    } else {
        "SELECT run_id, seq, body, raw FROM events ORDER BY run_id, seq"
    })?;
    let mut write = conn.prepare(INSERT_CHUNK)?;
    let mut flush = |run: &str, first: i64, lines: &mut Vec<String>, raws: &mut Vec<Option<String>>| -> Result<()> {
        if lines.is_empty() {
            return Ok(());
        }
        let raws_z = pack_raws(raws)?;
        write.execute(params![run, first, first + lines.len() as i64 - 1, pack(lines.join("\n").as_bytes())?, raws_z])?;
        lines.clear();
        raws.clear();
        Ok(())
    };
    let mut rows = read.query([])?;
    let (mut run, mut first, mut next) = (String::new(), 0i64, 0i64);
    let (mut lines, mut raws) = (Vec::new(), Vec::new());
    let mut n = 0;
    while let Some(r) = rows.next()? {
        let (id, seq, body): (String, i64, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
        let raw = if compressed {
            match r.get::<_, Option<Vec<u8>>>(3)? {
                Some(z) => Some(String::from_utf8_lossy(&zstd::stream::decode_all(&z[..])?).into_owned()),
                None => None,
            }
        } else {
            r.get::<_, Option<String>>(3)?
        };
        // A chunk is contiguous: a new run, a gap in seq or a full chunk starts the next.
        if id != run || seq != next || lines.len() == MIGRATED_CHUNK {
            flush(&run, first, &mut lines, &mut raws)?;
            (run, first) = (id, seq);
        }
        next = seq + 1;
        // A body is compact JSON (serde_json escapes newlines in strings): one line. An old
        // body carries its seq; it is ignored when read (the seq is the chunk's).
        lines.push(body);
        raws.push(raw);
        n += 1;
    }
    flush(&run, first, &mut lines, &mut raws)?;
    Ok(n)
}
