//! `exec_command` and the process tools (API reference, "CodeSpace execution layer").

use std::time::Duration;

use spaces_sdk::tools::{
    ExecCommandRequest, ExecCommandResult, HoldableTool, OkResult, ProcessResizeRequest, ProcessStatus, ProcessStatusRequest,
    ReadProcessRequest, ReadProcessResult, TerminateProcessRequest, WriteStdinRequest,
};
use spaces_sdk::Approvals;

use super::files::{to_json, Approval};
use super::{busy, refuse_read_only, CodeSpace};
use crate::error::{Error, Result};
use crate::exec::ExecSpec;

impl CodeSpace {
    /// `exec_command{workspace_id, command, tty?}` -> `{process_id, dispatch_status}`.
    ///
    /// No shell unless `command` starts one; cwd = the workspace root; the operator's clean
    /// environment (plus `TERM` for a PTY) and time limit; a PTY starts at 24x80; in a
    /// `network: none` workspace, a network namespace of its own (the registry's sandbox).
    /// Errors: `WORKSPACE_NOT_FOUND`, `UNAUTHORIZED` (read-only; or `network: none` on a host
    /// without a sandbox), `APPROVAL_REQUIRED` (approvals `confirm`), `WORKSPACE_BUSY`,
    /// `INVALID_COMMAND`, `PROCESS_SPAWN_FAILED`.
    pub async fn exec_command(&self, req: ExecCommandRequest) -> Result<ExecCommandResult> {
        self.exec_command_as(req, Approval::Check).await
    }

    pub(super) async fn exec_command_as(&self, args: ExecCommandRequest, approval: Approval) -> Result<ExecCommandResult> {
        let ws = self.workspace(&args.workspace_id)?;
        if ws.read_only {
            return Err(refuse_read_only(&ws, "exec_command"));
        }
        if super::network_unenforced(&ws) {
            return Err(Error::NetworkUnenforced { workspace_id: ws.workspace_id, tool: "exec_command" });
        }
        if args.command.first().is_none_or(|p| p.is_empty()) {
            return Err(Error::EmptyCommand);
        }
        if approval == Approval::Check && ws.approvals == Approvals::Confirm {
            // The held call is the request without its coordination context.
            let held = ExecCommandRequest { work_id: None, ..args };
            return Err(self.hold(HoldableTool::ExecCommand, &ws.workspace_id, to_json(&held)?).await);
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
            workspace_id: ws.workspace_id.clone(),
            timeout: self.inner.exec.timeout,
            tag: String::new(),
            sandbox: self.inner.registry.sandbox(&ws)?,
        };
        let gate = self.gate(&root);
        let _held = gate.lock().await;
        if let Some(process_id) = self.live_in(&root) {
            return Err(busy(&ws.workspace_id, &process_id));
        }
        self.inner.processes.start(spec).await
    }

    /// `read_process{process_id, cursor?, wait_ms?}` -> `{process_id, cursor, chunk, eof,
    /// output_lost, retained_from}`. `wait_ms` (a Spaces extension, clamped to
    /// [`ReadProcessRequest::WAIT_MS_MAX`]) waits for new output. Errors: `PROCESS_NOT_FOUND`,
    /// `INVALID_ARGUMENT` (cursor past the end).
    pub async fn read_process(&self, req: ReadProcessRequest) -> Result<ReadProcessResult> {
        let wait = req.wait_ms.map(|ms| Duration::from_millis(ms.min(ReadProcessRequest::WAIT_MS_MAX)));
        self.inner.processes.read(&req.process_id, req.cursor, wait).await
    }

    /// `process_status{process_id}`. Errors: `PROCESS_NOT_FOUND`.
    pub async fn process_status(&self, req: ProcessStatusRequest) -> Result<ProcessStatus> {
        self.inner.processes.status(&req.process_id)
    }

    /// `write_stdin{process_id, data}` -> `{ok: true}` once every byte is written. Errors:
    /// `PROCESS_NOT_FOUND`, `PROCESS_NOT_RUNNING` (names the exit), `INVALID_ARGUMENT`, and
    /// `TIMEOUT` when the process has not taken all of it within
    /// [`WriteStdinRequest::TIMEOUT_MS`] (the table's `stdin_timeout`): the message says how
    /// many bytes of how many were written, and the process keeps running.
    pub async fn write_stdin(&self, req: WriteStdinRequest) -> Result<OkResult> {
        self.inner.processes.write_stdin(&req.process_id, req.data.as_bytes()).await?;
        Ok(OkResult { ok: true })
    }

    /// `process_resize{process_id, rows, cols}` -> `{ok: true}`. Errors: `PROCESS_NOT_FOUND`,
    /// `PROCESS_NOT_TTY`, `PROCESS_NOT_RUNNING`, `INVALID_ARGUMENT` (zero rows or cols).
    pub async fn process_resize(&self, req: ProcessResizeRequest) -> Result<OkResult> {
        self.inner.processes.resize(&req.process_id, req.rows, req.cols).await?;
        Ok(OkResult { ok: true })
    }

    /// `terminate_process{process_id}` -> `{ok: true}` once the process is reaped (signal to the
    /// whole process group, grace, kill). Errors: `PROCESS_NOT_FOUND`.
    pub async fn terminate_process(&self, req: TerminateProcessRequest) -> Result<OkResult> {
        self.inner.processes.terminate(&req.process_id).await?;
        Ok(OkResult { ok: true })
    }
}
