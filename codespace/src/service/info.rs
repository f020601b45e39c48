//! `workspace_info`: what the registered workspace permits and what this host supports, every
//! flag true for this host (API reference, `workspace_info`).

use spaces_sdk::tools::{
    Availability, ConflictPolicy, Containment, Enforcement, ExecCommandRequest, ExecutionInfo, ExitedHandles, FileCapabilities, FileTools,
    FindRequest, Isolation, LifetimeAction, NetworkInfo, NetworkPolicy, Permissions, ProcessCapabilities, ProcessContainment,
    ProcessLifetime, ProcessOwner, ProcessTools, Profile, ReadRequest, ReadsDuringProcess, RestartRecovery, Serialization,
    SerializationScope, TtyCapabilities, WorkspaceInfoRequest, WorkspaceInfoResult,
};
use spaces_sdk::{ErrorCode, SpaceNetwork};

use super::CodeSpace;
use crate::error::Result;

impl CodeSpace {
    /// `workspace_info{workspace_id}` -> `{workspace_id, root, profile, execution}`.
    ///
    /// `profile` is `read_only` or `read_write`. A read-only workspace reports `patch` and
    /// `process` unavailable (and omits process capabilities). Commands run in the host's
    /// sandbox (`command_sandbox: bubblewrap` or `landlock`, `spaces_os::sandbox`; `none` when the operator
    /// turned it off). `network` is the Space's setting in the contract's words: `enabled`
    /// (`enforcement: none`, nothing to enforce), or for `network: none` `restricted`, with
    /// `enforcement: enforced` when commands run in the sandbox (bubblewrap: a network
    /// namespace of their own; Landlock: no TCP, or no start) and `none` when the host has no
    /// sandbox; such a host refuses the workspace's commands, so it also reports `exec` and
    /// `process` unavailable. Processes belong to the daemon: a client disconnect keeps them
    /// running. With shims (the daemon's setting) a daemon shutdown or crash keeps them running
    /// and the next daemon re-adopts their handles (`gateway_shutdown: keep_running`,
    /// `restart_recovery: reattach`); without, a shutdown ends them and a restart does not
    /// restore handles (`terminate`, `none`). `isolation.process_containment` says what holds a
    /// command's processes: with shims, a cgroup per command (with its limits) where the host
    /// allowed one ([`spaces_os::process::cgroup::init`]), else the shim's subreaper; without,
    /// `process_group`. Errors: `WORKSPACE_NOT_FOUND`.
    pub async fn workspace_info(&self, req: WorkspaceInfoRequest) -> Result<WorkspaceInfoResult> {
        let ws = self.workspace(&req.workspace_id)?;
        let writable = !ws.read_only;
        let sandboxed = spaces_os::sandbox::level() != spaces_os::sandbox::Level::Off && self.inner.processes.shimmed();
        let network = match ws.network {
            SpaceNetwork::Enabled => {
                NetworkInfo { policy: NetworkPolicy::Enabled, enforcement: Enforcement::None, client_may_escalate: false }
            }
            SpaceNetwork::None => NetworkInfo {
                policy: NetworkPolicy::Restricted,
                enforcement: if sandboxed { Enforcement::Enforced } else { Enforcement::None },
                client_may_escalate: false,
            },
        };
        let can_exec = writable && !super::network_unenforced(&ws);
        let limits = &self.inner.exec.limits;
        let shimmed = self.inner.processes.shimmed();
        let capabilities = can_exec.then(|| ProcessCapabilities {
            handles: true,
            survives_request_end: true,
            write_stdin: true,
            incremental_read: true,
            terminate: true,
            output_combined: true,
            output_retained_bytes: limits.retained_bytes as u64,
            exited_handles: ExitedHandles { kept_for_ms: limits.keep_exited_for.as_millis() as u64, max: limits.keep_exited_max as u64 },
            timeout_ms: self.inner.exec.timeout.map(|t| t.as_millis() as u64),
            tty: TtyCapabilities {
                supported: true,
                default: false,
                initial_rows: ExecCommandRequest::TTY_ROWS,
                initial_cols: ExecCommandRequest::TTY_COLS,
                resize_supported: true,
            },
            lifetime: ProcessLifetime {
                owner: ProcessOwner::Daemon,
                client_disconnect: LifetimeAction::KeepRunning,
                runner_disconnect: LifetimeAction::Terminate,
                gateway_shutdown: if shimmed { LifetimeAction::KeepRunning } else { LifetimeAction::Terminate },
                restart_recovery: if shimmed { RestartRecovery::Reattach } else { RestartRecovery::None },
            },
        });
        Ok(WorkspaceInfoResult {
            workspace_id: ws.workspace_id,
            root: ws.root.display().to_string(),
            profile: if writable { Profile::ReadWrite } else { Profile::ReadOnly },
            execution: ExecutionInfo {
                permissions: Permissions { read: true, write: writable, exec: can_exec },
                files: FileTools {
                    read: Availability { available: true },
                    find: Availability { available: true },
                    patch: Availability { available: writable },
                    capabilities: FileCapabilities {
                        read_max_bytes: ReadRequest::LIMIT_MAX,
                        find_max_paths: FindRequest::LIMIT_MAX,
                        read_range: true,
                        find_pagination: true,
                    },
                },
                process: ProcessTools { available: can_exec, capabilities },
                serialization: Serialization {
                    scope: SerializationScope::Workspace,
                    process_conflict: ConflictPolicy::Reject,
                    conflict_error: ErrorCode::WorkspaceBusy,
                    reads_during_process: ReadsDuringProcess::Allowed,
                },
                isolation: Isolation {
                    file_tools_workspace_scoped: true,
                    command_sandbox: match spaces_os::sandbox::level() {
                        spaces_os::sandbox::Level::Off => "none".to_owned(),
                        level if shimmed => level.as_str().to_owned(),
                        _ => "none".to_owned(),
                    },
                    process_containment: if shimmed {
                        spaces_os::process::cgroup::report()
                    } else {
                        ProcessContainment { mode: Containment::ProcessGroup, pids_max: None, memory_max_bytes: None }
                    },
                },
                network,
                approvals: ws.approvals,
            },
        })
    }
}
