//! The operation catalogue: every operation of the contract (API reference, all sections) with
//! its name, one-line doc, request and result types, and HTTP route. It is data, listed once in
//! [`crate::for_each_operation!`]; the daemon's operation table, the typed [`crate::client::Client`],
//! the HTTP routes, the OpenAPI document and the generated docs are all built from it.
//!
//! A new operation is one line here plus its handler in the daemon's `Service` (a test there
//! fails while an operation has no handler).

use serde::de::DeserializeOwned;
use serde::Serialize;

/// HTTP method of an operation's route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HttpMethod {
    Get,
    Post,
    Patch,
}

impl HttpMethod {
    /// `GET`, `POST`, `PATCH`.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
            HttpMethod::Patch => "PATCH",
        }
    }
}

/// Who an operation is for, beyond HTTP (where every operation is served).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// Agent loops and SDK users: served as an MCP tool and an SDK method too.
    Tool,
    /// The user's side of steering (`/inbox`): HTTP and SDKs, not an agent's MCP tool.
    Inbox,
    /// Host management for operators (volumes and persistent agents' homes): HTTP, the CLI and
    /// the SDKs; not an MCP tool, and refused to tool callers.
    Operator,
}

/// What an operation that changes state does, for callers that decide how carefully to call it
/// (MCP tool annotations `destructiveHint`, `idempotentHint`). Read-only operations need none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hint {
    /// It may delete, overwrite or end something (`destructiveHint: true`).
    Destructive,
    /// It only adds or records state, never removes any (`destructiveHint: false`).
    Additive,
    /// The same call again has no further effect (`idempotentHint: true`).
    Idempotent,
    /// Its HTTP route also answers `Accept: text/event-stream`, with its pages as server-sent
    /// events (API reference, `agent_events`; `spacesd/src/http/sse.rs`). Not an MCP annotation.
    EventStream,
}

/// One operation of the contract. Implemented by the marker types in [`ops`].
pub trait Operation {
    /// Wire name (`agent_start`, `read`, ...): the MCP tool name and the SDK method name.
    const NAME: &'static str;
    /// One-line description.
    const DOC: &'static str;
    /// HTTP method of the route.
    const METHOD: HttpMethod;
    /// Route template; `{field}` segments are request fields (`/v1/spaces/{space}/agents`).
    const PATH: &'static str;
    /// True when the operation changes nothing (MCP `readOnlyHint`).
    const READ_ONLY: bool;
    /// Who it is for beyond HTTP.
    const AUDIENCE: Audience;
    /// Behaviour hints of an operation that changes state (empty: none stated).
    const HINTS: &'static [Hint];
    /// The request (`#[serde(deny_unknown_fields)]`).
    type Request: Serialize + DeserializeOwned + schemars::JsonSchema + Send + Sync + 'static;
    /// The result.
    type Result: Serialize + DeserializeOwned + schemars::JsonSchema + Send + Sync + 'static;
}

/// The catalogue as plain data (no types): what docs and listings need.
#[derive(Debug, Clone, Copy)]
pub struct OperationInfo {
    pub name: &'static str,
    pub doc: &'static str,
    pub method: HttpMethod,
    pub path: &'static str,
    pub read_only: bool,
    pub audience: Audience,
    pub hints: &'static [Hint],
}

impl OperationInfo {
    /// The info of `O`.
    pub fn of<O: Operation>() -> OperationInfo {
        OperationInfo {
            name: O::NAME,
            doc: O::DOC,
            method: O::METHOD,
            path: O::PATH,
            read_only: O::READ_ONLY,
            audience: O::AUDIENCE,
            hints: O::HINTS,
        }
    }

    /// `Some(true)` for [`Hint::Destructive`], `Some(false)` for [`Hint::Additive`], else `None`
    /// (not stated; MCP clients then assume a state-changing tool may be destructive).
    pub fn destructive(&self) -> Option<bool> {
        if self.hints.contains(&Hint::Destructive) {
            Some(true)
        } else if self.hints.contains(&Hint::Additive) {
            Some(false)
        } else {
            None
        }
    }

