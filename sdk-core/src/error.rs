//! Error codes shared by every transport (API reference, "Error codes").

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The closed set of error codes. Serialized SCREAMING_SNAKE_CASE, e.g. `RUN_NOT_FOUND`.
///
/// The contract's `OUTPUT_LIMIT` is not in this set: every output here is windowed with a
/// cursor (`read` offsets, `find` pages, `read_process` and `agent_events` cursors), so no call
/// fails because of output size. `RESOURCE_QUEUE_FULL`: a run already holds its limit of
/// queued follow-ups. `AGENT_BUSY`: a follow-up while a stop is ending the run. `TIMEOUT`:
/// `write_stdin` to a process that stopped reading.
///
/// `UNAUTHORIZED`: no credential, or a wrong one (also a mutation of a read-only Space).
/// `WORKSPACE_EXISTS`: `space_add` of a name already registered differently (a conflict, HTTP
/// 409; add again with `replace` to change it). Like `FORBIDDEN`, an addition to the contract's list.
/// `FORBIDDEN`: the credential is known but lacks the right (a tool caller's token asking for
/// an operator's operation, another Space, or a change with watch scope).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    Unauthorized,
    Forbidden,
    WorkspaceNotFound,
    WorkspaceBusy,
    WorkspaceExists,
    ResourceQueueFull,
    InvalidPatch,
    InvalidCommand,
    InvalidArgument,
    PathEscape,
    SymlinkRejected,
    SpecialFileRejected,
    FileNotFound,
    PathNotDirectory,
    FileOperationFailed,
    AddFileExists,
    MoveDestinationExists,
    VersionConflict,
    OperationKeyConflict,
    OperationNotFound,
    ProcessSpawnFailed,
    ProcessNotFound,
    ProcessNotTty,
    ProcessNotRunning,
    Timeout,
    WorkNotFound,
    WorkClosed,
    IntentNotFound,
    IntentAlreadyClaimed,
    IntentNotEditable,
    IntentRevisionConflict,
    ApprovalRequired,
    ApprovalNotFound,
    ApprovalConflict,
    ApprovalAmbiguous,
    RunNotFound,
    HarnessUnavailable,
    AgentBusy,
    LeaseHeld,
    Internal,
}

impl ErrorCode {
    /// The wire spelling, e.g. `"RUN_NOT_FOUND"`.
    pub fn as_str(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "INTERNAL".to_owned())
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.as_str())
    }
}

/// The error body every transport returns: `{code, message, operation_id?, approval_id?}`.
/// `message` says what happened and what to do next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// For `INVALID_ARGUMENT`: the path of the offending request field (`options.base_url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl ApiError {
    /// An error with `code` and a message that tells the caller what to do.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), operation_id: None, approval_id: None, field: None }
    }
}

/// The HTTP error envelope: `{"error": {code, message, ...}}`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorEnvelope {
    pub error: ApiError,
}
