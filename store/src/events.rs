//! The append-only event log of each run.
//!
//! `seq` starts at 1 per run and never repeats: a batch is appended in one transaction that reads
//! the run's current maximum and numbers the batch after it.
//!
//! Chunked rows: each appended batch is one row of `event_chunks`, holding events `first_seq
//! ..= last_seq` of its run. `bodies` is the events' JSON, one event per line (without `raw`; a
//! body says `seq: 0`, the seq is the chunk's `first_seq` plus the line's index), zstd-compressed
//! (a BLOB; a chunk written before compression holds it as TEXT, and reads the same: `unpack_bodies`).
//! Compressed, a batch's transaction writes a fraction of the pages it did, and a quiet run's
//! commit waits that much less behind it (docs/benchmarks.md, "Compressed bodies"). `raws_z` is
//! the harness's original lines (which repeat the events' text), each framed by its length
//! (`pack_raws`), zstd-compressed, read back only when a caller asks for it; NULL when no event
//! of the batch has one. One row per batch instead of one per event: under load a batch is up
//! to 128 events (fewer when they are long: at most about 48 KiB of lines), so the writer
//! inserts one row where it inserted as many, and a batch's raw lines
//! compress together (docs/benchmarks.md, "Chunked rows"). Both columns are prepared by the
//! caller, off the writer thread: the writer only numbers and inserts. A reader's page starts
//! inside a chunk as easily as at its start (the lines before its cursor are skipped unparsed).

use rusqlite::params;
use spaces_harnesses::EventDraft;
use spaces_os::process::bulk;
use spaces_sdk::Event;

use super::{JournalPos, Store};
use crate::chunks::{prepare, unpack_bodies, unpack_raws, Chunk, INSERT_CHUNK};
use crate::error::{Error, Result};

impl Store {
    /// Append `drafts` to the log of `run_id` in one transaction; returns the stored events (with
    /// `raw` kept as given). With `pos`, the run's journal position is stored in the same
    /// transaction (the drafts are what the journal holds before it). Blocks until committed.
    pub fn events_append(&self, run_id: &str, drafts: Vec<EventDraft>, pos: Option<JournalPos>) -> Result<Vec<Event>> {
        if drafts.is_empty() && pos.is_none() {
            return Ok(Vec::new());
        }
        self.events_append_with(run_id, drafts, pos, |_| Ok(()))
    }

    /// [`Store::events_append`] with `first` run in the same transaction before the events are
    /// inserted (a turn's start: its `turns` row and the run's state with its first events, in
    /// one commit instead of three). Blocks until committed; fails whole.
    pub fn events_append_with(
        &self,
        run_id: &str,
        drafts: Vec<EventDraft>,
        pos: Option<JournalPos>,
        first: impl FnOnce(&rusqlite::Connection) -> Result<()> + Send + 'static,
    ) -> Result<Vec<Event>> {
        let run_id = run_id.to_owned();
        let chunk = prepare(drafts)?;
        self.write(move |conn| {
            first(conn)?;
            append_in(conn, &run_id, chunk, pos)
        })
    }

    /// [`Store::events_append`] for async callers: the batch joins the writer's next group
    /// commit; once committed, `after` runs (on the writer thread) with the stored events, then
    /// they are returned.
    pub async fn events_append_async(
        &self,
        run_id: &str,
        drafts: Vec<EventDraft>,
        pos: Option<JournalPos>,
        after: impl FnOnce(&Vec<Event>) + Send + 'static,
    ) -> Result<Vec<Event>> {
        if drafts.is_empty() && pos.is_none() {
            return Ok(Vec::new());
        }
        let run_id = run_id.to_owned();
        // A noisy run's batch is serialized and compressed below the daemon's priority, while
        // this task's runtime worker goes on with other tasks.
        let chunk = if drafts.len() >= bulk::BULK_MIN_ITEMS { bulk::spawn(move || prepare(drafts)).await } else { prepare(drafts) }?;
        let bytes = chunk.row_bytes;
        self.writer.call_async(bytes, move |conn| append_in(conn, &run_id, chunk, pos), after).await
    }

    /// The stored journal position of `run_id`, if its agent ever ran under a shim.
    pub fn journal_pos(&self, run_id: &str) -> Result<Option<JournalPos>> {
        use rusqlite::OptionalExtension;
        Ok(self
            .reader()?
            .prepare_cached("SELECT gen, offset FROM journals WHERE run_id = ?1")?
            .query_row(params![run_id], |r| Ok(JournalPos { gen: r.get::<_, i64>(0)? as u64, offset: r.get::<_, i64>(1)? as u64 }))
            .optional()?)
    }

