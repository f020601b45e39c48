//! Launch plan, stdin messages and the interrupt request of Claude Code's stream-json mode.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use spaces_sdk::McpServer;

use crate::plan::MCP_STARTUP_WAIT_MS;
use crate::plan::{LaunchContext, LaunchPlan, StdinMode};

/// `CLAUDE_CODE_MAX_RETRIES` unless the caller sets it: the CLI's default backoff retries a
/// failing endpoint for minutes; with 2 a failing model call ends the turn within a few seconds.
pub const MAX_RETRIES_DEFAULT: &str = "2";

/// `ANTHROPIC_API_KEY` given to the CLI when a custom `base_url` is set and the caller passed
/// neither `ANTHROPIC_API_KEY` nor `ANTHROPIC_AUTH_TOKEN`. Without any key the CLI refuses to
/// start a turn ("Not logged in"); a custom endpoint (a local proxy, a scripted model) usually
/// does its own auth, so a visible placeholder is sent instead. An endpoint that checks keys
/// answers 401 and the turn ends `error`.
pub const PLACEHOLDER_API_KEY: &str = "spaces-placeholder-key";

/// `request_id` of the interrupt control request (the CLI echoes it in its `control_response`).
pub const INTERRUPT_REQUEST_ID: &str = "spaces-interrupt";

/// The run-local MCP config file (in the run directory, not the agent's home: it holds the
/// servers' secrets).
pub const MCP_CONFIG_FILE: &str = "claude-mcp.json";

/// Set to `0` when the run has MCP servers: the CLI then connects them before the first model
/// request, waiting for all of them together for up to [`MCP_CONNECT_TIMEOUT_VAR`] (a server
/// not ready by then is left out of that request and goes on connecting). By default `claude -p`
/// sends the request at once and a server still starting is missing from it: the model's call
/// is refused "No such tool available ... is still connecting" (seen with a `spaces` server
/// slowed by 4 s, and once on a loaded CI host). Read by claude-code's
/// `MCP_CONNECTION_NONBLOCKING` check, where `0`/`false`/`no`/`off` mean blocking.
pub const MCP_NONBLOCKING_VAR: &str = "MCP_CONNECTION_NONBLOCKING";

/// How long, in ms, the blocking connect of [`MCP_NONBLOCKING_VAR`] waits for the servers:
/// [`MCP_STARTUP_WAIT_MS`], set with it. The CLI's own default is 5,000 ms, shorter than a
/// server fetched by `npx` on first use may take.
pub const MCP_CONNECT_TIMEOUT_VAR: &str = "MCP_CONNECT_TIMEOUT_MS";

