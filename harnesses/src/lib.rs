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
//! from [`ending`] so every harness agrees (as do the stderr tail kept for error reasons and the
//! last step of a stdout line, from [`lines`]). `tests/suite/contract.rs` runs one table of
//! situations (crash, stop, interrupt, a missing result line, junk lines, ...) against every
//! harness in [`all`]: the same situation must give the same events whichever CLI produced them.

pub mod acp;
pub mod claude_code;
pub mod draft;
pub mod ending;
pub mod gemini_cli;
pub mod lines;
pub mod openai_codex;
pub mod opencode;
pub mod plan;
pub mod wording;

pub use draft::EventDraft;
pub use plan::{ExitInfo, InstallSpec, InterruptRecipe, LaunchContext, LaunchPlan, ProcessModel, StdinMode};

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
    /// What a persistent agent's home is for this CLI (API reference `home`; issue "Persistent
    /// agents and volumes"): the config directory under the run's `home` that is restored before
    /// the first turn and saved after every turn (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`), the paths in
    /// it never saved, and where a session's transcript lives.
    fn persistent_home(&self) -> HomeLayout;
}

/// Where one CLI keeps what a persistent agent carries between runs and hosts. Paths are
/// relative to the run's `home` (the agent's `HOME`); patterns are globs relative to
/// `config_dir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HomeLayout {
    /// The CLI's config directory (`.claude`, `.codex`): sessions, memory, settings.
    pub config_dir: &'static str,
    /// Globs (relative to `config_dir`) never saved: files the launcher rewrites for every
    /// process (they may hold MCP secrets) and caches.
    pub excludes: &'static [&'static str],
    /// Where the transcript of a session is, and where it must be to resume it.
    pub sessions: SessionFiles,
}

/// How a CLI files session transcripts, so a home restored on another host (whose Space folder
/// differs) still resumes: see [`HomeLayout::sessions`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionFiles {
    /// Claude Code: `projects/<slug of the cwd>/<session id>.jsonl` (and a `<session id>/`
    /// directory beside it); `--resume` only looks in the current cwd's project directory
    /// (another cwd gives "No conversation found"), so a transcript filed under another host's
    /// folder must be moved to this cwd's slug ([`claude_code::project_slug`]).
    ByCwd,
    /// Codex: `sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`, found by thread id from
    /// any cwd.
    ById,
}

impl SessionFiles {
    /// True when `rel` (a path relative to the config dir, `/`-separated) is the transcript of
    /// `session_id`.
    pub fn is_transcript(self, rel: &str, session_id: &str) -> bool {
        if session_id.is_empty() {
            return false;
        }
        match self {
            SessionFiles::ByCwd => {
                let parts: Vec<&str> = rel.split('/').collect();
                parts.len() == 3 && parts[0] == "projects" && parts[2] == format!("{session_id}.jsonl")
            }
            SessionFiles::ById => {
                rel.starts_with("sessions/")
                    && rel.rsplit('/').next().is_some_and(|f| f.starts_with("rollout-") && f.ends_with(&format!("-{session_id}.jsonl")))
            }
        }
    }

    /// The directory (relative to the config dir) where the transcript must be for a process in
    /// `cwd` to resume it; `None` when anywhere will do.
    pub fn resume_dir(self, cwd: &std::path::Path) -> Option<String> {
        match self {
            SessionFiles::ByCwd => Some(format!("projects/{}", claude_code::project_slug(&cwd.to_string_lossy()))),
            SessionFiles::ById => None,
        }
    }
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

    // A conversation wire (`codex app-server`, the Agent Client Protocol) is a dialogue, not
    // a stream: the CLI answers requests and asks its own (a session id to use, a permission),
    // and what to send next depends on what it said. A normalizer of such a wire keeps that
    // state and says what to write; the defaults below are those of a one-way wire (Claude
    // Code's stream-json, `codex exec --json`), so a harness that does not talk back writes
    // nothing of its own.

    /// A process of this run is about to start with `ctx` (every process: the first, a resume,
    /// a respawn), before any of its output is fed. A conversation normalizer keeps what its
    /// handshake needs (cwd, MCP servers, model, the session to resume) and resets its per-process
    /// state (request ids, pending answers). Default: nothing.
    fn launched(&mut self, _ctx: &LaunchContext<'_>) {}

    /// Lines to write on the agent's stdin, in order, each one whole line without its `\n`
    /// (JSON-RPC requests and answers: the next handshake step, a permission answer). The
    /// caller drains this after every call that feeds the normalizer (`stdout_line`,
    /// `begin_turn`, `interrupt_requested`, ...) and writes the lines before anything else it
    /// sends later. Never drained while re-feeding stored output after a daemon restart (those
    /// lines were written by the previous daemon). Default: none.
    fn take_outgoing(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// What starts turn `text` in the live [`ProcessModel::LongLived`] process when it depends
    /// on the conversation's state (a thread id, the next request id): one line without its
    /// `\n`. `None`: the harness's stateless [`Harness::user_message`]. Default: `None`.
    fn turn_input(&mut self, _text: &str) -> Option<String> {
        None
    }

    /// What interrupts the turn in flight when it depends on the conversation's state (the
    /// turn id of `turn/interrupt`, the session of `session/cancel`): one line without its
    /// `\n`. `None`: the harness's [`Harness::interrupt`] recipe. Default: `None`.
    fn interrupt_input(&mut self) -> Option<String> {
        None
    }
}

/// Every harness this build knows, in display order. `openai-codex-app-server` is Codex on
/// `codex app-server` (a conversation wire: the daemon drives the [`Normalizer`] conversation
/// hooks); it shares `openai-codex`'s pinned package, and the daemon installs it once for both.
pub fn all() -> Vec<&'static dyn Harness> {
    vec![&claude_code::ClaudeCode, &openai_codex::OpenAiCodex, &openai_codex::app_server::OpenAiCodexAppServer]
}

/// The harness with this id, if any.
pub fn by_id(id: &str) -> Option<&'static dyn Harness> {
    all().into_iter().find(|h| h.id() == id)
}

#[cfg(test)]
mod home_tests {
    use super::SessionFiles;

    #[test]
    fn transcripts_are_recognised_where_each_cli_files_them() {
        let by_cwd = SessionFiles::ByCwd;
        assert!(by_cwd.is_transcript("projects/-tmp-a/abc.jsonl", "abc"));
        assert!(!by_cwd.is_transcript("projects/-tmp-a/abcd.jsonl", "abc"));
        assert!(!by_cwd.is_transcript("projects/-tmp-a/sub/abc.jsonl", "abc"));
        assert!(!by_cwd.is_transcript("projects/-tmp-a/abc.jsonl", ""));
        assert_eq!(by_cwd.resume_dir(std::path::Path::new("/srv/b")).as_deref(), Some("projects/-srv-b"));
        let by_id = SessionFiles::ById;
        assert!(by_id.is_transcript("sessions/2026/11/30/rollout-2026-11-30T10-00-00-t1.jsonl", "t1"));
        assert!(!by_id.is_transcript("sessions/2026/11/30/rollout-x-t2.jsonl", "t1"));
        assert!(!by_id.is_transcript("archived/rollout-x-t1.jsonl", "t1"));
        assert_eq!(by_id.resume_dir(std::path::Path::new("/srv/b")), None);
    }
}
