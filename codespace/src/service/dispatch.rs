//! One untyped entry point for every tool, `call(name, arguments)` -> result JSON, over the
//! typed methods; the coordination block of tools given a `work_id` ([`CodeSpace::coordinated`]);
//! and the steering tools. Transports (HTTP `POST /v1/tools/{name}`, MCP `tools/call`) adapt
//! either to `call` or to the typed methods, so names and semantics are the same everywhere.

use std::future::Future;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use spaces_sdk::tools::{
    ApplyPatchRequest, ApprovalCreateRequest, ApprovalResolveRequest, Coordinated,
    ExecCommandRequest, FindRequest, Intent, OperationResumeRequest, OperationStatusRequest,
    ProcessResizeRequest, ProcessStatusRequest, ReadProcessRequest, ReadRequest,
    SteerClaimNextRequest, SteerClaimNextResult, SteerCompleteRequest, SteerStatus,
    SteerStatusRequest, TerminateProcessRequest, Work, WorkFinishRequest, WorkFinishResult,
    WorkOpenRequest, WorkspaceInfoRequest, WriteStdinRequest,
};
use spaces_sdk::{decode, ApiError, ErrorCode};

use super::files::to_json;
use super::{blocking, CodeSpace};

/// Every tool name, in the order of the API reference.
pub const TOOLS: &[&str] = &[
    "workspace_info",
    "read",
    "find",
    "apply_patch",
    "operation_status",
    "exec_command",
    "read_process",
    "process_status",
    "write_stdin",
    "process_resize",
    "terminate_process",
    "approval_create",
    "approval_resolve",
    "operation_resume",
    "work_open",
    "steer_status",
    "steer_claim_next",
    "steer_complete",
    "work_finish",
];

/// The work a request names for coordination: its optional `work_id`, the `work_id` of a
/// steering tool, or none (`work_open`).
trait WorkContext {
    fn work_context(&self) -> Option<String>;
}

macro_rules! optional_work {
    ($($req:ty),+) => {$(
        impl WorkContext for $req {
            fn work_context(&self) -> Option<String> {
                self.work_id.clone()
            }
        }
    )+};
}

macro_rules! named_work {
    ($($req:ty),+) => {$(
        impl WorkContext for $req {
            fn work_context(&self) -> Option<String> {
                Some(self.work_id.clone())
            }
        }
    )+};
}

optional_work!(
    WorkspaceInfoRequest,
    ReadRequest,
    FindRequest,
    ApplyPatchRequest,
    OperationStatusRequest,
    ExecCommandRequest,
    ReadProcessRequest,
    ProcessStatusRequest,
    WriteStdinRequest,
    ProcessResizeRequest,
    TerminateProcessRequest,
    ApprovalCreateRequest,
    ApprovalResolveRequest,
    OperationResumeRequest
);
named_work!(
    SteerStatusRequest,
    SteerClaimNextRequest,
    SteerCompleteRequest,
    WorkFinishRequest
);

impl WorkContext for WorkOpenRequest {
    fn work_context(&self) -> Option<String> {
        None
    }
}

/// `call` arm: decode the arguments as the typed method's request, run it coordinated, encode.
macro_rules! tool {
    ($cs:expr, $name:expr, $args:expr, $method:ident) => {
        $cs.run($name, $args, |cs, req| async move { cs.$method(req).await })
            .await
    };
}

impl CodeSpace {
    /// Runs tool `name` with `arguments` (a JSON object; `null` reads as `{}`).
    ///
    /// The arguments are decoded as the tool's request type (`spaces_sdk::tools`), which
    /// refuses unknown keys. A call that names a `work_id` (and every steering tool) goes
    /// through [`CodeSpace::coordinated`]: the work must exist and the result gains
    /// `coordination`. Errors: the tool's own, `INVALID_ARGUMENT` for an unknown tool or
    /// malformed arguments (naming the field, and the valid key an unknown one resembles).
    pub async fn call(&self, name: &str, arguments: Value) -> Result<Value, ApiError> {
        match name {
            "workspace_info" => tool!(self, name, arguments, workspace_info),
            "read" => tool!(self, name, arguments, read),
            "find" => tool!(self, name, arguments, find),
            "apply_patch" => tool!(self, name, arguments, apply_patch),
            "operation_status" => tool!(self, name, arguments, operation_status),
            "exec_command" => tool!(self, name, arguments, exec_command),
            "read_process" => tool!(self, name, arguments, read_process),
            "process_status" => tool!(self, name, arguments, process_status),
            "write_stdin" => tool!(self, name, arguments, write_stdin),
            "process_resize" => tool!(self, name, arguments, process_resize),
            "terminate_process" => tool!(self, name, arguments, terminate_process),
            "approval_create" => tool!(self, name, arguments, approval_create),
            "approval_resolve" => tool!(self, name, arguments, approval_resolve),
            "operation_resume" => tool!(self, name, arguments, operation_resume),
            "work_open" => tool!(self, name, arguments, work_open),
            "steer_status" => tool!(self, name, arguments, steer_status),
            "steer_claim_next" => tool!(self, name, arguments, steer_claim_next),
            "steer_complete" => tool!(self, name, arguments, steer_complete),
            "work_finish" => tool!(self, name, arguments, work_finish),
            other => Err(ApiError::new(
                ErrorCode::InvalidArgument,
                format!("unknown tool {other:?}; tools: {}", TOOLS.join(", ")),
            )),
        }
    }