/// The process for a run: `claude -p --input-format stream-json --output-format stream-json
/// --verbose --include-partial-messages --dangerously-skip-permissions [--mcp-config FILE
/// --strict-mcp-config] [--model M] [--resume SID]`, stdin a pipe, the first turn's message as
/// `initial_stdin`. `--include-partial-messages` adds the model's stream as `stream_event` lines,
/// so the answer can be shown as it streams (see the normalizer). With MCP servers, FILE is
/// [`MCP_CONFIG_FILE`] in the run directory ([`mcp_config`]) and only those servers are
/// used (none from the user's or the Space's own configs); their tools need no permission rule,
/// as `--dangerously-skip-permissions` allows every tool, `mcp__<name>__*` included. Environment: the run's private `HOME` with
/// `CLAUDE_CONFIG_DIR=$HOME/.claude`, telemetry, autoupdate and nonessential traffic off,
/// `IS_SANDBOX=1` (needed for `--dangerously-skip-permissions` as root), a small retry count;
/// with MCP servers, [`MCP_NONBLOCKING_VAR`]`=0` and [`MCP_CONNECT_TIMEOUT_VAR`] (connect them,
/// for up to 30 s, before the first request);
/// `ANTHROPIC_BASE_URL` from `base_url`; then every `ctx.env` entry (the caller wins).
pub fn plan(ctx: &LaunchContext<'_>) -> LaunchPlan {
    let mut argv: Vec<String> = vec![
        ctx.binary.display().to_string(),
        "-p".into(),
        "--input-format".into(),
        "stream-json".into(),
        "--output-format".into(),
        "stream-json".into(),
        "--verbose".into(),
        "--include-partial-messages".into(),
        "--dangerously-skip-permissions".into(),
    ];
    let mut files = Vec::new();
    if !ctx.mcp_servers.is_empty() {
        let path = ctx.run_dir.join(MCP_CONFIG_FILE);
        argv.push("--mcp-config".into());
        argv.push(path.display().to_string());
        argv.push("--strict-mcp-config".into());
        files.push((path, format!("{:#}\n", mcp_config(ctx.mcp_servers))));
    }
    if let Some(model) = ctx.model {
        argv.push("--model".into());
        argv.push(model.into());
    }
    if let Some(usd) = ctx.max_budget_usd {
        // The CLI's own limit (HARNESS-NOTES: the turn ends `error_max_budget_usd`); its cost
        // adds up over the process, and each process gets what the run has left.
        argv.push("--max-budget-usd".into());
        argv.push(format!("{usd:.6}"));
    }
    if let Some(sid) = ctx.session_id {
        argv.push("--resume".into());
        argv.push(sid.into());
        if let Some(at) = ctx.resume_at {
            // A rewind (issue 34): the session as it was at that message, as a new session
            // (the old one keeps its history).
            argv.push("--resume-session-at".into());
            argv.push(at.into());
            argv.push("--fork-session".into());
        }
    }

    let mut env = BTreeMap::new();
    let home = ctx.home.display().to_string();
    env.insert("HOME".to_owned(), home);
    env.insert("CLAUDE_CONFIG_DIR".to_owned(), ctx.home.join(".claude").display().to_string());
    env.insert("DISABLE_TELEMETRY".to_owned(), "1".to_owned());
    env.insert("DISABLE_AUTOUPDATER".to_owned(), "1".to_owned());
    env.insert("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".to_owned(), "1".to_owned());
    env.insert("IS_SANDBOX".to_owned(), "1".to_owned());
    env.insert("CLAUDE_CODE_MAX_RETRIES".to_owned(), MAX_RETRIES_DEFAULT.to_owned());
    if !ctx.mcp_servers.is_empty() {
        env.insert(MCP_NONBLOCKING_VAR.to_owned(), "0".to_owned());
        env.insert(MCP_CONNECT_TIMEOUT_VAR.to_owned(), MCP_STARTUP_WAIT_MS.to_string());
    }
    if let Some(url) = ctx.base_url {
        env.insert("ANTHROPIC_BASE_URL".to_owned(), url.trim_end_matches('/').to_owned());
    }
    let custom_endpoint = ctx.base_url.is_some() || ctx.env.contains_key("ANTHROPIC_BASE_URL");
    let has_key = ctx.env.contains_key("ANTHROPIC_API_KEY") || ctx.env.contains_key("ANTHROPIC_AUTH_TOKEN");
    if custom_endpoint && !has_key {
        env.insert("ANTHROPIC_API_KEY".to_owned(), PLACEHOLDER_API_KEY.to_owned());
    }
    for (k, v) in ctx.env {
        env.insert(k.clone(), v.clone());
    }

    LaunchPlan { argv, env, files, stdin: StdinMode::Pipe, initial_stdin: Some(user_message(ctx.prompt)) }
}

/// The `--mcp-config` document: `{"mcpServers": {NAME: {"command", "args", "env"} |
/// {"type": "http", "url", "headers"}}}`.
pub fn mcp_config(servers: &[McpServer]) -> Value {
    let entries: serde_json::Map<String, Value> = servers
        .iter()
        .map(|server| {
            let entry = match server {
                McpServer::Stdio(s) => json!({ "command": s.command, "args": s.args, "env": s.env }),
                McpServer::Http(s) => json!({ "type": "http", "url": s.url, "headers": s.headers }),
            };
            (server.name().to_owned(), entry)
        })
        .collect();
    json!({ "mcpServers": entries })
}

