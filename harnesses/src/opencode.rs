//! opencode (`opencode`, harness id `opencode`), pinned to `opencode-ai@1.18.33`, spoken to over
//! the Agent Client Protocol ([`crate::acp`]).
//!
//! Process model: one long-lived `opencode acp --pure` process per run; the conversation is
//! ACP (see [`crate::acp::normalize`]). Facts this follows (checked against 1.18.33):
//! - the npm package's `bin/opencode` is a Node launcher; the native binary is in the optional
//!   dependency `opencode-linux-x64` (`bin/opencode`, 185 MB). Its postinstall script only
//!   links that binary and fails on hosts without some of the variants (`npm install
//!   --ignore-scripts` is enough);
//! - config: `OPENCODE_CONFIG` names the run's config file (written here, under the run's
//!   home: `.config/opencode/opencode.json`), `OPENCODE_DISABLE_PROJECT_CONFIG=1` keeps a
//!   Space's own `opencode.json` out; `--pure` and `OPENCODE_DISABLE_DEFAULT_PLUGINS=1` leave out
//!   external and default plugins, but on every start it still tries an npm install of
//!   `@opencode-ai/plugin` (the SDK for plugins written by the user, with `@opencode-ai/sdk`,
//!   `effect`, `zod`, ...) into `$XDG_CONFIG_HOME/opencode/node_modules` (here
//!   `<home>/.config/opencode/`). Nothing of a `--pure` run uses it: the run gets
//!   `npm_config_offline=true`, so that install fails at once (a warning in opencode's log)
//!   instead of reaching the registry from a run (checked with strace: no connect but its own
//!   loopback server, and a seeded directory is not kept: a symlinked `node_modules` was removed
//!   and fetched again); autoupdate, sharing, LSP downloads, the
//!   models.dev fetch and Claude Code compatibility (reading `~/.claude`) are off;
//! - a custom endpoint is an OpenAI-compatible (Chat Completions) provider `spaces` with
//!   `options.baseURL = <base_url>/v1` and the key from `OPENAI_API_KEY`; the model is
//!   `spaces/<model>`;
//! - MCP servers are given in `session/new` (ACP `mcpServers`), not in the config file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::acp::{AcpCli, AcpCommand, Flavor};
use crate::harness::{HomeLayout, SessionFiles};
use crate::plan::LaunchContext;

/// The pinned npm package.
pub const PACKAGE: &str = "opencode-ai@1.18.33";
/// The version `opencode --version` reports.
pub const VERSION: &str = "1.18.33";
/// The native binary inside the npm optional dependency for this platform, relative to the
/// tools directory.
#[cfg(target_arch = "aarch64")]
pub const BINARY: &str = "node_modules/opencode-linux-arm64/bin/opencode";
/// The native binary inside the npm optional dependency for this platform, relative to the
/// tools directory.
#[cfg(not(target_arch = "aarch64"))]
pub const BINARY: &str = "node_modules/opencode-linux-x64/bin/opencode";

/// The provider id of a custom endpoint in the run's config.
pub const PROVIDER_ID: &str = "spaces";
/// The variable the provider's key is read from.
pub const KEY_VAR: &str = "OPENAI_API_KEY";
/// Key given to a custom endpoint when the caller passed none.
pub const PLACEHOLDER_KEY: &str = "spaces-no-key";
/// Model used with a custom endpoint when the caller names none.
pub const DEFAULT_ENDPOINT_MODEL: &str = "gpt-5.5";

/// How opencode's conversation behaves: `session/load` of a session an earlier process made
/// works (its store is under the home; the `opencode_resume` recording).
pub const FLAVOR: Flavor = Flavor { name: "opencode", load_in_new_process: true };

/// The opencode adapter (a [`crate::harness::Harness`] through [`AcpCli`]).
pub struct OpenCode;

