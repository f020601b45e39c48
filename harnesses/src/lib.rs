//! # spaces-harnesses: one adapter per agent CLI
//!
//! Theory of operation: a [`Harness`] knows everything about one coding-agent CLI that the daemon
//! must not hard-code: the pinned npm package to install ([`InstallSpec`]), how to launch a turn
//! ([`Harness::launch`] gives a [`LaunchPlan`]: argv, environment, files, stdin mode), how
//! follow-ups and interrupts reach the CLI ([`ProcessModel`], [`InterruptRecipe`]), and how its
//! output becomes normalized events ([`Normalizer`]).
//!
//! Everything here is pure: no process is spawned, no file is written, no clock is read. The
//! daemon's run supervisor executes plans and feeds output lines to the normalizer; tests feed
//! recorded output of the real CLIs (see `tests/fixtures/`) and snapshot the events with `insta`.
//!
//! Event rules every normalizer keeps (API reference, `agent_events`): every turn ends with exactly
//! one `turn_ended`; a non-blank line that cannot be parsed becomes hidden `other` with its text,
//! never dropped (a blank line yields nothing); a tool left open when a turn ends is closed as
//! `failed`, never `completed`; how a turn ends when its process does, and the `exited` event, come
//! from [`ending`] so every harness agrees. `tests/suite/contract.rs` runs one table of situations
//! (crash, stop, interrupt, a missing result line, junk lines, ...) against every harness in
//! [`all`]: the same situation must give the same events whichever CLI produced them.

pub mod claude_code;
pub mod draft;
pub mod ending;
pub mod openai_codex;
pub mod plan;
pub mod redact;

pub use draft::EventDraft;
pub use plan::{
    ExitInfo, InstallSpec, InterruptRecipe, LaunchContext, LaunchPlan, ProcessModel, StdinMode,
};
pub use redact::Redactor;

/// One agent CLI adapter. Implementations are stateless; per-run state lives in the
/// [`Normalizer`] they create.
pub trait Harness: Send + Sync {
    /// Harness id used in `agent_start.agent` (`claude-code`, `openai-codex`).
    fn id(&self) -> &'static str;
    /// Human name (`Claude Code`).
    fn name(&self) -> &'static str;
    /// The pinned npm install of the CLI.
    fn install_spec(&self) -> InstallSpec;
    /// Whether one process serves every turn (stdin stream) or each turn is its own process.
    fn process_model(&self) -> ProcessModel;
    /// Short description of how follow-ups work, shown in capabilities (`stdin-stream`, ...).
    fn followups(&self) -> &'static str;
    /// Wire protocols accepted by `base_url` (`anthropic-messages`, `openai-responses`).
    fn endpoint_wires(&self) -> &'static [&'static str];
    /// Provider key variables the CLI reads (`ANTHROPIC_API_KEY`, ...).
    fn keys(&self) -> &'static [&'static str];
    /// The launch plan of a process serving turn `ctx.turn` (a fresh session, or a resume when
    /// `ctx.session_id` is set).
    fn launch(&self, ctx: &LaunchContext<'_>) -> LaunchPlan;
    /// Bytes to write on stdin to start a turn with `text` in a live [`ProcessModel::LongLived`]
    /// process. Per-turn harnesses never receive this call.
    fn user_message(&self, text: &str) -> Vec<u8>;
    /// How to cancel the turn in flight while keeping the session.
    fn interrupt(&self) -> InterruptRecipe;
    /// A fresh normalizer for one run.
    fn normalizer(&self) -> Box<dyn Normalizer>;
}

/// Turns one run's raw output into normalized events. Pure state machine, fed in order.
pub trait Normalizer: Send {
    /// A turn begins: returns `turn_started` and the `user_message` event carrying `text`.
    fn begin_turn(&mut self, turn: u32, text: &str) -> Vec<EventDraft>;
    /// The caller asked to interrupt the turn in flight; a turn that then ends without a normal
    /// result ends `interrupted`. Returns `cancel_requested` when a turn is in flight, nothing
    /// otherwise (an idle interrupt is never remembered).
    fn interrupt_requested(&mut self) -> Vec<EventDraft>;
    /// One complete stdout line, without its `\n` (a trailing `\r` is tolerated). Already redacted.
    fn stdout_line(&mut self, line: &str) -> Vec<EventDraft>;
    /// One stderr line (already redacted). Usually kept only for error reasons.
    fn stderr_line(&mut self, line: &str) -> Vec<EventDraft>;
    /// The agent process ended: closes open tools as `failed`, ends a turn still in flight
    /// (`interrupted`, `stopped`, or `error` with the exit code and stderr tail), then `exited`.
    fn process_exited(&mut self, exit: &ExitInfo) -> Vec<EventDraft>;
    /// The CLI's session id (Claude session id, Codex thread id) once seen.
    fn session_id(&self) -> Option<String>;
    /// True while a tool call of the turn in flight has started and not finished: a silent
    /// agent is then waiting on its tool (a build, a test run), not stalled.
    fn tool_running(&self) -> bool;
    /// True between `begin_turn` and that turn's `turn_ended`.
    fn turn_in_flight(&self) -> bool;
}

/// Every harness this build knows, in display order.
pub fn all() -> Vec<&'static dyn Harness> {
    vec![&claude_code::ClaudeCode, &openai_codex::OpenAiCodex]
}

/// The harness with this id, if any.
pub fn by_id(id: &str) -> Option<&'static dyn Harness> {
    all().into_iter().find(|h| h.id() == id)
}