    /// Up to `max` events of `run_id` with `seq > cursor`, in order; `raw` filled when
    /// `with_raw`. Errors: `Damaged` for a chunk whose lines disagree with its seq range.
    pub fn events_after(&self, run_id: &str, cursor: u64, max: u32, with_raw: bool) -> Result<Vec<Event>> {
        let conn = self.reader()?;
        let mut stmt = conn.prepare_cached(
            "SELECT first_seq, last_seq, bodies, CASE WHEN ?3 THEN raws_z END FROM event_chunks \
             WHERE run_id = ?1 AND last_seq > ?2 ORDER BY last_seq",
        )?;
        let mut rows = stmt.query(params![run_id, cursor as i64, with_raw])?;
        let mut out = Vec::new();
        while out.len() < max as usize {
            let Some(row) = rows.next()? else { break };
            let (first, last): (i64, i64) = (row.get(0)?, row.get(1)?);
            let (first, last) = (first as u64, last as u64);
            let bodies = unpack_bodies(row.get_ref(2)?)?;
            let mut raws = match row.get::<_, Option<Vec<u8>>>(3)? {
                Some(z) => Some(unpack_raws(&z)?),
                None => None,
            };
            let lines: Vec<&str> = bodies.split('\n').collect();
            let count = lines.len() as u64;
            if first == 0 || last < first || count != last - first + 1 || raws.as_ref().is_some_and(|r| r.len() as u64 != count) {
                return Err(Error::Damaged(format!("run {run_id}: the chunk of events {first}..={last} holds {count} events")));
            }
            let skip = cursor.saturating_sub(first - 1) as usize;
            let wanted = (max as usize - out.len()).min(count as usize - skip);
            for (i, body) in lines.iter().enumerate().skip(skip).take(wanted) {
                let mut event: Event = serde_json::from_str(body)?;
                event.seq = first + i as u64;
                if let Some(raws) = &mut raws {
                    event.raw = raws[i].take();
                }
                out.push(event);
            }
        }
        Ok(out)
    }

    /// The seq of the last event of `run_id` (0 when none).
    pub fn events_last_seq(&self, run_id: &str) -> Result<u64> {
        Ok(last_seq(&*self.reader()?, run_id)?)
    }
}

fn last_seq(conn: &rusqlite::Connection, run_id: &str) -> rusqlite::Result<u64> {
    let last: i64 = conn
        .prepare_cached("SELECT COALESCE(MAX(last_seq), 0) FROM event_chunks WHERE run_id = ?1")?
        .query_row(params![run_id], |r| r.get(0))?;
    Ok(last as u64)
}

