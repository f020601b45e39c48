//! `workspace_info` (API reference, "CodeSpace execution layer"): what a workspace permits
//! and what this host supports, every flag telling the truth about this host.

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
    /// Largest `read` window, bytes (`ReadRequest::LIMIT_MAX`).
    pub read_max_bytes: u64,
    /// Most paths in one `find` page (`FindRequest::LIMIT_MAX`).
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
