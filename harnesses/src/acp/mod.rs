//! The Agent Client Protocol (ACP v1): one conversation core for every CLI that speaks it
//! (`opencode acp`, `gemini --acp`).
//!
//! ACP is JSON-RPC 2.0 over the agent's stdio, one message a line (spec:
//! <https://agentclientprotocol.com>, schema `agent-client-protocol` v1). Spaces is the client:
//! it writes `initialize`, `session/new` (or `session/load`/`session/resume`), `session/prompt`
//! and `session/cancel`, and answers the agent's `session/request_permission`; the agent streams
//! `session/update` notifications and answers each prompt with its `stopReason`.
//!
//! - [`rpc`]: the lines (builders and a classifier), `serde_json` only;
//! - [`normalize`]: [`AcpNormalizer`], the conversation state and the events (what goes out
//!   when is in its module docs);
//! - [`updates`]: `session/update` to events, and how streamed answers appear (pieces hidden,
//!   the whole answer once).
//!
//! Process model of an ACP harness: [`crate::ProcessModel::LongLived`], `StdinMode::Pipe`, the
//! launch plan's `initial_stdin` is the `initialize` line; everything after it comes from the
//! normalizer's hooks (`take_outgoing`, `turn_input`, `interrupt_input`), so the harness's
//! stateless `user_message` is empty and its interrupt recipe writes nothing.

pub mod normalize;
pub mod rpc;
#[cfg(test)]
mod tests;
pub mod updates;

pub use normalize::{AcpNormalizer, Flavor, PermissionPolicy};

use crate::Harness;

/// The ACP harnesses of this build (not yet in [`crate::all`]: the daemon wires the
/// conversation hooks first), in display order.
pub fn harnesses() -> Vec<&'static dyn Harness> {
    vec![&crate::opencode::OpenCode, &crate::gemini_cli::GeminiCli]
}

/// The interrupt recipe of an ACP harness: nothing to write. The cancel names the session, so
/// it comes from [`crate::Normalizer::interrupt_input`]; when that is `None` no prompt is out
/// and `interrupt_requested` already ended the turn.
pub fn no_stdin_interrupt() -> crate::InterruptRecipe {
    crate::InterruptRecipe::Stdin(Vec::new())
}

/// A line with its `\n`, as stdin bytes.
pub fn line_bytes(line: &str) -> Vec<u8> {
    let mut out = line.as_bytes().to_vec();
    out.push(b'\n');
    out
}
