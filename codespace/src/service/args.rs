//! Tool arguments, as the API reference names them. Unknown extra arguments are ignored and
//! never grant anything (`approved: true`, `network: true`, ...): these structs simply do not
//! have such fields.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use spaces_sdk::{ApiError, ErrorCode};

/// Decodes `args` as `T`, or `INVALID_ARGUMENT` naming the tool and what is wrong.
pub fn decode<T: DeserializeOwned>(tool: &str, args: serde_json::Value) -> Result<T, ApiError> {
    let args = if args.is_null() { serde_json::Value::Object(Default::default()) } else { args };
    serde_json::from_value(args)
        .map_err(|e| ApiError::new(ErrorCode::InvalidArgument, format!("invalid arguments for {tool}: {e}")))
}

#[derive(Debug, Clone, Deserialize)]
pub struct WorkspaceArgs {
    pub workspace_id: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ReadArgs {
    pub workspace_id: String,
    pub path: String,
    pub offset: Option<u64>,
    pub limit: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct FindArgs {
    pub workspace_id: String,
    pub glob: Option<String>,
    pub offset: Option<u64>,
    pub limit: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub struct ApplyPatchArgs {
    pub workspace_id: String,
    pub patch: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub expected_versions: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_key: Option<String>,
    #[serde(default)]
    pub check_only: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct OperationStatusArgs {
    pub operation_id: Option<String>,
    pub operation_key: Option<String>,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub struct ExecArgs {
    pub workspace_id: String,
    pub command: Vec<String>,
    #[serde(default)]
    pub tty: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ProcessArgs {
    pub process_id: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ReadProcessArgs {
    pub process_id: String,
    pub cursor: Option<u64>,
    /// Spaces extension: wait up to this many ms for new output (long-poll); at most 30,000.
    pub wait_ms: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct WriteStdinArgs {
    pub process_id: String,
    pub data: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ResizeArgs {
    pub process_id: String,
    pub rows: u16,
    pub cols: u16,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ApprovalCreateArgs {
    pub tool: String,
    pub arguments: serde_json::Value,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ApprovalResolveArgs {
    pub approval_id: String,
    pub decision: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ApprovalArgs {
    pub approval_id: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct WorkOpenArgs {
    pub workspace_id: String,
    pub title: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct WorkArgs {
    pub work_id: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SteerCompleteArgs {
    pub work_id: String,
    pub intent_id: String,
    pub outcome: String,
}
