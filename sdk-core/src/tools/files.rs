//! `workspace_info`, `read`, `find`, `apply_patch`, `operation_status` (API reference,
//! "CodeSpace execution layer").

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::ErrorCode;
use crate::run::Approvals;

// ---------------------------------------------------------------------------------------------
// workspace_info

/// `workspace_info`: what the workspace permits and what this host supports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceInfoRequest {
    /// The workspace (a registered Space's name).
    pub workspace_id: String,
    /// Coordination context: the result then carries `coordination`. The work must exist
    /// (`WORK_NOT_FOUND`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_id: Option<String>,
}

/// Result of `workspace_info`: every flag tells the truth about this host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkspaceInfoResult {
    /// The workspace asked about.
    pub workspace_id: String,
    /// Absolute path of the workspace root on the host.
    pub root: String,
    /// `read_only` (read and find only) or `read_write`.
    pub profile: Profile,
    /// What the tools can do here.
    pub execution: ExecutionInfo,
}

/// A workspace's profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// `read` and `find` only: no `apply_patch`, no `exec_command`.
    ReadOnly,
    /// Every tool.
    ReadWrite,
}

/// `workspace_info.execution`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExecutionInfo {
    /// What a caller may do in this workspace.
    pub permissions: Permissions,
    /// The file tools (`read`, `find`, `apply_patch`).
    pub files: FileTools,
    /// The process tools (`exec_command` and its handles).
    pub process: ProcessTools,
    /// How tools of one workspace are serialized.
    pub serialization: Serialization,
    /// What confines the tools.
    pub isolation: Isolation,
    /// Network access of commands.
    pub network: NetworkInfo,
    /// The operator's approval setting: `off` or `confirm` (mutations are held).
    pub approvals: Approvals,
}

/// `execution.permissions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Permissions {
    /// Files may be read (`read`, `find`).
    pub read: bool,
    /// Files may be changed (`apply_patch`).
    pub write: bool,
    /// Commands may run (`exec_command`).
    pub exec: bool,
}

/// Whether a tool can be called here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Availability {
    /// True when the tool works in this workspace.
    pub available: bool,
}

/// `execution.files`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FileTools {
    /// `read`.
    pub read: Availability,
    /// `find`.
    pub find: Availability,
    /// `apply_patch` (unavailable in a read-only workspace).
    pub patch: Availability,
    /// Limits of the file tools.
    pub capabilities: FileCapabilities,
}

/// `execution.files.capabilities`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FileCapabilities {
    /// Largest `read` window, bytes ([`ReadRequest::LIMIT_MAX`]).
    pub read_max_bytes: u64,
    /// Most paths in one `find` page ([`FindRequest::LIMIT_MAX`]).
    pub find_max_paths: u64,
    /// `read` takes `offset`/`limit`.
    pub read_range: bool,
    /// `find` takes `offset`/`limit` and answers `next_offset`.
    pub find_pagination: bool,
}

/// `execution.process`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessTools {
    /// True when `exec_command` works here (false in a read-only workspace).
    pub available: bool,
    /// What the process tools can do; omitted when unavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<ProcessCapabilities>,
}

/// `execution.process.capabilities`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessCapabilities {
    /// `exec_command` returns a `process_id` handle.
    pub handles: bool,
    /// A process outlives the request that started it.
    pub survives_request_end: bool,
    /// `write_stdin` is supported.
    pub write_stdin: bool,
    /// `read_process` reads output incrementally by cursor.
    pub incremental_read: bool,
    /// `terminate_process` is supported.
    pub terminate: bool,
    /// stdout and stderr come as one combined byte stream.
    pub output_combined: bool,
    /// Output bytes retained per process (the tail), bytes.
    pub output_retained_bytes: u64,
    /// How long and how many exited handles stay readable.
    pub exited_handles: ExitedHandles,
    /// The operator's time limit of one command, ms; `null` when there is none.
    pub timeout_ms: Option<u64>,
    /// PTY support.
    pub tty: TtyCapabilities,
    /// Who owns a process and what ends it.
    pub lifetime: ProcessLifetime,
}

/// `process.capabilities.exited_handles`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExitedHandles {
    /// How long an exited handle stays readable, ms; then `PROCESS_NOT_FOUND`.
    pub kept_for_ms: u64,
    /// Most exited handles kept (the oldest exit is evicted first).
    pub max: u64,
}

/// `process.capabilities.tty`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TtyCapabilities {
    /// `exec_command{tty: true}` allocates a PTY.
    pub supported: bool,
    /// Whether `tty` defaults to true (it does not).
    pub default: bool,
    /// Rows of a new PTY ([`crate::tools::ExecCommandRequest::TTY_ROWS`]).
    pub initial_rows: u16,
    /// Columns of a new PTY ([`crate::tools::ExecCommandRequest::TTY_COLS`]).
    pub initial_cols: u16,
    /// `process_resize` is supported.
    pub resize_supported: bool,
}

