//! # spaces-testkit: scripted model endpoints
//!
//! Theory of operation: no model provider is reachable from these machines, so tests (and the
//! offline demo) run the real agent CLIs against a [`ScriptedServer`] on `127.0.0.1:<random port>`.
//! Each server speaks one wire ([`Wire::AnthropicMessages`] for Claude Code, [`Wire::OpenAiResponses`]
//! for Codex) as a streaming (SSE) endpoint and answers each model request with the next [`Reply`] of
//! its script: text, a tool call, a slow stream (for interrupt tests), an HTTP error, or a hang.
//! Every request is recorded ([`RecordedRequest`]) so tests can check what the CLI sent (e.g. that
//! a follow-up carries the earlier turn's history). A responder
//! ([`ScriptedServer::start_with_responder`]) computes replies from the request instead, when the
//! next step depends on what a tool answered.
//!
//! [`mcp_echo`] is a one-tool stdio MCP server (hand-written JSON-RPC) for runs that prove an
//! agent CLI reaches the MCP servers it was given.

mod anthropic;
mod chat;
mod gemini;
pub mod mcp_echo;
mod openai;
pub mod schema;
pub mod script;
pub mod server;
mod wire;

pub use script::{Reply, Script};
pub use server::{RecordedRequest, Responder, ScriptedServer, Wire};
