//! The append-only event log of each run.
//!
//! `seq` starts at 1 per run and never repeats: a batch is appended in one transaction that reads
//! the run's current maximum and numbers the batch after it.
//!
//! Lean rows: `events` is a plain rowid table (a `WITHOUT ROWID` table pushes rows over about
//! 1 KB into overflow pages). The event is stored as JSON in `body`, without `raw`; `raw` (the
//! harness's original line, which repeats the event's text) is stored once, zstd-compressed, in
//! `raw_z`, and only read back when a caller asks for it. Both are prepared by the caller, off
//! the writer thread: the writer only numbers and inserts. `seq` is the column's (a body written
//! before the row was numbered says `0`).

use spaces_codespace::process::bulk;
use rusqlite::params;
use spaces_harnesses::EventDraft;
use spaces_sdk::Event;

use super::{now_ms, JournalPos, Store};
use crate::error::Result;

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
        let rows = prepare(drafts)?;
        self.write(move |conn| {
            first(conn)?;
            append_in(conn, &run_id, rows, pos)
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
        // A noisy run's batch is serialized and compressed below the daemon's priority.
        let rows = if drafts.len() >= bulk::BULK_MIN_ITEMS { bulk::run(|| prepare(drafts)) } else { prepare(drafts) }?;
        let bytes = rows.iter().map(|r| r.body.len() + r.raw_z.as_ref().map_or(0, Vec::len)).sum();
        self.writer.call_async(bytes, move |conn| append_in(conn, &run_id, rows, pos), after).await
    }

    /// The stored journal position of `run_id`, if its agent ever ran under a shim.
    pub fn journal_pos(&self, run_id: &str) -> Result<Option<JournalPos>> {
        use rusqlite::OptionalExtension;
        Ok(self
            .reader()?
            .prepare_cached("SELECT gen, offset FROM journals WHERE run_id = ?1")?
            .query_row(params![run_id], |r| {
                Ok(JournalPos { gen: r.get::<_, i64>(0)? as u64, offset: r.get::<_, i64>(1)? as u64 })
            })
            .optional()?)
    }

    /// Up to `max` events of `run_id` with `seq > cursor`, in order; `raw` filled when `with_raw`.
    pub fn events_after(&self, run_id: &str, cursor: u64, max: u32, with_raw: bool) -> Result<Vec<Event>> {
        let conn = self.reader()?;
        let mut stmt = conn.prepare_cached(
            "SELECT seq, body, CASE WHEN ?4 THEN raw_z END FROM events WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![run_id, cursor as i64, max as i64, with_raw], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, Option<Vec<u8>>>(2)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, body, raw_z) = row?;
            let mut event: Event = serde_json::from_str(&body)?;
            event.seq = seq as u64;
            if let Some(z) = raw_z {
                event.raw = Some(unpack(&z)?);
            }
            out.push(event);
        }
        Ok(out)
    }

    /// The seq of the last event of `run_id` (0 when none).
    pub fn events_last_seq(&self, run_id: &str) -> Result<u64> {
        let last: i64 = self
            .reader()?
            .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?1")?
            .query_row(params![run_id], |r| r.get(0))?;
        Ok(last as u64)
    }
}

/// An event ready for the writer: everything but its seq.
pub(crate) struct Row {
    event: Event,
    body: String,
    raw_z: Option<Vec<u8>>,
}

/// zstd level for `raw`: the fastest; the lines are short and the writer waits on nothing.
const RAW_LEVEL: i32 = 1;

/// The rows of `drafts`: body JSON (seq left 0, set when read) and `raw` compressed.
fn prepare(drafts: Vec<EventDraft>) -> Result<Vec<Row>> {
    let ts_ms = now_ms();
    drafts
        .into_iter()
        .map(|d| {
            let mut event = Event {
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
                raw: None,
            };
            let body = serde_json::to_string(&event)?;
            let raw_z = d.raw.as_deref().map(pack).transpose()?;
            event.raw = d.raw;
            Ok(Row { event, body, raw_z })
        })
        .collect()
}

thread_local! {
    /// This thread's zstd context for `raw`, made once: a context costs hundreds of KiB to set
    /// up, more than compressing one line (it was a third of the daemon's CPU under load).
    static PACKER: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> = const { std::cell::RefCell::new(None) };
}

fn pack(raw: &str) -> Result<Vec<u8>> {
    PACKER.with(|packer| {
        let mut packer = packer.borrow_mut();
        let packer = match packer.as_mut() {
            Some(p) => p,
            None => packer.insert(zstd::bulk::Compressor::new(RAW_LEVEL)?),
        };
        Ok(packer.compress(raw.as_bytes())?)
    })
}

