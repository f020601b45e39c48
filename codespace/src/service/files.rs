//! `read`, `find`, `apply_patch` and `operation_status` (API reference, "CodeSpace execution
//! layer").

use serde_json::{json, Value};
use spaces_sdk::tools::{
    ApplyPatchRequest, ApplyPatchResult, FindRequest, FindResult, HoldableTool, OperationRecord, OperationStatusRequest, ReadRequest,
    ReadResult,
};
use spaces_sdk::{ApiError, Approvals};

use super::{blocking, busy, refuse_read_only, CodeSpace};
use crate::error::{Error, Result};
use crate::fs::{ChangeRecord, CommitStatus};
use crate::ledger::{Minted, OperationRef, OperationStatus, StoredOperation};
use spaces_v4a::Plan;

/// Whether a call may still need an approval hold, or runs because a hold was granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Approval {
    /// An ordinary call: with approvals `confirm`, hold it.
    Check,
    /// `operation_resume` of a granted hold: run now.
    Granted,
}

impl CodeSpace {
    /// `read{workspace_id, path, offset?, limit?}` -> `{path, content, version, truncated,
    /// byte_count, offset?, next_offset?, content_lossy?}` (window <= 1 MiB). Errors:
    /// `WORKSPACE_NOT_FOUND`, `PATH_ESCAPE`, `SYMLINK_REJECTED`, `SPECIAL_FILE_REJECTED`,
    /// `FILE_NOT_FOUND`, `PATH_NOT_DIRECTORY`, `INVALID_ARGUMENT`.
    pub async fn read(&self, req: ReadRequest) -> Result<ReadResult> {
        let root = self.root(&self.workspace(&req.workspace_id)?)?;
        blocking(move || root.read(&req.path, req.offset, req.limit)).await
    }

    /// `find{workspace_id, glob?, offset?, limit?}` -> `{paths, truncated, next_offset?,
    /// incomplete, listing_version}`. Errors: `WORKSPACE_NOT_FOUND`, `INVALID_ARGUMENT` (bad glob).
    pub async fn find(&self, req: FindRequest) -> Result<FindResult> {
        let root = self.root(&self.workspace(&req.workspace_id)?)?;
        blocking(move || root.find(req.glob.as_deref(), req.offset, req.limit)).await
    }

    /// `apply_patch{workspace_id, patch, expected_versions?, operation_key?, check_only?}` ->
    /// `{status, operation_id, replayed, files, changes}`.
    ///
    /// Order: policy (read-only: `UNAUTHORIZED`; approvals `confirm`: `APPROVAL_REQUIRED`
    /// unless a preview or a replay of a known key), busy check (`WORKSPACE_BUSY`), ledger mint
    /// (replay / `OPERATION_KEY_CONFLICT` / an unfinished record answers `unknown`), plan
    /// (`INVALID_PATCH`, `VERSION_CONFLICT`, `ADD_FILE_EXISTS`, `MOVE_DESTINATION_EXISTS`,
    /// path errors), then `checked` for a preview or the atomic commit. A commit that could not
    /// finish answers `FILE_OPERATION_FAILED` naming `failed_rolled_back` or `failed_partial`.
    /// Every error after the mint carries `operation_id`; the outcome is in the ledger.
    pub async fn apply_patch(&self, req: ApplyPatchRequest) -> Result<ApplyPatchResult> {
        self.apply_patch_as(req, Approval::Check).await
    }

    pub(super) async fn apply_patch_as(&self, args: ApplyPatchRequest, approval: Approval) -> Result<ApplyPatchResult> {
        let ws = self.workspace(&args.workspace_id)?;
        if ws.read_only {
            return Err(refuse_read_only(&ws, "apply_patch"));
        }
        let fingerprint = crate::ledger::fingerprint(&ws.workspace_id, &args.patch, &args.expected_versions, args.check_only);
        if approval == Approval::Check && ws.approvals == Approvals::Confirm && !args.check_only {
            let known_key = match &args.operation_key {
                Some(key) => self.ledger_lookup(OperationRef::Key(key.clone())).await?.is_some(),
                None => false,
            };
            if !known_key {
                // The held call is the request without its coordination context.
                let held = ApplyPatchRequest { work_id: None, ..args };
                return Err(self.hold(HoldableTool::ApplyPatch, &ws.workspace_id, to_json(&held)?).await);
            }
        }
        let root = self.root(&ws)?;
        let gate = self.gate(&root);
        let _held = gate.lock().await;
        // A preview writes nothing, so a running command does not stop it.
        if !args.check_only {
            if let Some(process_id) = self.live_in(&root) {
                return Err(busy(&ws.workspace_id, &process_id));
            }
        }
        let this = self.clone();
        let ws_id = ws.workspace_id.clone();
        blocking(move || this.apply_patch_blocking(&ws_id, &root, args, &fingerprint)).await
    }