    /// True for [`Hint::Idempotent`].
    pub fn idempotent(&self) -> bool {
        self.hints.contains(&Hint::Idempotent)
    }

    /// True for [`Hint::EventStream`]: the route streams when asked.
    pub fn event_stream(&self) -> bool {
        self.hints.contains(&Hint::EventStream)
    }

    /// The `{field}` names of the route template, in order.
    pub fn path_params(&self) -> Vec<&'static str> {
        path_params(self.path)
    }
}

/// The catalogue entry named `name`. Errors: `INVALID_ARGUMENT` naming the closest operation
/// and listing them all.
pub fn find(name: &str) -> Result<OperationInfo, crate::error::ApiError> {
    let all = catalogue();
    if let Some(info) = all.iter().find(|o| o.name == name) {
        return Ok(*info);
    }
    let names: Vec<String> = all.iter().map(|o| o.name.to_owned()).collect();
    let hint = crate::decode::closest(name, &names).map(|n| format!("did you mean {n:?}? ")).unwrap_or_default();
    Err(crate::error::ApiError::new(
        crate::error::ErrorCode::InvalidArgument,
        format!("unknown operation {name:?}; {hint}operations: {}", names.join(", ")),
    ))
}

/// The `{field}` names of a route template, in order.
pub fn path_params(path: &'static str) -> Vec<&'static str> {
    path.split('/').filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}'))).collect()
}

