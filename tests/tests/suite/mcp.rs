//! The MCP server: `spacesd mcp` on stdio and Streamable HTTP at `/mcp`, driven by the
//! hand-written clients of `support::mcp`. Tools against the operation table, the seed's loop,
//! refusals, cases M28-M31, and the daemon started for a fresh state dir.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use spaces_sdk::op::Audience;

use crate::support::mcp::{refusal, Dial, HttpMcp, Mcp, StdioMcp};
use crate::support::TestDaemon;

/// A daemon with loopback TCP, and how to reach its `/mcp` there.
async fn tcp_daemon() -> (TestDaemon, Dial) {
    let d = TestDaemon::start_with(vec![], vec!["--tcp".into(), "127.0.0.1:0".into()]).await;
    let state = d.state_dir();
    let addr = std::fs::read_to_string(state.join("tcp.addr")).unwrap().trim().to_owned();
    let token = std::fs::read_to_string(state.join("token")).unwrap().trim().to_owned();
    (d, Dial::Tcp { addr, token })
}

/// `spacesd mcp` for the daemon of `d`, initialized.
fn stdio(d: &TestDaemon, env: &[(&str, &str)]) -> StdioMcp {
    let mut m = StdioMcp::start(&d.state_dir(), env, &d.dir.path().join("mcp-stderr.log"));
    let init = m.initialize();
    assert_eq!(init["protocolVersion"], "2025-11-25");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    m
}

/// Reads a process's output until `eof` (long-polling); the output and the last answer.
fn drain(m: &mut impl Mcp, process_id: &str) -> (String, Value) {
    let (mut out, mut cursor) = (String::new(), 0);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = m.ok("read_process", json!({"process_id": process_id, "cursor": cursor, "wait_ms": 2000}));
        out.push_str(r["chunk"].as_str().unwrap());
        cursor = r["cursor"].as_u64().unwrap();
        if r["eof"] == json!(true) {
            return (out, r);
        }
        assert!(Instant::now() < deadline, "no eof within 30 s; output so far: {out:?}");
    }
}

