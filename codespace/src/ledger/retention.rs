//! What the ledger keeps, and for how long ([`Retention`]).
//!
//! Finished operations (with their events) and terminal holds (`denied`, `consumed`) are
//! removed once older than [`Retention::keep_for`] (7 days), and beyond the newest
//! [`Retention::keep_max`] (10,000) of each kind per workspace. Unfinished operations and
//! pending, granted or resuming holds are never removed: they still decide what a retry does.
//! Pending holds are capped instead: a workspace with [`Retention::pending_approvals_max`]
//! (1,000) of them gets `RESOURCE_QUEUE_FULL` for one more, and so does a hold whose request
//! would take the workspace's pending requests past [`Retention::pending_approvals_max_bytes`]
//! (128 MiB of stored arguments): a count alone would let 1,000 holds of 64 MiB patches each
//! fill the disk.
//!
//! What removal means for a caller: an `operation_status` or `approval_id` past the retention
//! answers `OPERATION_NOT_FOUND` / `APPROVAL_NOT_FOUND`, and an `operation_key` whose operation
//! was removed is a new key (the patch runs again, against the files' current versions, which
//! its `expected_version` guards).
//!
//! Pruning runs when the ledger opens and after every [`PRUNE_EVERY`] new records, in one
//! transaction each.

use std::time::Duration;

use rusqlite::{params, Connection, TransactionBehavior};

use crate::error::Result;

/// New records (operations and holds) between two prunings.
pub const PRUNE_EVERY: u32 = 256;

/// What the ledger keeps (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Finished operations and terminal holds older than this are removed.
    pub keep_for: Duration,
    /// At most this many finished operations, and this many terminal holds, per workspace
    /// (the newest are kept).
    pub keep_max: usize,
    /// Most pending holds per workspace.
    pub pending_approvals_max: usize,
    /// Most bytes of held requests (their stored arguments) across a workspace's pending holds.
    pub pending_approvals_max_bytes: u64,
}

/// Default [`Retention::pending_approvals_max_bytes`]: 128 MiB, two of the largest requests
/// the daemon reads.
const PENDING_APPROVALS_MAX_BYTES: u64 = 128 * 1024 * 1024;

impl Default for Retention {
    fn default() -> Self {
        Retention {
            keep_for: Duration::from_secs(7 * 24 * 3600),
            keep_max: 10_000,
            pending_approvals_max: 1_000,
            pending_approvals_max_bytes: PENDING_APPROVALS_MAX_BYTES,
        }
    }
}

/// What one pruning removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    pub operations: usize,
    pub approvals: usize,
}

/// Finished operations to remove: too old, or past the newest `?2` of their workspace. Records
/// of the same millisecond are told apart by insertion order (`rowid`), never by their random
/// ids: "the newest" is the last written.
const DOOMED_OPERATIONS: &str = "SELECT operation_id FROM (
        SELECT operation_id, finished_at,
               ROW_NUMBER() OVER (PARTITION BY workspace_id ORDER BY finished_at DESC, created_at DESC, rowid DESC) AS n
        FROM operations WHERE finished_at IS NOT NULL)
    WHERE finished_at < ?1 OR n > ?2";

/// Terminal holds to remove, likewise.
const DOOMED_APPROVALS: &str = "SELECT approval_id FROM (
        SELECT approval_id, updated_at,
               ROW_NUMBER() OVER (PARTITION BY workspace_id ORDER BY updated_at DESC, created_at DESC, rowid DESC) AS n
        FROM approvals WHERE state IN ('denied', 'consumed'))
    WHERE updated_at < ?1 OR n > ?2";

/// Remove what `retention` no longer keeps, as of `now` (ms since the epoch).
pub(super) fn prune(conn: &mut Connection, retention: &Retention, now: i64) -> Result<Pruned> {
    let cutoff = now.saturating_sub(i64::try_from(retention.keep_for.as_millis()).unwrap_or(i64::MAX));
    let keep = i64::try_from(retention.keep_max).unwrap_or(i64::MAX);
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute(&format!("DELETE FROM operation_events WHERE operation_id IN ({DOOMED_OPERATIONS})"), params![cutoff, keep])?;
    let operations = tx.execute(&format!("DELETE FROM operations WHERE operation_id IN ({DOOMED_OPERATIONS})"), params![cutoff, keep])?;
    let approvals = tx.execute(&format!("DELETE FROM approvals WHERE approval_id IN ({DOOMED_APPROVALS})"), params![cutoff, keep])?;
    tx.commit()?;
    Ok(Pruned { operations, approvals })
}