    async fn run<Req, Res, Fut>(
        &self,
        name: &str,
        arguments: Value,
        method: impl FnOnce(CodeSpace, Req) -> Fut,
    ) -> Result<Value, ApiError>
    where
        Req: DeserializeOwned + WorkContext,
        Res: Serialize,
        Fut: Future<Output = Result<Res, ApiError>>,
    {
        let req: Req = decode(name, arguments)?;
        let work_id = req.work_context();
        to_json(&self.coordinated(work_id, method(self.clone(), req)).await?)
    }

    /// Runs `tool` (a typed method's future, not yet polled) in the coordination context of
    /// `work_id`: when one is given, the work must exist (`WORK_NOT_FOUND`, checked before the
    /// tool runs) and the result carries `coordination{work_id, pending_user_items,
    /// queue_revision}` read after the tool ran (hints, not instruction bodies; left out if
    /// they cannot be read). Without a `work_id` the result is returned as it is.
    ///
    /// The typed methods ignore a request's `work_id`; a transport passes it here, as
    /// [`CodeSpace::call`] does.
    pub async fn coordinated<T>(
        &self,
        work_id: Option<String>,
        tool: impl Future<Output = Result<T, ApiError>>,
    ) -> Result<Coordinated<T>, ApiError> {
        let Some(work_id) = work_id else {
            return Ok(Coordinated::bare(tool.await?));
        };
        {
            let work_id = work_id.clone();
            self.steer(move |s| s.work(&work_id).map(|_| ())).await?;
        }
        let result = tool.await?;
        let coordination = self.steer(move |s| s.coordination(&work_id)).await.ok();
        Ok(Coordinated {
            result,
            coordination,
        })
    }

    /// `work_open{workspace_id, title?}` -> the new active work. Queued `next_work`
    /// instructions left on closed or stopped works of the workspace move to it. Errors:
    /// `WORKSPACE_NOT_FOUND`, `INVALID_ARGUMENT` (empty `workspace_id`).
    pub async fn work_open(&self, req: WorkOpenRequest) -> Result<Work, ApiError> {
        self.workspace(&req.workspace_id)?;
        self.steer(move |s| s.work_open(&req.workspace_id, req.title.as_deref()))
            .await
    }

    /// `steer_status{work_id}` -> counts of the work's queue, never bodies. Errors:
    /// `WORK_NOT_FOUND`.
    pub async fn steer_status(&self, req: SteerStatusRequest) -> Result<SteerStatus, ApiError> {
        self.steer(move |s| s.steer_status(&req.work_id)).await
    }

    /// `steer_claim_next{work_id}` -> `{item?}`: claims the next claimable instruction.
    /// Errors: `WORK_NOT_FOUND`, `WORK_CLOSED`.
    pub async fn steer_claim_next(
        &self,
        req: SteerClaimNextRequest,
    ) -> Result<SteerClaimNextResult, ApiError> {
        self.steer(move |s| s.steer_claim_next(&req.work_id)).await
    }

    /// `steer_complete{work_id, intent_id, outcome}` -> the ended intent. Errors:
    /// `WORK_NOT_FOUND`, `WORK_CLOSED`, `INTENT_NOT_FOUND`, `INVALID_ARGUMENT` (not claimed),
    /// `INTENT_NOT_EDITABLE` (ended otherwise).
    pub async fn steer_complete(&self, req: SteerCompleteRequest) -> Result<Intent, ApiError> {
        self.steer(move |s| s.steer_complete(&req.work_id, &req.intent_id, req.outcome))
            .await
    }

    /// `work_finish{work_id}` -> `{closed, reason?, queued, claimed, state}`. Errors:
    /// `WORK_NOT_FOUND`, `WORK_CLOSED` (stopped by the user).
    pub async fn work_finish(&self, req: WorkFinishRequest) -> Result<WorkFinishResult, ApiError> {
        self.steer(move |s| s.work_finish(&req.work_id)).await
    }

    /// Runs `f` on the steering store on tokio's blocking pool (the `/inbox` routes use it too).
    /// Errors: `f`'s, or `INTERNAL` if the task panicked.
    pub async fn steer<T: Send + 'static>(
        &self,
        f: impl FnOnce(&crate::steer::Steering) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let this = self.clone();
        blocking(move || f(&this.inner.steering)).await
    }
}
