//! OpenAI Codex CLI (`openai-codex`), pinned to `@openai/codex@0.171.0`.
//!
//! Process model: one `codex exec --json` process per turn ([`ProcessModel::PerTurn`]); turn 2+
//! is `codex exec resume THREAD_ID TEXT` on the thread id from the first `thread.started` line.
//! Interrupt: SIGINT to the process group; the native binary exits 1 within ~50 ms, prints
//! nothing more, and the thread records the abort so a resume continues it.
//! See [`launch`] for the command line and config, [`normalize`] for the event mapping.

pub mod app_server;
pub mod items;
pub mod launch;
pub mod normalize;
#[cfg(test)]
mod tests;

use crate::harness::{Harness, HomeLayout, Normalizer, SessionFiles};
use crate::plan::{InstallSpec, InterruptRecipe, LaunchContext, LaunchPlan, ProcessModel};

/// The pinned npm package.
pub const PACKAGE: &str = "@openai/codex@0.171.0";
/// The version `codex --version` reports (`codex-cli 0.171.0`).
pub const VERSION: &str = "0.171.0";

/// The native binary inside the npm optional dependency for this platform, relative to the tools
/// directory. The npm `codex` entry is a Node launcher; launching the native binary directly
/// makes signals reach the process that does the work.
#[cfg(target_arch = "aarch64")]
pub const BINARY: &str = "node_modules/@openai/codex-linux-arm64/vendor/aarch64-unknown-linux-musl/bin/codex";
/// The native binary inside the npm optional dependency for this platform, relative to the tools
/// directory. The npm `codex` entry is a Node launcher; launching the native binary directly
/// makes signals reach the process that does the work.
#[cfg(not(target_arch = "aarch64"))]
pub const BINARY: &str = "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";

/// SIGINT (Linux signal number 2).
pub const SIGINT: i32 = 2;

/// The harness id of [`OpenAiCodex`]: Codex on `codex exec --json`, one process per turn, the
/// documented fallback of `openai-codex` (which is Codex on `codex app-server`,
/// [`app_server::OpenAiCodexAppServer`]).
pub const EXEC_ID: &str = "openai-codex-exec";

/// The Codex CLI adapter on `codex exec --json` (harness id [`EXEC_ID`]).
pub struct OpenAiCodex;

impl Harness for OpenAiCodex {
    fn id(&self) -> &'static str {
        EXEC_ID
    }

    fn name(&self) -> &'static str {
        "OpenAI Codex (exec)"
    }

    fn install_spec(&self) -> InstallSpec {
        InstallSpec { packages: vec![PACKAGE.to_owned()], version: VERSION, binary: BINARY }
    }

    fn process_model(&self) -> ProcessModel {
        ProcessModel::PerTurn
    }

    fn followups(&self) -> &'static str {
        "exec-resume"
    }

    fn wire(&self) -> &'static str {
        "codex-exec-jsonl"
    }

    /// `exec resume` per turn; usage per turn; no streamed pieces (`exec --json` sends whole
    /// items); no permission requests (approvals and sandbox bypassed).
    fn supports(&self) -> spaces_sdk::HarnessSupports {
        spaces_sdk::HarnessSupports { resume: true, usage: true, ..Default::default() }
    }

    fn endpoint_wires(&self) -> &'static [&'static str] {
        &["openai-responses"]
    }

    fn keys(&self) -> &'static [&'static str] {
        &["OPENAI_API_KEY", "CODEX_API_KEY"]
    }

    fn launch(&self, ctx: &LaunchContext<'_>) -> LaunchPlan {
        launch::plan(ctx)
    }

    /// Never called: each turn is its own process ([`ProcessModel::PerTurn`]). Returns the text
    /// as one line should a caller do it anyway.
    fn user_message(&self, text: &str) -> Vec<u8> {
        let mut out = text.as_bytes().to_vec();
        out.push(b'\n');
        out
    }

    fn interrupt(&self) -> InterruptRecipe {
        InterruptRecipe::SignalGroup(SIGINT)
    }

    fn normalizer(&self) -> Box<dyn Normalizer> {
        Box::new(normalize::CodexNormalizer::default())
    }

    /// `turn.completed.usage` adds up over the thread, across `exec resume`; input includes
    /// the cached tokens (HARNESS-NOTES). Codex reports no cost.
    fn usage_tally(&self) -> crate::UsageTally {
        crate::UsageTally { tokens: crate::Tally::Thread, cost: None, input_includes_cached: true, usd_limit: false }
    }

    /// `CODEX_HOME` is `<home>/.codex` ([`launch::codex_home`]). `config.toml` is rewritten for
    /// every process (it may hold MCP server secrets), so it is never saved.
    fn persistent_home(&self) -> HomeLayout {
        HomeLayout { config_dir: ".codex", excludes: &["config.toml", "log/**", "tmp/**"], sessions: SessionFiles::ById }
    }
}
