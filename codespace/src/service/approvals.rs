//! Approval holds: `approval_create`, `approval_resolve`, `operation_resume`, and the hold an
//! ordinary `apply_patch`/`exec_command` gets in a workspace with approvals `confirm` (API
//! reference, "Approvals"; seed "Confirm a held mutation").
//!
//! A hold is a workflow pause, not a grant: resuming re-checks the workspace policy (a Space
//! made read-only meanwhile refuses) and runs the original call once. `consumed` is stored only
//! with a terminal result, and repeating a resume returns it. A resume interrupted by a daemon
//! crash recovers a patch from the operations ledger (the resumed patch always carries an
//! operation key, `approval:<approval_id>` unless it had one); for a command the outcome is
//! unknowable, so it answers `APPROVAL_AMBIGUOUS` and never re-spawns.

use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use spaces_sdk::tools::{
    ApplyPatchRequest, ApprovalCreateRequest, ApprovalRecord, ApprovalResolveRequest, ApprovalResolveResult, ExecCommandRequest,
    HoldableTool, OperationResumeRequest, OperationResumeResult,
};
use spaces_sdk::{decode, ApiError};

use super::files::{replay, stored_error, to_json, Approval};
use super::{blocking, CodeSpace};
use crate::error::{Error, Result};
use crate::ledger::{ApprovalState, OperationRef, ResumeStart, StoredApproval};

impl CodeSpace {
    /// Opens (or reuses, for a retry of the same call) a hold and returns the
    /// `APPROVAL_REQUIRED` error carrying its `approval_id` (or why the hold could not be opened).
    pub(super) async fn hold(&self, tool: HoldableTool, workspace_id: &str, arguments: Value) -> Error {
        match self.open_hold(tool, workspace_id, arguments).await {
            Ok(record) => Error::ApprovalRequired { workspace_id: workspace_id.to_owned(), tool, approval_id: record.approval_id },
            Err(e) => e,
        }
    }

    async fn open_hold(&self, tool: HoldableTool, workspace_id: &str, arguments: Value) -> Result<ApprovalRecord> {
        let this = self.clone();
        let ws = workspace_id.to_owned();
        blocking(move || this.inner.ledger.approval_hold(&ws, tool, &arguments)).await
    }

    /// `approval_create{tool, arguments}` -> the pending hold `{approval_id, state, tool,
    /// workspace_id, ...}`. Works whatever the approval setting. Errors: `INVALID_ARGUMENT`
    /// (arguments that tool would refuse, the field named as `arguments.<key>`),
    /// `WORKSPACE_NOT_FOUND`, `UNAUTHORIZED` (read-only workspace).
    pub async fn approval_create(&self, req: ApprovalCreateRequest) -> Result<ApprovalRecord> {
        let workspace_id = match req.tool {
            HoldableTool::ApplyPatch => held_arguments::<ApplyPatchRequest>(req.tool, &req.arguments)?.workspace_id,
            HoldableTool::ExecCommand => held_arguments::<ExecCommandRequest>(req.tool, &req.arguments)?.workspace_id,
        };
        let ws = self.workspace(&workspace_id)?;
        if ws.read_only {
            return Err(super::refuse_read_only(&ws, req.tool.as_str()));
        }
        self.open_hold(req.tool, &workspace_id, req.arguments).await
    }

    /// `approval_resolve{approval_id, decision: grant|deny}` -> `{approval_id, state}`. Errors:
    /// `APPROVAL_NOT_FOUND`, `APPROVAL_CONFLICT` (not pending).
    pub async fn approval_resolve(&self, req: ApprovalResolveRequest) -> Result<ApprovalResolveResult> {
        let this = self.clone();
        let record = blocking(move || this.inner.ledger.approval_resolve(&req.approval_id, req.decision)).await?;
        Ok(ApprovalResolveResult { approval_id: record.approval_id, state: record.state })
    }

    /// `operation_resume{approval_id}` -> `{approval_id, state: consumed, apply_patch? |
    /// exec_command?}`: runs the granted call once and stores its terminal result; a repeat
    /// returns the stored result. Errors: `APPROVAL_NOT_FOUND`, `APPROVAL_CONFLICT` (pending,
    /// denied, or a resume in progress), `APPROVAL_AMBIGUOUS` (a command resume was cut by a
    /// crash), and the held tool's own errors (stored, so a repeat answers the same).
    pub async fn operation_resume(&self, req: OperationResumeRequest) -> Result<OperationResumeResult> {
        let id = req.approval_id;
        self.refuse_resume_while_busy(&id).await?;
        let this = self.clone();
        let start = {
            let id = id.clone();
            blocking(move || this.inner.ledger.approval_begin_resume(&id)).await?
        };
        let stored = match start {
            ResumeStart::Done(stored) => {
                let held = self.approval_record(&id).await?;
                return answer(&held.record, &stored);
            }
            ResumeStart::Run(held) => self.run_held(&held.record).await,
            ResumeStart::Interrupted(held) => self.recover_interrupted(&held.record).await?,
        };
        let this = self.clone();
        let consumed = {
            let (id, stored) = (id.clone(), stored.clone());
            blocking(move || this.inner.ledger.approval_consume(&id, &stored)).await?
        };
        answer(&consumed, &stored)
    }

