//! The durable ledger: patch operations (idempotent `apply_patch`, `operation_status`) and
//! approval holds (`approval_create`/`approval_resolve`/`operation_resume`), in one SQLite file.
//!
//! Theory of operation: the ledger only stores records; the caller (the service layer) runs the
//! patch or command. Every state change is one `BEGIN IMMEDIATE` transaction, committed before
//! the caller acts on it, on a WAL database with `synchronous=FULL` and a busy timeout, so a row
//! written by one daemon is visible to the next one opened on the same file.
//!
//! Patches (API.md "Idempotency", seed "Retry and recover deliberately"): the caller computes a
//! [`fingerprint`], then [`Ledger::mint`]s. A new key (or no key) gets a fresh
//! `op-<uuid>` row and a `minted` event *before* anything is written to disk; the caller then
//! [`Ledger::finish`]es it with the status and the full response to replay. A repeated key with
//! the same fingerprint replays that stored response; if there is none (still in flight, or left
//! by a crash) it is reported as unfinished and is never re-applied; a different fingerprint is
//! `OPERATION_KEY_CONFLICT`.
//!
//! Crash recovery: each [`Ledger::open`] mints a fresh `boot_id` and closes every operation still
//! unfinished as `unknown` with a `finished` event whose reason is `"unknown"`. One daemon owns a
//! ledger file at a time; opening a second ledger on a live daemon's file closes its in-flight
//! rows.
//!
//! Approvals (seed "Confirm a held mutation"): pending -> granted | denied (terminal); granted ->
//! resuming (stamped with this `boot_id`) -> consumed (with the terminal result). A resume found in
//! `resuming` under another `boot_id` was interrupted by a crash: it stays so, and every later
//! resume reports it the same way, so the caller recovers a patch from the ledger (see
//! [`Ledger::approval_link_operation`]) or answers `APPROVAL_AMBIGUOUS`, and never re-spawns.

mod approval_record;
mod approvals;
mod fingerprint;
mod operation_record;
mod operations;
mod retention;
mod schema;
#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

use rusqlite::Connection;

use crate::error::Result;

pub use crate::error::OperationRef;
pub use approval_record::{ApprovalRecord, ApprovalState, Decision, HoldableTool, ResumeStart, StoredApproval};
pub use fingerprint::{canonical_json, fingerprint};
pub use operation_record::{EventName, Minted, OperationEvent, OperationKind, OperationRecord, OperationStatus, StoredOperation};
pub use retention::{Pruned, Retention, PRUNE_EVERY};

/// The open ledger: one connection behind a mutex, plus the id of this daemon's boot.
pub struct Ledger {
    conn: Mutex<Connection>,
    boot_id: String,
    retention: Retention,
    /// New records since the last pruning.
    fresh: AtomicU32,
}

impl Ledger {
    /// Open (creating if needed) the ledger at `path`, apply the schema, close every operation
    /// an earlier daemon left unfinished as `unknown` (crash recovery), and mint a fresh
    /// `boot_id`. Errors: [`crate::error::Error::Db`] when the file cannot be opened or written.
    pub fn open(path: &Path) -> Result<Ledger> {
        Self::open_with(path, Retention::default())
    }

    /// [`Ledger::open`] with `retention` instead of the default (see [`Retention`]); the open
    /// prunes what it no longer keeps.
    pub fn open_with(path: &Path, retention: Retention) -> Result<Ledger> {
        let mut conn = crate::sqlite::open(path, "FULL")?;
        schema::apply(&conn)?;
        let closed = operations::close_unfinished(&mut conn)?;
        if closed > 0 {
            tracing::warn!(closed, "ledger: closed operations left unfinished by an earlier daemon as unknown");
        }
        let ledger =
            Ledger { conn: Mutex::new(conn), boot_id: format!("boot-{}", uuid::Uuid::new_v4()), retention, fresh: AtomicU32::new(0) };
        ledger.prune()?;
        Ok(ledger)
    }

    /// What this ledger keeps.
    pub fn retention(&self) -> &Retention {
        &self.retention
    }

    /// Remove the finished operations and terminal holds past the retention now. Errors:
    /// `INTERNAL` (the database).
    pub fn prune(&self) -> Result<Pruned> {
        self.fresh.store(0, Ordering::Relaxed);
        let pruned = retention::prune(&mut self.conn(), &self.retention, now_ms())?;
        if pruned != Pruned::default() {
            tracing::info!(operations = pruned.operations, approvals = pruned.approvals, "ledger: removed records past the retention");
        }
        Ok(pruned)
    }

    /// A record was added: prune after every [`PRUNE_EVERY`]. A failed pruning is logged (the
    /// record itself is stored).
    fn added(&self) {
        if self.fresh.fetch_add(1, Ordering::Relaxed) + 1 >= PRUNE_EVERY {
            if let Err(e) = self.prune() {
                tracing::warn!(error = %e, "ledger: pruning failed");
            }
        }
    }

    /// The id minted for this process's ledger (`boot-<uuid>`); stamps resumes it begins.
    pub fn boot_id(&self) -> &str {
        &self.boot_id
    }

    /// The connection (poisoning is ignored: SQLite keeps its own consistency).
    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// [`crate::sqlite::now_ms`] as SQLite's integer, the type the ledger's columns are bound with.
fn now_ms() -> i64 {
    i64::try_from(crate::sqlite::now_ms()).unwrap_or(i64::MAX)
}

/// A stored timestamp as the wire's u64 ms (never negative on a sane clock).
fn ms(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}
