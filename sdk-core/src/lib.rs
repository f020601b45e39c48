//! # spaces-sdk: the Spaces wire contract
//!
//! Theory of operation: this crate holds the records every transport speaks (HTTP API of
//! `spacesd`, the CLI, later MCP and the Python/Node bindings): agent-run requests and reports
//! ([`run`]), normalized events and the `agent_events` page ([`event`]), harness capabilities
//! ([`capabilities`]), the closed set of error codes ([`error`]), and the typed contract of every
//! CodeSpace tool: request, result, closed sets, defaults and limits ([`tools`]). Requests are
//! turned from JSON into these types by one function, [`decode()`], which refuses unknown keys.
//! Field names are exactly those of the API reference (`spec/API.md`, sections "Agent runs" and
//! "CodeSpace execution layer"); JSON is snake_case.
//!
//! The wire types carry no behaviour and do no I/O. The optional [`client`] module (feature
//! `client`, on by default) is a small async HTTP/1.1 client that talks to a running `spacesd` over
//! its Unix socket or loopback TCP with a bearer token; [`follow`] follows a run's events live
//! over the daemon's server-sent event stream (long-polls when there is none).

pub mod capabilities;
#[cfg(feature = "client")]
pub mod client;
pub mod decode;
pub mod error;
pub mod event;
#[cfg(feature = "client")]
pub mod exchange;
#[cfg(feature = "client")]
pub mod follow;
pub mod home;
#[cfg(feature = "client")]
pub mod local;
pub mod mcp_server;
pub mod methods;
pub mod op;
pub mod run;
#[cfg(feature = "client")]
pub mod space;
pub mod timetravel;
pub mod tools;
pub mod usage;
pub mod webhook;

pub use capabilities::{AuthState, Capabilities, HarnessCapabilities, HarnessSupports};
pub use decode::decode;
pub use error::{bounded, ApiError, ErrorCode};
pub use event::{Category, Event, EventKind, EventsPage, StopReason, ToolStatus, Usage};
pub use home::{
    HomeDeleteReport, HomeExportRequest, HomeImportRequest, HomeLease, HomeMoveReport, HomeMoveRequest, HomeRecord, HomeRequest,
    HomeRestoreRequest, HomeSnapshot, HomeTransferReport, PersistentAgentSendReport, PersistentAgentSendRequest, VolumeCapabilities,
};
pub use mcp_server::{McpHttpServer, McpServer, McpStdioServer};
pub use op::{ops, Operation, OperationInfo};
pub use run::{
    ActionReport, AgentEventsRequest, AgentListRequest, AgentMessageRequest, AgentPruneRequest, AgentRunRequest, AgentStartReport,
    AgentStartRequest, AgentStatusRequest, Approvals, Attachment, Empty, Phase, RunStatus, RunsRemovedReport, SpaceAddRequest,
    SpaceAgentOptions, SpaceNetwork, SpaceRecord, SpaceRemoveReport, SpaceRemoveRequest, Status, IDEMPOTENCY_KEY_MAX,
};
pub use timetravel::{
    AgentDiffRequest, AgentForkRequest, AgentMergeRequest, AgentRewindRequest, DiffReport, FileChange, FileChangeKind, ForkReport,
    MergeConflict, MergeReport, RewindReport, RewindWhat,
};
pub use usage::{AgentBudgetRequest, AgentUsageRequest, Budget, BudgetReport, RunUsage, TurnUsage, UsageReport, UsageTotals};
pub use webhook::{
    WebhookAddRequest, WebhookDeliveriesRequest, WebhookDelivery, WebhookRecord, WebhookRemoveRequest, WebhookRemoved, WEBHOOK_EVENTS,
};
