//! Launch plans for `codex exec` (turn 1) and `codex exec resume` (turn 2+).
//!
//! Facts this follows (checked against codex-cli 0.171.0):
//! - `codex exec --json` prints one JSON event per line on stdout; stdin must be `/dev/null`
//!   (an open pipe makes it wait for a prompt on stdin forever).
//! - Follow-ups are new processes: `codex exec resume THREAD_ID TEXT` (the subcommand takes the
//!   same flags after its positionals; it has no `--cd`, the process cwd is the workspace).
//! - `OPENAI_BASE_URL` is ignored; a custom endpoint is a model provider in `config.toml`.
//!   Retries are set to 0 so a failing endpoint ends the turn within seconds.
//! - `CODEX_HOME` (default `~/.codex`) holds config, sessions (needed by resume) and auth.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use spaces_sdk::McpServer;

use crate::plan::{LaunchContext, LaunchPlan, StdinMode, MCP_STARTUP_WAIT_MS};

/// Model used with a custom endpoint when the caller names none. It must be a slug Codex knows:
/// with an unknown slug Codex falls back to generic model settings and drops `apply_patch`.
pub const DEFAULT_ENDPOINT_MODEL: &str = "gpt-5.5";
/// Name of the run-local model provider written for a custom endpoint.
pub const PROVIDER_ID: &str = "spaces_endpoint";
/// The variable Codex reads the provider key from (`env_key` of the provider).
pub const KEY_VAR: &str = "OPENAI_API_KEY";
/// Key given to a custom endpoint when the caller passed none. Scripted and local endpoints do
/// not check it; a real provider answers 401, which ends the turn `error` with that reason.
pub const PLACEHOLDER_KEY: &str = "spaces-no-key";

/// Settings that keep Codex from calling home. Without them codex-cli 0.171.0 runs
/// `git ls-remote https://github.com/openai/plugins.git` (plugin marketplace) and resolves
/// `chatgpt.com` and `api.github.com` on every start (seen with strace); with them it only talks
/// to the model endpoint. `--strict-config` accepts every key.
pub const NO_PHONE_HOME: &str = "\n[analytics]\nenabled = false\n\n[feedback]\nenabled = false\n\n\
    [features]\nplugins = false\nremote_plugin = false\napps = false\nin_app_updates = false\n";

/// `CODEX_HOME` of a run: `<home>/.codex` (the CLI's own default under `HOME`).
pub fn codex_home(home: &Path) -> PathBuf {
    home.join(".codex")
}

/// The plan of one `codex exec` process for `ctx.turn` (a resume when `ctx.session_id` is set).
pub fn plan(ctx: &LaunchContext<'_>) -> LaunchPlan {
    let mut argv = vec![ctx.binary.display().to_string(), "exec".to_owned()];
    if let Some(thread_id) = ctx.session_id {
        argv.push("resume".to_owned());
        argv.push(thread_id.to_owned());
    }
    argv.extend(["--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"].map(String::from));
    if let Some(model) = ctx.model {
        argv.push("-m".to_owned());
        argv.push(model.to_owned());
    }
    // The prompt goes on stdin (`-`), never on the command line: `ps` would show it to every
    // user, and a prompt over 128 KiB would fail the exec with E2BIG (`codex exec --help`: "If
    // not provided as an argument (or if `-` is used), instructions are read from stdin").
    argv.push("-".to_owned());

    let home = codex_home(ctx.home);
    let mut env = BTreeMap::new();
    env.insert("HOME".to_owned(), ctx.home.display().to_string());
    env.insert("CODEX_HOME".to_owned(), home.display().to_string());
    if ctx.base_url.is_some() && !ctx.env.contains_key(KEY_VAR) {
        env.insert(KEY_VAR.to_owned(), PLACEHOLDER_KEY.to_owned());
    }
    for (k, v) in ctx.env {
        env.insert(k.clone(), v.clone());
    }

    LaunchPlan {
        argv,
        env,
        files: vec![(home.join("config.toml"), config_toml(ctx.base_url, ctx.model, ctx.mcp_servers))],
        stdin: StdinMode::Once,
        initial_stdin: Some(ctx.prompt.as_bytes().to_vec()),
    }
}

