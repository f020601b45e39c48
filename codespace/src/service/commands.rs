//! `exec_command` and the process tools (API reference, "CodeSpace execution layer").

use std::time::Duration;

use serde_json::{json, Value};
use spaces_sdk::{ApiError, Approvals};

use super::args::{ExecArgs, ProcessArgs, ReadProcessArgs, ResizeArgs, WriteStdinArgs};
use super::files::{to_json, Approval};
use super::{busy, refuse_read_only, CodeSpace};
use crate::exec::ExecSpec;

/// Longest long-poll of `read_process` (`wait_ms`), ms.
pub const READ_PROCESS_MAX_WAIT_MS: u64 = 30_000;

impl CodeSpace {
    /// `exec_command{workspace_id, command, tty?}` -> `{process_id, dispatch_status}`.
    ///
    /// No shell unless `command` starts one; cwd = the workspace root; the operator's clean
    /// environment (plus `TERM` for a PTY) and time limit; a PTY starts at 24x80. Errors:
    /// `WORKSPACE_NOT_FOUND`, `UNAUTHORIZED` (read-only), `APPROVAL_REQUIRED` (approvals
    /// `confirm`), `WORKSPACE_BUSY`, `INVALID_COMMAND`, `PROCESS_SPAWN_FAILED`.
    pub async fn exec_command(&self, args: ExecArgs) -> Result<Value, ApiError> {
        self.exec_command_as(args, Approval::Check).await
    }

    pub(super) async fn exec_command_as(&self, args: ExecArgs, approval: Approval) -> Result<Value, ApiError> {
        let ws = self.workspace(&args.workspace_id)?;
        if ws.read_only {
            return Err(refuse_read_only(&ws, "exec_command"));
        }
        if args.command.first().is_none_or(|p| p.is_empty()) {
            return Err(ApiError::new(
                spaces_sdk::ErrorCode::InvalidCommand,
                "command must be a non-empty argument array, e.g. [\"/bin/echo\", \"hi\"]",
            ));
        }
        if approval == Approval::Check && ws.approvals == Approvals::Confirm {
            return Err(self.hold("exec_command", &ws.workspace_id, to_json(&args)?).await?);
        }
        let root = self.root(&ws)?;
        let mut env = self.inner.exec.env.clone();
        if let Some((name, value)) = self.inner.exec.host_marker.as_deref().and_then(|m| m.split_once('=')) {
            env.insert(name.to_owned(), value.to_owned());
        }
        if args.tty {
            env.entry("TERM".to_owned()).or_insert_with(|| "xterm-256color".to_owned());
        }
        let spec = ExecSpec {
            argv: args.command,
            cwd: root.path().to_path_buf(),
            env,
            tty: args.tty,
            tty_size: None,
            owner: super::owner(&root),
            timeout: self.inner.exec.timeout,
            tag: String::new(),
        };
        let gate = self.gate(&root);
        let _held = gate.lock().await;
        if let Some(process_id) = self.live_in(&root) {
            return Err(busy(&ws.workspace_id, &process_id));
        }
        to_json(&self.inner.processes.exec(spec)?)
    }

    /// `read_process{process_id, cursor?, wait_ms?}` -> `{process_id, cursor, chunk, eof,
    /// output_lost, retained_from}`. `wait_ms` (a Spaces extension, <= 30,000) waits for new
    /// output. Errors: `PROCESS_NOT_FOUND`, `INVALID_ARGUMENT` (cursor past the end).
    pub async fn read_process(&self, args: ReadProcessArgs) -> Result<Value, ApiError> {
        let wait = args.wait_ms.map(|ms| Duration::from_millis(ms.min(READ_PROCESS_MAX_WAIT_MS)));
        to_json(&self.inner.processes.read(&args.process_id, args.cursor, wait).await?)
    }

    /// `process_status{process_id}`. Errors: `PROCESS_NOT_FOUND`.
    pub async fn process_status(&self, args: ProcessArgs) -> Result<Value, ApiError> {
        to_json(&self.inner.processes.status(&args.process_id)?)
    }

    /// `write_stdin{process_id, data}` -> `{ok: true}`. Errors: `PROCESS_NOT_FOUND`,
    /// `PROCESS_NOT_RUNNING` (names the exit), `INVALID_ARGUMENT`.
    pub async fn write_stdin(&self, args: WriteStdinArgs) -> Result<Value, ApiError> {
        self.inner.processes.write_stdin(&args.process_id, args.data.as_bytes()).await?;
        Ok(json!({ "ok": true }))
    }

    /// `process_resize{process_id, rows, cols}` -> `{ok: true}`. Errors: `PROCESS_NOT_FOUND`,
    /// `PROCESS_NOT_TTY`, `PROCESS_NOT_RUNNING`.
    pub async fn process_resize(&self, args: ResizeArgs) -> Result<Value, ApiError> {
        self.inner.processes.resize(&args.process_id, args.rows, args.cols)?;
        Ok(json!({ "ok": true }))
    }

    /// `terminate_process{process_id}` -> `{ok: true}` once the process is reaped (signal to the
    /// whole process group, grace, kill). Errors: `PROCESS_NOT_FOUND`.
    pub async fn terminate_process(&self, args: ProcessArgs) -> Result<Value, ApiError> {
        self.inner.processes.terminate(&args.process_id).await?;
        Ok(json!({ "ok": true }))
    }
}