fn wait_exited(m: &mut impl Mcp, process_id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = m.ok("process_status", json!({"process_id": process_id}));
        if s["state"] == "exited" {
            return s;
        }
        assert!(Instant::now() < deadline, "process did not exit: {s}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The tools the table serves, with the schemas MCP must carry (arrays wrapped under `items`).
fn expected_tools() -> Vec<(String, Value, Value)> {
    spaces_sdk::op::catalogue()
        .into_iter()
        .filter(|o| o.audience == Audience::Tool)
        .map(|o| {
            let input = spaces_service::request_schema(o.name).unwrap();
            let mut output = spaces_service::result_schema(o.name).unwrap();
            if output["type"] == "array" {
                let obj = output.as_object_mut().unwrap();
                let (dialect, defs) = (obj.remove("$schema"), obj.remove("$defs"));
                let items = Value::Object(obj.clone());
                output =
                    json!({"$schema": dialect, "type": "object", "properties": {"items": items}, "required": ["items"], "$defs": defs});
            }
            (o.name.to_owned(), input, output)
        })
        .collect()
}

fn compare_with_table(transport: &str, tools: &[Value]) {
    let want = expected_tools();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let want_names: Vec<&str> = want.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(names, want_names, "{transport}: tool names");
    assert_eq!(
        names.len(),
        35,
        "19 CodeSpace tools, 13 agent tools (agent_usage with issue 33; agent_diff, agent_rewind, agent_fork and agent_merge with issue 34), space_list, space_add, persistent_agent_send"
    );
    for (tool, (name, input, output)) in tools.iter().zip(&want) {
        assert_eq!(&tool["inputSchema"], input, "{transport}: inputSchema of {name}");
        assert_eq!(&tool["outputSchema"], output, "{transport}: outputSchema of {name}");
        assert!(tool["description"].as_str().is_some_and(|d| !d.is_empty()), "{name}");
    }
    let by_name = |n: &str| tools.iter().find(|t| t["name"] == n).unwrap()["annotations"].clone();
    assert_eq!(by_name("read")["readOnlyHint"], true);
    assert_eq!(by_name("find")["readOnlyHint"], true);
    assert_eq!(by_name("agent_status")["readOnlyHint"], true);
    assert_eq!(by_name("terminate_process")["destructiveHint"], true);
    assert_eq!(by_name("agent_stop")["destructiveHint"], true);
    assert_eq!(by_name("apply_patch")["readOnlyHint"], false);
}

#[tokio::test]
async fn tools_over_stdio_and_http_are_the_table() {
    let (d, dial) = tcp_daemon().await;
    let mut m = stdio(&d, &[]);
    let over_stdio = m.list_tools();
    compare_with_table("stdio", &over_stdio);
    let mut h = HttpMcp::new(dial);
    h.initialize();
    let over_http = h.list_tools();
    compare_with_table("http", &over_http);
    assert_eq!(over_stdio, over_http, "one handler behind both transports");
    let mut u = HttpMcp::new(Dial::Unix(d.state_dir().join("spacesd.sock")));
    u.initialize();
    assert_eq!(u.list_tools(), over_http, "/mcp on the Unix socket");
}

/// The seed's loop: read, preview, apply, read back, run, collect output, end a long command,
/// recover the patch by its key.
fn seed_loop(m: &mut impl Mcp, root: &std::path::Path, tag: &str) {
    std::fs::write(root.join("hello.txt"), "hi\n").unwrap();
    let read = m.ok("read", json!({"workspace_id": "demo", "path": "hello.txt"}));
    assert_eq!(read["content"], "hi\n");
    let v1 = read["version"].as_str().unwrap().to_owned();
    let patch = "*** Begin Patch\n*** Update File: hello.txt\n@@\n-hi\n+hello\n*** End Patch\n";
    let preview = m.ok(
        "apply_patch",
        json!({"workspace_id": "demo", "patch": patch,
        "expected_versions": {"hello.txt": v1}, "operation_key": format!("{tag}-preview"), "check_only": true}),
    );
    assert_eq!(preview["status"], "checked");
    assert_eq!(std::fs::read_to_string(root.join("hello.txt")).unwrap(), "hi\n", "a preview writes nothing");
    let applied = m.ok(
        "apply_patch",
        json!({"workspace_id": "demo", "patch": patch,
        "expected_versions": {"hello.txt": v1}, "operation_key": format!("{tag}-apply")}),
    );
    assert_eq!(applied["status"], "applied", "{applied}");
    let back = m.ok("read", json!({"workspace_id": "demo", "path": "hello.txt"}));
    assert_eq!(back["content"], "hello\n");
    assert_eq!(back["version"], applied["changes"][0]["after_version"]);

    let run = m.ok("exec_command", json!({"workspace_id": "demo", "command": ["/bin/echo", "mcp-smoke"]}));
    assert_eq!(run["dispatch_status"], "confirmed");
    let pid = run["process_id"].as_str().unwrap().to_owned();
    let (out, _) = drain(m, &pid);
    assert_eq!(out, "mcp-smoke\n");
    wait_exited(m, &pid);

    let long = m.ok("exec_command", json!({"workspace_id": "demo", "command": ["sleep", "60"]}));
    let long_id = long["process_id"].as_str().unwrap().to_owned();
    assert_eq!(m.ok("terminate_process", json!({"process_id": long_id}))["ok"], true);
    let st = wait_exited(m, &long_id);
    assert_eq!(st["termination"], "terminated", "{st}");

    let status = m.ok("operation_status", json!({"operation_key": format!("{tag}-apply")}));
    assert_eq!(status["status"], "applied");
    assert_eq!(status["operation_id"], applied["operation_id"]);

    let spaces = m.ok("space_list", json!({}));
    assert_eq!(spaces["items"][0]["name"], "demo", "a list result is wrapped under items: {spaces}");
}

#[tokio::test]
async fn the_seed_loop_over_stdio_and_http() {
    let (d, dial) = tcp_daemon().await;
    let root = d.space("demo").await;
    let mut m = stdio(&d, &[]);
    seed_loop(&mut m, &root, "stdio");
    let mut h = HttpMcp::new(dial);
    h.initialize();
    seed_loop(&mut h, &root, "http");
}

#[tokio::test]
async fn a_refusal_is_an_is_error_result_with_the_code() {
    let d = TestDaemon::start().await;
    d.space("demo").await;
    let mut m = stdio(&d, &[]);
    let e = m.refused("read", json!({"workspace_id": "demo", "path": "missing.txt"}));
    assert_eq!(e["code"], "FILE_NOT_FOUND", "{e}");
    assert!(e["message"].as_str().is_some_and(|s| s.contains("missing.txt")), "{e}");
    let e = m.refused("read", json!({"workspace_id": "demo", "paht": "a.txt"}));
    assert_eq!(e["code"], "INVALID_ARGUMENT", "{e}");
    assert!(e["message"].as_str().unwrap().contains("path"), "suggests the key: {e}");
    let e = m.refused("agent_status", json!({"space": "nope", "run_id": "run-00000000"}));
    assert_eq!(e["code"], "WORKSPACE_NOT_FOUND", "{e}");
    let e = m.refused("read", json!({"workspace_id": "demo", "path": "../etc/passwd"}));
    assert_eq!(e["code"], "PATH_ESCAPE", "{e}");
    // An unknown tool (or a user-side inbox operation) is a protocol error, not a tool result.
    for name in ["no_such_tool", "inbox_works"] {
        let id = m.send_request("tools/call", json!({"name": name, "arguments": {}}));
        let answer = m.answer(id, Duration::from_secs(10)).unwrap();
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
    }
}

/// M28: a blocked `read_process` wait, then `notifications/cancelled` for it: the wait ends
/// at once (no answer, no more progress for it), the server serves the next call, and the
/// process keeps running and stays readable.
#[tokio::test]
async fn case_m28_cancel_ends_a_blocked_wait_and_the_process_keeps_running() {
    let d = TestDaemon::start().await;
    d.space("demo").await;
    let mut m = stdio(&d, &[]);
    let run = m.ok(
        "exec_command",
        json!({"workspace_id": "demo",
        "command": ["sh", "-c", "echo start; sleep 3; echo later; sleep 60"]}),
    );
    let pid = run["process_id"].as_str().unwrap().to_owned();
    let first = m.ok("read_process", json!({"process_id": pid, "cursor": 0, "wait_ms": 5000}));
    assert_eq!(first["chunk"], "start\n");
    let cursor = first["cursor"].as_u64().unwrap();

    // A wait with a progress token: the first progress notification proves it is blocked.
    let blocked = m.send_request(
        "tools/call",
        json!({"name": "read_process",
        "arguments": {"process_id": pid, "cursor": cursor, "wait_ms": 30000},
        "_meta": {"progressToken": "wait-1"}}),
    );
    let progress = m.wait_notification("notifications/progress", Duration::from_secs(5), |p| p["progressToken"] == "wait-1");
    assert!(progress.is_some(), "a long wait reports progress when asked");
    let cancelled_at = Instant::now();
    m.notify("notifications/cancelled", json!({"requestId": blocked, "reason": "the user moved on"}));

    // The server answers the next call at once, and never answers the cancelled one.
    let st = m.ok("process_status", json!({"process_id": pid}));
    assert_eq!(st["state"], "running", "the process outlives the cancelled wait: {st}");
    assert!(cancelled_at.elapsed() < Duration::from_secs(2), "served promptly");
    // Progress for the cancelled call stops: none for 1.5 s (it ticks every second).
    m.notifications("notifications/progress");
    let late = m.wait_notification("notifications/progress", Duration::from_millis(1500), |p| p["progressToken"] == "wait-1");
    assert!(late.is_none(), "the cancelled wait still reports progress: {late:?}");
    assert!(m.answer(blocked, Duration::from_millis(100)).is_none(), "no answer for a cancelled request");

    // Still readable from the same cursor.
    let later = m.ok("read_process", json!({"process_id": pid, "cursor": cursor, "wait_ms": 10000}));
    assert_eq!(later["chunk"], "later\n", "{later}");
    m.ok("terminate_process", json!({"process_id": pid}));
}

/// M29: initialize, close stdin: exit within 2 s with code 0, also before initializing and with
/// a wait in flight; a process started over MCP keeps running in the daemon.
#[tokio::test]
async fn case_m29_stdio_exits_promptly_when_stdin_closes() {
    let d = TestDaemon::start().await;
    d.space("demo").await;

    let mut m = stdio(&d, &[]);
    let t = Instant::now();
    m.close_stdin();
    let st = m.wait_exit(Duration::from_secs(2)).unwrap_or_else(|| panic!("still running 2 s after stdin closed"));
    assert!(st.success(), "exit code 0: {st:?}; stderr:\n{}", m.stderr_text());
    assert!(t.elapsed() < Duration::from_secs(2));

    // A client that leaves before initializing: a clean exit too.
    let mut early = StdioMcp::start(&d.state_dir(), &[], &d.dir.path().join("early-stderr.log"));
    early.close_stdin();
    let st = early.wait_exit(Duration::from_secs(2)).expect("exits");
    assert!(st.success(), "{st:?}: {}", early.stderr_text());

    let mut m = stdio(&d, &[]);
    let run = m.ok("exec_command", json!({"workspace_id": "demo", "command": ["sleep", "60"]}));
    let pid = run["process_id"].as_str().unwrap().to_owned();
    m.send_request(
        "tools/call",
        json!({"name": "read_process",
        "arguments": {"process_id": pid, "wait_ms": 30000}, "_meta": {"progressToken": 7}}),
    );
    let waiting = m.wait_notification("notifications/progress", Duration::from_secs(5), |p| p["progressToken"] == 7);
    assert!(waiting.is_some(), "the call is waiting");
    let t = Instant::now();
    m.close_stdin();
    let st = m.wait_exit(Duration::from_secs(2)).unwrap_or_else(|| panic!("a waiting call kept it alive after stdin closed"));
    assert!(st.success(), "{st:?}");
    assert!(t.elapsed() < Duration::from_secs(2));
    let status = d.client.call_named("process_status", json!({"process_id": pid})).await.unwrap();
    assert_eq!(status["state"], "running", "processes outlive the MCP session");
    d.client.call_named("terminate_process", json!({"process_id": pid})).await.unwrap();
}

/// M30: 50 MB of output, then `read_process` with no limit: one bounded answer (the last 256 KiB
/// are retained), the session stays usable, and stdout carries only JSON-RPC at trace level.
#[tokio::test]
async fn case_m30_huge_output_is_bounded_and_stdout_stays_json_rpc() {
    let d = TestDaemon::start().await;
    d.space("demo").await;
    let mut m = stdio(&d, &[("RUST_LOG", "trace"), ("SPACES_LOG", "trace")]);
    let run = m.ok(
        "exec_command",
        json!({"workspace_id": "demo",
        "command": ["sh", "-c", "head -c 52428800 /dev/zero | tr '\\000' x"]}),
    );
    let pid = run["process_id"].as_str().unwrap().to_owned();
    let st = wait_exited(&mut m, &pid);
    assert_eq!(st["exit_code"], 0, "{st}");
    assert_eq!(st["output_total"], 52_428_800u64);

    let id = m.send_request("tools/call", json!({"name": "read_process", "arguments": {"process_id": pid}}));
    let answer = m.answer(id, Duration::from_secs(30)).expect("an answer");
    let size = answer.to_string().len();
    let r = crate::support::mcp::success("read_process", &json!({}), &answer["result"]);
    let chunk = r["chunk"].as_str().unwrap();
    assert!(chunk.len() <= 256 * 1024 && !chunk.is_empty(), "chunk of {} bytes", chunk.len());
    assert!(size < 1024 * 1024, "the whole answer is bounded: {size} bytes");
    assert_eq!(r["output_lost"], true);
    assert_eq!(r["eof"], true);
    assert_eq!(r["retained_from"].as_u64().unwrap() + chunk.len() as u64, 52_428_800);
    assert_eq!(r["cursor"], 52_428_800u64);

    // The session stays usable.
    assert_eq!(m.ok("process_status", json!({"process_id": pid}))["state"], "exited");
    assert_eq!(m.ok("space_list", json!({}))["items"][0]["name"], "demo");
    assert!(m.stray.lock().unwrap().is_empty(), "stdout lines that are not JSON-RPC: {:?}", m.stray.lock().unwrap());
    m.close_stdin();
    assert!(m.wait_exit(Duration::from_secs(2)).is_some_and(|s| s.success()));
    let stderr = m.stderr_text();
    assert!(stderr.contains("TRACE") || stderr.contains("DEBUG"), "logs went to stderr at trace level");
    assert!(m.stray.lock().unwrap().is_empty(), "{:?}", m.stray.lock().unwrap());
}

/// M31: `/mcp` refuses a foreign Host or Origin with 403 and no session; `Host:
/// localhost:<port>` without Origin works; an unknown session is 404.
#[tokio::test]
async fn case_m31_mcp_checks_host_and_origin() {
    let (d, dial) = tcp_daemon().await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}});
    let sock = Dial::Unix(d.state_dir().join("spacesd.sock"));
    for dial in [dial.clone(), sock] {
        let h = HttpMcp::new(dial.clone());
        let evil = h.post(&init, &[("Host", "attacker.example"), ("Origin", "http://attacker.example")]);
        assert_eq!(evil.status, 403, "{dial:?}: {evil:?}");
        assert!(evil.header("mcp-session-id").is_none(), "no session: {evil:?}");
        let evil_origin = h.post(&init, &[("Origin", "http://attacker.example")]);
        assert_eq!(evil_origin.status, 403, "{dial:?}: {evil_origin:?}");
        assert!(evil_origin.header("mcp-session-id").is_none());
        let good = h.post(&init, &[]);
        assert_eq!(good.status, 200, "{dial:?} with Host {}: {good:?}", h.host);
        assert!(good.header("mcp-session-id").is_some());
        assert_eq!(good.messages()[0]["result"]["protocolVersion"], "2025-11-25");
    }
    // On TCP, Host must carry this listener's port; a loopback name alone is not enough.
    let mut wrong_port = HttpMcp::new(dial.clone());
    wrong_port.host = "localhost:1".into();
    assert_eq!(wrong_port.post(&init, &[]).status, 403);
    // An unknown (or ended) session: 404, so the client initializes again.
    let mut h = HttpMcp::new(dial.clone());
    h.session = Some("no-such-session".into());
    let gone = h.post(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}), &[]);
    assert_eq!(gone.status, 404, "{gone:?}");
    // DELETE ends a session with 200 (clients such as the Python SDK accept 200 or 204, not
    // 202); the ended session then gets 404.
    let mut h = HttpMcp::new(dial.clone());
    h.initialize();
    let ended = h.delete();
    assert_eq!(ended.status, 200, "{ended:?}");
    let gone = h.post(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}), &[]);
    assert_eq!(gone.status, 404, "{gone:?}");
    // And the bearer token still applies to /mcp.
    let Dial::Tcp { addr, .. } = dial else { unreachable!() };
    let no_token = HttpMcp::new(Dial::Tcp { addr, token: "wrong".into() }).post(&init, &[]);
    assert_eq!(no_token.status, 403, "{no_token:?}");
    // An older revision is negotiated as asked.
    let mut old = init.clone();
    old["params"]["protocolVersion"] = json!("2025-03-26");
    let r = HttpMcp::new(Dial::Unix(d.state_dir().join("spacesd.sock"))).post(&old, &[]);
    assert_eq!(r.messages()[0]["result"]["protocolVersion"], "2025-03-26");
}

