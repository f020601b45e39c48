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
pub mod harness;
pub mod lines;
pub mod openai_codex;
pub mod opencode;
pub mod plan;
pub mod quota;
pub mod slug;
pub mod wording;

pub use draft::EventDraft;
pub use harness::{Harness, HomeLayout, Normalizer, SessionFiles, Tally, UsageTally};
pub use plan::{ExitInfo, InstallSpec, InterruptRecipe, LaunchContext, LaunchPlan, ProcessModel, StdinMode};

/// Every harness this build knows, in display order. `openai-codex` is Codex on
/// `codex app-server` and `opencode`/`gemini-cli` speak the Agent Client Protocol: conversation
/// wires, whose dialogue the daemon drives through the [`Normalizer`] conversation hooks.
/// `openai-codex-exec` (Codex on `codex exec --json`, one process per turn: the fallback) shares
/// `openai-codex`'s pinned package, and the daemon installs it once for both.
pub fn all() -> Vec<&'static dyn Harness> {
    let mut all: Vec<&'static dyn Harness> =
        vec![&claude_code::ClaudeCode, &openai_codex::app_server::OpenAiCodexAppServer, &openai_codex::OpenAiCodex];
    all.extend(acp_harnesses());
    all
}

/// The harnesses of this build spoken to over the Agent Client Protocol ([`acp`]), in display
/// order (also in [`all`]).
pub fn acp_harnesses() -> Vec<&'static dyn Harness> {
    vec![&opencode::OpenCode, &gemini_cli::GeminiCli]
}

/// The harness with this id, if any. `openai-codex-app-server`, the app-server's id before it
/// became `openai-codex`, still names it (runs stored then keep working).
pub fn by_id(id: &str) -> Option<&'static dyn Harness> {
    let id = if id == openai_codex::app_server::OLD_ID { openai_codex::app_server::ID } else { id };
    all().into_iter().find(|h| h.id() == id)
}

/// Whether a persistent home saved by harness `saved` serves harness `wanted`: the same id, or
/// two wires of one CLI (one pinned package, one config dir: `openai-codex` and
/// `openai-codex-exec`), old ids included ([`by_id`]).
pub fn same_cli(saved: &str, wanted: &str) -> bool {
    match (by_id(saved), by_id(wanted)) {
        (Some(a), Some(b)) => a.install_spec().packages == b.install_spec().packages,
        _ => saved == wanted,
    }
}

#[cfg(test)]
mod home_tests {
    #[test]
    fn a_home_serves_every_wire_of_its_cli() {
        assert!(super::same_cli("openai-codex", "openai-codex-exec"));
        assert!(super::same_cli("openai-codex-app-server", "openai-codex"));
        assert!(super::same_cli("claude-code", "claude-code"));
        assert!(!super::same_cli("claude-code", "openai-codex"));
        assert!(!super::same_cli("opencode", "gemini-cli"));
        assert!(!super::same_cli("some-old-cli", "claude-code"));
    }

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
