//! # steer: the coordination (steering) store
//!
//! Theory of operation (API reference, "Coordination"; the seed's "Handle user instructions and
//! finish"): an agent opens a *work* (`work_open`) and passes its `work_id` on its tools. The user
//! writes *intents* (instructions) for that work through HTTP `/inbox`: a draft is created, edited
//! with a revision check, then queued. At safe checkpoints the agent asks `steer_status`, claims
//! the next claimable intent with `steer_claim_next`, handles it and ends it with `steer_complete`
//! (`done` or `blocked`). `work_finish` closes the work only when nothing is left for it; otherwise
//! it answers `closed: false, reason: "pending_user_input"` and the agent drains the queue first.
//!
//! Delivery rules (what `steer_claim_next` may hand out, first match in queue order):
//! - only `queued` intents are ever delivered; drafts never;
//! - `next_checkpoint`: claimable at any `steer_claim_next`;
//! - `after_current_work`: claimable once no `next_checkpoint` intent of the work is queued or
//!   claimed, or once the agent has called `work_finish` on it;
//! - `next_work`: never claimable in its own work, and `work_finish` does not wait for it. When its
//!   work is closed or stopped it stays queued there; the next `work_open` in the same workspace
//!   adopts it (as `next_checkpoint`, at the end of the new queue, same revision).
//!
//! Editing: only drafts can be edited (`INTENT_NOT_EDITABLE` otherwise; to change a queued
//! instruction, cancel it and queue a new one, so the agent never claims text that changes under
//! it). `revision` counts body edits; edit and queue take the revision the caller saw
//! (`INTENT_REVISION_CONFLICT` when stale). Cancel works on drafts and queued intents (also of a
//! closed work, to tidy up), never on claimed ones (`INTENT_ALREADY_CLAIMED`). Reorder takes a
//! permutation of the work's open (draft and queued) intents.
//!
//! Closed and stopped works: agent calls that change state (`steer_claim_next`,
//! `steer_complete`, `work_finish` on a stopped work) and user calls that add or change intents
//! (create, edit, queue, reorder) fail with `WORK_CLOSED`. `steer_status`, `coordination` and the
//! listings keep answering (they report the state). `work_finish` on a closed work and
//! `work_stop` on a closed or stopped work return the current record (retry-safe). Intents left
//! queued or claimed on a stopped work stay as they are (not delivered) and remain visible.
//!
//! `queue_revision` (per work) grows on every change to its queued set: queue, cancel of a queued
//! intent, reorder, claim, complete, and carrying `next_work` intents in or out.
//!
//! Storage: SQLite (WAL, busy timeout) in tables prefixed `steer_`, in a file the caller names
//! and may share with other components. Each call is one `BEGIN IMMEDIATE` transaction, so two
//! processes (or two [`Steering`] values) on one file never claim one intent twice. Times are
//! Unix ms. Ids: `work-<uuid v4>`, `intent-<uuid v4>`.

mod agent;
mod inbox;
mod queue;
mod rows;
mod schema;
mod types;

#[cfg(test)]
mod tests_agent;
#[cfg(test)]
mod tests_inbox;

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use rusqlite::{Connection, Transaction, TransactionBehavior};

use crate::error::Result;

pub use schema::BUSY_TIMEOUT_MS;
pub use types::{
    ClaimedItem, Coordination, Delivery, FinishReason, Intent, IntentState, Outcome, SteerClaimNextResult, SteerStatus, Work,
    WorkFinishResult, WorkState,
};

/// The steering store: one SQLite connection behind a mutex. Cheap to share behind an `Arc`;
/// several `Steering` values (or processes) may open the same file.
pub struct Steering {
    conn: Mutex<Connection>,
}

impl Steering {
    /// Open (creating if needed) the store in the SQLite file at `path`, creating the `steer_`
    /// tables if missing. Errors: `INTERNAL` when the file cannot be opened or migrated.
    pub fn open(path: &Path) -> Result<Steering> {
        Ok(Steering { conn: Mutex::new(schema::open_connection(path)?) })
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A poisoned lock only means another call panicked; SQLite kept its own consistency.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Run `f` in one `BEGIN IMMEDIATE` transaction: committed on `Ok`, rolled back on `Err`.
    fn write<T>(&self, f: impl FnOnce(&Transaction<'_>, u64) -> Result<T>) -> Result<T> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let out = f(&tx, now_ms())?;
        tx.commit()?;
        Ok(out)
    }

    /// Run `f` in one read transaction (a consistent snapshot across its queries).
    fn read<T>(&self, f: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
        let out = f(&tx)?;
        tx.commit()?;
        Ok(out)
    }
}

use crate::sqlite::now_ms;

/// A fresh id `<prefix>-<uuid v4>`.
fn new_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4())
}
