//! Reading and writing single rows of the steering tables. Every function takes a connection
//! (or a transaction, which derefs to one) and leaves transaction control to the caller.

use rusqlite::{params, Connection, OptionalExtension, Row};
use spaces_sdk::ApiError;

use super::types::{Intent, IntentState, Work, WorkState};
use crate::error::{Error, Result};

/// A work row with the bookkeeping the wire record leaves out.
#[derive(Debug, Clone)]
pub struct WorkRow {
    pub work: Work,
    pub queue_revision: u64,
    /// Set once the agent called `work_finish` and was told `pending_user_input`.
    pub finish_requested: bool,
}

const WORK_COLS: &str = "work_id, workspace_id, title, state, created_at, queue_revision, finish_requested";
pub const INTENT_COLS: &str = "intent_id, work_id, revision, kind, delivery, state, content, created_at, updated_at";

fn parse<T: std::str::FromStr<Err = ApiError>>(idx: usize, s: String) -> rusqlite::Result<T> {
    s.parse().map_err(|e: ApiError| rusqlite::Error::FromSqlConversionFailure(idx, rusqlite::types::Type::Text, Box::new(e)))
}

fn work_row(r: &Row<'_>) -> rusqlite::Result<WorkRow> {
    Ok(WorkRow {
        work: Work {
            work_id: r.get(0)?,
            workspace_id: r.get(1)?,
            title: r.get(2)?,
            state: parse(3, r.get(3)?)?,
            created_at: r.get::<_, i64>(4)? as u64,
        },
        queue_revision: r.get::<_, i64>(5)? as u64,
        finish_requested: r.get::<_, i64>(6)? != 0,
    })
}

/// Map a row selected with [`INTENT_COLS`].
pub fn intent_row(r: &Row<'_>) -> rusqlite::Result<Intent> {
    Ok(Intent {
        intent_id: r.get(0)?,
        work_id: r.get(1)?,
        revision: r.get::<_, i64>(2)? as u64,
        kind: r.get(3)?,
        delivery: parse(4, r.get(4)?)?,
        state: parse(5, r.get(5)?)?,
        content: r.get(6)?,
        created_at: r.get::<_, i64>(7)? as u64,
        updated_at: r.get::<_, i64>(8)? as u64,
    })
}

/// The work `work_id`. Errors: `WORK_NOT_FOUND`.
pub fn load_work(c: &Connection, work_id: &str) -> Result<WorkRow> {
    let sql = format!("SELECT {WORK_COLS} FROM steer_works WHERE work_id = ?1");
    c.query_row(&sql, [work_id], work_row).optional()?.ok_or_else(|| Error::WorkNotFound { work_id: work_id.to_owned() })
}

/// The `WORK_CLOSED` refusal for a work that is no longer active.
pub fn work_closed(work: &Work) -> Error {
    Error::WorkClosed { work_id: work.work_id.clone(), state: work.state }
}

/// The work `work_id`, which must be active. Errors: `WORK_NOT_FOUND`, `WORK_CLOSED`.
pub fn active_work(c: &Connection, work_id: &str) -> Result<WorkRow> {
    let row = load_work(c, work_id)?;
    if row.work.state != WorkState::Active {
        return Err(work_closed(&row.work));
    }
    Ok(row)
}

/// Works in creation order, optionally of one workspace.
pub fn list_works(c: &Connection, workspace_id: Option<&str>) -> Result<Vec<Work>> {
    let sql = format!("SELECT {WORK_COLS} FROM steer_works WHERE ?1 IS NULL OR workspace_id = ?1 ORDER BY seq");
    let mut stmt = c.prepare(&sql)?;
    let rows = stmt.query_map([workspace_id], work_row)?;
    Ok(rows.map(|r| r.map(|w| w.work)).collect::<rusqlite::Result<_>>()?)
}

/// The intent `intent_id`. Errors: `INTENT_NOT_FOUND`.
pub fn load_intent(c: &Connection, intent_id: &str) -> Result<Intent> {
    let sql = format!("SELECT {INTENT_COLS} FROM steer_intents WHERE intent_id = ?1");
    c.query_row(&sql, [intent_id], intent_row).optional()?.ok_or_else(|| Error::IntentNotFound { intent_id: intent_id.to_owned() })
}

/// The intents of `work_id` in queue order (`position`, then creation), optionally only those in
/// `states`.
pub fn list_intents(c: &Connection, work_id: &str, states: &[IntentState]) -> Result<Vec<Intent>> {
    let sql = format!("SELECT {INTENT_COLS} FROM steer_intents WHERE work_id = ?1 ORDER BY position, seq");
    let mut stmt = c.prepare(&sql)?;
    let rows = stmt.query_map([work_id], intent_row)?;
    let all: Vec<Intent> = rows.collect::<rusqlite::Result<_>>()?;
    Ok(all.into_iter().filter(|i| states.is_empty() || states.contains(&i.state)).collect())
}

/// The position after every intent of `work_id` (0 for an empty work).
pub fn next_position(c: &Connection, work_id: &str) -> Result<i64> {
    Ok(c.query_row("SELECT COALESCE(MAX(position) + 1, 0) FROM steer_intents WHERE work_id = ?1", [work_id], |r| r.get(0))?)
}

/// Set an intent's state and `updated_at`.
pub fn set_intent_state(c: &Connection, intent_id: &str, state: IntentState, now: u64) -> Result<()> {
    c.execute("UPDATE steer_intents SET state = ?2, updated_at = ?3 WHERE intent_id = ?1", params![intent_id, state.as_str(), now as i64])?;
    Ok(())
}

/// Record a change to the queued set of `work_id`: `queue_revision += 1`.
pub fn bump_queue(c: &Connection, work_id: &str, now: u64) -> Result<()> {
    c.execute(
        "UPDATE steer_works SET queue_revision = queue_revision + 1, updated_at = ?2
         WHERE work_id = ?1",
        params![work_id, now as i64],
    )?;
    Ok(())
}

/// Set a work's state (and `finish_requested`).
pub fn set_work_state(c: &Connection, work_id: &str, state: WorkState, finish_requested: bool, now: u64) -> Result<()> {
    c.execute(
        "UPDATE steer_works SET state = ?2, finish_requested = ?3, updated_at = ?4
         WHERE work_id = ?1",
        params![work_id, state.as_str(), finish_requested as i64, now as i64],
    )?;
    Ok(())
}
