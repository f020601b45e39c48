//! `openai-codex` on `codex app-server`: one long-lived process per run speaking JSON-RPC on
//! stdin/stdout, instead of one `codex exec --json` process per turn (issue 31).
//!
//! Not wired into the daemon yet: this is the pure protocol layer. What it gives:
//! - [`launch`]: the plan of one `codex app-server` process: the same `config.toml`, `CODEX_HOME`,
//!   `HOME` and key handling as the exec launch ([`crate::openai_codex::launch`]), a stdin pipe
//!   kept open, and `initial_stdin` = the `initialize` request
//!   ([`conversation::initialize_line`]);
//! - [`AppServerNormalizer`]: the event mapping ([`normalize`]) and the client side of the
//!   dialogue ([`conversation`]) through the [`crate::Normalizer`] conversation hooks:
//!   `launched` (cwd, model, session to resume), `take_outgoing` (`initialized`,
//!   `thread/start|resume`, the first `turn/start`, answers to server requests), `turn_input`
//!   (`turn/start` of a follow-up), `interrupt_input` (`turn/interrupt`), and
//!   [`AppServerNormalizer::steer_input`] (`turn/steer`).
//!
//! Facts (codex-cli 0.171.0; `codex app-server generate-json-schema`, HARNESS-NOTES): lines are
//! JSON-RPC without `jsonrpc`; `thread/start{cwd, approvalPolicy: "never", sandbox:
//! "danger-full-access"}` runs like `exec --dangerously-bypass-approvals-and-sandbox`;
//! `turn/interrupt` ends the turn within ~20 ms with `turn/completed` `interrupted`, items it cut
//! off get no `item/completed`, and a running command is not killed; on SIGTERM the server exits
//! cleanly and kills its tools. The server prints nothing before it has read `initialize`.

pub mod conversation;
pub mod items;
pub mod normalize;
#[cfg(test)]
mod tests;

pub use normalize::AppServerNormalizer;

use crate::plan::{LaunchContext, LaunchPlan, StdinMode};

/// The subcommand.
pub const SUBCOMMAND: &str = "app-server";

/// The plan of one `codex app-server` process: argv `[binary, "app-server"]`, the environment
/// and run-local `config.toml` of the exec launch (custom endpoint provider, MCP servers, no
/// phone-home, `CODEX_HOME` = `<home>/.codex`), stdin a pipe that stays open, and the
/// `initialize` request (one line) as its first bytes. The prompt is not in the plan: it goes
/// out as `turn/start` once the thread is ready ([`AppServerNormalizer`]); the model, cwd and
/// session to resume go in `thread/start|resume`.
pub fn launch(ctx: &LaunchContext<'_>) -> LaunchPlan {
    let exec = crate::openai_codex::launch::plan(ctx);
    let mut initial = conversation::initialize_line().into_bytes();
    initial.push(b'\n');
    LaunchPlan {
        argv: vec![ctx.binary.display().to_string(), SUBCOMMAND.to_owned()],
        env: exec.env,
        files: exec.files,
        stdin: StdinMode::Pipe,
        initial_stdin: Some(initial),
    }
}