/// `process.capabilities.lifetime`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessLifetime {
    /// Who owns the processes.
    pub owner: ProcessOwner,
    /// What a client disconnect does to its processes.
    pub client_disconnect: LifetimeAction,
    /// What losing the runner does.
    pub runner_disconnect: LifetimeAction,
    /// What a shutdown of the host daemon does.
    pub gateway_shutdown: LifetimeAction,
    /// Whether handles survive a daemon restart.
    pub restart_recovery: RestartRecovery,
}

/// Owner of the processes of a workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProcessOwner {
    /// The host daemon (`spacesd`).
    Daemon,
}

/// What an event does to running processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LifetimeAction {
    /// They keep running.
    KeepRunning,
    /// Their process groups are ended.
    Terminate,
}

/// Whether process handles survive a daemon restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RestartRecovery {
    /// A restart ends them; their ids answer `PROCESS_NOT_FOUND`.
    None,
    /// They keep running while the daemon is down (each held by its shim), and the next daemon
    /// re-attaches their handles: the same `process_id`s answer, `read_process` continues from
    /// the same cursors (output printed meanwhile included, within the retained window), and
    /// the exit, `terminate_process`, the time limit and `WORKSPACE_BUSY` carry on.
    Reattach,
}

/// `execution.serialization`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Serialization {
    /// What one live command occupies.
    pub scope: SerializationScope,
    /// What happens to a conflicting `apply_patch` or second `exec_command`.
    pub process_conflict: ConflictPolicy,
    /// The error code of such a conflict (`WORKSPACE_BUSY`).
    pub conflict_error: ErrorCode,
    /// Whether `read`/`find` work while a command runs.
    pub reads_during_process: ReadsDuringProcess,
}

/// `serialization.scope`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SerializationScope {
    /// One live command per workspace (per root directory).
    Workspace,
}

/// `serialization.process_conflict`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ConflictPolicy {
    /// Refused at once with `conflict_error`.
    Reject,
}

/// `serialization.reads_during_process`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReadsDuringProcess {
    /// `read` and `find` keep working.
    Allowed,
}

/// `execution.isolation`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Isolation {
    /// File tools cannot leave the workspace root (checked at open time).
    pub file_tools_workspace_scoped: bool,
    /// The sandbox commands run in: `none` or the sandbox's name.
    pub command_sandbox: String,
    /// What holds every process a command (or an agent run) starts, so that a stop or a time
    /// limit ends all of them and the limits hold: a cgroup per command and run, or its
    /// shim's subreaper.
    pub process_containment: ProcessContainment,
}

/// `isolation.process_containment` (and `agent_capabilities.process_containment`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessContainment {
    /// `cgroup_v2`, `cgroup_v1` or `subreaper`.
    pub mode: Containment,
    /// Most tasks (processes and threads) one command or run may have at once; absent: no
    /// limit (always absent without a cgroup). Past it, `fork` fails inside the tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_max: Option<u64>,
    /// Most memory one command or run may use, in bytes; absent: no limit (always absent
    /// without a cgroup). Past it, the kernel kills a process of the tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_max_bytes: Option<u64>,
}

/// What holds a command's or run's processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Containment {
    /// A cgroup v2 per command and run: every descendant, whatever it does (`setsid`, `env
    /// -i`, double forks), is in it; a stop kills the cgroup; the limits hold.
    CgroupV2,
    /// A cgroup v1 (`pids`, and `memory` where mounted) per command and run, as for v2.
    CgroupV1,
    /// No cgroup could be made: the shim (a child subreaper) keeps every descendant while it
    /// lives and a stop ends its whole tree; no process or memory limit.
    Subreaper,
    /// Commands are children of the serving process, found by process group and tag (a host
    /// without shims, e.g. an embedded service in tests).
    ProcessGroup,
}

/// `execution.network`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NetworkInfo {
    /// `restricted` or `enabled`.
    pub policy: NetworkPolicy,
    /// `none` (the policy is not enforced) or `enforced`.
    pub enforcement: Enforcement,
    /// Whether a client can ask for more network access (never).
    pub client_may_escalate: bool,
}

/// `network.policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NetworkPolicy {
    /// Commands should not reach the network.
    Restricted,
    /// Commands may reach the network.
    Enabled,
}

/// `network.enforcement`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    /// Nothing enforces the policy.
    None,
    /// The host enforces the policy.
    Enforced,
}

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
    pub const ALL: [OperationStatus; 6] = [
        Self::Checked,
        Self::Applied,
        Self::Rejected,
        Self::FailedRolledBack,
        Self::FailedPartial,
        Self::Unknown,
    ];

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
