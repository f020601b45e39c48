//! `workspace_info`: what the registered workspace permits and what this host supports, every
//! flag true for this host (API reference, `workspace_info`).

use serde_json::{json, Value};
use spaces_sdk::ApiError;

use super::args::WorkspaceArgs;
use super::CodeSpace;

use crate::fs::{FIND_MAX_PATHS, READ_MAX_BYTES};

impl CodeSpace {
    /// `workspace_info{workspace_id}` -> `{workspace_id, root, profile, execution}`.
    ///
    /// `profile` is `read_only` or `read_write`. A read-only workspace reports `patch` and
    /// `process` unavailable (and omits process capabilities). Commands run without a sandbox
    /// (`command_sandbox: none`) and the network is not restricted (`policy: enabled,
    /// enforcement: none`). Processes belong to the daemon: a client disconnect keeps them
    /// running; a daemon shutdown ends them; a restart does not restore handles
    /// (`restart_recovery: none`). Errors: `WORKSPACE_NOT_FOUND`.
    pub async fn workspace_info(&self, args: WorkspaceArgs) -> Result<Value, ApiError> {
        let ws = self.workspace(&args.workspace_id)?;
        let writable = !ws.read_only;
        let mut process = json!({ "available": writable });
        if writable {
            let limits = &self.inner.exec.limits;
            process["capabilities"] = json!({
                "handles": true,
                "survives_request_end": true,
                "write_stdin": true,
                "incremental_read": true,
                "terminate": true,
                "output_combined": true,
                "output_retained_bytes": limits.retained_bytes,
                "exited_handles": {
                    "kept_for_ms": limits.keep_exited_for.as_millis() as u64,
                    "max": limits.keep_exited_max,
                },
                "timeout_ms": self.inner.exec.timeout.map(|t| t.as_millis() as u64),
                "tty": {
                    "supported": true,
                    "default": false,
                    "initial_rows": 24,
                    "initial_cols": 80,
                    "resize_supported": true,
                },
                "lifetime": {
                    "owner": "daemon",
                    "client_disconnect": "keep_running",
                    "runner_disconnect": "terminate",
                    "gateway_shutdown": "terminate",
                    "restart_recovery": "none",
                },
            });
        }
        Ok(json!({
            "workspace_id": ws.workspace_id,
            "root": ws.root.display().to_string(),
            "profile": if writable { "read_write" } else { "read_only" },
            "execution": {
                "permissions": { "read": true, "write": writable, "exec": writable },
                "files": {
                    "read": { "available": true },
                    "find": { "available": true },
                    "patch": { "available": writable },
                    "capabilities": {
                        "read_max_bytes": READ_MAX_BYTES,
                        "find_max_paths": FIND_MAX_PATHS,
                        "read_range": true,
                        "find_pagination": true,
                    },
                },
                "process": process,
                "serialization": {
                    "scope": "workspace",
                    "process_conflict": "reject",
                    "conflict_error": "WORKSPACE_BUSY",
                    "reads_during_process": "allowed",
                },
                "isolation": {
                    "file_tools_workspace_scoped": true,
                    "command_sandbox": "none",
                },
                "network": {
                    "policy": "enabled",
                    "enforcement": "none",
                    "client_may_escalate": false,
                },
                "approvals": ws.approvals.as_str(),
            },
        }))
    }
}
