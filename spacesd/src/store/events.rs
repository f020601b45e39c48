//! The append-only event log of each run.
//!
//! `seq` starts at 1 per run and never repeats: a batch is appended in one transaction that reads
//! the run's current maximum and numbers the batch after it. The event body is stored as JSON
//! without `raw`; `raw` (the harness's original line) has its own column and is only read when a
//! caller asks for it.

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
        let run_id = run_id.to_owned();
        self.write(move |conn| append_in(conn, &run_id, drafts, pos))
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
        self.writer.call_async(move |conn| append_in(conn, &run_id, drafts, pos), after).await
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
            "SELECT body, raw FROM events WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![run_id, cursor as i64, max as i64], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (body, raw) = row?;
            let mut event: Event = serde_json::from_str(&body)?;
            if with_raw {
                event.raw = raw;
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

/// Inside the writer's transaction: stores `pos` and numbers and inserts `drafts` after the
/// run's last seq.
fn append_in(
    conn: &rusqlite::Connection,
    run_id: &str,
    drafts: Vec<EventDraft>,
    pos: Option<JournalPos>,
) -> Result<Vec<Event>> {
    if let Some(pos) = pos {
        conn.prepare_cached("INSERT OR REPLACE INTO journals (run_id, gen, offset) VALUES (?1, ?2, ?3)")?
            .execute(params![run_id, pos.gen as i64, pos.offset as i64])?;
    }
    let last: i64 = conn
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?1")?
        .query_row(params![run_id], |r| r.get(0))?;
    let ts_ms = now_ms();
    let mut out = Vec::with_capacity(drafts.len());
    let mut stmt = conn.prepare_cached("INSERT INTO events (run_id, seq, body, raw) VALUES (?1, ?2, ?3, ?4)")?;
    for (i, d) in drafts.into_iter().enumerate() {
        let mut event = Event {
            seq: last as u64 + 1 + i as u64,
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
        stmt.execute(params![run_id, event.seq as i64, body, d.raw])?;
        event.raw = d.raw;
        out.push(event);
    }
    Ok(out)
}
