//! `approval_create`, `approval_resolve`, `operation_resume` (API reference, "Approvals").

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::files::ApplyPatchResult;
use super::process::ExecCommandResult;

/// The tools an approval can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HoldableTool {
    /// `apply_patch` (not a `check_only` preview).
    ApplyPatch,
    /// `exec_command`.
    ExecCommand,
}

impl HoldableTool {
    /// Both, in contract order.
    pub const ALL: [HoldableTool; 2] = [Self::ApplyPatch, Self::ExecCommand];

    /// The tool name (`"apply_patch"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ApplyPatch => "apply_patch",
            Self::ExecCommand => "exec_command",
        }
    }

    /// Parse a tool name; anything else is `None`.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// `approval_create`: open a hold for a call explicitly, whatever the workspace's approval
/// setting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalCreateRequest {
    /// The tool to hold: `apply_patch` or `exec_command`.
    pub tool: HoldableTool,
    /// That tool's arguments, an `ApplyPatchRequest` or `ExecCommandRequest` object; checked
    /// as that tool would check them (`INVALID_ARGUMENT`) and stored as given.
    pub arguments: serde_json::Value,
    /// Coordination context: the result then carries `coordination`. The work must exist
    /// (`WORK_NOT_FOUND`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_id: Option<String>,
}

/// State of a hold: `pending` -> `granted` | `denied` (terminal); `granted` -> `resuming` ->
/// `consumed` (with the stored terminal result).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Waiting for `approval_resolve`.
    Pending,
    /// Granted: `operation_resume` runs it.
    Granted,
    /// Denied; terminal.
    Denied,
    /// A resume is running (or was cut by a crash).
    Resuming,
    /// Ran once; its terminal result is stored.
    Consumed,
}

impl ApprovalState {
    /// Every state, in lifecycle order.
    pub const ALL: [ApprovalState; 5] = [Self::Pending, Self::Granted, Self::Denied, Self::Resuming, Self::Consumed];

    /// The wire spelling, e.g. `"resuming"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Granted => "granted",
            Self::Denied => "denied",
            Self::Resuming => "resuming",
            Self::Consumed => "consumed",
        }
    }

    /// Parse the wire spelling; anything else is `None`.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// Result of `approval_create`: the hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalRecord {
    /// `appr-<uuid>`.
    pub approval_id: String,
    /// The workspace named in the held arguments.
    pub workspace_id: String,
    /// The held tool.
    pub tool: HoldableTool,
    /// The held tool's arguments.
    pub arguments: serde_json::Value,
    /// The hold's state.
    pub state: ApprovalState,
    /// When the hold was opened, Unix ms.
    pub created_at: u64,
}

/// `approval_resolve.decision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Allow one run (by `operation_resume`).
    Grant,
    /// Refuse it; terminal.
    Deny,
}

/// `approval_resolve`: grant or deny a pending hold (`APPROVAL_CONFLICT` unless pending).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalResolveRequest {
    /// The hold (`appr-<uuid>`).
    pub approval_id: String,
    /// `grant` or `deny`.
    pub decision: Decision,
    /// Coordination context: the result then carries `coordination`. The work must exist
    /// (`WORK_NOT_FOUND`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_id: Option<String>,
}

/// Result of `approval_resolve`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalResolveResult {
    /// The hold.
    pub approval_id: String,
    /// `granted` or `denied`.
    pub state: ApprovalState,
}

/// `operation_resume`: run a granted hold once (policy re-checked) and store its terminal
/// result; a repeat returns the stored result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OperationResumeRequest {
    /// The hold (`appr-<uuid>`).
    pub approval_id: String,
    /// Coordination context: the result then carries `coordination`. The work must exist
    /// (`WORK_NOT_FOUND`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_id: Option<String>,
}

/// Result of `operation_resume`: the held tool's result under its name. A held call that
/// failed answers its error instead (stored too, so a repeat answers the same).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OperationResumeResult {
    /// The hold.
    pub approval_id: String,
    /// `consumed`.
    pub state: ApprovalState,
    /// The result of a held `apply_patch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply_patch: Option<ApplyPatchResult>,
    /// The result of a held `exec_command`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec_command: Option<ExecCommandResult>,
}