/// Inside the writer's transaction: stores `pos`, numbers `chunk`'s events after the run's last
/// seq and inserts them as one row.
fn append_in(conn: &rusqlite::Connection, run_id: &str, chunk: Chunk, pos: Option<JournalPos>) -> Result<Vec<Event>> {
    if let Some(pos) = pos {
        conn.prepare_cached("INSERT OR REPLACE INTO journals (run_id, gen, offset) VALUES (?1, ?2, ?3)")?.execute(params![
            run_id,
            pos.gen as i64,
            pos.offset as i64
        ])?;
    }
    let mut events = chunk.events;
    if events.is_empty() {
        return Ok(events);
    }
    let first = last_seq(conn, run_id)? + 1;
    for (i, event) in events.iter_mut().enumerate() {
        event.seq = first + i as u64;
    }
    let last = first + events.len() as u64 - 1;
    conn.prepare_cached(INSERT_CHUNK)?.execute(params![run_id, first as i64, last as i64, chunk.bodies_z, chunk.raws_z])?;
    Ok(events)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use spaces_harnesses::EventDraft;
    use spaces_sdk::{Event, EventKind};

    use super::super::Store;

    /// The `events` table as every `spacesd` before lean rows made it.
    const FIRST_EVENTS_DDL: &str = "CREATE TABLE events (
        run_id  TEXT NOT NULL,
        seq     INTEGER NOT NULL,
        body    TEXT NOT NULL,
        raw     TEXT,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;";

    /// The `events` table of lean rows (one row per event, `raw` zstd-compressed), the shape
    /// before chunked rows.
    const LEAN_EVENTS_DDL: &str = "CREATE TABLE events (
        run_id  TEXT NOT NULL,
        seq     INTEGER NOT NULL,
        body    TEXT NOT NULL,
        raw_z   BLOB,
        PRIMARY KEY (run_id, seq)
    );";

    /// A body as the old code wrote it: the event's JSON, its seq inside, `raw` left out.
    fn old_body(seq: u64, d: EventDraft) -> String {
        let mut e = super::prepare(vec![d]).unwrap().events.remove(0);
        e.seq = seq;
        e.raw = None;
        serde_json::to_string(&e).unwrap()
    }

    /// Writes two events of `run-old` (the first with a raw line, the second without; a second
    /// run with 300 events, raw lines on every third, so it takes several chunks) in the table
    /// made by `ddl`, raw lines compressed when `compressed`.
    fn old_database(path: &std::path::Path, ddl: &str, compressed: bool) {
        let c = rusqlite::Connection::open(path).unwrap();
        c.execute_batch("PRAGMA journal_mode=WAL;").unwrap();
        c.execute_batch(ddl).unwrap();
        let column = if compressed { "raw_z" } else { "raw" };
        let insert = |run: &str, seq: u64, body: String, raw: Option<String>| {
            let raw: Option<rusqlite::types::Value> = raw.map(|r| match compressed {
                true => zstd::bulk::compress(r.as_bytes(), 1).unwrap().into(),
                false => r.into(),
            });
            c.execute(
                &format!("INSERT INTO events (run_id, seq, body, {column}) VALUES (?1, ?2, ?3, ?4)"),
                rusqlite::params![run, seq as i64, body, raw],
            )
            .unwrap();
        };
        insert(
            "run-old",
            1,
            old_body(1, EventDraft::new(1, EventKind::Message).text("hello\nworld")),
            Some(r#"{"type":"assistant","text":"hello"}"#.into()),
        );
        insert("run-old", 2, old_body(2, EventDraft::new(1, EventKind::Notice).summary("no raw")), None);
        for seq in 1..=300u64 {
            let raw = seq.is_multiple_of(3).then(|| format!("raw line {seq}"));
            insert("run-long", seq, old_body(seq, EventDraft::new(1, EventKind::Message).text(format!("line {seq}"))), raw);
        }
    }

    fn check_migrated(path: &std::path::Path) {
        let store = Store::open(path).unwrap();
        let events = store.events_after("run-old", 0, 10, true).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!((events[0].seq, events[0].kind, events[0].text.as_deref()), (1, EventKind::Message, Some("hello\nworld")));
        assert_eq!(events[0].raw.as_deref(), Some(r#"{"type":"assistant","text":"hello"}"#));
        assert_eq!((events[1].seq, events[1].raw.as_deref()), (2, None));
        assert!(store.events_after("run-old", 0, 10, false).unwrap().iter().all(|e| e.raw.is_none()));
        let long = store.events_after("run-long", 0, 1000, true).unwrap();
        assert_eq!(long.len(), 300);
        for (i, e) in long.iter().enumerate() {
            let seq = i as u64 + 1;
            assert_eq!((e.seq, e.text.clone()), (seq, Some(format!("line {seq}"))));
            assert_eq!(e.raw, seq.is_multiple_of(3).then(|| format!("raw line {seq}")));
        }
        assert_eq!(store.events_last_seq("run-long").unwrap(), 300);
        // New events follow the old ones, and come back with their raw lines.
        let draft = EventDraft { raw: Some("the raw line".into()), ..EventDraft::new(2, EventKind::Message).text("new") };
        let stored = store.events_append("run-old", vec![draft], None).unwrap();
        assert_eq!(stored[0].seq, 3);
        let read = store.events_after("run-old", 2, 10, true).unwrap();
        assert_eq!(read, stored);
        // Opening again finds chunked rows and leaves them be.
        drop(store);
        let store = Store::open(path).unwrap();
        assert_eq!(store.events_after("run-old", 0, 10, true).unwrap().len(), 3);
        assert_eq!(store.events_after("run-long", 0, 1000, false).unwrap().len(), 300);
    }

    #[test]
    fn a_state_dir_from_before_lean_rows_keeps_its_events_and_raw_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spaces.db");
        old_database(&path, FIRST_EVENTS_DDL, false);
        check_migrated(&path);
    }

    #[test]
    fn a_state_dir_of_lean_rows_keeps_its_events_and_raw_lines_in_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spaces.db");
        old_database(&path, LEAN_EVENTS_DDL, true);
        check_migrated(&path);
        let c = rusqlite::Connection::open(&path).unwrap();
        let chunks: i64 = c.query_row("SELECT COUNT(*) FROM event_chunks WHERE run_id = 'run-long'", [], |r| r.get(0)).unwrap();
        assert_eq!(chunks, 3, "300 events in chunks of at most 128");
        let gone: bool = c.prepare("SELECT 1 FROM sqlite_master WHERE name = 'events'").unwrap().exists([]).unwrap();
        assert!(!gone, "the old table is dropped");
    }

    /// Batches of 1 to 130 events (some with raw lines, some without, text with newlines):
    /// every page, from every cursor and for several sizes, is the right slice of the log.
    #[test]
    fn every_page_from_every_cursor_is_the_right_slice_across_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("spaces.db")).unwrap();
        let mut all: Vec<Event> = Vec::new();
        for (b, size) in [1usize, 3, 130, 1, 2, 64].into_iter().enumerate() {
            let drafts = (0..size)
                .map(|i| {
                    let d = EventDraft::new(b as u32 + 1, EventKind::Message).text(format!("batch {b}\nevent {i}"));
                    EventDraft { raw: b.is_multiple_of(2).then(|| format!("raw {b}/{i}")), ..d }
                })
                .collect();
            all.extend(store.events_append("run-a", drafts, None).unwrap());
        }
        assert_eq!(all.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=all.len() as u64).collect::<Vec<_>>());
        assert_eq!(store.events_last_seq("run-a").unwrap(), all.len() as u64);
        for cursor in 0..=all.len() as u64 + 1 {
            for max in [1u32, 2, 5, 128, 1000] {
                for raw in [false, true] {
                    let page = store.events_after("run-a", cursor, max, raw).unwrap();
                    let want: Vec<Event> = all
                        .iter()
                        .filter(|e| e.seq > cursor)
                        .take(max as usize)
                        .map(|e| Event { raw: if raw { e.raw.clone() } else { None }, ..e.clone() })
                        .collect();
                    assert_eq!(page, want, "cursor {cursor}, max {max}, raw {raw}");
                }
            }
        }
        assert!(store.events_after("run-b", 0, 10, true).unwrap().is_empty());
    }

    #[test]
    fn raw_lines_read_back_framed_and_from_chunks_written_as_a_json_array() {
        let raws =
            vec![Some("{\"type\":\"x\",\"q\":\"a \\\"b\\\" é\"}".to_owned()), None, Some(String::new()), Some("\u{1f600}".repeat(3))];
        let framed = crate::chunks::pack_raws(&raws).unwrap().unwrap();
        assert_eq!(super::unpack_raws(&framed).unwrap(), raws);
        assert_eq!(crate::chunks::pack_raws(&[None, None]).unwrap(), None);
        // A chunk stored before the framing: its raw lines as one compressed JSON array.
        let json = zstd::stream::encode_all(&serde_json::to_vec(&raws).unwrap()[..], 1).unwrap();
        assert_eq!(super::unpack_raws(&json).unwrap(), raws);
        // Cut short, not UTF-8, or neither format: a typed error, never a panic.
        let payload = zstd::stream::decode_all(&framed[..]).unwrap();
        let mut not_utf8 = vec![crate::chunks::FRAMED];
        not_utf8.extend_from_slice(&2u32.to_le_bytes());
        not_utf8.extend_from_slice(&[0xff, 0xfe]);
        for bad in [&payload[..payload.len() - 1], &payload[..3], &not_utf8[..], b"{}", b""] {
            let z = zstd::stream::encode_all(bad, 1).unwrap();
            let err = super::unpack_raws(&z).unwrap_err();
            assert!(matches!(err, crate::error::Error::Damaged(_)), "{bad:?}: {err}");
        }
    }

    /// Bodies are stored compressed; a chunk written before that (its bodies as TEXT) reads the
    /// same, and a BLOB that is not a zstd frame of UTF-8 lines is a typed error, never a panic.
    #[test]
    fn bodies_read_back_compressed_or_as_text_and_garbage_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spaces.db");
        let store = Store::open(&path).unwrap();
        let text = "a line with \"quotes\", a tab\t and é ".repeat(40);
        let stored = store.events_append("run-new", vec![EventDraft::new(1, EventKind::Message).text(text.clone())], None).unwrap();
        let c = rusqlite::Connection::open(&path).unwrap();
        let (kind, len): (String, i64) = c
            .query_row("SELECT typeof(bodies), length(bodies) FROM event_chunks WHERE run_id = 'run-new'", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!(kind, "blob");
        assert!((len as usize) < text.len() / 4, "{len} bytes stored for a body of {} bytes of text", text.len());
        assert_eq!(store.events_after("run-new", 0, 10, false).unwrap(), stored);
        // The same bodies as an older daemon stored them: TEXT.
        let mut olds = super::prepare(vec![
            EventDraft::new(1, EventKind::Message).text("old one"),
            EventDraft::new(1, EventKind::Notice).summary("old two"),
        ])
        .unwrap()
        .events;
        let bodies = olds.iter().map(|e| serde_json::to_string(e).unwrap()).collect::<Vec<_>>().join("\n");
        c.execute("INSERT INTO event_chunks (run_id, first_seq, last_seq, bodies) VALUES ('run-old', 1, 2, ?1)", [&bodies]).unwrap();
        let (kind,): (String,) =
            c.query_row("SELECT typeof(bodies) FROM event_chunks WHERE run_id = 'run-old'", [], |r| Ok((r.get(0)?,))).unwrap();
        assert_eq!(kind, "text");
        (olds[0].seq, olds[1].seq) = (1, 2);
        assert_eq!(store.events_after("run-old", 0, 10, false).unwrap(), olds);
        // Not zstd, or zstd of bytes that are not UTF-8: typed errors.
        let not_utf8 = zstd::stream::encode_all(&[0xffu8, 0xfe][..], 1).unwrap();
        for (run, value) in
            [("run-junk", rusqlite::types::Value::Blob(b"not zstd".to_vec())), ("run-latin1", rusqlite::types::Value::Blob(not_utf8))]
        {
            c.execute(
                "INSERT INTO event_chunks (run_id, first_seq, last_seq, bodies) VALUES (?1, 1, 1, ?2)",
                rusqlite::params![run, value],
            )
            .unwrap();
            let err = store.events_after(run, 0, 10, false).unwrap_err();
            assert!(matches!(err, crate::error::Error::Damaged(_)), "{run}: {err}");
        }
    }

    /// A batch weighs its rows' bytes before compression in the writer's queue: a noisy batch of
    /// long lines compresses to less than a small job, and would otherwise go with the quiet
    /// runs' lines in groups of hundreds.
    #[test]
    fn a_batch_weighs_its_uncompressed_rows_in_the_writers_queue() {
        let line = format!("noise {}", "x".repeat(1600));
        let drafts: Vec<EventDraft> =
            (0..31).map(|_| EventDraft { raw: Some(line.clone()), ..EventDraft::new(1, EventKind::Message).text(line.clone()) }).collect();
        let chunk = super::prepare(drafts).unwrap();
        let compressed = chunk.bodies_z.len() + chunk.raws_z.as_ref().map_or(0, Vec::len);
        assert!(compressed <= crate::writer::SMALL_JOB_BYTES, "{compressed} bytes compressed");
        assert!(chunk.row_bytes >= 31 * 2 * 1600, "{} bytes of rows", chunk.row_bytes);
        assert!(chunk.row_bytes > crate::writer::SMALL_JOB_BYTES);
        // A quiet run's line stays small.
        let one = super::prepare(vec![EventDraft { raw: Some("{}".into()), ..EventDraft::new(1, EventKind::Message).text("hi") }]).unwrap();
        assert!(one.row_bytes <= crate::writer::SMALL_JOB_BYTES);
    }

    /// A chunk whose lines disagree with its seq range (or that starts at seq 0) is a typed
    /// error for the reader, never a panic or a wrong page.
    #[test]
    fn a_damaged_chunk_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spaces.db");
        let store = Store::open(&path).unwrap();
        let c = rusqlite::Connection::open(&path).unwrap();
        for (run, first, last) in [("run-short", 1, 3), ("run-zero", 0, 1)] {
            c.execute(
                "INSERT INTO event_chunks (run_id, first_seq, last_seq, bodies) VALUES (?1, ?2, ?3, '{}\n{}')",
                rusqlite::params![run, first, last],
            )
            .unwrap();
            let err = store.events_after(run, 0, 10, false).unwrap_err();
            assert!(matches!(err, crate::error::Error::Damaged(_)), "{run}: {err}");
        }
    }
}
