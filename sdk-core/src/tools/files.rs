//! `read`, `find`, `apply_patch`, `operation_status` (API reference, "CodeSpace execution
//! layer"); `workspace_info` is in [`super::workspace`].

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// ---------------------------------------------------------------------------------------------
// read

/// `read`: a window of one regular file, with the version of the whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadRequest {
    /// The workspace (a registered Space's name).
    pub workspace_id: String,
    /// The file, relative to the workspace root (`..`, absolute paths, NUL and symlinks are
    /// refused).
    pub path: String,
    /// First byte of the window, bytes; default 0. Past the end gives an empty window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Most bytes returned, 1 to 1048576 (1 MiB, [`ReadRequest::LIMIT_MAX`]); default and
    /// larger values: 1 MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Coordination context: the result then carries `coordination`. The work must exist
    /// (`WORK_NOT_FOUND`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_id: Option<String>,
}

impl ReadRequest {
    /// Largest window, bytes (`read_max_bytes`, 1 MiB).
    pub const LIMIT_MAX: u64 = 1_048_576;
    /// Window when `limit` is omitted, bytes.
    pub const LIMIT_DEFAULT: u64 = Self::LIMIT_MAX;
}

/// Result of `read`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReadResult {
    /// The path as requested (normalized).
    pub path: String,
    /// The window's bytes as text (lossy when not UTF-8, see `content_lossy`).
    pub content: String,
    /// `sha256:<hex>` of the whole file, usable in `expected_versions`.
    pub version: String,
    /// True when bytes remain after the window.
    pub truncated: bool,
    /// Size of the whole file, bytes.
    pub byte_count: u64,
    /// The requested start offset, bytes, echoed when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Where the next window starts, bytes, when `truncated`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
    /// `true` when the window was not valid UTF-8 and invalid bytes became U+FFFD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_lossy: Option<bool>,
}

// ---------------------------------------------------------------------------------------------
// find

/// `find`: regular files matching a glob, sorted, paged. Symlinks are neither followed nor
/// listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindRequest {
    /// The workspace (a registered Space's name).
    pub workspace_id: String,
    /// Glob over the whole relative path; `*` never crosses `/` (`*.rs` is top level only,
    /// `**/*.rs` is recursive). Default: every file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glob: Option<String>,
    /// Paths to skip (a count, from a previous `next_offset`); default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Most paths returned, 1 to 10000 ([`FindRequest::LIMIT_MAX`]); default and larger
    /// values: 10000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Coordination context: the result then carries `coordination`. The work must exist
    /// (`WORK_NOT_FOUND`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_id: Option<String>,
}

impl FindRequest {
    /// Most paths in one page (`find_max_paths`).
    pub const LIMIT_MAX: u64 = 10_000;
    /// Page size when `limit` is omitted.
    pub const LIMIT_DEFAULT: u64 = Self::LIMIT_MAX;
}

/// Result of `find`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FindResult {
    /// This page of matching regular files: relative to the root, `/`-separated, sorted.
    pub paths: Vec<String>,
    /// True when matches remain after this page.
    pub truncated: bool,
    /// Offset of the next page (a count of paths), when `truncated`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
    /// True when part of the tree could not be listed (an unreadable directory, a non-UTF-8
    /// name, or the walk's bound on visited entries).
    pub incomplete: bool,
    /// `sha256:<hex>` of the full sorted match list: equal versions mean the same listing,
    /// whatever page was asked.
    pub listing_version: String,
}

// ---------------------------------------------------------------------------------------------
// apply_patch

/// `apply_patch`: a V4A patch, checked as a whole before any write, committed atomically.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchRequest {
    /// The workspace (a registered Space's name).
    pub workspace_id: String,
    /// The V4A patch text, from `*** Begin Patch` to `*** End Patch`.
    pub patch: String,
    /// Path -> version the file must have (`sha256:<hex>` from `read`, or `absent` for "must
    /// not exist"); a mismatch is `VERSION_CONFLICT`. Default: none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub expected_versions: BTreeMap<String, String>,
    /// Idempotency key, unique host-wide: the same key with the same request replays the
    /// stored result (`replayed: true`); with a different request it is
    /// `OPERATION_KEY_CONFLICT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_key: Option<String>,
    /// Check only (status `checked`), write nothing. Default false.
    #[serde(default)]
    pub check_only: bool,
    /// Coordination context: the result then carries `coordination`. The work must exist
    /// (`WORK_NOT_FOUND`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_id: Option<String>,
}

