//! One entry point for every tool: `call(name, arguments)` -> result JSON. Transports (HTTP
//! `POST /v1/tools/{name}`, MCP `tools/call`) only adapt to it, so names and semantics are the
//! same everywhere.

use serde_json::Value;
use spaces_sdk::{ApiError, ErrorCode};

use super::args::{decode, SteerCompleteArgs, WorkArgs, WorkOpenArgs};
use super::files::to_json;
use super::{blocking, CodeSpace};
use crate::steer::Outcome;

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

impl CodeSpace {
    /// Runs tool `name` with `arguments` (a JSON object; unknown fields are ignored).
    ///
    /// When `arguments` carries a `work_id`, the work must exist (`WORK_NOT_FOUND`, checked
    /// before the tool runs) and an object result gains `coordination{work_id,
    /// pending_user_items, queue_revision}` (hints, not instruction bodies). Errors: the tool's
    /// own, `INVALID_ARGUMENT` for an unknown tool or malformed arguments.
    pub async fn call(&self, name: &str, arguments: Value) -> Result<Value, ApiError> {
        let work_id = arguments.get("work_id").and_then(Value::as_str).map(str::to_owned);
        if let Some(work_id) = &work_id {
            let work_id = work_id.clone();
            self.steer(move |s| s.work(&work_id).map(|_| ())).await?;
        }
        let mut result = self.run_tool(name, arguments).await?;
        if let (Some(work_id), Some(obj)) = (work_id, result.as_object_mut()) {
            if let Ok(coordination) = self.coordination(&work_id).await {
                obj.insert("coordination".to_owned(), coordination);
            }
        }
        Ok(result)
    }

    async fn coordination(&self, work_id: &str) -> Result<Value, ApiError> {
        let this = self.clone();
        let work_id = work_id.to_owned();
        blocking(move || to_json(&this.inner.steering.coordination(&work_id)?)).await
    }

    async fn run_tool(&self, name: &str, args: Value) -> Result<Value, ApiError> {
        match name {
            "workspace_info" => self.workspace_info(decode(name, args)?).await,
            "read" => self.read(decode(name, args)?).await,
            "find" => self.find(decode(name, args)?).await,
            "apply_patch" => self.apply_patch(decode(name, args)?).await,
            "operation_status" => self.operation_status(decode(name, args)?).await,
            "exec_command" => self.exec_command(decode(name, args)?).await,
            "read_process" => self.read_process(decode(name, args)?).await,
            "process_status" => self.process_status(decode(name, args)?).await,
            "write_stdin" => self.write_stdin(decode(name, args)?).await,
            "process_resize" => self.process_resize(decode(name, args)?).await,
            "terminate_process" => self.terminate_process(decode(name, args)?).await,
            "approval_create" => self.approval_create(decode(name, args)?).await,
            "approval_resolve" => self.approval_resolve(decode(name, args)?).await,
            "operation_resume" => self.operation_resume(decode(name, args)?).await,
            "work_open" => {
                let a: WorkOpenArgs = decode(name, args)?;
                self.workspace(&a.workspace_id)?;
                self.steer(move |s| to_json(&s.work_open(&a.workspace_id, a.title.as_deref())?)).await
            }
            "steer_status" => {
                let a: WorkArgs = decode(name, args)?;
                self.steer(move |s| to_json(&s.steer_status(&a.work_id)?)).await
            }
            "steer_claim_next" => {
                let a: WorkArgs = decode(name, args)?;
                self.steer(move |s| to_json(&s.steer_claim_next(&a.work_id)?)).await
            }
            "steer_complete" => {
                let a: SteerCompleteArgs = decode(name, args)?;
                let outcome = match a.outcome.as_str() {
                    "done" => Outcome::Done,
                    "blocked" => Outcome::Blocked,
                    other => {
                        return Err(ApiError::new(
                            ErrorCode::InvalidArgument,
                            format!("outcome must be \"done\" or \"blocked\", not {other:?}"),
                        ))
                    }
                };
                self.steer(move |s| to_json(&s.steer_complete(&a.work_id, &a.intent_id, outcome)?)).await
            }
            "work_finish" => {
                let a: WorkArgs = decode(name, args)?;
                self.steer(move |s| to_json(&s.work_finish(&a.work_id)?)).await
            }
            other => Err(ApiError::new(
                ErrorCode::InvalidArgument,
                format!("unknown tool {other:?}; tools: {}", TOOLS.join(", ")),
            )),
        }
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