/// The run-local `config.toml`: no update checks; up to [`MCP_STARTUP_WAIT_MS`] of waiting for
/// MCP servers that are still starting (`mcp_optional_startup_grace_ms`: Codex waits only while
/// a server is starting, and leaves out one that fails; without it a server slower than its own
/// short grace is missing from the first request and the model's call is refused `unsupported
/// call`); no analytics, feedback uploads, plugin or app syncs
/// ([`NO_PHONE_HOME`]); with a
/// custom endpoint (`base_url` without `/v1`), a Responses provider with retries off and a known
/// model slug unless `model` is given (then `-m` names it); and one `[mcp_servers.<name>]` table
/// per MCP server ([`mcp_servers_toml`]). The file is 0600 under the run's `CODEX_HOME`: it holds
/// the servers' env values and headers.
pub fn config_toml(base_url: Option<&str>, model: Option<&str>, mcp_servers: &[McpServer]) -> String {
    let mut out = String::from(
        "# Written by spacesd for this run; rewritten at every launch.\n\
         check_for_update_on_startup = false\n",
    );
    if base_url.is_some() {
        if model.is_none() {
            out.push_str(&format!("model = {}\n", toml_str(DEFAULT_ENDPOINT_MODEL)));
        }
        out.push_str(&format!("model_provider = {}\n", toml_str(PROVIDER_ID)));
    }
    out.push_str(&format!("mcp_optional_startup_grace_ms = {MCP_STARTUP_WAIT_MS}\n"));
    out.push_str(NO_PHONE_HOME);
    if let Some(base) = base_url {
        let base = format!("{}/v1", base.trim_end_matches('/').trim_end_matches("/v1"));
        out.push_str(&format!(
            "\n[model_providers.{PROVIDER_ID}]\n\
             name = \"Spaces endpoint\"\n\
             base_url = {}\n\
             wire_api = \"responses\"\n\
             env_key = {}\n\
             request_max_retries = 0\n\
             stream_max_retries = 0\n",
            toml_str(&base),
            toml_str(KEY_VAR),
        ));
    }
    out.push_str(&mcp_servers_toml(mcp_servers));
    out
}

/// `[mcp_servers.<name>]` tables as codex-cli 0.171.0 reads them (the shape `codex mcp add`
/// writes): `command`, `args`, `env` for a stdio server; `url` and `http_headers` for a
/// Streamable HTTP one.
pub fn mcp_servers_toml(servers: &[McpServer]) -> String {
    let mut out = String::new();
    for server in servers {
        out.push_str(&format!("\n[mcp_servers.{}]\n", toml_key(server.name())));
        match server {
            McpServer::Stdio(s) => {
                out.push_str(&format!("command = {}\n", toml_str(&s.command)));
                let args: Vec<String> = s.args.iter().map(|a| toml_str(a)).collect();
                out.push_str(&format!("args = [{}]\n", args.join(", ")));
                if !s.env.is_empty() {
                    out.push_str(&format!("env = {}\n", toml_inline_table(&s.env)));
                }
            }
            McpServer::Http(s) => {
                out.push_str(&format!("url = {}\n", toml_str(&s.url)));
                if !s.headers.is_empty() {
                    out.push_str(&format!("http_headers = {}\n", toml_inline_table(&s.headers)));
                }
            }
        }
    }
    out
}

/// A TOML key: bare when it is only letters, digits, `_` and `-`, else quoted.
fn toml_key(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        s.to_owned()
    } else {
        toml_str(s)
    }
}

/// `{ "K" = "v", ... }` (keys always quoted: env and header names may hold any character).
fn toml_inline_table(map: &std::collections::BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = map.iter().map(|(k, v)| format!("{} = {}", toml_str(k), toml_str(v))).collect();
    format!("{{ {} }}", pairs.join(", "))
}

/// A TOML basic string (JSON string escaping is valid TOML for these values).
fn toml_str(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}
