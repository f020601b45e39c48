//! Result shapes of the process tools, field names as API.md spells them.

use serde::{Deserialize, Serialize};

/// Whether the spawn was acknowledged (`exec_command`). `unknown` is for callers that lose
/// track of a spawn (e.g. an interrupted approval resume); this layer always confirms.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DispatchStatus {
    Confirmed,
    Unknown,
}

/// `exec_command` result: `{process_id: "proc-<uuid>", dispatch_status}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExecStarted {
    pub process_id: String,
    pub dispatch_status: DispatchStatus,
}

/// `read_process` result. `chunk` is the combined output from the cursor (or from
/// `retained_from` when the cursor's bytes were dropped), lossy UTF-8; `cursor` is the next
/// cursor; `output_lost` is true once the retained window no longer starts at byte 0;
/// `retained_from` = bytes dropped so far; `eof` = collection finished and `cursor` reached the end.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReadProcess {
    pub process_id: String,
    pub cursor: u64,
    pub chunk: String,
    pub eof: bool,
    pub output_lost: bool,
    pub retained_from: u64,
}

/// `running` or `exited` (the direct child was reaped).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ProcessState {
    Running,
    Exited,
}

/// How an exited process ended. Only `exited` carries an exit code; `timeout`, `terminated`
/// and `unknown` are never success.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    /// Exited on its own (`exit_code` present).
    Exited,
    /// Killed by a signal not sent by us (`signal` present), e.g. `kill -9` from outside.
    Signaled,
    /// Stopped because its time limit passed.
    Timeout,
    /// Stopped by `terminate_process`.
    Terminated,
    /// The exit status could not be read.
    Unknown,
}

/// `process_status` result. Byte counts are of the combined output; `eof` = collection
/// finished.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProcessStatus {
    pub process_id: String,
    pub state: ProcessState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub termination: Option<Termination>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    pub output_total: u64,
    pub output_retained_from: u64,
    pub eof: bool,
}
