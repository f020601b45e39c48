//! `exec_command` and the process tools: `read_process`, `process_status`, `write_stdin`,
//! `process_resize`, `terminate_process` (API reference, "CodeSpace execution layer").

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `exec_command`: start a command in the workspace root. No shell unless the argv starts one;
/// a clean environment; the operator's time limit. A live command occupies the workspace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecCommandRequest {
    /// The workspace (a registered Space's name).
    pub workspace_id: String,
    /// Program and arguments, e.g. `["cargo", "test"]`; non-empty (`INVALID_COMMAND`). A
    /// relative program is looked up in the clean `PATH`.
    pub command: Vec<String>,
    /// Run on a PTY (24 rows x 80 columns, [`ExecCommandRequest::TTY_ROWS`] x
    /// [`ExecCommandRequest::TTY_COLS`]) instead of pipes. Default false.
    #[serde(default)]
    pub tty: bool,
    /// Coordination context: the result then carries `coordination`. The work must exist
    /// (`WORK_NOT_FOUND`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_id: Option<String>,
}

impl ExecCommandRequest {
    /// Rows of a new PTY.
    pub const TTY_ROWS: u16 = 24;
    /// Columns of a new PTY.
    pub const TTY_COLS: u16 = 80;
}

/// Whether the spawn was acknowledged. `unknown` is for callers that lose track of a spawn
/// (e.g. an interrupted approval resume); a started command reads `confirmed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DispatchStatus {
    /// The process was started.
    Confirmed,
    /// Whether it started is not known.
    Unknown,
}

/// Result of `exec_command`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExecCommandResult {
    /// The handle, `proc-<uuid>`.
    pub process_id: String,
    /// `confirmed` or `unknown`.
    pub dispatch_status: DispatchStatus,
}

/// `read_process`: the combined output (stdout and stderr in one byte stream) from a cursor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadProcessRequest {
    /// The handle from `exec_command`.
    pub process_id: String,
    /// Byte offset in the combined output to read from (the `cursor` of the previous answer);
    /// default 0. Bytes no longer retained are skipped (`output_lost`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<u64>,
    /// Spaces extension: wait up to this many ms for output past the cursor (long-poll); at
    /// most 30000 ([`ReadProcessRequest::WAIT_MS_MAX`]), larger values are clamped. Default:
    /// answer at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
    /// Coordination context: the result then carries `coordination`. The work must exist
    /// (`WORK_NOT_FOUND`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_id: Option<String>,
}

impl ReadProcessRequest {
    /// Longest long-poll, ms.
    pub const WAIT_MS_MAX: u64 = 30_000;
}

/// Result of `read_process`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReadProcessResult {
    /// The handle.
    pub process_id: String,
    /// The next cursor (bytes): pass it back unchanged.
    pub cursor: u64,
    /// Output from the cursor (or from `retained_from` when the cursor's bytes were dropped),
    /// lossy UTF-8.
    pub chunk: String,
    /// The process exited, collection finished and the cursor reached the end: nothing more
    /// will come, and the workspace is free for the next command (spec: `read_process`).
    pub eof: bool,
    /// True once the retained window no longer starts at byte 0.
    pub output_lost: bool,
    /// Bytes dropped so far (the retained window starts here).
    pub retained_from: u64,
}

/// `process_status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessStatusRequest {
    /// The handle from `exec_command`.
    pub process_id: String,
    /// Coordination context: the result then carries `coordination`. The work must exist
    /// (`WORK_NOT_FOUND`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_id: Option<String>,
}

/// `running` or `exited` (the direct child was reaped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProcessState {
    /// Still running.
    Running,
    /// Ended; `termination` says how.
    Exited,
}

/// How an exited process ended. Only `exited` carries an exit code; `timeout`, `terminated`
/// and `unknown` are never success.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    /// Exited on its own (`exit_code` present).
    Exited,
    /// Killed by a signal not sent by the host (`signal` present), e.g. `kill -9` from outside.
    Signaled,
    /// Stopped because its time limit passed.
    Timeout,
    /// Stopped by `terminate_process`.
    Terminated,
    /// The exit status could not be read.
    Unknown,
}

/// Result of `process_status`. Byte counts are of the combined output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessStatus {
    /// The handle.
    pub process_id: String,
    /// The workspace the command was started in (its `exec_command`'s `workspace_id`).
    pub workspace_id: String,
    /// `running` or `exited`.
    pub state: ProcessState,
    /// How it ended, once exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination: Option<Termination>,
    /// Exit code, only when `termination` is `exited`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Signal number, only when `termination` is `signaled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Output bytes produced so far.
    pub output_total: u64,
    /// Output bytes dropped so far (the retained window starts here).
    pub output_retained_from: u64,
    /// The process exited and output collection finished (then `state` is `exited`).
    pub eof: bool,
}

/// `write_stdin`: bytes to the process's stdin (or its PTY).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteStdinRequest {
    /// The handle from `exec_command`.
    pub process_id: String,
    /// The text to write, as UTF-8 bytes (include `\n` to end a line).
    pub data: String,
    /// Coordination context: the result then carries `coordination`. The work must exist
    /// (`WORK_NOT_FOUND`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_id: Option<String>,
}

impl WriteStdinRequest {
    /// Longest a `write_stdin` call waits, in total, for the process to take its input (its pipe
    /// or terminal is full while it is not reading), ms. Then the call answers `TIMEOUT` saying
    /// how many of the bytes were written; the process keeps running. Treat such a write as
    /// interrupted: inspect its partial effects before sending more.
    pub const TIMEOUT_MS: u64 = 10_000;
}

/// `process_resize`: the new size of a PTY process (`PROCESS_NOT_TTY` for pipes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessResizeRequest {
    /// The handle from `exec_command{tty: true}`.
    pub process_id: String,
    /// Rows, 1 to 65535.
    pub rows: u16,
    /// Columns, 1 to 65535.
    pub cols: u16,
    /// Coordination context: the result then carries `coordination`. The work must exist
    /// (`WORK_NOT_FOUND`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_id: Option<String>,
}

/// `terminate_process`: end the process's whole process group (signal, grace, kill); answers
/// once it is reaped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TerminateProcessRequest {
    /// The handle from `exec_command`.
    pub process_id: String,
    /// Coordination context: the result then carries `coordination`. The work must exist
    /// (`WORK_NOT_FOUND`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_id: Option<String>,
}

/// Result of `write_stdin`, `process_resize` and `terminate_process`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OkResult {
    /// Always true (a failure is an error instead).
    pub ok: bool,
}
