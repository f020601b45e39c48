//! MCP servers for the agents themselves (`options.mcp_servers`), on the real CLIs: each harness
//! hands its CLI a server in the CLI's own config format (the testkit's one-tool echo server,
//! over stdio as the `mcp-echo` binary and over Streamable HTTP), the scripted model calls its
//! tool, and the tool's answer reaches the model. Bad server specs are
//! refused at the door, naming the field, and create nothing.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::json;
use spaces_sdk::client::ClientError;
use spaces_sdk::{
    AgentStartRequest, ErrorCode, EventKind, McpHttpServer, McpServer, McpStdioServer, SpaceAgentOptions, StopReason, ToolStatus,
};
use spaces_testkit::mcp_echo::HttpEchoServer;
use spaces_testkit::{Reply, Script, ScriptedServer};

use super::harness::{CLAUDE, CODEX, H};
use crate::support::{describe, require_cli, settled, TestDaemon};

const TURN: Duration = Duration::from_secs(90);
/// The echo server's `env`: a secret of 8+ characters, so it must be redacted from events.
const PREFIX_SECRET: &str = "mcp-env-secret-42";
/// The HTTP server's `Authorization` token: a header secret.
const HEADER_SECRET: &str = "http-header-secret-7";
const SAID: &str = "ping from the model";

/// The `mcp-echo` binary as the stdio server `echo`, its prefix the secret [`PREFIX_SECRET`].
fn echo_server() -> McpStdioServer {
    McpStdioServer {
        name: "echo".into(),
        command: env!("CARGO_BIN_EXE_mcp-echo").into(),
        args: vec![],
        env: [("MCP_ECHO_PREFIX".to_owned(), PREFIX_SECRET.to_owned())].into(),
    }
}

/// How long the slow echo server waits before it reads its first message, in ms: longer than
/// either CLI waits on its own before its first model request (Codex left out a server that
/// took 4 s; Claude Code, even when told to wait, let a 6 s server in and left a 12 s one out
/// unless `MCP_CONNECT_TIMEOUT_MS` says more), and within the 30 s spacesd has both wait.
const SLOW_START_MS: u64 = 12000;

/// The model calls the `echo` tool of the run's `echo` MCP server over stdio, then answers. The
/// call is a `tool_call`/`tool_update completed` pair whose output is redacted; the model's
/// second request carries the tool's output (so the server got its `env`); the secret is nowhere
/// in the database; the servers' secrets sit 0600 in the run directory.
pub(super) async fn a_stdio_mcp_server_given_to_the_agent_is_called(h: H) {
    echo_call(h, McpServer::Stdio(echo_server()), &format!("{PREFIX_SECRET} echo: {SAID}"), PREFIX_SECRET).await;
}

/// A stdio server that takes [`SLOW_START_MS`] to start (like one fetched by `npx` on first use)
/// is still offered in the CLI's first model request, and its call works: the CLI waits for its
/// servers before it asks the model (Claude Code by `MCP_CONNECTION_NONBLOCKING=0` with
/// `MCP_CONNECT_TIMEOUT_MS=30000`, Codex by `mcp_optional_startup_grace_ms`). Without that,
/// both CLIs sent the first request at once and refused the model's call ("still connecting",
/// "unsupported call"), which a loaded host turned into a flaky run of spacesd's own `spaces`
/// server.
async fn a_slow_starting_mcp_server_is_offered_from_the_first_request(h: H) {
    let mut server = echo_server();
    server.env.insert("MCP_ECHO_STARTUP_DELAY_MS".to_owned(), SLOW_START_MS.to_string());
    echo_call(h, McpServer::Stdio(server), &format!("{PREFIX_SECRET} echo: {SAID}"), PREFIX_SECRET).await;
}

