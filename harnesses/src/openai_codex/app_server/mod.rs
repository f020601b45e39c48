//! `openai-codex` on `codex app-server`: one long-lived process per run speaking JSON-RPC on
//! stdin/stdout, instead of one `codex exec --json` process per turn (issue 31).
//!
//! The protocol layer; the daemon's run supervisor drives it (harness id [`ID`], in
//! [`crate::all`]). What it gives:
//! - [`launch`]: the plan of one `codex app-server` process: the same `config.toml`, `CODEX_HOME`,
//!   `HOME` and key handling as the exec launch ([`crate::openai_codex::launch`]), a stdin pipe
//!   kept open, and `initial_stdin` = the `initialize` request
//!   ([`conversation::initialize_line`]);
//! - [`AppServerNormalizer`]: the event mapping ([`normalize`]) and the client side of the
//!   dialogue ([`conversation`]) through the [`crate::harness::Normalizer`] conversation hooks:
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

use crate::harness::{Harness, HomeLayout, Normalizer};
use crate::plan::{InstallSpec, InterruptRecipe, LaunchContext, LaunchPlan, ProcessModel, StdinMode};

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

/// The harness id of [`OpenAiCodexAppServer`]: `openai-codex` is Codex on `codex app-server`;
/// the exec wire is the fallback [`crate::openai_codex::EXEC_ID`].
pub const ID: &str = "openai-codex";

/// The id this harness had while it lived beside the exec one (runs stored by a daemon of then
/// still find it: [`crate::by_id`]).
pub const OLD_ID: &str = "openai-codex-app-server";

/// `openai-codex` on `codex app-server`: the same CLI, install, keys and home as
/// [`crate::openai_codex::OpenAiCodex`], one long-lived process per run. In [`crate::all`]
/// (`agent_start` with `agent: "openai-codex"`); the contract table
/// (`tests/suite/contract.rs`) runs it.
///
/// What the daemon must do for it: write the plan's `initial_stdin` and keep stdin open; call
/// [`Normalizer::launched`] before feeding a process's output; write
/// [`Normalizer::take_outgoing`] after every call that feeds the normalizer; start a follow-up
/// with [`Normalizer::turn_input`] and interrupt with [`Normalizer::interrupt_input`] (the
/// stateless [`Harness::user_message`] and [`Harness::interrupt`] write nothing: a `None` there
/// means the line goes out via `take_outgoing` once the server named the thread or turn).
pub struct OpenAiCodexAppServer;

impl Harness for OpenAiCodexAppServer {
    fn id(&self) -> &'static str {
        ID
    }

    fn name(&self) -> &'static str {
        "OpenAI Codex (app-server)"
    }

    fn install_spec(&self) -> InstallSpec {
        crate::openai_codex::OpenAiCodex.install_spec()
    }

    fn process_model(&self) -> ProcessModel {
        ProcessModel::LongLived
    }

    fn followups(&self) -> &'static str {
        "app-server"
    }

    fn wire(&self) -> &'static str {
        "codex-app-server"
    }

    /// `turn/steer` for a `force` message mid-turn; `thread/resume` in a new process; usage per
    /// turn (`thread/tokenUsage/updated`); text deltas; no permission requests
    /// (`approvalPolicy: "never"`).
    fn supports(&self) -> spaces_sdk::HarnessSupports {
        spaces_sdk::HarnessSupports {
            steer: true,
            resume: true,
            fork: true,
            rewind: true,
            usage: true,
            message_deltas: true,
            ..Default::default()
        }
    }

    fn endpoint_wires(&self) -> &'static [&'static str] {
        crate::openai_codex::OpenAiCodex.endpoint_wires()
    }

    fn keys(&self) -> &'static [&'static str] {
        crate::openai_codex::OpenAiCodex.keys()
    }

    fn launch(&self, ctx: &LaunchContext<'_>) -> LaunchPlan {
        launch(ctx)
    }

    /// Nothing: a turn's `turn/start` names the thread and a request id, so it comes from
    /// [`Normalizer::turn_input`] (or `take_outgoing` when the handshake is still running).
    fn user_message(&self, _text: &str) -> Vec<u8> {
        Vec::new()
    }

    /// Nothing to write: `turn/interrupt` names the turn, so it comes from
    /// [`Normalizer::interrupt_input`] (or `take_outgoing` once the server named the turn).
    fn interrupt(&self) -> InterruptRecipe {
        InterruptRecipe::Stdin(Vec::new())
    }

    fn normalizer(&self) -> Box<dyn Normalizer> {
        Box::new(AppServerNormalizer::default())
    }

    /// `thread/tokenUsage/updated`'s `total` adds up over the thread; input includes the cached
    /// tokens. Codex reports no cost.
    fn usage_tally(&self) -> crate::UsageTally {
        crate::UsageTally { tokens: crate::Tally::Thread, cost: None, input_includes_cached: true, usd_limit: false }
    }

    fn persistent_home(&self) -> HomeLayout {
        crate::openai_codex::OpenAiCodex.persistent_home()
    }
}
