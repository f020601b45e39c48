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

use serde_json::{json, Value};
use spaces_sdk::{ApiError, ErrorCode};

use super::args::{decode, ApplyPatchArgs, ApprovalArgs, ApprovalCreateArgs, ApprovalResolveArgs, ExecArgs};
use super::files::{replay, Approval};
use super::{blocking, CodeSpace};
use crate::ledger::{ApprovalRecord, ApprovalState, Decision, OperationRef, ResumeStart};

/// Tools an approval can hold.
const HOLDABLE: &[&str] = &["apply_patch", "exec_command"];

impl CodeSpace {
    /// Opens (or reuses, for a retry of the same call) a hold and returns the
    /// `APPROVAL_REQUIRED` error carrying its `approval_id`.
    pub(super) async fn hold(&self, tool: &str, workspace_id: &str, arguments: Value) -> Result<ApiError, ApiError> {
        let record = self.open_hold(tool, workspace_id, arguments).await?;
        let mut e = ApiError::new(
            ErrorCode::ApprovalRequired,
            format!(
                "workspace {workspace_id:?} requires approval for {tool}: grant it with approval_resolve \
                 {{approval_id: {id:?}, decision: grant}}, then run it with operation_resume",
                id = record.approval_id
            ),
        );
        e.approval_id = Some(record.approval_id);
        Ok(e)
    }

    async fn open_hold(&self, tool: &str, workspace_id: &str, arguments: Value) -> Result<ApprovalRecord, ApiError> {
        let this = self.clone();
        let (tool, ws) = (tool.to_owned(), workspace_id.to_owned());
        blocking(move || this.inner.ledger.approval_hold(&ws, &tool, &arguments)).await
    }

    /// `approval_create{tool, arguments}` -> the pending hold `{approval_id, state, tool,
    /// workspace_id, ...}`. Works whatever the approval setting. Errors: `INVALID_ARGUMENT`
    /// (a tool that cannot be held, or arguments that tool would refuse), `WORKSPACE_NOT_FOUND`,
    /// `UNAUTHORIZED` (read-only workspace).
    pub async fn approval_create(&self, args: ApprovalCreateArgs) -> Result<Value, ApiError> {
        if !HOLDABLE.contains(&args.tool.as_str()) {
            return Err(ApiError::new(
                ErrorCode::InvalidArgument,
                format!("tool {:?} cannot be held; holdable tools: {}", args.tool, HOLDABLE.join(", ")),
            ));
        }
        let workspace_id = match args.tool.as_str() {
            "apply_patch" => decode::<ApplyPatchArgs>("apply_patch", args.arguments.clone())?.workspace_id,
            _ => decode::<ExecArgs>("exec_command", args.arguments.clone())?.workspace_id,
        };
        let ws = self.workspace(&workspace_id)?;
        if ws.read_only {
            return Err(super::refuse_read_only(&ws, &args.tool));
        }
        super::files::to_json(&self.open_hold(&args.tool, &workspace_id, args.arguments).await?)
    }

    /// `approval_resolve{approval_id, decision: grant|deny}` -> `{approval_id, state}`. Errors:
    /// `APPROVAL_NOT_FOUND`, `APPROVAL_CONFLICT` (not pending), `INVALID_ARGUMENT` (decision).
    pub async fn approval_resolve(&self, args: ApprovalResolveArgs) -> Result<Value, ApiError> {
        let decision = match args.decision.as_str() {
            "grant" => Decision::Grant,
            "deny" => Decision::Deny,
            other => {
                return Err(ApiError::new(
                    ErrorCode::InvalidArgument,
                    format!("decision must be \"grant\" or \"deny\", not {other:?}"),
                ))
            }
        };
        let this = self.clone();
        let record = blocking(move || this.inner.ledger.approval_resolve(&args.approval_id, decision)).await?;
        Ok(json!({ "approval_id": record.approval_id, "state": record.state }))
    }

    /// `operation_resume{approval_id}` -> `{approval_id, state: consumed, apply_patch? |
    /// exec_command?}`: runs the granted call once and stores its terminal result; a repeat
    /// returns the stored result. Errors: `APPROVAL_NOT_FOUND`, `APPROVAL_CONFLICT` (pending,
    /// denied, or a resume in progress), `APPROVAL_AMBIGUOUS` (a command resume was cut by a
    /// crash), and the held tool's own errors (stored, so a repeat answers the same).
    pub async fn operation_resume(&self, args: ApprovalArgs) -> Result<Value, ApiError> {
        let id = args.approval_id;
        self.refuse_resume_while_busy(&id).await?;
        let this = self.clone();
        let start = {
            let id = id.clone();
            blocking(move || this.inner.ledger.approval_begin_resume(&id)).await?
        };
        let stored = match start {
            ResumeStart::Done(stored) => {
                let record = self.approval_record(&id).await?;
                return answer(&record, stored);
            }
            ResumeStart::Run(record) => self.run_held(&record).await,
            ResumeStart::Interrupted(record) => self.recover_interrupted(&record).await?,
        };
        let this = self.clone();
        let consumed = {
            let (id, stored) = (id.clone(), stored.clone());
            blocking(move || this.inner.ledger.approval_consume(&id, &stored)).await?
        };
        answer(&consumed, stored)
    }

