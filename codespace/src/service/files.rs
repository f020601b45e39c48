//! `read`, `find`, `apply_patch` and `operation_status` (API reference, "CodeSpace execution
//! layer").

use serde_json::{json, Value};
use spaces_sdk::{ApiError, Approvals, ErrorCode};

use super::args::{ApplyPatchArgs, FindArgs, OperationStatusArgs, ReadArgs};
use super::{blocking, busy, refuse_read_only, CodeSpace};
use crate::fs::{ChangeRecord, CommitStatus};
use crate::ledger::{Minted, OperationRef, OperationStatus};
use crate::patch::Plan;

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
    pub async fn read(&self, args: ReadArgs) -> Result<Value, ApiError> {
        let root = self.root(&self.workspace(&args.workspace_id)?)?;
        let result = blocking(move || root.read(&args.path, args.offset, args.limit)).await?;
        to_json(&result)
    }

    /// `find{workspace_id, glob?, offset?, limit?}` -> `{paths, truncated, next_offset?,
    /// incomplete, listing_version}`. Errors: `WORKSPACE_NOT_FOUND`, `INVALID_ARGUMENT` (bad glob).
    pub async fn find(&self, args: FindArgs) -> Result<Value, ApiError> {
        let root = self.root(&self.workspace(&args.workspace_id)?)?;
        let result = blocking(move || root.find(args.glob.as_deref(), args.offset, args.limit)).await?;
        to_json(&result)
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
    pub async fn apply_patch(&self, args: ApplyPatchArgs) -> Result<Value, ApiError> {
        self.apply_patch_as(args, Approval::Check).await
    }

    pub(super) async fn apply_patch_as(&self, args: ApplyPatchArgs, approval: Approval) -> Result<Value, ApiError> {
        let ws = self.workspace(&args.workspace_id)?;
        if ws.read_only {
            return Err(refuse_read_only(&ws, "apply_patch"));
        }
        let fingerprint =
            crate::ledger::fingerprint(&ws.workspace_id, &args.patch, &args.expected_versions, args.check_only);
        if approval == Approval::Check && ws.approvals == Approvals::Confirm && !args.check_only {
            let known_key = match &args.operation_key {
                Some(key) => self.ledger_lookup(OperationRef::Key(key.clone())).await?.is_some(),
                None => false,
            };
            if !known_key {
                return Err(self.hold("apply_patch", &ws.workspace_id, serde_json::to_value(&args).unwrap_or(Value::Null)).await?);
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
        args: ApplyPatchArgs,
        fingerprint: &str,
    ) -> Result<Value, ApiError> {
        let ledger = &self.inner.ledger;
        let operation_id = match ledger.mint(workspace_id, args.operation_key.as_deref(), fingerprint)? {
            Minted::New { operation_id } => operation_id,
            Minted::Replay(record) => return replay(record.result.unwrap_or(Value::Null), &record.operation_id),
            Minted::Unfinished(record) => {
                return Ok(json!({
                    "status": "unknown",
                    "operation_id": record.operation_id,
                    "replayed": true,
                    "files": record.files,
                    "changes": record.changes,
                }))
            }
        };
        let plan = match root.plan_patch(&args.patch, &args.expected_versions) {
            Ok(plan) => plan,
            Err(e) => {
                let err = with_operation(ApiError::new(e.code(), e.to_string()), &operation_id);
                ledger.finish(&operation_id, OperationStatus::Rejected, &[], &json!([]), &json!({ "error": err }), Some(&err.message))?;
                return Err(err);
            }
        };
        let files = plan.files();
        if args.check_only {
            let changes = to_json(&planned_changes(&plan))?;
            let result = outcome("checked", &operation_id, &files, &changes);
            ledger.finish(&operation_id, OperationStatus::Checked, &files, &changes, &json!({ "ok": result }), None)?;
            return Ok(result);
        }
        // Before any write: a crash from here on leaves an `unknown` record naming the files.
        ledger.record_plan(&operation_id, &files, &to_json(&planned_changes(&plan))?)?;
        let report = root.commit(&plan);
        let changes = to_json(&report.changes)?;
        let status = match report.status {
            CommitStatus::Applied => OperationStatus::Applied,
            CommitStatus::Rejected => OperationStatus::Rejected,
            CommitStatus::FailedRolledBack => OperationStatus::FailedRolledBack,
            CommitStatus::FailedPartial => OperationStatus::FailedPartial,
        };
        if report.status == CommitStatus::Applied {
            let result = outcome(status.as_str(), &operation_id, &files, &changes);
            ledger.finish(&operation_id, status, &files, &changes, &json!({ "ok": result }), None)?;
            return Ok(result);
        }
        let cause = report
            .error
            .unwrap_or_else(|| ApiError::new(ErrorCode::FileOperationFailed, "the commit did not finish"));
        let err = if report.status == CommitStatus::Rejected {
            with_operation(cause, &operation_id)
        } else {
            with_operation(
                ApiError::new(
                    ErrorCode::FileOperationFailed,
                    format!(
                        "patch {}: {}; {}",
                        status.as_str(),
                        cause.message,
                        if report.status == CommitStatus::FailedPartial {
                            "some files may be changed: inspect them before a new patch"
                        } else {
                            "every file was restored"
                        }
                    ),
                ),
                &operation_id,
            )
        };
        ledger.finish(&operation_id, status, &files, &changes, &json!({ "error": err }), Some(&err.message))?;
        Err(err)
    }

    /// `operation_status{operation_id | operation_key}` (exactly one) -> the ledger record.
    /// Errors: `INVALID_ARGUMENT` (none or both given), `OPERATION_NOT_FOUND`.
    pub async fn operation_status(&self, args: OperationStatusArgs) -> Result<Value, ApiError> {
        let by = match (args.operation_id, args.operation_key) {
            (Some(id), None) => OperationRef::Id(id),
            (None, Some(key)) => OperationRef::Key(key),
            _ => {
                return Err(ApiError::new(
                    ErrorCode::InvalidArgument,
                    "give exactly one of operation_id or operation_key",
                ))
            }
        };
        let this = self.clone();
        let record = blocking(move || this.inner.ledger.operation(by)).await?;
        to_json(&record)
    }

    /// The ledger record `by`, or `None` when unknown.
    pub(super) async fn ledger_lookup(&self, by: OperationRef) -> Result<Option<crate::ledger::OperationRecord>, ApiError> {
        let this = self.clone();
        blocking(move || match this.inner.ledger.operation(by) {
            Ok(record) => Ok(Some(record)),
            Err(e) if e.code == ErrorCode::OperationNotFound => Ok(None),
            Err(e) => Err(e),
        })
        .await
    }
}

/// A stored `{"ok": result}` or `{"error": ApiError}` answered again, marked `replayed`.
pub(super) fn replay(stored: Value, operation_id: &str) -> Result<Value, ApiError> {
    if let Some(mut ok) = stored.get("ok").cloned() {
        if let Some(obj) = ok.as_object_mut() {
            obj.insert("replayed".to_owned(), Value::Bool(true));
        }
        return Ok(ok);
    }
    if let Some(err) = stored.get("error").and_then(|e| serde_json::from_value::<ApiError>(e.clone()).ok()) {
        return Err(err);
    }
    Ok(json!({ "status": "unknown", "operation_id": operation_id, "replayed": true, "files": [], "changes": [] }))
}

fn outcome(status: &str, operation_id: &str, files: &[String], changes: &Value) -> Value {
    json!({ "status": status, "operation_id": operation_id, "replayed": false, "files": files, "changes": changes })
}

fn with_operation(mut e: ApiError, operation_id: &str) -> ApiError {
    e.operation_id = Some(operation_id.to_owned());
    e
}

/// The `changes` of a preview: what the commit would do.
fn planned_changes(plan: &Plan) -> Vec<ChangeRecord> {
    plan.changes.iter().map(ChangeRecord::from).collect()
}

pub(super) fn to_json<T: serde::Serialize>(v: &T) -> Result<Value, ApiError> {
    serde_json::to_value(v).map_err(|e| ApiError::new(ErrorCode::Internal, format!("cannot encode the result: {e}")))
}
