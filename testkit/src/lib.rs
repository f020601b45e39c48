//! # spaces-testkit: scripted model endpoints
//!
//! Theory of operation: no model provider is reachable from these machines, so tests (and the
//! offline demo) run the real agent CLIs against a [`ScriptedServer`] on `127.0.0.1:<random port>`.
//! Each server speaks one wire ([`Wire::AnthropicMessages`] for Claude Code, [`Wire::OpenAiResponses`]
//! for Codex) as a streaming (SSE) endpoint and answers each model request with the next [`Reply`] of
//! its script: text, a tool call, a slow stream (for interrupt tests), an HTTP error, or a hang.
//! Every request is recorded ([`RecordedRequest`]) so tests can check what the CLI sent (e.g. that
//! a follow-up carries the earlier turn's history).

mod anthropic;
mod openai;
pub mod script;
pub mod server;

pub use script::{Reply, Script};
pub use server::{RecordedRequest, ScriptedServer, Wire};