/// `spacesd mcp` on a state dir where no daemon runs starts one in the background; it keeps
/// running (with what MCP started) after the MCP session ends.
#[tokio::test]
async fn stdio_starts_the_daemon_when_none_runs() {
    let dir = tempfile::Builder::new().prefix("spaces-mcp-auto-").tempdir().unwrap();
    let state = dir.path().join("state");
    let space = dir.path().join("space");
    std::fs::create_dir_all(&space).unwrap();
    let mut m = StdioMcp::start(&state, &[], &dir.path().join("mcp-stderr.log"));
    m.initialize();
    let daemon_pid = {
        let text = m.stderr_text();
        let pid =
            text.split("started spacesd serve (pid ").nth(1).and_then(|rest| rest.split(',').next()).and_then(|p| p.parse::<i32>().ok());
        pid.unwrap_or_else(|| panic!("no start notice on stderr:\n{text}"))
    };
    struct Kill(i32);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.0), nix::sys::signal::Signal::SIGTERM);
        }
    }
    let _kill = Kill(daemon_pid);
    let space = std::fs::canonicalize(space).unwrap();
    m.ok("space_add", json!({"name": "demo", "root": space.display().to_string()}));
    let run = m.ok("exec_command", json!({"workspace_id": "demo", "command": ["sleep", "60"]}));
    let pid = run["process_id"].as_str().unwrap().to_owned();
    m.close_stdin();
    assert!(m.wait_exit(Duration::from_secs(2)).is_some_and(|s| s.success()));
    assert!(std::fs::read_to_string(state.join("spacesd.log")).unwrap().contains("listening on"));

    let client = spaces_sdk::client::Client::new(spaces_sdk::client::Endpoint::Unix(state.join("spacesd.sock")));
    let status = client.call_named("process_status", json!({"process_id": pid})).await.unwrap();
    assert_eq!(status["state"], "running", "the daemon and its process outlive the MCP session");

    // A second `spacesd mcp` finds it running and starts nothing.
    let mut again = StdioMcp::start(&state, &[], &dir.path().join("mcp2-stderr.log"));
    again.initialize();
    assert_eq!(again.ok("process_status", json!({"process_id": pid}))["state"], "running");
    assert!(!again.stderr_text().contains("started spacesd serve"), "{}", again.stderr_text());
    let e = refusal("read", &json!({}), &again.call("read", json!({"workspace_id": "demo", "path": "x"})));
    assert_eq!(e["code"], "FILE_NOT_FOUND");
    again.ok("terminate_process", json!({"process_id": pid}));
}

