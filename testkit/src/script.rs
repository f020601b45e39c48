//! The per-test script of model replies.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// One model reply. Serialized form (for the `scripted-model` binary's `--script` file) is
/// externally tagged snake_case, e.g. `{"text": "done"}` or
/// `{"tool_call": {"name": "Write", "input": {...}}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// A plain text answer that ends the model's turn (`end_turn` / `response.completed`).
    Text(String),
    /// A function/tool call. Anthropic: a `tool_use` block with `input`; OpenAI Responses: a
    /// `function_call` whose `arguments` is `input` as a JSON string.
    ToolCall { name: String, input: serde_json::Value },
    /// OpenAI Responses only: a `custom_tool_call` (Codex's `apply_patch`) with a raw string input.
    CustomToolCall { name: String, input: String },
    /// A call of the tool `tool` of the agent's MCP server `server`, spelled as each CLI expects
    /// it. Anthropic: a `tool_use` named `mcp__<server>__<tool>` (Claude Code's name for MCP
    /// tools); OpenAI Responses: a `function_call` with `namespace: "mcp__<server>"` and `name:
    /// <tool>` (how Codex lists and dispatches MCP tools).
    McpToolCall { server: String, tool: String, input: serde_json::Value },
    /// Text streamed in `chunks` pieces with `delay_ms` between them (for interrupt tests).
    SlowText { text: String, chunks: u32, delay_ms: u64 },
    /// Answer the request with this HTTP status and body (no stream).
    HttpError { status: u16, body: String },
    /// A provider's rate or usage limit: HTTP 429 with the wire's own headers and body saying
    /// that it resets `reset_secs` from now and that the client should not retry
    /// (`wire::rate_limited`).
    RateLimited { reset_secs: u64 },
    /// Accept the request and never answer (stall tests).
    Hang,
}

/// An ordered queue of replies; each model request takes the next one. When the script is
/// exhausted, requests get [`Script::fallback`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Script {
    pub replies: VecDeque<Reply>,
    /// Reply used once the queue is empty (default: an HTTP 500 that names the cause).
    #[serde(default)]
    pub fallback: Option<Reply>,
}

impl Script {
    /// A script of these replies, in order.
    pub fn new(replies: impl IntoIterator<Item = Reply>) -> Self {
        Self { replies: replies.into_iter().collect(), fallback: None }
    }

    /// Use `reply` for every request after the queue runs out.
    pub fn with_fallback(mut self, reply: Reply) -> Self {
        self.fallback = Some(reply);
        self
    }

    /// The next reply.
    pub fn next_reply(&mut self) -> Reply {
        self.replies
            .pop_front()
            .or_else(|| self.fallback.clone())
            .unwrap_or(Reply::HttpError { status: 500, body: "scripted model: the test script has no reply left for this request".into() })
    }
}