/// One stream-json user message line: `{"type":"user","message":{"role":"user","content":
/// [{"type":"text","text":TEXT}]}}` plus `\n`.
pub fn user_message(text: &str) -> Vec<u8> {
    let msg = json!({
        "type": "user",
        "message": { "role": "user", "content": [{ "type": "text", "text": text }] }
    });
    line(&msg)
}

/// The interrupt control request line: `{"type":"control_request","request_id":...,
/// "request":{"subtype":"interrupt"}}` plus `\n`. The CLI answers with a `control_response`
/// and, when a turn is in flight, ends it with an `error_during_execution` result.
pub fn interrupt_request() -> Vec<u8> {
    let msg = json!({
        "type": "control_request",
        "request_id": INTERRUPT_REQUEST_ID,
        "request": { "subtype": "interrupt" }
    });
    line(&msg)
}

fn line(v: &serde_json::Value) -> Vec<u8> {
    let mut out = v.to_string().into_bytes();
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::path::Path;

    use super::*;
    use crate::claude_code::ClaudeCode;
    use crate::harness::Harness;
    use crate::plan::InterruptRecipe;

    fn ctx<'a>(env: &'a BTreeMap<String, String>) -> LaunchContext<'a> {
        LaunchContext {
            run_id: "run-1",
            turn: 1,
            prompt: "Write hello.txt\nplease",
            session_id: None,
            binary: Path::new("/tools/node_modules/@anthropic-ai/claude-code-linux-x64/claude"),
            cwd: Path::new("/space/ws"),
            home: Path::new("/runs/run-1/home"),
            run_dir: Path::new("/runs/run-1"),
            model: None,
            base_url: Some("http://127.0.0.1:4000/"),
            env,
            mcp_servers: &[],
            max_budget_usd: None,
            resume_at: None,
        }
    }

    #[test]
    fn a_budget_in_dollars_is_the_clis_own_limit() {
        let env = BTreeMap::new();
        let plan = ClaudeCode.launch(&LaunchContext { max_budget_usd: Some(0.0015), ..ctx(&env) });
        let at = plan.argv.iter().position(|a| a == "--max-budget-usd").expect("--max-budget-usd");
        assert_eq!(plan.argv[at + 1], "0.001500");
        assert!(!ClaudeCode.launch(&ctx(&env)).argv.contains(&"--max-budget-usd".to_owned()));
    }

    fn servers() -> Vec<McpServer> {
        serde_json::from_value(json!([
            {"name": "echo", "command": "/opt/bin/mcp-echo", "args": ["--loud"], "env": {"ECHO_TOKEN": "secret-123456"}},
            {"name": "docs", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer abcdefgh"}},
            {"name": "bare", "command": "npx"}
        ]))
        .unwrap()
    }

    #[test]
    fn launch_plan_runs_stream_json_with_offline_env_and_first_message_on_stdin() {
        let env = BTreeMap::new();
        let plan = ClaudeCode.launch(&ctx(&env));
        assert_eq!(
            plan.argv,
            [
                "/tools/node_modules/@anthropic-ai/claude-code-linux-x64/claude",
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--verbose",
                "--include-partial-messages",
                "--dangerously-skip-permissions",
            ]
        );
        let expected: BTreeMap<String, String> = [
            ("HOME", "/runs/run-1/home"),
            ("CLAUDE_CONFIG_DIR", "/runs/run-1/home/.claude"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:4000"),
            ("ANTHROPIC_API_KEY", PLACEHOLDER_API_KEY),
            ("DISABLE_TELEMETRY", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("IS_SANDBOX", "1"),
            ("CLAUDE_CODE_MAX_RETRIES", MAX_RETRIES_DEFAULT),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(plan.env, expected);
        assert_eq!(plan.stdin, StdinMode::Pipe);
        assert!(plan.files.is_empty());
        let first: serde_json::Value = serde_json::from_slice(plan.initial_stdin.as_deref().unwrap()).unwrap();
        assert_eq!(
            first,
            json!({"type": "user", "message": {"role": "user",
                "content": [{"type": "text", "text": "Write hello.txt\nplease"}]}})
        );
        assert!(plan.initial_stdin.unwrap().ends_with(b"}\n"));
    }

    #[test]
    fn resume_model_and_caller_env_win() {
        let env: BTreeMap<String, String> =
            [("ANTHROPIC_AUTH_TOKEN", "tok-123456789"), ("CLAUDE_CODE_MAX_RETRIES", "0"), ("HOME", "/elsewhere")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        let mut c = ctx(&env);
        c.session_id = Some("0b5f-sid");
        c.model = Some("claude-sonnet-4-5");
        let plan = ClaudeCode.launch(&c);
        assert_eq!(plan.argv[9..], ["--model", "claude-sonnet-4-5", "--resume", "0b5f-sid"].map(String::from));
        // A rewind (issue 34): the session as it was at a message, as a new session.
        let rewound = ClaudeCode.launch(&LaunchContext { resume_at: Some("msg-uuid"), ..c });
        assert_eq!(rewound.argv[11..], ["--resume", "0b5f-sid", "--resume-session-at", "msg-uuid", "--fork-session"].map(String::from));
        assert_eq!(plan.env["CLAUDE_CODE_MAX_RETRIES"], "0");
        assert_eq!(plan.env["HOME"], "/elsewhere");
        assert_eq!(plan.env["ANTHROPIC_AUTH_TOKEN"], "tok-123456789");
        assert!(!plan.env.contains_key("ANTHROPIC_API_KEY"), "no placeholder next to a real token");
    }

    #[test]
    fn no_placeholder_key_without_custom_endpoint() {
        let env = BTreeMap::new();
        let mut c = ctx(&env);
        c.base_url = None;
        let plan = ClaudeCode.launch(&c);
        assert!(!plan.env.contains_key("ANTHROPIC_API_KEY"));
        assert!(!plan.env.contains_key("ANTHROPIC_BASE_URL"));
    }

    #[test]
    fn mcp_servers_go_to_a_run_local_config_with_strict_mcp_config() {
        let env = BTreeMap::new();
        let servers = servers();
        let mut c = ctx(&env);
        c.mcp_servers = &servers;
        c.model = Some("claude-sonnet-4-5");
        let plan = ClaudeCode.launch(&c);
        assert_eq!(
            plan.argv[9..],
            ["--mcp-config", "/runs/run-1/claude-mcp.json", "--strict-mcp-config", "--model", "claude-sonnet-4-5"].map(String::from)
        );
        assert_eq!(plan.files.len(), 1);
        let config: serde_json::Value = serde_json::from_str(&plan.files[0].1).unwrap();
        assert_eq!(
            config,
            json!({"mcpServers": {
                "echo": {"command": "/opt/bin/mcp-echo", "args": ["--loud"], "env": {"ECHO_TOKEN": "secret-123456"}},
                "docs": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer abcdefgh"}},
                "bare": {"command": "npx", "args": [], "env": {}}
            }})
        );
        insta::assert_snapshot!(plan.render());
    }

    #[test]
    fn interrupt_is_a_control_request_line() {
        let InterruptRecipe::Stdin(bytes) = ClaudeCode.interrupt() else {
            panic!("expected a stdin recipe");
        };
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            v,
            json!({"type": "control_request", "request_id": INTERRUPT_REQUEST_ID,
                "request": {"subtype": "interrupt"}})
        );
        assert_eq!(bytes.last(), Some(&b'\n'));
    }
}