/// Calls `$callback!` with the whole catalogue, one entry per operation:
/// `name: Marker, METHOD "/path", Request => Result, read_only, Audience [Hint, ...], "doc";`
/// (the `[hints]` of a state-changing operation are optional; see [`Hint`]).
#[macro_export]
macro_rules! for_each_operation {
    ($callback:ident) => {
        $callback! {
            // ----- Spaces and agent runs (API reference, "Agent runs") -----
            agent_capabilities: AgentCapabilities, Get "/v1/capabilities",
                $crate::run::Empty => $crate::capabilities::Capabilities, true, Tool,
                "What this host's harnesses are and can do: readiness, auth, endpoint wires, follow-ups.";
            space_list: SpaceList, Get "/v1/spaces",
                $crate::run::Empty => Vec<$crate::run::SpaceRecord>, true, Tool,
                "Every Space registered on this host.";
            space_add: SpaceAdd, Post "/v1/spaces",
                $crate::run::SpaceAddRequest => $crate::run::SpaceRecord, false, Tool [Idempotent],
                "Register a Space (name, directory, policy); the same registration again is a no-op.";
            agent_start: AgentStart, Post "/v1/spaces/{space}/agents",
                $crate::run::AgentStartRequest => $crate::run::AgentStartReport, false, Tool,
                "Start an agent run with a prompt; answers as soon as the run is launched.";
            agent_list: AgentList, Get "/v1/spaces/{space}/agents",
                $crate::run::AgentListRequest => Vec<$crate::run::RunStatus>, true, Tool,
                "Every run of a Space, newest first, whoever started it.";
            agent_status: AgentStatus, Get "/v1/spaces/{space}/agents/{run_id}",
                $crate::run::AgentStatusRequest => $crate::run::RunStatus, true, Tool,
                "One run's status, phase, reason, last result and output tail.";
            agent_events: AgentEvents, Get "/v1/spaces/{space}/agents/{run_id}/events",
                $crate::run::AgentEventsRequest => $crate::event::EventsPage, true, Tool [EventStream],
                "A page of the run's normalized events after a cursor, optionally long-polling.";
            agent_message: AgentMessage, Post "/v1/spaces/{space}/agents/{run_id}/message",
                $crate::run::AgentMessageRequest => $crate::run::ActionReport, false, Tool,
                "Send a follow-up: the next turn, queued mid-turn, or forced (steered into the running turn, or run after an interrupt).";
            agent_interrupt: AgentInterrupt, Post "/v1/spaces/{space}/agents/{run_id}/interrupt",
                $crate::run::AgentRunRequest => $crate::run::ActionReport, false, Tool [Idempotent],
                "Cancel the turn in flight; the session stays open.";
            agent_stop: AgentStop, Post "/v1/spaces/{space}/agents/{run_id}/stop",
                $crate::run::AgentRunRequest => $crate::run::ActionReport, false, Tool [Destructive, Idempotent],
                "Stop the run: signal, grace, then kill of every process it has.";
            space_remove: SpaceRemove, Post "/v1/spaces/{name}/remove",
                $crate::run::SpaceRemoveRequest => $crate::run::SpaceRemoveReport, false, Operator [Destructive],
                "Unregister a Space and delete its runs' history (refused while runs live, unless force stops them).";
            agent_remove: AgentRemove, Post "/v1/spaces/{space}/agents/{run_id}/remove",
                $crate::run::AgentRunRequest => $crate::run::RunsRemovedReport, false, Operator [Destructive],
                "Delete a run that is not live: its row, events and run directory.";
            agent_prune: AgentPrune, Post "/v1/spaces/{space}/agents/prune",
                $crate::run::AgentPruneRequest => $crate::run::RunsRemovedReport, false, Operator [Destructive],
                "Delete the Space's runs that are not live and were created more than older_than_ms ago.";
            agent_usage: AgentUsage, Get "/v1/spaces/{space}/usage",
                $crate::usage::AgentUsageRequest => $crate::usage::UsageReport, true, Tool,
                "What a run, or every run of the Space, spent: tokens, cost, time and tool calls, in total and per turn.";
            agent_budget: AgentBudget, Post "/v1/spaces/{space}/agents/{run_id}/budget",
                $crate::usage::AgentBudgetRequest => $crate::usage::BudgetReport, false, Operator [Idempotent],
                "Set or raise a run's budget (usd, tokens, turns); a run at its budget takes turns again once it is raised.";
            agent_diff: AgentDiff, Get "/v1/spaces/{space}/agents/{run_id}/diff",
                $crate::timetravel::AgentDiffRequest => $crate::timetravel::DiffReport, true, Tool,
                "What a run's turns changed in its working folder: the files with +/- lines, and the unified diff.";
            agent_rewind: AgentRewind, Post "/v1/spaces/{space}/agents/{run_id}/rewind",
                $crate::timetravel::AgentRewindRequest => $crate::timetravel::RewindReport, false, Tool [Destructive],
                "Take an idle run back to the end of a turn: its folder from the checkpoint, its conversation resumed there.";
            agent_fork: AgentFork, Post "/v1/spaces/{space}/agents/{run_id}/fork",
                $crate::timetravel::AgentForkRequest => $crate::timetravel::ForkReport, false, Tool [Additive],
                "Fork a run at a turn into a new idle run: its own worktree at that turn's checkpoint, its session forked there.";
            agent_merge: AgentMerge, Post "/v1/spaces/{space}/agents/{run_id}/merge",
                $crate::timetravel::AgentMergeRequest => $crate::timetravel::MergeReport, false, Tool,
                "Merge a fork's changes into its parent's folder (three-way, per file); with a conflict nothing is written.";
            webhook_add: WebhookAdd, Post "/v1/webhooks",
                $crate::webhook::WebhookAddRequest => $crate::webhook::WebhookRecord, false, Operator [Additive],
                "Register an endpoint to be posted chosen run events, signed (Standard Webhooks), retried, in order per run.";
            webhook_list: WebhookList, Get "/v1/webhooks",
                $crate::run::Empty => Vec<$crate::webhook::WebhookRecord>, true, Operator,
                "Every registered webhook endpoint with its deliveries counted (never its secret).";
            webhook_remove: WebhookRemove, Post "/v1/webhooks/{webhook_id}/remove",
                $crate::webhook::WebhookRemoveRequest => $crate::webhook::WebhookRemoved, false, Operator [Destructive, Idempotent],
                "Unregister a webhook endpoint; its deliveries go too.";
            webhook_deliveries: WebhookDeliveries, Get "/v1/webhooks/deliveries",
                $crate::webhook::WebhookDeliveriesRequest => Vec<$crate::webhook::WebhookDelivery>, true, Operator,
                "Webhook deliveries, newest first: pending, delivered and failed ones, with tries and the last error.";

            // ----- persistent agents and their homes (API reference, "Words": volume) -----
            persistent_agent_send: PersistentAgentSend, Post "/v1/homes/{name}/send",
                $crate::home::PersistentAgentSendRequest => $crate::home::PersistentAgentSendReport, false, Tool,
                "Send to a persistent agent: a follow-up to its live run, or a fresh run with its home restored.";
            home_list: HomeList, Get "/v1/homes",
                $crate::run::Empty => Vec<$crate::home::HomeRecord>, true, Operator,
                "Every persistent agent's home in this host's volume, with its lease and latest snapshot.";
            home_snapshots: HomeSnapshots, Get "/v1/homes/{name}/snapshots",
                $crate::home::HomeRequest => Vec<$crate::home::HomeSnapshot>, true, Operator,
                "The snapshots of one home, oldest first.";
            home_export: HomeExport, Post "/v1/homes/{name}/export",
                $crate::home::HomeExportRequest => $crate::home::HomeTransferReport, false, Operator [Additive],
                "Write one snapshot of a home as a self-contained .tar.zst file on the daemon's host.";
            home_import: HomeImport, Post "/v1/homes/{name}/import",
                $crate::home::HomeImportRequest => $crate::home::HomeTransferReport, false, Operator [Additive],
                "Make a .tar.zst file on the daemon's host the home's newest snapshot.";
            home_restore: HomeRestore, Post "/v1/homes/{name}/restore",
                $crate::home::HomeRestoreRequest => $crate::home::HomeTransferReport, false, Operator [Destructive],
                "Point-in-time restore: a snapshot into a directory, or back as the home's newest snapshot.";
            home_delete: HomeDelete, Post "/v1/homes/{name}/delete",
                $crate::home::HomeRequest => $crate::home::HomeDeleteReport, false, Operator [Destructive],
                "Delete a home and every snapshot of it (refused while a run holds its lease).";
            home_move: HomeMove, Post "/v1/homes/{name}/move",
                $crate::home::HomeMoveRequest => $crate::home::HomeMoveReport, false, Operator [Idempotent],
                "Give a home to another Space: only that Space's runs may use it from then on.";

            // ----- CodeSpace tools (API reference, "CodeSpace execution layer") -----
            workspace_info: WorkspaceInfo, Post "/v1/tools/workspace_info",
                $crate::tools::WorkspaceInfoRequest => $crate::tools::Coordinated<$crate::tools::WorkspaceInfoResult>, true, Tool,
                "What the workspace permits and this host supports: permissions, limits, process lifetime, isolation.";
            read: Read, Post "/v1/tools/read",
                $crate::tools::ReadRequest => $crate::tools::Coordinated<$crate::tools::ReadResult>, true, Tool,
                "Read a file of the workspace (a window of at most 1 MiB) with its version.";
            find: Find, Post "/v1/tools/find",
                $crate::tools::FindRequest => $crate::tools::Coordinated<$crate::tools::FindResult>, true, Tool,
                "List the workspace's files matching a glob, sorted, in pages.";
            apply_patch: ApplyPatch, Post "/v1/tools/apply_patch",
                $crate::tools::ApplyPatchRequest => $crate::tools::Coordinated<$crate::tools::ApplyPatchResult>, false, Tool,
                "Apply a V4A patch atomically, with expected versions, an idempotency key and a preview mode.";
            operation_status: OperationStatus, Post "/v1/tools/operation_status",
                $crate::tools::OperationStatusRequest => $crate::tools::Coordinated<$crate::tools::OperationRecord>, true, Tool,
                "The ledger record of one apply_patch operation, by id or key.";
            exec_command: ExecCommand, Post "/v1/tools/exec_command",
                $crate::tools::ExecCommandRequest => $crate::tools::Coordinated<$crate::tools::ExecCommandResult>, false, Tool,
                "Start a command (argv, no shell) in the workspace on a PTY or pipes; answers with its handle.";
            read_process: ReadProcess, Post "/v1/tools/read_process",
                $crate::tools::ReadProcessRequest => $crate::tools::Coordinated<$crate::tools::ReadProcessResult>, true, Tool,
                "Read a command's retained output from a cursor, optionally waiting for more.";
            process_status: ProcessStatus, Post "/v1/tools/process_status",
                $crate::tools::ProcessStatusRequest => $crate::tools::Coordinated<$crate::tools::ProcessStatus>, true, Tool,
                "Whether a command runs or how it ended, with its output counts.";
            write_stdin: WriteStdin, Post "/v1/tools/write_stdin",
                $crate::tools::WriteStdinRequest => $crate::tools::Coordinated<$crate::tools::OkResult>, false, Tool,
                "Write bytes to a running command's stdin or terminal.";
            process_resize: ProcessResize, Post "/v1/tools/process_resize",
                $crate::tools::ProcessResizeRequest => $crate::tools::Coordinated<$crate::tools::OkResult>, false, Tool [Additive, Idempotent],
                "Resize a running command's terminal.";
            terminate_process: TerminateProcess, Post "/v1/tools/terminate_process",
                $crate::tools::TerminateProcessRequest => $crate::tools::Coordinated<$crate::tools::OkResult>, false, Tool [Destructive, Idempotent],
                "End a command's whole process group: signal, grace, kill.";
            approval_create: ApprovalCreate, Post "/v1/tools/approval_create",
                $crate::tools::ApprovalCreateRequest => $crate::tools::Coordinated<$crate::tools::ApprovalRecord>, false, Tool [Additive],
                "Open an approval hold for an apply_patch or exec_command call.";
            approval_resolve: ApprovalResolve, Post "/v1/tools/approval_resolve",
                $crate::tools::ApprovalResolveRequest => $crate::tools::Coordinated<$crate::tools::ApprovalResolveResult>, false, Tool [Additive],
                "Grant or deny a pending approval hold.";
            operation_resume: OperationResume, Post "/v1/tools/operation_resume",
                $crate::tools::OperationResumeRequest => $crate::tools::Coordinated<$crate::tools::OperationResumeResult>, false, Tool [Idempotent],
                "Run a granted hold's call once and store its result.";
            work_open: WorkOpen, Post "/v1/tools/work_open",
                $crate::tools::WorkOpenRequest => $crate::tools::Work, false, Tool [Additive],
                "Open a work (coordination context) in a workspace.";
            steer_status: SteerStatus, Post "/v1/tools/steer_status",
                $crate::tools::SteerStatusRequest => $crate::tools::Coordinated<$crate::tools::SteerStatus>, true, Tool,
                "Counts of a work's steering queue, never the instruction bodies.";
            steer_claim_next: SteerClaimNext, Post "/v1/tools/steer_claim_next",
                $crate::tools::SteerClaimNextRequest => $crate::tools::Coordinated<$crate::tools::SteerClaimNextResult>, false, Tool [Additive],
                "Claim the next deliverable instruction of a work.";
            steer_complete: SteerComplete, Post "/v1/tools/steer_complete",
                $crate::tools::SteerCompleteRequest => $crate::tools::Coordinated<$crate::tools::Intent>, false, Tool [Additive],
                "Mark a claimed instruction done or blocked.";
            work_finish: WorkFinish, Post "/v1/tools/work_finish",
                $crate::tools::WorkFinishRequest => $crate::tools::Coordinated<$crate::tools::WorkFinishResult>, false, Tool [Additive],
                "Close a work, unless instructions are still pending.";

            // ----- the user's side of steering (`/inbox`) -----
            inbox_works: InboxWorks, Get "/inbox/works",
                $crate::tools::InboxWorksRequest => Vec<$crate::tools::Work>, true, Inbox,
                "The works of this host, optionally of one workspace.";
            inbox_work: InboxWork, Get "/inbox/works/{work_id}",
                $crate::tools::WorkRef => $crate::tools::InboxWorkResult, true, Inbox,
                "One work and every intent of it, in queue order.";
            inbox_intent_create: InboxIntentCreate, Post "/inbox/works/{work_id}/intents",
                $crate::tools::IntentCreateRequest => $crate::tools::Intent, false, Inbox,
                "Add a draft instruction to a work's queue.";
            inbox_reorder: InboxReorder, Post "/inbox/works/{work_id}/reorder",
                $crate::tools::IntentReorderRequest => Vec<$crate::tools::Intent>, false, Inbox,
                "Reorder a work's open instructions.";
            inbox_intent_edit: InboxIntentEdit, Patch "/inbox/intents/{intent_id}",
                $crate::tools::IntentEditRequest => $crate::tools::Intent, false, Inbox,
                "Replace a draft's text (with a revision check).";
            inbox_intent_queue: InboxIntentQueue, Post "/inbox/intents/{intent_id}/queue",
                $crate::tools::IntentQueueRequest => $crate::tools::Intent, false, Inbox,
                "Queue a draft: from now on it can be delivered.";
            inbox_intent_cancel: InboxIntentCancel, Post "/inbox/intents/{intent_id}/cancel",
                $crate::tools::IntentRef => $crate::tools::Intent, false, Inbox,
                "Cancel a draft or queued instruction.";
            inbox_work_stop: InboxWorkStop, Post "/inbox/works/{work_id}/stop",
                $crate::tools::WorkRef => $crate::tools::Work, false, Inbox,
                "Stop a work: the agent's later steering calls get WORK_CLOSED.";
        }
    };
}

