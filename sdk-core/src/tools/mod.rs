//! The CodeSpace tools (API reference, "CodeSpace execution layer"): for each of the 19 tools
//! its request (`<Tool>Request`) and its result, exactly as they travel as JSON over every
//! transport (HTTP `POST /v1/tools/{name}`, MCP `tools/call`, the SDKs).
//!
//! - Requests refuse unknown keys (`#[serde(deny_unknown_fields)]`; decode them with
//!   [`crate::decode()`], which names the key and suggests the one it resembles). Optional fields
//!   may be omitted. Defaults and limits are associated consts of the request type
//!   ([`ReadRequest::LIMIT_MAX`], [`FindRequest::LIMIT_MAX`], [`ReadProcessRequest::WAIT_MS_MAX`],
//!   [`WriteStdinRequest::TIMEOUT_MS`], ...), declared once here and used by the server.
//! - Every tool that does not already name its work accepts an optional `work_id`: the work
//!   must exist (`WORK_NOT_FOUND`), and the result then carries `coordination`
//!   ([`Coordinated`]). The steering tools (`steer_status`, `steer_claim_next`,
//!   `steer_complete`, `work_finish`) always carry it.
//! - Every closed set is an enum, snake_case on the wire.
//!
//! Plain data: serde and schemars only, no behaviour beyond wire spellings.

mod approvals;
mod files;
mod process;
mod steer;
mod workspace;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use approvals::{
    ApprovalCreateRequest, ApprovalRecord, ApprovalResolveRequest, ApprovalResolveResult, ApprovalState, Decision, HoldableTool,
    OperationResumeRequest, OperationResumeResult,
};
pub use files::{
    ApplyPatchRequest, ApplyPatchResult, ChangeKind, ChangeRecord, EventName, FindRequest, FindResult, OperationEvent, OperationKind,
    OperationRecord, OperationStatus, OperationStatusRequest, ReadRequest, ReadResult,
};
pub use process::{
    DispatchStatus, ExecCommandRequest, ExecCommandResult, OkResult, ProcessResizeRequest, ProcessState, ProcessStatus,
    ProcessStatusRequest, ReadProcessRequest, ReadProcessResult, TerminateProcessRequest, Termination, WriteStdinRequest,
};
pub use steer::{
    ClaimedItem, Delivery, FinishReason, InboxWorkResult, InboxWorksRequest, Intent, IntentCreateRequest, IntentEditRequest,
    IntentQueueRequest, IntentRef, IntentReorderRequest, IntentState, Outcome, SteerClaimNextRequest, SteerClaimNextResult,
    SteerCompleteRequest, SteerStatus, SteerStatusRequest, Work, WorkFinishRequest, WorkFinishResult, WorkOpenRequest, WorkRef, WorkState,
};
pub use workspace::{
    Availability, ConflictPolicy, Containment, Enforcement, ExecutionInfo, ExitedHandles, FileCapabilities, FileTools, Isolation,
    LifetimeAction, NetworkInfo, NetworkPolicy, Permissions, ProcessCapabilities, ProcessContainment, ProcessLifetime, ProcessOwner,
    ProcessTools, Profile, ReadsDuringProcess, RestartRecovery, Serialization, SerializationScope, TtyCapabilities, WorkspaceInfoRequest,
    WorkspaceInfoResult,
};

/// Attached to the result of a tool given a `work_id` (and of every steering tool):
/// `pending_user_items` is the number of queued deliverable plus claimed intents, non-zero
/// exactly when `work_finish` would refuse to close. A hint, never an instruction body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Coordination {
    /// The work the call named (`work-<uuid>`).
    pub work_id: String,
    /// Queued deliverable plus claimed intents of the work (0 once it is closed or stopped).
    pub pending_user_items: u64,
    /// Grows on every change to the work's queue; compare it to notice new instructions.
    pub queue_revision: u64,
}

/// A tool result with the `coordination` block of its work, when the call named one. On the
/// wire the result's own fields and `coordination` sit side by side in one object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Coordinated<T> {
    /// The tool's own result.
    #[serde(flatten)]
    pub result: T,
    /// Present when the call named a `work_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordination: Option<Coordination>,
}

impl<T> Coordinated<T> {
    /// `result` without coordination.
    pub fn bare(result: T) -> Self {
        Coordinated { result, coordination: None }
    }
}

#[cfg(test)]
mod tests;
