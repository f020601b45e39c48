//! The wire shapes a commit reports: `apply_patch`'s `changes[]` entries and the commit
//! outcome (API.md, "CodeSpace execution layer", `apply_patch`). No logic beyond conversion.

use serde::{Deserialize, Serialize};
use spaces_sdk::tools::ChangeKind as WireKind;

/// One entry of `apply_patch`'s `changes[]` (API.md, `apply_patch`), defined in the SDK.
pub use spaces_sdk::tools::ChangeRecord;

use crate::error::Error;
use spaces_v4a::{Change, ChangeKind};

/// One planned change as its wire record (`changes[]` of `apply_patch`).
pub fn change_record(change: &Change) -> ChangeRecord {
    ChangeRecord {
        path: change.path.clone(),
        kind: match change.kind {
            ChangeKind::Add => WireKind::Add,
            ChangeKind::Update => WireKind::Update,
            ChangeKind::Delete => WireKind::Delete,
            ChangeKind::Move { .. } => WireKind::Move,
        },
        to: match &change.kind {
            ChangeKind::Move { to } => Some(to.clone()),
            _ => None,
        },
        before_version: change.before_version(),
        after_version: change.after_version(),
    }
}

/// How a commit ended (the `apply_patch` statuses a commit can produce).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CommitStatus {
    /// Every after-version was verified on disk.
    Applied,
    /// The re-check refused the plan; nothing was written.
    Rejected,
    /// A write failed and every change was undone (verified).
    FailedRolledBack,
    /// Some changes may be on disk: a write and its rollback failed, or verification failed.
    FailedPartial,
}

/// The outcome of [`crate::fs::Root::commit`]: `changes` are the plan's records in patch order; `error`
/// says why when the status is not `applied`.
#[derive(Debug)]
pub struct CommitReport {
    /// How it ended.
    pub status: CommitStatus,
    /// One record per planned change, in patch order (whatever the status).
    pub changes: Vec<ChangeRecord>,
    /// Why it did not apply: the re-check's refusal (the engine's `VersionConflict` with the
    /// current version, or a confinement refusal) or the failed step
    /// ([`Error::FileOperationFailed`], [`Error::RollbackFailed`], ...).
    pub error: Option<Error>,
}