/// The same over Streamable HTTP (`{name, url, headers}`): the configured header reaches the
/// server with every request.
async fn an_http_mcp_server_given_to_the_agent_is_called(h: H) {
    let http = HttpEchoServer::start().await.unwrap();
    let server = McpServer::Http(McpHttpServer {
        name: "echo".into(),
        url: http.url(),
        headers: [("Authorization".to_owned(), format!("Bearer {HEADER_SECRET}"))].into(),
    });
    echo_call(h, server, &format!("echo: {SAID}"), HEADER_SECRET).await;
    let seen = http.request_headers();
    assert!(!seen.is_empty(), "the CLI never reached the HTTP server");
    let posts_with_auth =
        seen.iter().filter(|h| h.iter().any(|(k, v)| k == "authorization" && v == &format!("Bearer {HEADER_SECRET}"))).count();
    assert!(posts_with_auth >= 3, "initialize, tools/list and tools/call carry the header: {seen:?}");
}

/// Run one turn in which the model calls `echo` of `server` with [`SAID`] and the tool answers
/// `output`; check events, the model's requests, and where `secret` may and may not be.
async fn echo_call(h: H, server: McpServer, output: &str, secret: &str) {
    require_cli(h.tools, h.binary);
    let script = Script::new([
        Reply::McpToolCall { server: "echo".into(), tool: "echo".into(), input: json!({"text": SAID}) },
        Reply::Text("The echo answered.".into()),
    ]);
    let model = ScriptedServer::start(h.wire, script).await.unwrap();
    let d = TestDaemon::start().await;
    d.space("s").await;
    let req = AgentStartRequest {
        space: "s".into(),
        agent: h.id.into(),
        prompt: "Call the echo tool, please".into(),
        show: None,
        options: Some(SpaceAgentOptions { base_url: Some(model.base_url()), mcp_servers: vec![server], ..Default::default() }),
        request_id: None,
        traceparent: None,
    };
    let report = d.client.agent_start(&req).await.unwrap();
    assert_eq!(report.notes, Vec::<String>::new(), "nothing about the servers is ignored");
    let run = report.run_id;

    let ended = d.wait_turn_end("s", &run, 1, TURN).await;
    let events = d.events("s", &run).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{}", describe(&events));
    let call = events
        .iter()
        .find(|e| e.kind == EventKind::ToolCall && e.tool_title.as_deref().unwrap_or("").contains("echo"))
        .unwrap_or_else(|| panic!("a tool_call of the echo tool:\n{}", describe(&events)));
    let done = events
        .iter()
        .find(|e| e.kind == EventKind::ToolUpdate && e.tool_id == call.tool_id && e.tool_status == Some(ToolStatus::Completed))
        .unwrap_or_else(|| panic!("the echo call completes:\n{}", describe(&events)));
    let shown = output.replace(secret, "[redacted]");
    let text = done.text.as_deref().unwrap_or("");
    assert!(text.contains(&shown), "the tool's output {shown:?}, secrets redacted: {text:?}");
    let page = d.client.space("s").agent_events(&run, Some(0), Some(1000)).await.unwrap();
    assert!(!serde_json::to_string(&page).unwrap().contains(secret), "no event carries the server's secret");

    let st = d.wait_status("s", &run, TURN, settled).await;
    assert_eq!(st.result_text.as_deref(), Some("The echo answered."), "{st:#?}");
    let calls = model.model_calls();
    assert_eq!(calls.len(), 2, "one call for the tool, one for the answer");
    let first = calls[0].json.as_ref().unwrap().to_string();
    // How each CLI names a server's tool to the model.
    let offered = match h.id {
        "opencode" => "echo_echo",
        "gemini-cli" => "mcp_echo_echo",
        _ => "mcp__echo",
    };
    assert!(first.contains(offered), "the CLI offered the echo tool to the model: {first}");
    let second = calls[1].json.as_ref().unwrap().to_string();
    assert!(second.contains(output), "the model's second request carries the tool's output {output:?}: {second}");

    let run_dir = d.state_dir().join("runs").join(&run);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&run_dir.join("mcp_servers.json")), 0o600);
    // The ACP CLIs get their servers in `session/new`, not in a file.
    let cli_config = match h.id {
        // In the run's API directory: `/run/spaces` in its sandbox.
        "claude-code" => Some(run_dir.join("api/claude-mcp.json")),
        "openai-codex" | "openai-codex-exec" => Some(run_dir.join("home/.codex/config.toml")),
        _ => None,
    };
    if let Some(cli_config) = cli_config {
        assert_eq!(mode(&cli_config), 0o600, "{}", cli_config.display());
    }
    for db in ["spaces.db", "spaces.db-wal"] {
        let bytes = std::fs::read(d.state_dir().join(db)).unwrap_or_default();
        assert!(!String::from_utf8_lossy(&bytes).contains(secret), "{db} holds a server secret in clear");
    }
}