    /// A granted hold whose workspace is busy answers `WORKSPACE_BUSY` without starting the
    /// resume, so a transient busy state never becomes the hold's stored terminal result.
    async fn refuse_resume_while_busy(&self, id: &str) -> Result<()> {
        let held = self.approval_record(id).await?;
        if held.record.state != ApprovalState::Granted {
            return Ok(());
        }
        let ws = self.workspace(&held.record.workspace_id)?;
        let root = self.root(&ws)?;
        match self.live_in(&root) {
            Some(process_id) => Err(Error::WorkspaceBusy { workspace_id: ws.workspace_id, process_id, approval_id: Some(id.to_owned()) }),
            None => Ok(()),
        }
    }

    async fn approval_record(&self, id: &str) -> Result<StoredApproval> {
        let this = self.clone();
        let id = id.to_owned();
        blocking(move || this.inner.ledger.approval(&id)).await
    }

    /// Runs the held call; its terminal result as `{"ok": ...}` or `{"error": ...}`.
    async fn run_held(&self, held: &ApprovalRecord) -> Value {
        let result = match held.tool {
            HoldableTool::ApplyPatch => match patch_args(held) {
                Ok(args) => self.apply_patch_as(args, Approval::Granted).await.and_then(|r| to_json(&r)),
                Err(e) => Err(e),
            },
            HoldableTool::ExecCommand => match decode::<ExecCommandRequest>("exec_command", held.arguments.clone()) {
                Ok(args) => self.exec_command_as(args, Approval::Granted).await.and_then(|r| to_json(&r)),
                Err(e) => Err(Error::decode(e)),
            },
        };
        stored(result)
    }

    /// A resume an earlier daemon started and did not finish.
    async fn recover_interrupted(&self, held: &ApprovalRecord) -> Result<Value> {
        if held.tool != HoldableTool::ApplyPatch {
            return Ok(stored_error(&Error::ApprovalAmbiguous { approval_id: held.approval_id.clone() }));
        }
        let args = patch_args(held)?;
        let key = args.operation_key.clone().unwrap_or_default();
        match self.ledger_lookup(OperationRef::Key(key)).await? {
            Some(op) => Ok(stored(replay(&op).and_then(|r| to_json(&r)))),
            // Never minted: the patch never started, so running it now is its only run.
            None => Ok(self.run_held(held).await),
        }
    }
}

/// The arguments `approval_create` holds for `tool`, checked as that tool checks them; an
/// offending field is named `arguments.<key>`.
fn held_arguments<T: DeserializeOwned>(tool: HoldableTool, arguments: &Value) -> Result<T> {
    decode::<T>(tool.as_str(), arguments.clone()).map_err(|e| Error::InvalidArgument {
        field: Some(match e.field {
            Some(field) => format!("arguments.{field}"),
            None => "arguments".to_owned(),
        }),
        message: e.message,
    })
}

/// The held `apply_patch` arguments, with the recovery key `approval:<id>` when it had none.
fn patch_args(held: &ApprovalRecord) -> Result<ApplyPatchRequest> {
    let mut args = decode::<ApplyPatchRequest>("apply_patch", held.arguments.clone()).map_err(Error::decode)?;
    if args.operation_key.is_none() {
        args.operation_key = Some(format!("approval:{}", held.approval_id));
    }
    Ok(args)
}

/// A terminal result as the ledger stores it: `{"ok": result}` or `{"error": ApiError}`.
fn stored(result: Result<Value>) -> Value {
    match result {
        Ok(v) => json!({ "ok": v }),
        Err(e) => stored_error(&e),
    }
}

/// `{approval_id, state, <tool>: result}`, or the stored error (carrying the `approval_id`).
fn answer(held: &ApprovalRecord, stored: &Value) -> Result<OperationResumeResult> {
    let unreadable =
        |detail: String| Error::StoredUnreadable { what: format!("the stored result of approval {}", held.approval_id), detail };
    if let Some(ok) = stored.get("ok") {
        let mut out = OperationResumeResult {
            approval_id: held.approval_id.clone(),
            state: ApprovalState::Consumed,
            apply_patch: None,
            exec_command: None,
        };
        match held.tool {
            HoldableTool::ApplyPatch => out.apply_patch = Some(serde_json::from_value(ok.clone()).map_err(|e| unreadable(e.to_string()))?),
            HoldableTool::ExecCommand => {
                out.exec_command = Some(serde_json::from_value(ok.clone()).map_err(|e| unreadable(e.to_string()))?)
            }
        }
        return Ok(out);
    }
    let Some(error) = stored.get("error") else {
        return Err(unreadable("neither ok nor error".to_owned()));
    };
    let mut e = serde_json::from_value::<ApiError>(error.clone()).map_err(|e| unreadable(e.to_string()))?;
    e.approval_id.get_or_insert(held.approval_id.clone());
    Err(Error::Replayed(e))
}