fn unpack(z: &[u8]) -> Result<String> {
    let bytes = zstd::stream::decode_all(z)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Inside the writer's transaction: stores `pos` and numbers and inserts `rows` after the
/// run's last seq.
fn append_in(conn: &rusqlite::Connection, run_id: &str, rows: Vec<Row>, pos: Option<JournalPos>) -> Result<Vec<Event>> {
    if let Some(pos) = pos {
        conn.prepare_cached("INSERT OR REPLACE INTO journals (run_id, gen, offset) VALUES (?1, ?2, ?3)")?
            .execute(params![run_id, pos.gen as i64, pos.offset as i64])?;
    }
    let last: i64 = conn
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?1")?
        .query_row(params![run_id], |r| r.get(0))?;
    let mut out = Vec::with_capacity(rows.len());
    let mut stmt = conn.prepare_cached("INSERT INTO events (run_id, seq, body, raw_z) VALUES (?1, ?2, ?3, ?4)")?;
    for (i, row) in rows.into_iter().enumerate() {
        let mut event = row.event;
        event.seq = last as u64 + 1 + i as u64;
        stmt.execute(params![run_id, event.seq as i64, row.body, row.raw_z])?;
        out.push(event);
    }
    Ok(out)
}

/// Takes a database whose `events` table has the old shape (`WITHOUT ROWID`, `raw` as text) to
/// lean rows (a rowid table, `raw_z` compressed), in one transaction: a state dir made by an
/// older `spacesd` keeps every event, seq and raw line.
pub(crate) fn migrate_to_lean_rows(conn: &rusqlite::Connection) -> Result<()> {
    let old: bool = conn.prepare("SELECT 1 FROM pragma_table_info('events') WHERE name = 'raw'")?.exists([])?;
    if !old {
        return Ok(());
    }
    conn.execute_batch(
        "BEGIN IMMEDIATE;
         ALTER TABLE events RENAME TO events_old;
         CREATE TABLE events (
             run_id  TEXT NOT NULL,
             seq     INTEGER NOT NULL,
             body    TEXT NOT NULL,
             raw_z   BLOB,
             PRIMARY KEY (run_id, seq)
         );",
    )?;
    let copied = (|| -> Result<u64> {
        let mut read = conn.prepare("SELECT run_id, seq, body, raw FROM events_old ORDER BY run_id, seq")?;
        let mut write = conn.prepare("INSERT INTO events (run_id, seq, body, raw_z) VALUES (?1, ?2, ?3, ?4)")?;
        let mut rows = read.query([])?;
        let mut n = 0;
        while let Some(r) = rows.next()? {
            let raw: Option<String> = r.get(3)?;
            let raw_z = raw.as_deref().map(pack).transpose()?;
            write.execute(params![r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get::<_, String>(2)?, raw_z])?;
            n += 1;
        }
        Ok(n)
    })();
    match copied {
        Ok(n) => {
            conn.execute_batch("DROP TABLE events_old; COMMIT;")?;
            tracing::info!("state database: {n} events moved to lean rows");
            Ok(())
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use spaces_harnesses::EventDraft;
    use spaces_sdk::EventKind;

    use super::super::Store;

    /// The `events` table as every `spacesd` before lean rows made it.
    const OLD_EVENTS_DDL: &str = "CREATE TABLE events (
        run_id  TEXT NOT NULL,
        seq     INTEGER NOT NULL,
        body    TEXT NOT NULL,
        raw     TEXT,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;";

    #[test]
    fn a_state_dir_from_before_lean_rows_keeps_its_events_and_raw_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spaces.db");
        {
            let c = rusqlite::Connection::open(&path).unwrap();
            c.execute_batch("PRAGMA journal_mode=WAL;").unwrap();
            c.execute_batch(OLD_EVENTS_DDL).unwrap();
            // Bodies as the old code wrote them: the event's JSON, its seq inside, `raw` left out.
            let old_body = |seq: u64, d: EventDraft| {
                let mut e = super::prepare(vec![d]).unwrap().remove(0).event;
                e.seq = seq;
                e.raw = None;
                serde_json::to_string(&e).unwrap()
            };
            let bodies = [
                (1, old_body(1, EventDraft::new(1, EventKind::Message).text("hello")), Some(r#"{"type":"assistant","text":"hello"}"#)),
                (2, old_body(2, EventDraft::new(1, EventKind::Notice).summary("no raw")), None),
            ];
            for (seq, body, raw) in bodies {
                c.execute("INSERT INTO events (run_id, seq, body, raw) VALUES ('run-old', ?1, ?2, ?3)", rusqlite::params![seq, body, raw]).unwrap();
            }
        }
        let store = Store::open(&path).unwrap();
        let events = store.events_after("run-old", 0, 10, true).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!((events[0].seq, events[0].kind, events[0].text.as_deref()), (1, EventKind::Message, Some("hello")));
        assert_eq!(events[0].raw.as_deref(), Some(r#"{"type":"assistant","text":"hello"}"#));
        assert_eq!((events[1].seq, events[1].raw.as_deref()), (2, None));
        assert!(store.events_after("run-old", 0, 10, false).unwrap().iter().all(|e| e.raw.is_none()));
        // New events follow the old ones, and come back with their raw lines.
        let draft = EventDraft { raw: Some("the raw line".into()), ..EventDraft::new(2, EventKind::Message).text("new") };
        let stored = store.events_append("run-old", vec![draft], None).unwrap();
        assert_eq!(stored[0].seq, 3);
        let read = store.events_after("run-old", 2, 10, true).unwrap();
        assert_eq!(read, stored);
        // Opening again finds lean rows and leaves them be.
        drop(store);
        let store = Store::open(&path).unwrap();
        assert_eq!(store.events_after("run-old", 0, 10, true).unwrap().len(), 3);
    }
}
