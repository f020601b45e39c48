//! The MCP server: every operation of the table whose audience is `Tool` served as an MCP tool,
//! over stdio (`spacesd mcp`, [`stdio`]) and Streamable HTTP (`/mcp` on the daemon's listeners,
//! [`http`]).
//!
//! Theory of operation: one `rmcp` handler, [`SpacesMcp`], is an adapter over the operation
//! table like the HTTP routes are. It holds no copy of names or schemas: a tool's name, doc,
//! `inputSchema` and `outputSchema` come from the row ([`crate::backend::tools`]), and a call runs the row
//! through a [`Backend`]: in-process ([`spaces_service::Service`], for `/mcp` inside the daemon)
//! or the daemon over its Unix socket ([`crate::backend::Daemon`], for stdio).
//!
//! - Success: `structuredContent` is the operation's JSON result, and one text content carries the
//!   same JSON. MCP wants object output, so an array result (`space_list`, `agent_list`) is
//!   wrapped as `{"items": [...]}`, in the output schema too ([`crate::backend::tools::ITEMS`]).
//! - A refusal (the wire `ApiError`) is a tool result with `isError: true` whose one text content
//!   is `{code, message, operation_id?, approval_id?, field?}`, and no `structuredContent`
//!   (clients validate it against the success schema). An unknown tool name is a JSON-RPC error.
//! - `notifications/cancelled` ends the wait of the call it names at once (a long-poll
//!   `read_process` or `agent_events`): the handler drops the backend's future, which for stdio
//!   drops the HTTP request to the daemon. Processes and runs started over MCP belong to the
//!   daemon and outlive the MCP session.
//! - A call that carries a `progressToken` gets a progress notification every second while it
//!   waits.
//!
//! - Scoped to one Space (`spacesd mcp --space NAME`, the `spaces` server an agent run gets):
//!   fewer tools, every call checked to act on that Space only, its name optional ([`crate::access::scope`]).
//!
//! What it never does: write to stdout outside the JSON-RPC transport (stdio), or serve an
//! `Inbox` operation (the user's side of steering) as an agent's tool.

pub mod docs;
mod handler;
pub mod http;
pub mod resume;
pub mod stdio;

pub use crate::backend::Backend;
pub use handler::SpacesMcp;
