//! Gemini CLI (`gemini`, harness id `gemini-cli`), pinned to `@google/gemini-cli@0.61.0`, spoken
//! to over the Agent Client Protocol ([`crate::acp`]).
//!
//! Process model: one long-lived `gemini --acp -m MODEL` process per run. Facts this follows
//! (checked against 0.61.0):
//! - the package's `bundle/gemini.js` is a Node script (`#!/usr/bin/env node`): `node` must be on
//!   the agent's `PATH`. `GEMINI_CLI_NO_RELAUNCH=true` keeps it from re-spawning itself in a
//!   child Node (signals and the exit status then belong to the process Spaces started);
//! - `-m MODEL` is required in practice: without it the "auto" model router makes a model call
//!   of its own first, which hangs against an endpoint that does not serve it;
//! - a custom endpoint is `GOOGLE_GEMINI_BASE_URL` (Gemini API `streamGenerateContent`), the
//!   key `GEMINI_API_KEY` (or `GOOGLE_API_KEY`); `security.auth.selectedType: "gemini-api-key"`
//!   in the run's `~/.gemini/settings.json` spares the ACP `authenticate` step;
//! - it asks `session/request_permission` for tool calls (the normalizer's policy answers);
//! - it advertises `loadSession`, but `session/load` of a session made by an earlier process
//!   failed: a resume after the process is gone is a fresh session with a notice
//!   ([`FLAVOR`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::acp::{AcpCli, AcpCommand, Flavor};
use crate::harness::{HomeLayout, SessionFiles};
use crate::plan::LaunchContext;

/// The pinned npm package.
pub const PACKAGE: &str = "@google/gemini-cli@0.61.0";
/// The version `gemini --version` reports.
pub const VERSION: &str = "0.61.0";
/// The CLI's entry script, relative to the tools directory.
pub const BINARY: &str = "node_modules/@google/gemini-cli/bundle/gemini.js";
/// The model when the caller names none (`-m` is always given, see the module docs).
pub const DEFAULT_MODEL: &str = "gemini-2.5-flash";
/// The variable the key is read from.
pub const KEY_VAR: &str = "GEMINI_API_KEY";
/// Key given to a custom endpoint when the caller passed none.
pub const PLACEHOLDER_KEY: &str = "spaces-no-key";

/// How Gemini CLI's conversation behaves: no `session/load` across processes.
pub const FLAVOR: Flavor = Flavor { name: "Gemini CLI", load_in_new_process: false };

/// The Gemini CLI adapter (a [`crate::harness::Harness`] through [`AcpCli`]).
pub struct GeminiCli;

/// The run's settings file: `<home>/.gemini/settings.json`.
pub fn settings_path(home: &Path) -> PathBuf {
    home.join(".gemini/settings.json")
}

/// The run's `settings.json`: API-key auth, no auto-update or update nag, no usage statistics
/// or telemetry.
pub fn settings_json() -> String {
    let settings = json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
    });
    serde_json::to_string_pretty(&settings).unwrap_or_default()
}

impl AcpCli for GeminiCli {
    const ID: &'static str = "gemini-cli";
    const NAME: &'static str = "Gemini CLI";
    const PACKAGE: &'static str = PACKAGE;
    const VERSION: &'static str = VERSION;
    const BINARY: &'static str = BINARY;
    const ENDPOINT_WIRES: &'static [&'static str] = &["gemini-generate-content"];
    const KEYS: &'static [&'static str] = &[KEY_VAR, "GOOGLE_API_KEY"];
    const FLAVOR: Flavor = FLAVOR;
    /// Yes, even in yolo mode (seen on 0.61.0).
    const ASKS_PERMISSION: bool = true;

    /// `gemini --acp -m MODEL` with the run's settings.
    fn command(&self, ctx: &LaunchContext<'_>) -> AcpCommand {
        let model = ctx.model.unwrap_or(DEFAULT_MODEL);
        let argv = vec![ctx.binary.display().to_string(), "--acp".to_owned(), "-m".to_owned(), model.to_owned()];
        let mut env = BTreeMap::new();
        env.insert("HOME".to_owned(), ctx.home.display().to_string());
        env.insert("GEMINI_CLI_NO_RELAUNCH".to_owned(), "true".to_owned());
        env.insert("GEMINI_CLI_TRUST_WORKSPACE".to_owned(), "true".to_owned());
        env.insert("GEMINI_TELEMETRY_ENABLED".to_owned(), "false".to_owned());
        if let Some(base) = ctx.base_url {
            env.insert("GOOGLE_GEMINI_BASE_URL".to_owned(), base.trim_end_matches('/').to_owned());
            if !ctx.env.contains_key(KEY_VAR) && !ctx.env.contains_key("GOOGLE_API_KEY") {
                env.insert(KEY_VAR.to_owned(), PLACEHOLDER_KEY.to_owned());
            }
        }
        AcpCommand { argv, env, files: vec![(settings_path(ctx.home), settings_json())] }
    }

    /// `~/.gemini`: settings (rewritten every launch) and chats under `tmp/<project hash>/`.
    fn home_layout(&self) -> HomeLayout {
        HomeLayout { config_dir: ".gemini", excludes: &["settings.json", "tmp/**/logs.json"], sessions: SessionFiles::None }
    }
}