/// [`for_each_operation!`] by its module's path (`crate::op::for_each_operation!`), as this
/// crate's own modules call it.
#[allow(unused_imports)] // used by the client (feature `client`)
pub(crate) use for_each_operation;

macro_rules! define_operations {
    ($( $name:ident: $marker:ident, $method:ident $path:literal,
        $req:ty => $res:ty, $ro:literal, $aud:ident $([$($hint:ident),*])?, $doc:literal; )*) => {
        /// Marker types, one per operation (`ops::AgentStart`, `ops::Read`, ...).
        pub mod ops {
            $(
                #[doc = $doc]
                #[derive(Debug, Clone, Copy)]
                pub struct $marker;
                impl super::Operation for $marker {
                    const NAME: &'static str = stringify!($name);
                    const DOC: &'static str = $doc;
                    const METHOD: super::HttpMethod = super::HttpMethod::$method;
                    const PATH: &'static str = $path;
                    const READ_ONLY: bool = $ro;
                    const AUDIENCE: super::Audience = super::Audience::$aud;
                    const HINTS: &'static [super::Hint] = &[$($(super::Hint::$hint),*)?];
                    type Request = $req;
                    type Result = $res;
                }
            )*
        }

        /// Every operation of the catalogue, in catalogue order.
        pub fn catalogue() -> Vec<OperationInfo> {
            vec![$(OperationInfo::of::<ops::$marker>()),*]
        }

        /// Every operation with the JSON Schema (draft 2020-12, definitions inline under
        /// `$defs`) of its request, in catalogue order: the one place a request schema is made
        /// outside the daemon ([`crate::methods`] and the SDK bindings build on it).
        pub fn request_schemas() -> Vec<(OperationInfo, schemars::Schema)> {
            vec![$((OperationInfo::of::<ops::$marker>(), schemars::schema_for!($req))),*]
        }
    };
}

for_each_operation!(define_operations);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_routes_distinct() {
        let all = catalogue();
        let mut names: Vec<_> = all.iter().map(|o| o.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len());
        let mut routes: Vec<_> = all.iter().map(|o| (o.method, o.path)).collect();
        routes.sort_unstable_by_key(|(m, p)| (m.as_str(), *p));
        routes.dedup();
        assert_eq!(routes.len(), all.len());
    }
}
