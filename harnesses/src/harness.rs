//! The two traits every agent CLI adapter implements: [`Harness`] (install, launch, home) and
//! [`Normalizer`] (its output as events, and the conversation hooks), with the home's layout.

use crate::draft::EventDraft;
use crate::plan::{ExitInfo, InstallSpec, InterruptRecipe, LaunchContext, LaunchPlan, ProcessModel};

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
    /// The protocol spoken with the CLI on its stdio, shown in capabilities
    /// (`claude-stream-json`, `codex-app-server`, `codex-exec-jsonl`, `acp`).
    fn wire(&self) -> &'static str;
    /// What runs of this harness can do, shown in capabilities.
    fn supports(&self) -> spaces_sdk::HarnessSupports;
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
    /// How the figures of this CLI's `usage` events add up, so the daemon's usage ledger keeps
    /// each turn's own share. By default each event gives its turn's tokens, input without
    /// cached ones, and no cost.
    fn usage_tally(&self) -> UsageTally {
        UsageTally { tokens: Tally::Turn, cost: None, input_includes_cached: false, usd_limit: false }
    }
}

/// What a running figure of a CLI counts over ([`UsageTally`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tally {
    /// Each event gives the turn's own figure.
    Turn,
    /// A running total over the agent process: a new process starts again from zero
    /// (Claude Code's `total_cost_usd`).
    Process,
    /// A running total over the session (thread), across processes and resumes (Codex's token
    /// counts).
    Thread,
}

/// How one CLI's `usage` figures add up ([`Harness::usage_tally`]); docs/harnesses.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageTally {
    /// What the token counts count over.
    pub tokens: Tally,
    /// What `total_cost_usd` counts over; `None` when the CLI reports no cost (the daemon's
    /// price table then estimates it).
    pub cost: Option<Tally>,
    /// True when `input_tokens` already includes the cached ones (Codex); false when cached
    /// reads and cache writes come beside it (Claude Code).
    pub input_includes_cached: bool,
    /// True when the CLI keeps a dollar limit itself ([`crate::LaunchContext::max_budget_usd`],
    /// Claude Code's `--max-budget-usd`), for the life of its process.
    pub usd_limit: bool,
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
    /// folder must be moved to this cwd's slug ([`crate::slug::project_slug`]).
    ByCwd,
    /// Codex: `sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`, found by thread id from
    /// any cwd.
    ById,
    /// Every session in one store file at this path (relative to the config dir), found by id
    /// from any cwd: opencode's `opencode.db` (SQLite). A restored home holds the session when it
    /// holds the store.
    Store(&'static str),
    /// The CLI cannot continue a session in a new process (Gemini CLI over ACP): a restored home
    /// never holds a session to resume, and the run starts a fresh one with a notice.
    None,
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
            SessionFiles::Store(file) => rel == file,
            SessionFiles::None => false,
        }
    }

    /// The directory (relative to the config dir) where the transcript must be for a process in
    /// `cwd` to resume it; `None` when anywhere will do.
    pub fn resume_dir(self, cwd: &std::path::Path) -> Option<String> {
        match self {
            SessionFiles::ByCwd => Some(format!("projects/{}", crate::slug::project_slug(&cwd.to_string_lossy()))),
            SessionFiles::ById | SessionFiles::Store(_) | SessionFiles::None => None,
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
    /// Where the session stands now, as the CLI names a point to resume at
    /// ([`crate::LaunchContext::resume_at`]): asked at each turn's end for `agent_rewind`
    /// (issue 34). Claude Code: the uuid of the last message line; Codex app-server: the last
    /// turn's id. `None` (the default): the CLI cannot resume at a point.
    fn turn_point(&self) -> Option<String> {
        None
    }
    /// True while a tool call of the turn in flight has started and not finished: a silent
    /// agent is then waiting on its tool (a build, a test run), not stalled.
    fn tool_running(&self) -> bool;
    /// True between `begin_turn` and that turn's `turn_ended`.
    fn turn_in_flight(&self) -> bool;
    /// The usage the CLI reported for the turn in flight so far, before the turn's `usage`
    /// event, in the figures of [`Harness::usage_tally`] (Codex app-server's
    /// `thread/tokenUsage/updated`); `None` when the wire says nothing mid-turn. The daemon
    /// checks a run's budget against it and interrupts the turn that crosses it.
    fn usage_so_far(&self) -> Option<spaces_sdk::Usage> {
        None
    }
    /// After a turn ended `quota_waiting`: when the provider's limit resets, Unix ms, when the
    /// CLI said (beyond the turn's text, which the daemon reads with [`crate::quota`]); `None`
    /// by default.
    fn quota_resets_at_ms(&self) -> Option<u64> {
        None
    }

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

    /// A `force` message mid-turn on a wire that can add input to the turn in flight (Codex
    /// `turn/steer`): the line to write (without its `\n`) and the events it makes (the caller's
    /// `user_message`, in the turn in flight). `None`: the wire cannot steer now (no turn the
    /// agent named yet, or no steering at all); the caller then interrupts the turn and runs the
    /// message next. Default: `None`.
    fn steer(&mut self, _text: &str) -> Option<(String, Vec<EventDraft>)> {
        None
    }

    /// The texts of steers the agent refused since the last call (its turn ended first, ...),
    /// oldest first: the caller runs each as the next turn, so no message is lost. Drained like
    /// [`Normalizer::take_outgoing`]. Default: none.
    fn take_refused_steers(&mut self) -> Vec<String> {
        Vec::new()
    }
}
