//! The CodeSpace tools (API reference, "CodeSpace execution layer") and the user's side of
//! steering (`/inbox`): typed operations over the CodeSpace service. A tool given a `work_id`
//! runs in that work's coordination context (`WORK_NOT_FOUND` first; the result then carries
//! `coordination`). Here the CodeSpace layer's [`spaces_codespace::Error`] becomes the wire
//! [`ApiError`] (its `code`, message, and the `operation_id`/`approval_id`/`field` it carries).

use spaces_sdk::tools::*;
use spaces_sdk::ApiError;

use crate::service::Service;

type Result<T> = std::result::Result<T, ApiError>;

/// A tool whose request has an optional `work_id`: run it coordinated.
macro_rules! coordinated_tools {
    ($($name:ident: $req:ty => $res:ty;)*) => {
        impl Service {
            $(
                #[doc = concat!("`", stringify!($name), "` (see `spaces_sdk::ops` for the contract). Errors: the tool's own, `WORK_NOT_FOUND` for an unknown `work_id`.")]
                pub async fn $name(&self, req: $req) -> Result<Coordinated<$res>> {
                    let work_id = req.work_id.clone();
                    Ok(self.cs.coordinated(work_id, self.cs.$name(req)).await?)
                }
            )*
        }
    };
}

coordinated_tools! {
    workspace_info: WorkspaceInfoRequest => WorkspaceInfoResult;
    read: ReadRequest => ReadResult;
    find: FindRequest => FindResult;
    apply_patch: ApplyPatchRequest => ApplyPatchResult;
    operation_status: OperationStatusRequest => OperationRecord;
    exec_command: ExecCommandRequest => ExecCommandResult;
    read_process: ReadProcessRequest => ReadProcessResult;
    process_status: ProcessStatusRequest => ProcessStatus;
    write_stdin: WriteStdinRequest => OkResult;
    process_resize: ProcessResizeRequest => OkResult;
    terminate_process: TerminateProcessRequest => OkResult;
    approval_create: ApprovalCreateRequest => ApprovalRecord;
    approval_resolve: ApprovalResolveRequest => ApprovalResolveResult;
    operation_resume: OperationResumeRequest => OperationResumeResult;
}

/// A steering tool: its `work_id` is required and is its coordination context.
macro_rules! steering_tools {
    ($($name:ident: $req:ty => $res:ty;)*) => {
        impl Service {
            $(
                #[doc = concat!("`", stringify!($name), "` (see `spaces_sdk::ops`). Errors: `WORK_NOT_FOUND`, `WORK_CLOSED` and the tool's own.")]
                pub async fn $name(&self, req: $req) -> Result<Coordinated<$res>> {
                    let work_id = Some(req.work_id.clone());
                    Ok(self.cs.coordinated(work_id, self.cs.$name(req)).await?)
                }
            )*
        }
    };
}

steering_tools! {
    steer_status: SteerStatusRequest => SteerStatus;
    steer_claim_next: SteerClaimNextRequest => SteerClaimNextResult;
    steer_complete: SteerCompleteRequest => Intent;
    work_finish: WorkFinishRequest => WorkFinishResult;
}

impl Service {
    /// `work_open`: a new active work. Errors: `WORKSPACE_NOT_FOUND`.
    pub async fn work_open(&self, req: WorkOpenRequest) -> Result<Work> {
        Ok(self.cs.work_open(req).await?)
    }

    /// `inbox_works`: newest first. Errors: `INTERNAL` (store).
    pub async fn inbox_works(&self, req: InboxWorksRequest) -> Result<Vec<Work>> {
        Ok(self.cs.steer(move |s| s.works(req.workspace_id.as_deref())).await?)
    }

    /// `inbox_work`: the work and its intents. Errors: `WORK_NOT_FOUND`.
    pub async fn inbox_work(&self, req: WorkRef) -> Result<InboxWorkResult> {
        Ok(self.cs.steer(move |s| Ok(InboxWorkResult { work: s.work(&req.work_id)?, intents: s.intents(&req.work_id)? })).await?)
    }

    /// `inbox_intent_create`: a draft. Errors: `WORK_NOT_FOUND`, `WORK_CLOSED`,
    /// `INVALID_ARGUMENT` (empty body).
    pub async fn inbox_intent_create(&self, req: IntentCreateRequest) -> Result<Intent> {
        Ok(self.cs.steer(move |s| s.intent_create(&req.work_id, &req.body, req.kind.as_deref(), req.delivery)).await?)
    }

    /// `inbox_reorder`. Errors: `WORK_NOT_FOUND`, `INVALID_ARGUMENT` (not every open intent
    /// exactly once).
    pub async fn inbox_reorder(&self, req: IntentReorderRequest) -> Result<Vec<Intent>> {
        Ok(self.cs.steer(move |s| s.intent_reorder(&req.work_id, &req.intent_ids)).await?)
    }

    /// `inbox_work_stop`. Errors: `WORK_NOT_FOUND`.
    pub async fn inbox_work_stop(&self, req: WorkRef) -> Result<Work> {
        Ok(self.cs.steer(move |s| s.work_stop(&req.work_id)).await?)
    }

    /// `inbox_intent_edit`. Errors: `INTENT_NOT_FOUND`, `INTENT_NOT_EDITABLE`,
    /// `INTENT_REVISION_CONFLICT`.
    pub async fn inbox_intent_edit(&self, req: IntentEditRequest) -> Result<Intent> {
        Ok(self.cs.steer(move |s| s.intent_edit(&req.intent_id, &req.body, req.revision)).await?)
    }

    /// `inbox_intent_queue`. Errors: `INTENT_NOT_FOUND`, `INTENT_NOT_EDITABLE`,
    /// `INTENT_REVISION_CONFLICT`.
    pub async fn inbox_intent_queue(&self, req: IntentQueueRequest) -> Result<Intent> {
        Ok(self.cs.steer(move |s| s.intent_queue(&req.intent_id, req.revision)).await?)
    }

    /// `inbox_intent_cancel`. Errors: `INTENT_NOT_FOUND`, `INTENT_NOT_EDITABLE`.
    pub async fn inbox_intent_cancel(&self, req: IntentRef) -> Result<Intent> {
        Ok(self.cs.steer(move |s| s.intent_cancel(&req.intent_id)).await?)
    }
}