/// The run's config file: `<home>/.config/opencode/opencode.json`.
pub fn config_path(home: &Path) -> PathBuf {
    home.join(".config/opencode/opencode.json")
}

/// The run's `opencode.json`: no autoupdate or sharing, every tool allowed (Spaces runs agents
/// unattended), and with `base_url` the `spaces` OpenAI-compatible provider and its model.
pub fn config_json(base_url: Option<&str>, model: Option<&str>) -> String {
    let mut config = json!({
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": false,
        "share": "disabled",
        "permission": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
    });
    match (base_url, model) {
        (Some(base), model) => {
            let model = model.unwrap_or(DEFAULT_ENDPOINT_MODEL);
            let base = format!("{}/v1", base.trim_end_matches('/').trim_end_matches("/v1"));
            config["model"] = json!(format!("{PROVIDER_ID}/{model}"));
            config["provider"] = json!({PROVIDER_ID: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Spaces endpoint",
                "options": {"baseURL": base, "apiKey": format!("{{env:{KEY_VAR}}}")},
                "models": {model: {"name": model}},
            }});
        }
        (None, Some(model)) => config["model"] = json!(model),
        (None, None) => {}
    }
    serde_json::to_string_pretty(&config).unwrap_or_default()
}

impl AcpCli for OpenCode {
    const ID: &'static str = "opencode";
    const NAME: &'static str = "opencode";
    const PACKAGE: &'static str = PACKAGE;
    const VERSION: &'static str = VERSION;
    const BINARY: &'static str = BINARY;
    const ENDPOINT_WIRES: &'static [&'static str] = &["openai-chat-completions"];
    const KEYS: &'static [&'static str] = &[KEY_VAR];
    const FLAVOR: Flavor = FLAVOR;
    /// No: the run's config allows every tool.
    const ASKS_PERMISSION: bool = false;

    /// `opencode acp --pure --cwd CWD` with the run's config. A resume is the normalizer's
    /// `session/load` (`ctx.session_id`).
    fn command(&self, ctx: &LaunchContext<'_>) -> AcpCommand {
        let argv = vec![
            ctx.binary.display().to_string(),
            "acp".to_owned(),
            "--pure".to_owned(),
            "--cwd".to_owned(),
            ctx.cwd.display().to_string(),
        ];
        let config = config_path(ctx.home);
        let mut env = BTreeMap::new();
        env.insert("HOME".to_owned(), ctx.home.display().to_string());
        env.insert("OPENCODE_CONFIG".to_owned(), config.display().to_string());
        // Its first start's npm install of `@opencode-ai/plugin` (the SDK of user-written
        // plugins, which `--pure` leaves out) fails at once without touching the network.
        env.insert("npm_config_offline".to_owned(), "true".to_owned());
        for flag in [
            "OPENCODE_DISABLE_PROJECT_CONFIG",
            "OPENCODE_DISABLE_AUTOUPDATE",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS",
            "OPENCODE_DISABLE_LSP_DOWNLOAD",
            "OPENCODE_DISABLE_MODELS_FETCH",
            "OPENCODE_DISABLE_SHARE",
            "OPENCODE_DISABLE_CLAUDE_CODE",
        ] {
            env.insert(flag.to_owned(), "1".to_owned());
        }
        if ctx.base_url.is_some() && !ctx.env.contains_key(KEY_VAR) {
            env.insert(KEY_VAR.to_owned(), PLACEHOLDER_KEY.to_owned());
        }
        AcpCommand { argv, env, files: vec![(config, config_json(ctx.base_url, ctx.model))] }
    }

    /// opencode keeps sessions in its data dir (`$XDG_DATA_HOME/opencode/opencode.db`, SQLite),
    /// found by id from any cwd ([`SessionFiles::Store`]).
    fn home_layout(&self) -> HomeLayout {
        HomeLayout { config_dir: ".local/share/opencode", excludes: &["log/**", "bin/**"], sessions: SessionFiles::Store("opencode.db") }
    }
}