/// Outcome of a patch operation (`apply_patch.status`, `operation_status.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OperationStatus {
    /// Checked only (`check_only`), nothing written.
    Checked,
    /// Every after-version verified on disk.
    Applied,
    /// Refused; nothing written.
    Rejected,
    /// A write failed and every change was undone.
    FailedRolledBack,
    /// A write and its rollback failed: some files may be changed.
    FailedPartial,
    /// The outcome is not known (e.g. a crash mid-apply, or still in flight); never re-applied.
    Unknown,
}

impl OperationStatus {
    /// Every status, in contract order.
    pub const ALL: [OperationStatus; 6] =
        [Self::Checked, Self::Applied, Self::Rejected, Self::FailedRolledBack, Self::FailedPartial, Self::Unknown];

    /// The wire spelling, e.g. `"failed_rolled_back"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Checked => "checked",
            Self::Applied => "applied",
            Self::Rejected => "rejected",
            Self::FailedRolledBack => "failed_rolled_back",
            Self::FailedPartial => "failed_partial",
            Self::Unknown => "unknown",
        }
    }

    /// Parse the wire spelling; anything else is `None`.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// What a change does to its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// The file is created.
    Add,
    /// The file's content is replaced.
    Update,
    /// The file is removed.
    Delete,
    /// The file is moved to `to` (and possibly changed).
    Move,
}

impl ChangeKind {
    /// The wire spelling (`"move"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Add => "add",
            Self::Update => "update",
            Self::Delete => "delete",
            Self::Move => "move",
        }
    }
}

/// One entry of `changes[]` (`apply_patch`, `operation_status`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChangeRecord {
    /// The file the operation names (a move's source).
    pub path: String,
    /// `add | update | delete | move`.
    pub kind: ChangeKind,
    /// A move's destination.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// `sha256:<hex>` before the change; absent for an add.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_version: Option<String>,
    /// `sha256:<hex>` after the change (at `to` for a move); absent for a delete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_version: Option<String>,
}

/// Result of `apply_patch`. A refusal after the operation was minted is an error carrying
/// `operation_id`; its outcome is in `operation_status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApplyPatchResult {
    /// `checked`, `applied`, or `unknown` (a replay of an unfinished operation).
    pub status: OperationStatus,
    /// `op-<uuid>`; look it up with `operation_status`.
    pub operation_id: String,
    /// True when this is the stored result of an earlier call with the same `operation_key`.
    pub replayed: bool,
    /// Every file the patch names, in patch order.
    pub files: Vec<String>,
    /// What happened (or, for `checked`, would happen) to each file.
    pub changes: Vec<ChangeRecord>,
}

// ---------------------------------------------------------------------------------------------
// operation_status

/// `operation_status`: the ledger record of a patch operation. Give exactly one of
/// `operation_id` or `operation_key` (`INVALID_ARGUMENT` otherwise).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OperationStatusRequest {
    /// The operation's id (`op-<uuid>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<String>,
    /// The `operation_key` the patch was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_key: Option<String>,
    /// Coordination context: the result then carries `coordination`. The work must exist
    /// (`WORK_NOT_FOUND`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_id: Option<String>,
}

/// What the ledger tracks: patches only (commands are tracked by `process_id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OperationKind {
    /// An `apply_patch` operation.
    Patch,
}

/// Name of a ledger event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventName {
    /// The operation was recorded, before anything was written.
    Minted,
    /// The operation ended (`status` says how).
    Finished,
}

/// One entry of `operation_status.events`. A `finished` event with `reason: "unknown"` was
/// written by crash recovery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OperationEvent {
    /// When, Unix ms.
    pub at: u64,
    /// `minted` or `finished`.
    pub name: EventName,
    /// The status a `finished` event recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<OperationStatus>,
    /// Why it finished that way, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Result of `operation_status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OperationRecord {
    /// `op-<uuid>`.
    pub operation_id: String,
    /// The outcome (`unknown` while in flight: then `finished_at` is absent).
    pub status: OperationStatus,
    /// Always `patch`.
    pub kind: OperationKind,
    /// The workspace the patch was for.
    pub workspace_id: String,
    /// When it was minted, Unix ms.
    pub created_at: u64,
    /// When it finished, Unix ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<u64>,
    /// Every file the patch names (empty when it was refused before planning).
    pub files: Vec<String>,
    /// The changes as recorded (planned ones for an operation that never finished).
    pub changes: Vec<ChangeRecord>,
    /// What happened, oldest first.
    pub events: Vec<OperationEvent>,
}
