//! [`SpacesMcp`]: the `rmcp` server handler. `tools/list` is the tool list of [`crate::backend::tools`];
//! `tools/call` runs the row through the [`Backend`] and shapes the answer (see the module doc
//! of [`crate::mcp`] for success, refusal and cancellation).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::Value;
use spaces_sdk::{bounded, ApiError, ErrorCode};
use tokio_util::sync::CancellationToken;

use crate::access::scope::Scope;
use crate::access::Principal;
use crate::backend::tools::{self, ToolEntry};
use crate::backend::Backend;

/// How often a waiting call that carries a `progressToken` reports progress.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);

const INSTRUCTIONS: &str = "Spaces: the CodeSpace tools (read, find, apply_patch, exec_command, read_process, ...) \
act on a registered Space, named by workspace_id; agent_* tools start and follow coding-agent runs. \
Errors come back as isError results whose text is {code, message, ...}.";

/// The MCP server handler over one [`Backend`], optionally scoped to one Space ([`Scope`]).
/// Cheap to clone (one per HTTP session).
#[derive(Clone)]
pub struct SpacesMcp<B> {
    backend: B,
    ended: CancellationToken,
    scope: Option<Arc<Scope>>,
}

impl<B: Backend> SpacesMcp<B> {
    /// A handler whose calls run on `backend` and are abandoned when `ended` is cancelled (the
    /// transport went away: stdin closed, or the daemon shuts down).
    pub fn new(backend: B, ended: CancellationToken) -> SpacesMcp<B> {
        SpacesMcp { backend, ended, scope: None }
    }

    /// The same handler scoped to one Space: its tool list and every call go through `scope`.
    pub fn scoped(mut self, scope: Arc<Scope>) -> SpacesMcp<B> {
        self.scope = Some(scope);
        self
    }

    /// The tools offered: all of them, or the scope's.
    fn tool_list(&self) -> &[ToolEntry] {
        match &self.scope {
            Some(s) => s.tools(),
            None => tools::tools(),
        }
    }

    fn tool_entry(&self, name: &str) -> Option<&ToolEntry> {
        match &self.scope {
            Some(s) => s.tool(name),
            None => tools::tool(name),
        }
    }

    /// Runs tool `name` with `args` as `asker`: `Ok(result)` for a success or a refusal, `Err`
    /// for an unknown tool; `None` in the `Ok` when the call was cancelled before it answered.
    async fn run(
        &self,
        asker: Asker,
        name: &str,
        args: Value,
        cancelled: &CancellationToken,
        progress: Option<(Peer<RoleServer>, ProgressToken)>,
    ) -> Result<Option<CallToolResult>, McpError> {
        let Some(entry) = self.tool_entry(name) else {
            return Err(McpError::invalid_params(format!("unknown tool {:?}; tools/list names them", bounded(name)), None));
        };
        let call = async {
            match (asker, &self.scope) {
                (Asker::Unchecked, _) => Err(ApiError::new(ErrorCode::Unauthorized, "no credential was checked for this request")),
                (Asker::Is(Principal::Caller(caller)), _) => Principal::Caller(caller).call(&self.backend, name, args).await,
                (_, Some(scope)) => scope.call(&self.backend, name, args).await,
                (_, None) => self.backend.call(name, args).await,
            }
        };
        let ticker = async {
            match progress {
                Some((peer, token)) => report_progress(peer, token).await,
                None => std::future::pending().await,
            }
        };
        let outcome = tokio::select! {
            outcome = call => outcome,
            _ = cancelled.cancelled() => return Ok(None),
            _ = self.ended.cancelled() => return Ok(None),
            // Polled only to send progress notifications; it never completes.
            _ = ticker => return Ok(None),
        };
        Ok(Some(match outcome {
            Ok(value) => CallToolResult::structured(tools::structured(entry, value)),
            Err(e) => refusal(e),
        }))
    }
}

/// Who sends an MCP request.
enum Asker {
    /// Not over HTTP (stdio): the daemon checks the credentials of the socket connection.
    Transport,
    /// Over HTTP, as this principal ([`crate::access`]).
    Is(Principal),
    /// Over HTTP without a checked credential: refused.
    Unchecked,
}

/// The asker of a request: `/mcp` carries the HTTP request's parts, whose extensions hold the
/// principal the listener's credential check found.
fn asker(context: &RequestContext<RoleServer>) -> Asker {
    match context.extensions.get::<axum::http::request::Parts>() {
        None => Asker::Transport,
        Some(parts) => match parts.extensions.get::<Principal>() {
            Some(p) => Asker::Is(p.clone()),
            None => Asker::Unchecked,
        },
    }
}

/// A refusal as MCP wants it: `isError`, the wire error's JSON as text, no structured content;
/// its message cut like every error body ([`ApiError::capped`]).
pub fn refusal(e: ApiError) -> CallToolResult {
    let e = &e.capped();
    let text = serde_json::to_string(e).unwrap_or_else(|_| format!("{{\"code\":\"INTERNAL\",\"message\":{:?}}}", e.message));
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// Sends a progress notification every [`PROGRESS_EVERY`] (progress = seconds waited) until
/// dropped; ends only if the peer is gone.
async fn report_progress(peer: Peer<RoleServer>, token: ProgressToken) {
    let start = Instant::now();
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
    loop {
        tick.tick().await;
        let waited = start.elapsed().as_secs_f64().floor();
        let note = ProgressNotificationParam::new(token.clone(), waited).with_message(format!("waiting ({waited:.0} s)"));
        if peer.notify_progress(note).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl<B: Backend> ServerHandler for SpacesMcp<B> {
    fn get_info(&self) -> ServerConfig {
        let instructions = match &self.scope {
            // The scope first: clients may show only the start (Codex lists a deferred
            // namespace with the first ~200 characters).
            Some(s) => format!(
                "Spaces tools for the Space {:?} only: the CodeSpace tools (read, find, apply_patch, exec_command, \
read_process, ...) and the agent_* runs act on it, workspace_id/space may be left out, another Space is refused. \
Errors come back as isError results whose text is {{code, message, ...}}.",
                s.space()
            ),
            None => INSTRUCTIONS.to_owned(),
        };
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("spacesd", env!("CARGO_PKG_VERSION")))
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
            .with_instructions(instructions)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = match asker(&context) {
            Asker::Is(Principal::Caller(caller)) => caller.tools().into_iter().map(|t| t.tool.clone()).collect(),
            Asker::Unchecked => Vec::new(),
            _ => self.tool_list().iter().map(|t| t.tool.clone()).collect(),
        };
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tool_entry(name).map(|t| t.tool.clone())
    }

    async fn call_tool(&self, request: CallToolRequestParams, context: RequestContext<RoleServer>) -> Result<CallToolResponse, McpError> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let traceparent = context.meta.get("traceparent").and_then(Value::as_str);
        let args = spaces_service::trace_context::with_traceparent(&request.name, args, traceparent);
        let progress = context.meta.get_progress_token().map(|t| (context.peer.clone(), t));
        match self.run(asker(&context), &request.name, args, &context.ct, progress).await? {
            Some(result) => Ok(result.into()),
            // No answer goes out for a cancelled request (rmcp drops it); this error is for a
            // transport that closed under a running call.
            None => Err(McpError::internal_error("the call was cancelled before it answered", None)),
        }
    }
}