crate::support::per_harness!(
    a_stdio_mcp_server_given_to_the_agent_is_called,
    a_slow_starting_mcp_server_is_offered_from_the_first_request,
    an_http_mcp_server_given_to_the_agent_is_called
);

fn refusal(r: Result<impl std::fmt::Debug, ClientError>) -> spaces_sdk::ApiError {
    match r {
        Err(ClientError::Api(e)) => e,
        other => panic!("expected a typed error, got {other:?}"),
    }
}

/// Misspelt keys, mixed shapes, bad names, urls and commands, and programs the run's sandbox
/// would not show the CLI (in the state dir, which it hides; in its own /tmp, outside the Space):
/// `INVALID_ARGUMENT` naming the field, and no run is created.
#[tokio::test]
async fn bad_mcp_servers_are_refused_naming_the_field() {
    let d = TestDaemon::start().await;
    d.space("s").await;
    let in_state = d.state_dir().join("server");
    std::fs::write(&in_state, "").unwrap();
    // Beside the state dir, in the test's temp dir: outside the Space.
    let outside = d.state_dir().with_file_name("server");
    std::fs::write(&outside, "").unwrap();
    let mut cases = vec![
        (json!([{"name": "x", "command": in_state}]), "options.mcp_servers[0].command", "hides it"),
        (json!([{"name": "x", "command": "node", "args": [in_state]}]), "options.mcp_servers[0].args", "hides it"),
    ];
    if outside.starts_with("/tmp") {
        cases.push((json!([{"name": "x", "command": outside}]), "options.mcp_servers[0].command", "/tmp is the run's sandbox's own"));
    }
    cases.extend([
        (json!([{"name": "x", "urll": "http://h/mcp"}]), "options.mcp_servers[0].urll", "did you mean `url`?"),
        (json!([{"name": "x", "url": "http://h", "command": "c"}]), "options.mcp_servers[0]", "not both"),
        (json!([{"name": "x"}]), "options.mcp_servers[0]", "needs `url`"),
        (json!([{"name": "a b", "command": "c"}]), "options.mcp_servers[0].name", "letters, digits"),
        (json!([{"name": "x", "command": "c"}, {"name": "x", "command": "c"}]), "options.mcp_servers[1].name", "unique"),
        (json!([{"name": "spaces", "command": "c"}]), "options.mcp_servers[0].name", "reserved"),
        (json!([{"name": "x", "url": "file:///etc/passwd"}]), "options.mcp_servers[0].url", "http://"),
        (json!([{"name": "x", "command": ""}]), "options.mcp_servers[0].command", "empty"),
    ]);
    for (servers, field, says) in cases {
        let body = json!({"space": "s", "agent": "claude-code", "prompt": "hi", "options": {"mcp_servers": servers}});
        let e = refusal(d.client.call_named("agent_start", body).await);
        assert_eq!(e.code, ErrorCode::InvalidArgument, "{servers}: {e:?}");
        assert_eq!(e.field.as_deref(), Some(field), "{servers}: {e:?}");
        assert!(e.message.contains(says), "{servers}: {}", e.message);
    }
    assert!(d.client.space("s").agent_list().await.unwrap().is_empty(), "no run was created");
    let n = std::fs::read_dir(d.state_dir().join("runs")).map(|r| r.count()).unwrap_or(0);
    assert_eq!(n, 0, "no run directory was created");
}