    /// A granted hold whose workspace is busy answers `WORKSPACE_BUSY` without starting the
    /// resume, so a transient busy state never becomes the hold's stored terminal result.
    async fn refuse_resume_while_busy(&self, id: &str) -> Result<(), ApiError> {
        let record = self.approval_record(id).await?;
        if record.state != ApprovalState::Granted {
            return Ok(());
        }
        let ws = self.workspace(&record.workspace_id)?;
        let root = self.root(&ws)?;
        match self.live_in(&root) {
            Some(process_id) => {
                let mut e = super::busy(&ws.workspace_id, &process_id);
                e.approval_id = Some(id.to_owned());
                Err(e)
            }
            None => Ok(()),
        }
    }

    async fn approval_record(&self, id: &str) -> Result<ApprovalRecord, ApiError> {
        let this = self.clone();
        let id = id.to_owned();
        blocking(move || this.inner.ledger.approval(&id)).await
    }

    /// Runs the held call; its terminal result as `{"ok": ...}` or `{"error": ...}`.
    async fn run_held(&self, record: &ApprovalRecord) -> Value {
        let result = match record.tool.as_str() {
            "apply_patch" => match patch_args(record) {
                Ok(args) => self.apply_patch_as(args, Approval::Granted).await,
                Err(e) => Err(e),
            },
            "exec_command" => match decode::<ExecArgs>("exec_command", record.arguments.clone()) {
                Ok(args) => self.exec_command_as(args, Approval::Granted).await,
                Err(e) => Err(e),
            },
            other => Err(ApiError::new(ErrorCode::InvalidArgument, format!("tool {other:?} cannot be held"))),
        };
        match result {
            Ok(v) => json!({ "ok": v }),
            Err(e) => json!({ "error": e }),
        }
    }

    /// A resume an earlier daemon started and did not finish.
    async fn recover_interrupted(&self, record: &ApprovalRecord) -> Result<Value, ApiError> {
        if record.tool != "apply_patch" {
            let mut e = ApiError::new(
                ErrorCode::ApprovalAmbiguous,
                "the resume of this command was interrupted (the daemon stopped) and its outcome is unknown; \
                 it will not be started again: inspect the workspace before deciding on a new command",
            );
            e.approval_id = Some(record.approval_id.clone());
            return Ok(json!({ "error": e }));
        }
        let args = patch_args(record)?;
        let key = args.operation_key.clone().unwrap_or_default();
        match self.ledger_lookup(OperationRef::Key(key)).await? {
            Some(op) => Ok(match replay(op.result.clone().unwrap_or(Value::Null), &op.operation_id) {
                Ok(v) => json!({ "ok": v }),
                Err(e) => json!({ "error": e }),
            }),
            // Never minted: the patch never started, so running it now is its only run.
            None => Ok(self.run_held(record).await),
        }
    }
}

/// The held `apply_patch` arguments, with the recovery key `approval:<id>` when it had none.
fn patch_args(record: &ApprovalRecord) -> Result<ApplyPatchArgs, ApiError> {
    let mut args = decode::<ApplyPatchArgs>("apply_patch", record.arguments.clone())?;
    if args.operation_key.is_none() {
        args.operation_key = Some(format!("approval:{}", record.approval_id));
    }
    Ok(args)
}

/// `{approval_id, state, <tool>: result}`, or the stored error.
fn answer(record: &ApprovalRecord, stored: Value) -> Result<Value, ApiError> {
    if let Some(ok) = stored.get("ok") {
        let mut out = json!({ "approval_id": record.approval_id, "state": "consumed" });
        out[record.tool.as_str()] = ok.clone();
        return Ok(out);
    }
    let mut e = stored
        .get("error")
        .and_then(|e| serde_json::from_value::<ApiError>(e.clone()).ok())
        .unwrap_or_else(|| ApiError::new(ErrorCode::Internal, "the stored result of this approval is unreadable"));
    e.approval_id.get_or_insert(record.approval_id.clone());
    Err(e)
}
