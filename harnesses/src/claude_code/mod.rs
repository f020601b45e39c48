//! Claude Code (`claude`, harness id `claude-code`), pinned to `@anthropic-ai/claude-code@2.1.197`.
//!
//! Process model: one long-lived `claude -p --input-format stream-json --output-format stream-json
//! --verbose` process per run (`launch`). Each turn is one user message JSON line on stdin; the
//! CLI answers with a `system/init` ... `result` cycle in the same session and exits when stdin
//! closes. An interrupt is a `control_request` line on stdin: the turn ends with a `result` of
//! `subtype: error_during_execution` and the process stays alive for the next message. A respawn
//! (after a crash) resumes with `--resume SESSION_ID` from the same cwd.
//!
//! Output becomes events in `normalize`. Facts about the stream were checked against the real
//! binary (fixtures under `harnesses/tests/fixtures/claude_code/`, recorded by
//! `testkit/examples/record_claude.rs`).

mod launch;
mod normalize;
mod tools;

pub use launch::{INTERRUPT_REQUEST_ID, MAX_RETRIES_DEFAULT, PLACEHOLDER_API_KEY};
pub use normalize::ClaudeNormalizer;

use crate::harness::{Harness, HomeLayout, Normalizer, SessionFiles};
use crate::plan::{InstallSpec, InterruptRecipe, LaunchContext, LaunchPlan, ProcessModel};

/// The pinned CLI version.
pub const VERSION: &str = "2.1.197";

/// The Claude Code adapter (stateless; per-run state lives in [`ClaudeNormalizer`]).
pub struct ClaudeCode;

impl Harness for ClaudeCode {
    fn id(&self) -> &'static str {
        "claude-code"
    }

    fn name(&self) -> &'static str {
        "Claude Code"
    }

    /// The npm package ships its native binary in the optional dependency
    /// `@anthropic-ai/claude-code-linux-x64`; we launch that binary directly (the postinstall
    /// link step may be skipped by npm, and signals must reach the working process).
    fn install_spec(&self) -> InstallSpec {
        InstallSpec {
            packages: vec![format!("@anthropic-ai/claude-code@{VERSION}")],
            version: VERSION,
            binary: "node_modules/@anthropic-ai/claude-code-linux-x64/claude",
        }
    }

    fn process_model(&self) -> ProcessModel {
        ProcessModel::LongLived
    }

    fn followups(&self) -> &'static str {
        "stdin-stream"
    }

    fn wire(&self) -> &'static str {
        "claude-stream-json"
    }

    /// `--resume` in a new process; usage and cost per turn; `--include-partial-messages`
    /// pieces; no permission requests (`--dangerously-skip-permissions`).
    fn supports(&self) -> spaces_sdk::HarnessSupports {
        spaces_sdk::HarnessSupports { resume: true, fork: true, rewind: true, usage: true, message_deltas: true, ..Default::default() }
    }

    fn endpoint_wires(&self) -> &'static [&'static str] {
        &["anthropic-messages"]
    }

    fn keys(&self) -> &'static [&'static str] {
        &["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"]
    }

    fn launch(&self, ctx: &LaunchContext<'_>) -> LaunchPlan {
        launch::plan(ctx)
    }

    fn user_message(&self, text: &str) -> Vec<u8> {
        launch::user_message(text)
    }

    fn interrupt(&self) -> InterruptRecipe {
        InterruptRecipe::Stdin(launch::interrupt_request())
    }

    fn normalizer(&self) -> Box<dyn Normalizer> {
        Box::new(ClaudeNormalizer::new())
    }

    /// Token counts of a `result` are the turn's, beside its cache reads and writes;
    /// `total_cost_usd` adds up over the process (HARNESS-NOTES).
    fn usage_tally(&self) -> crate::UsageTally {
        crate::UsageTally { tokens: crate::Tally::Turn, cost: Some(crate::Tally::Process), input_includes_cached: false, usd_limit: true }
    }

    /// `CLAUDE_CONFIG_DIR` is `<home>/.claude` (see the `launch` module); transcripts are filed by cwd.
    fn persistent_home(&self) -> HomeLayout {
        HomeLayout {
            config_dir: ".claude",
            excludes: &["statsig/**", "shell-snapshots/**", "debug/**", "*.lock"],
            sessions: SessionFiles::ByCwd,
        }
    }
}

pub use crate::slug::project_slug;

#[cfg(test)]
mod slug_tests {
    use super::project_slug;

    #[test]
    fn every_unit_that_is_not_alphanumeric_becomes_a_dash() {
        assert_eq!(project_slug("/tmp/a.b_c/Space 1"), "-tmp-a-b-c-Space-1");
        // é is one UTF-16 unit, 😀 two.
        assert_eq!(project_slug("/é/😀"), "-----");
    }

    #[test]
    fn a_long_cwd_is_cut_at_200_and_hashed() {
        let cwd = format!("/{}", "x".repeat(250));
        let slug = project_slug(&cwd);
        assert!(slug.starts_with(&format!("-{}-", "x".repeat(199))), "{slug}");
        assert!(slug.len() > 201);
        // The JS hash of "a" is 97; of "ab" is 97*31+98 = 3105.
        let mut h: i32 = 0;
        for u in "ab".encode_utf16() {
            h = h.wrapping_shl(5).wrapping_sub(h).wrapping_add(i32::from(u));
        }
        assert_eq!(h, 3105);
        assert_ne!(project_slug(&format!("/{}", "y".repeat(250))), slug);
    }
}