/// A `GET /mcp` with `last_event_id` must be refused at once with `400` in the JSON-RPC error
/// shape (`-32600`, `id: null`) naming the id, and the connection ended: never a `200` stream.
fn assert_refused_resume(h: &HttpMcp, last_event_id: &str) {
    let (reply, ended) = h.get(&[("Last-Event-ID", last_event_id)], Duration::from_secs(10));
    assert_eq!(reply.status, 400, "Last-Event-ID {last_event_id:?}: {reply:?}");
    assert!(ended, "Last-Event-ID {last_event_id:?}: the answer did not end: {reply:?}");
    assert!(reply.header("content-type").is_some_and(|t| t.starts_with("application/json")), "{reply:?}");
    let body: Value = serde_json::from_str(&reply.body).unwrap_or_else(|e| panic!("{e}: {reply:?}"));
    assert_eq!((&body["jsonrpc"], &body["id"], &body["error"]["code"]), (&json!("2.0"), &Value::Null, &json!(-32600)), "{body}");
    assert_eq!(body["error"]["data"]["code"], "INVALID_ARGUMENT", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(&format!("{last_event_id:?}")), "{message}");
}

/// A session's `tools/list` (answered as an SSE stream): the event ids it carried.
fn listed_ids(h: &mut HttpMcp, id: u64) -> Vec<String> {
    let reply = h.post(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}), &[]);
    assert_eq!(reply.status, 200, "{reply:?}");
    let ids = HttpMcp::event_ids(&reply);
    assert!(ids.iter().any(|i| i.contains('/')), "a request's stream carries `N/R` ids: {reply:?}");
    ids
}