    fn apply_patch_blocking(
        &self,
        workspace_id: &str,
        root: &crate::fs::Root,
        args: ApplyPatchRequest,
        fingerprint: &str,
    ) -> Result<ApplyPatchResult> {
        let ledger = &self.inner.ledger;
        let operation_id = match ledger.mint(workspace_id, args.operation_key.as_deref(), fingerprint)? {
            Minted::New { operation_id } => operation_id,
            Minted::Replay(stored) => return replay(&stored),
            Minted::Unfinished(StoredOperation { record, .. }) => {
                return Ok(ApplyPatchResult {
                    status: OperationStatus::Unknown,
                    operation_id: record.operation_id,
                    replayed: true,
                    files: record.files,
                    changes: record.changes,
                })
            }
        };
        let plan = match root.plan_patch(&args.patch, &args.expected_versions) {
            Ok(plan) => plan,
            Err(e) => {
                let err = e.in_operation(&operation_id);
                ledger.finish(&operation_id, OperationStatus::Rejected, &[], &[], &stored_error(&err), Some(&err.to_string()))?;
                return Err(err);
            }
        };
        let files = plan.files();
        if args.check_only {
            let result = outcome(OperationStatus::Checked, &operation_id, files, planned_changes(&plan));
            let stored = json!({ "ok": to_json(&result)? });
            ledger.finish(&operation_id, result.status, &result.files, &result.changes, &stored, None)?;
            return Ok(result);
        }
        // Before any write: a crash from here on leaves an `unknown` record naming the files.
        ledger.record_plan(&operation_id, &files, &planned_changes(&plan))?;
        let report = root.commit(&plan);
        let changes = report.changes;
        let status = match report.status {
            CommitStatus::Applied => OperationStatus::Applied,
            CommitStatus::Rejected => OperationStatus::Rejected,
            CommitStatus::FailedRolledBack => OperationStatus::FailedRolledBack,
            CommitStatus::FailedPartial => OperationStatus::FailedPartial,
        };
        if report.status == CommitStatus::Applied {
            let result = outcome(status, &operation_id, files, changes);
            let stored = json!({ "ok": to_json(&result)? });
            ledger.finish(&operation_id, status, &result.files, &result.changes, &stored, None)?;
            return Ok(result);
        }
        let cause = report.error.unwrap_or_else(|| Error::FileOperationFailed {
            path: ".".to_owned(),
            action: "the commit",
            source: std::io::Error::other("it did not finish"),
        });
        let err = match report.status {
            CommitStatus::Rejected => cause,
            _ => Error::CommitFailed { partial: report.status == CommitStatus::FailedPartial, cause: Box::new(cause) },
        }
        .in_operation(&operation_id);
        ledger.finish(&operation_id, status, &files, &changes, &stored_error(&err), Some(&err.to_string()))?;
        Err(err)
    }

    /// `operation_status{operation_id | operation_key}` (exactly one) -> the ledger record.
    /// Errors: `INVALID_ARGUMENT` (none or both given), `OPERATION_NOT_FOUND`.
    pub async fn operation_status(&self, req: OperationStatusRequest) -> Result<OperationRecord> {
        let by = match (req.operation_id, req.operation_key) {
            (Some(id), None) => OperationRef::Id(id),
            (None, Some(key)) => OperationRef::Key(key),
            _ => return Err(Error::invalid("give exactly one of operation_id or operation_key")),
        };
        let this = self.clone();
        blocking(move || this.inner.ledger.operation(by).map(|stored| stored.record)).await
    }

    /// The ledger row `by`, or `None` when unknown.
    pub(super) async fn ledger_lookup(&self, by: OperationRef) -> Result<Option<StoredOperation>> {
        let this = self.clone();
        blocking(move || match this.inner.ledger.operation(by) {
            Ok(record) => Ok(Some(record)),
            Err(Error::OperationNotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        })
        .await
    }
}

/// The stored `{"ok": result}` or `{"error": ApiError}` of `stored` answered again, marked
/// `replayed`. Errors: the stored error ([`Error::Replayed`]), or [`Error::StoredUnreadable`].
pub(super) fn replay(stored: &StoredOperation) -> Result<ApplyPatchResult> {
    let operation_id = &stored.record.operation_id;
    let Some(result) = &stored.result else {
        return Ok(ApplyPatchResult {
            status: OperationStatus::Unknown,
            operation_id: operation_id.clone(),
            replayed: true,
            files: Vec::new(),
            changes: Vec::new(),
        });
    };
    if let Some(ok) = result.get("ok") {
        let mut answer: ApplyPatchResult = serde_json::from_value(ok.clone()).map_err(|e| Error::StoredUnreadable {
            what: format!("the stored result of operation {operation_id}"),
            detail: e.to_string(),
        })?;
        answer.replayed = true;
        return Ok(answer);
    }
    if let Some(err) = result.get("error").and_then(|e| serde_json::from_value::<ApiError>(e.clone()).ok()) {
        return Err(Error::Replayed(err));
    }
    Ok(ApplyPatchResult {
        status: OperationStatus::Unknown,
        operation_id: operation_id.clone(),
        replayed: true,
        files: Vec::new(),
        changes: Vec::new(),
    })
}

fn outcome(status: OperationStatus, operation_id: &str, files: Vec<String>, changes: Vec<ChangeRecord>) -> ApplyPatchResult {
    ApplyPatchResult { status, operation_id: operation_id.to_owned(), replayed: false, files, changes }
}

/// A terminal error as the ledger stores it (`{"error": ApiError}`), so a replay answers it
/// exactly: the one place an operation's error takes its wire form inside this crate.
pub(super) fn stored_error(e: &Error) -> Value {
    json!({ "error": ApiError::from(e) })
}

/// The `changes` of a preview: what the commit would do.
fn planned_changes(plan: &Plan) -> Vec<ChangeRecord> {
    plan.changes.iter().map(crate::fs::change_record).collect()
}

/// `v` as JSON (results stored in the ledger, held arguments). Errors: [`Error::Json`].
pub(super) fn to_json<T: serde::Serialize>(v: &T) -> Result<Value> {
    Ok(serde_json::to_value(v)?)
}
