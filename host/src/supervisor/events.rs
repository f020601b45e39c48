//! `agent_events` pages: the long-poll on the event log, a cursor past the end refused, and
//! `caught_up`/`status` as they are after the wait. Defaults and limits are the request type's.

use std::time::Duration;

use spaces_sdk::{ApiError, ErrorCode, EventsPage, Status};

use super::shared::Inner;
use crate::error::Result;

/// At most `max` events of `run_id` after `cursor`; long-polls up to `wait` when caught up.
/// Errors: `INVALID_ARGUMENT` (field `cursor`) for a cursor past the last event.
pub(super) async fn page(inner: &Inner, run_id: &str, cursor: u64, max: u32, wait: Duration, raw: bool) -> Result<EventsPage> {
    // A cursor past the last event names events that never existed: waiting on it would end
    // in a false `caught_up: true` (case C3). Refuse at once and say where the log ends.
    let mut last = inner.log.last_seq(run_id)?;
    if cursor > last {
        // The published seq can trail a commit by a moment: ask the database before refusing.
        last = inner.log.stored_last_seq(run_id)?;
    }
    if cursor > last {
        let mut e = ApiError::new(
            ErrorCode::InvalidArgument,
            format!(
                "cursor {cursor} is past the last event of run {run_id} (the last cursor is {last}); \
                 continue from cursor {last}, or 0 to read from the start"
            ),
        );
        e.field = Some("cursor".to_owned());
        return Err(e.into());
    }
    let events = inner.log.read(run_id, cursor, max, wait, raw).await?;
    let new_cursor = events.last().map(|e| e.seq).unwrap_or(cursor);
    // A short page already proves nothing later existed when it was read.
    let caught_up = events.len() < max as usize || new_cursor >= inner.log.last_seq(run_id)?;
    // Re-read the status: it may have changed while the long-poll waited.
    let status = inner.store.run_get(run_id)?.map(|r| r.status).unwrap_or(Status::Unknown);
    Ok(EventsPage { caught_up, cursor: new_cursor, events, status })
}