/// Case M44: over Streamable HTTP (TCP and the Unix socket), a `GET /mcp` with a valid session
/// and a `Last-Event-ID` this session was never sent (`9999`, past its last event, another
/// session's request stream, a finished request's stream rmcp no longer keeps) is a definite
/// `400` JSON-RPC error, never an empty `200` stream that hangs. The session goes on working, and
/// its common stream still resumes from `0`.
#[tokio::test]
async fn case_m44_a_last_event_id_never_sent_is_a_definite_error_not_an_empty_stream() {
    let (d, dial) = tcp_daemon().await;
    for dial in [dial, Dial::Unix(d.state_dir().join("spacesd.sock"))] {
        let mut a = HttpMcp::new(dial.clone());
        a.initialize();
        let a_ids = listed_ids(&mut a, 1);
        let mut b = HttpMcp::new(dial.clone());
        b.initialize();
        let mut b_ids = Vec::new();
        for id in 1..=3 {
            b_ids = listed_ids(&mut b, id);
        }
        let theirs = b_ids.last().unwrap().clone();
        assert!(!a_ids.contains(&theirs), "{a_ids:?} / {theirs}");
        let mine = a_ids.last().unwrap().clone();
        let (index, request) = mine.split_once('/').unwrap();
        let past = format!("{}/{request}", index.parse::<u64>().unwrap() + 1);
        for never in ["9999", "9999/0", past.as_str(), theirs.as_str()] {
            assert_refused_resume(&a, never);
        }
        // An id it was sent, of a request whose stream has ended: rmcp keeps no finished
        // request's stream, so that too is a definite refusal, saying so.
        assert_refused_resume(&a, &mine);
        // Still a working session, whose common stream resumes from the priming event `0` every
        // `initialize` answer carries: a live `200` event stream.
        assert_eq!(a.list_tools().len(), b.list_tools().len());
        let (stream, ended) = a.get(&[("Last-Event-ID", "0")], Duration::from_secs(1));
        assert_eq!(stream.status, 200, "{stream:?}");
        assert!(!ended && stream.header("content-type").is_some_and(|t| t.starts_with("text/event-stream")), "{stream:?}");
    }
}

/// M44's kind with other ids: a `Last-Event-ID` that is no event id of this server at all
/// (empty after the name, words, a negative or huge number, a malformed `N/R`) is refused the
/// same way, before rmcp parses it.
#[tokio::test]
async fn a_malformed_last_event_id_is_a_definite_error() {
    let (d, _dial) = tcp_daemon().await;
    let mut h = HttpMcp::new(Dial::Unix(d.state_dir().join("spacesd.sock")));
    h.initialize();
    listed_ids(&mut h, 1);
    for bad in ["abc", "-1", "1/x", "/0", "1/2/3", "99999999999999999999999"] {
        assert_refused_resume(&h, bad);
    }
    assert!(!h.list_tools().is_empty());
}
