//! spacesd's own tools for the agents (`options.space_tools`, on by default), on the real CLIs:
//! every run gets the stdio MCP server `spaces` (this daemon's binary, `spacesd mcp --space`),
//! and a scripted model works the run's Space through it the way a model would: `read` a file,
//! `apply_patch` it, `exec_command` a shell line and `read_process` its output until `eof`, then
//! try to `read` a file of another Space, which the scoped server refuses. The CLI is busy with
//! its turn the whole time: a run is not a CodeSpace command, so the Space is not busy for the
//! agent's own tools.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use spaces_sdk::{AgentStartRequest, EventKind, SpaceAgentOptions, StopReason, ToolStatus};
use spaces_testkit::{Reply, Script, ScriptedServer, Wire};

use super::harness::{CLAUDE, CODEX, H};
use crate::support::mcp::{Mcp, StdioMcp};
use crate::support::{describe, require_cli, settled, TestDaemon};

const TURN: Duration = Duration::from_secs(120);
const FILE: &str = "notes.txt";
const BEFORE: &str = "alpha-line-1\nbeta-line-2\n";
const AFTER: &str = "alpha-line-1\ngamma-patched-3\n";
const PATCH: &str = "*** Begin Patch\n*** Update File: notes.txt\n@@\n alpha-line-1\n-beta-line-2\n+gamma-patched-3\n*** End Patch\n";
/// What the shell prints after the file: only a shell that ran the line computes `42`.
const COMMAND: &str = "cat notes.txt; echo done-$((40+2))";
const DONE: &str = "done-42";
/// The content of the other Space's file: no request may ever carry it.
const OTHER_CONTENT: &str = "other-space-content-77";
/// In the daemon's environment only: neither the agent nor its `spaces` server may see it.
const DAEMON_SECRET: &str = "daemon-only-secret-9153";
const FINAL: &str = "The Space is patched and checked.";

/// The texts of the tool results a model request carries, oldest first: Anthropic `tool_result`
/// blocks, OpenAI `function_call_output` items. Escapes and blanks are dropped, so the JSON the
/// tools answered reads `"eof":true` however many times the CLI quoted it.
fn tool_outputs(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let flat = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    for m in body["messages"].as_array().into_iter().flatten() {
        for block in m["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" {
                out.push(flat(&block["content"]));
            }
        }
    }
    for item in body["input"].as_array().into_iter().flatten() {
        if item["type"] == "function_call_output" || item["type"] == "custom_tool_call_output" {
            out.push(flat(&item["output"]));
        }
    }
    out.into_iter().map(|s| s.replace(['\\', ' ', '\n'], "")).collect()
}

/// The first `proc-<uuid>` in `text`.
fn process_id(text: &str) -> Option<String> {
    let at = text.find("proc-")?;
    text.get(at..at + 41).map(str::to_owned)
}

/// The number after `"cursor":` in `text`.
fn cursor(text: &str) -> Option<u64> {
    let at = text.find("\"cursor\":")? + "\"cursor\":".len();
    text[at..].chars().take_while(char::is_ascii_digit).collect::<String>().parse().ok()
}

/// `spacesd mcp` processes serving `state` with `--space`, as (cmdline, environ) pairs.
fn space_servers(root: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let dir = entry.path();
        let Ok(cmd) = std::fs::read(dir.join("cmdline")) else { continue };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        // In the run's sandbox the server reaches the daemon through the run's own socket
        // (`--state-dir /run/spaces`); it works in this test's Space (`root`).
        if cmd.contains(" mcp ")
            && cmd.contains("--space")
            && cmd.contains("--state-dir /run/spaces ")
            && std::fs::read_link(dir.join("cwd")).is_ok_and(|c| c.display().to_string() == root)
        {
            let env = std::fs::read(dir.join("environ")).map(|e| String::from_utf8_lossy(&e).replace('\0', "\n")).unwrap_or_default();
            out.push((cmd, env));
        }
    }
    out
}

/// The conversation, one step per model call, chosen from the tool results the request carries
/// (so a retried request gets the same step). While the CLI waits for `exec_command`'s answer,
/// the `spaces` server's environment is taken from `/proc` into `seen_env`.
fn conversation(state: String, seen_env: Arc<Mutex<Vec<(String, String)>>>) -> impl Fn(&Value) -> Option<Reply> + Send + Sync {
    let call = |tool: &str, input: Value| Reply::McpToolCall { server: "spaces".into(), tool: tool.into(), input };
    move |body| {
        let outputs = tool_outputs(body);
        let last = outputs.last().cloned().unwrap_or_default();
        Some(match outputs.len() {
            // The Space named explicitly once, then left to the scoped server to fill in.
            0 => call("read", json!({"workspace_id": "s", "path": FILE})),
            1 => call("apply_patch", json!({"patch": PATCH})),
            2 => {
                seen_env.lock().unwrap().extend(space_servers(&state));
                call("exec_command", json!({"command": ["sh", "-c", COMMAND]}))
            }
            _ if last.contains("UNAUTHORIZED") => Reply::Text(FINAL.into()),
            _ if last.contains("\"eof\":true") => call("read", json!({"workspace_id": "other", "path": "secret.txt"})),
            _ => {
                let Some(pid) = outputs.iter().rev().find_map(|o| process_id(o)) else {
                    return Some(Reply::Text(format!("no process id in the tool results: {outputs:?}")));
                };
                let from = if last.contains("\"eof\":") { cursor(&last).unwrap_or(0) } else { 0 };
                if outputs.len() > 12 {
                    return Some(Reply::Text(format!("read_process never reached eof: {outputs:?}")));
                }
                call("read_process", json!({"process_id": pid, "cursor": from, "wait_ms": 5000}))
            }
        })
    }
}

/// The tool name of an event title: `spaces: read` (an MCP tool, titled alike for every CLI).
fn tool_name(title: &str) -> &str {
    title.rsplit([':', '.']).next().unwrap_or(title).trim()
}

/// A run with default options in Space `s` (holding `notes.txt`) next to Space `other`: the model
/// reads the file through `mcp__spaces__read`, patches it, runs a shell line and reads its output
/// to `eof`, then is refused the other Space. The patch is on disk; the model's requests carry
/// the file as `read` returned it and the command's output as `read_process` returned it; the
/// calls are `tool_call`/`tool_update` events; the refusal reached the model with its code and
/// nothing of the other Space did; the `spaces` server ran with the agent's environment (its
/// `HOME` is the run's, at `/run/home` in the sandbox) and without the daemon's secrets.
async fn the_agent_works_its_space_through_spacesds_own_tools(h: H) {
    require_cli(h.tools, h.binary);
    let d = TestDaemon::start_with_env(vec![
        ("SPACES_E2E_DAEMON_SECRET".into(), DAEMON_SECRET.into()),
        ("ANTHROPIC_API_KEY".into(), DAEMON_SECRET.into()),
        ("OPENAI_API_KEY".into(), DAEMON_SECRET.into()),
    ])
    .await;
    let root = d.space("s").await;
    std::fs::write(root.join(FILE), BEFORE).unwrap();
    let other = d.space("other").await;
    std::fs::write(other.join("secret.txt"), OTHER_CONTENT).unwrap();
    let state = root.display().to_string();
    let seen_env = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedServer::start_with_responder(h.wire, Script::default(), conversation(state, seen_env.clone())).await.unwrap();

    let req = AgentStartRequest {
        space: "s".into(),
        agent: h.id.into(),
        prompt: "Fix notes.txt with the spaces tools, then check it".into(),
        show: None,
        options: Some(SpaceAgentOptions { base_url: Some(model.base_url()), ..Default::default() }),
        request_id: None,
        traceparent: None,
    };
    let report = d.client.agent_start(&req).await.unwrap();
    assert_eq!(report.notes, Vec::<String>::new(), "space_tools is on and nothing is ignored");
    let run = report.run_id;
    let ended = d.wait_turn_end("s", &run, 1, TURN).await;
    let events = d.events("s", &run).await;
    let calls = model.model_calls();
    let last_body = calls.last().and_then(|c| c.json.clone()).unwrap_or_default();
    let outputs = tool_outputs(&last_body);
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{}\ntool outputs: {outputs:#?}", describe(&events));
    let st = d.wait_status("s", &run, TURN, settled).await;
    assert_eq!(st.result_text.as_deref(), Some(FINAL), "tool outputs: {outputs:#?}\n{}", describe(&events));

    // The model was offered the server's tools, without the unscoped ones. Claude Code lists
    // them; Codex defers MCP tools behind its `tool_search`, naming the namespace with the
    // start of the server's instructions.
    let first = calls[0].json.as_ref().unwrap().to_string();
    match h.wire {
        Wire::AnthropicMessages => {
            for tool in ["read", "apply_patch", "exec_command", "read_process"] {
                assert!(first.contains(&format!("\"mcp__spaces__{tool}\"")), "the CLI offers {tool}: {first}");
            }
            for tool in ["space_list", "space_add", "approval_resolve"] {
                assert!(!first.contains(&format!("\"mcp__spaces__{tool}\"")), "a scoped server does not offer {tool}");
            }
        }
        Wire::OpenAiResponses => {
            assert!(
                first.contains("mcp__spaces: Spaces tools for the Space \\\"s\\\" only"),
                "the namespace is listed with its scope: {first}"
            );
        }
        other => panic!("no harness of this suite speaks {other:?} yet"),
    }

    // The patch landed; the model saw the file as read, then the command's output after it.
    assert_eq!(std::fs::read_to_string(root.join(FILE)).unwrap(), AFTER);
    assert!(outputs[0].contains("alpha-line-1") && outputs[0].contains("beta-line-2"), "read returned the file: {}", outputs[0]);
    assert!(outputs[1].contains("applied"), "apply_patch applied: {}", outputs[1]);
    assert!(process_id(&outputs[2]).is_some(), "exec_command answered its handle: {}", outputs[2]);
    let reads = &outputs[3..outputs.len() - 1];
    assert!(!reads.is_empty() && reads.iter().all(|r| r.contains("\"process_id\"")), "{reads:#?}");
    // The chunks in order: a command's output may come in pieces cut anywhere.
    let seen: String = reads.iter().filter_map(|r| r.split("\"chunk\":\"").nth(1)?.split('"').next()).collect();
    assert!(seen.contains("gamma-patched-3") && seen.contains(DONE), "read_process returned the patched file and {DONE}: {reads:#?}");
    assert!(reads.last().unwrap().contains("\"eof\":true"), "read until eof: {reads:#?}");

    // Another Space is refused with the code, and nothing of it reached the model.
    let refusal = outputs.last().unwrap();
    assert!(refusal.contains("UNAUTHORIZED") && refusal.contains("scopedtoSpace"), "{refusal}");
    for c in &calls {
        let body = c.json.as_ref().map(Value::to_string).unwrap_or_default();
        assert!(!body.contains(OTHER_CONTENT), "the other Space's file reached the model");
    }

    // Every call is a tool_call with a tool_update ending it.
    let mcp_calls: Vec<_> =
        events.iter().filter(|e| e.kind == EventKind::ToolCall && e.tool_title.as_deref().is_some_and(|t| t.contains("spaces"))).collect();
    let names: Vec<&str> = mcp_calls.iter().map(|e| tool_name(e.tool_title.as_deref().unwrap_or(""))).collect();
    let mut want = vec!["read", "apply_patch", "exec_command"];
    want.extend(std::iter::repeat_n("read_process", reads.len()));
    want.push("read");
    assert_eq!(names, want, "{}", describe(&events));
    for (i, call) in mcp_calls.iter().enumerate() {
        let end = events
            .iter()
            .find(|e| {
                e.kind == EventKind::ToolUpdate
                    && e.tool_id == call.tool_id
                    && matches!(e.tool_status, Some(ToolStatus::Completed | ToolStatus::Failed))
            })
            .unwrap_or_else(|| panic!("call {i} ({}) ends in a tool_update:\n{}", names[i], describe(&events)));
        if i + 1 < mcp_calls.len() {
            assert_eq!(end.tool_status, Some(ToolStatus::Completed), "{}: {:?}", names[i], end.text);
        }
    }

    // The server ran with the agent's environment and none of the daemon's.
    let servers = seen_env.lock().unwrap().clone();
    assert!(!servers.is_empty(), "a `spacesd mcp --space` process served the run's CLI");
    // The agent's home, as the sandbox shows it (the run's home is mounted there).
    let home = std::path::PathBuf::from("/run/home");
    for (cmd, env) in &servers {
        assert!(cmd.contains("--space s ") && cmd.contains("--no-autostart"), "{cmd}");
        assert!(!env.contains(DAEMON_SECRET), "the daemon's secret reached the spaces server: {env}");
        let home_var = format!("HOME={}\n", home.display());
        assert!(env.contains(&home_var), "the server has the agent's HOME ({home_var:?}): {env}");
    }
}

crate::support::per_harness!(the_agent_works_its_space_through_spacesds_own_tools);

// ----- the scoped server itself, over stdio, without an agent -----

/// `spacesd mcp --space s` for the daemon of `d`, initialized; the instructions lead with the
/// scope.
fn scoped(d: &TestDaemon, space: &str) -> StdioMcp {
    let log = d.dir.path().join(format!("mcp-{space}-stderr.log"));
    let mut m = StdioMcp::start_with_args(&d.state_dir(), &["--space", space, "--no-autostart"], &[], &log);
    let init = m.initialize();
    let instructions = init["instructions"].as_str().unwrap_or("");
    assert!(instructions.starts_with(&format!("Spaces tools for the Space {space:?} only")), "{init}");
    m
}

/// Waits for `process_id` (started by anyone) to end, through the unscoped client.
async fn wait_gone(d: &TestDaemon, process_id: &str) {
    for _ in 0..600 {
        let st = d.client.call_named("process_status", json!({"process_id": process_id})).await.unwrap();
        if st["state"] == "exited" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{process_id} did not exit");
}

/// The scoped server's tool list and each kind of check: a Space named or left out, another
/// Space refused `UNAUTHORIZED` naming the field, and ids of another Space (process, work,
/// operation, hold) refused before anything runs, while the same ids of its own Space work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoped_server_acts_on_its_space_only() {
    let d = TestDaemon::start().await;
    let root = d.space("s").await;
    std::fs::write(root.join(FILE), BEFORE).unwrap();
    let other = d.space("other").await;
    std::fs::write(other.join("secret.txt"), OTHER_CONTENT).unwrap();
    let mut m = scoped(&d, "s");

    // The list: no other Spaces, no self-approval; the Space optional in every schema.
    let tools = m.list_tools();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    for gone in ["space_list", "space_add", "approval_resolve"] {
        assert!(!names.contains(&gone), "{gone} is not offered: {names:?}");
    }
    for want in
        ["agent_capabilities", "read", "apply_patch", "exec_command", "read_process", "operation_resume", "agent_start", "work_open"]
    {
        assert!(names.contains(&want), "{want} is offered: {names:?}");
    }
    for t in &tools {
        let required = t["inputSchema"]["required"].as_array().cloned().unwrap_or_default();
        assert!(!required.contains(&json!("workspace_id")) && !required.contains(&json!("space")), "{}: {required:?}", t["name"]);
    }

    // Left out, named, or another Space.
    assert!(m.ok("read", json!({"path": FILE}))["content"].as_str().unwrap().contains("beta-line-2"));
    assert!(m.ok("read", json!({"workspace_id": "s", "path": FILE}))["content"].as_str().unwrap().contains("alpha-line-1"));
    let e = m.refused("read", json!({"workspace_id": "other", "path": "secret.txt"}));
    assert_eq!((e["code"].as_str(), e["field"].as_str()), (Some("UNAUTHORIZED"), Some("workspace_id")), "{e}");
    assert!(e["message"].as_str().unwrap().contains("scoped to Space \"s\""), "{e}");
    assert!(!e.to_string().contains(OTHER_CONTENT));
    let e = m.refused("agent_list", json!({"space": "other"}));
    assert_eq!((e["code"].as_str(), e["field"].as_str()), (Some("UNAUTHORIZED"), Some("space")), "{e}");
    assert_eq!(m.ok("agent_list", json!({}))["items"], json!([]));
    let e = m.refused("approval_create", json!({"tool": "exec_command", "arguments": {"workspace_id": "other", "command": ["true"]}}));
    assert_eq!(e["field"], "arguments.workspace_id", "{e}");
    // An unscoped tool is not there at all.
    let id = m.send_request("tools/call", json!({"name": "space_list", "arguments": {}}));
    let answer = m.answer(id, Duration::from_secs(10)).unwrap();
    assert_eq!(answer["error"]["code"], -32602, "{answer}");

    // Processes: its own are readable; another Space's are not touched.
    let theirs = d.client.call_named("exec_command", json!({"workspace_id": "other", "command": ["sleep", "30"]})).await.unwrap();
    let theirs = theirs["process_id"].as_str().unwrap().to_owned();
    for (tool, args) in [
        ("read_process", json!({"process_id": theirs})),
        ("write_stdin", json!({"process_id": theirs, "data": "x\n"})),
        ("terminate_process", json!({"process_id": theirs})),
    ] {
        let e = m.refused(tool, args);
        assert_eq!(e["code"], "UNAUTHORIZED", "{tool}: {e}");
        assert!(e["message"].as_str().unwrap().contains("belongs to another Space"), "{e}");
    }
    let st = d.client.call_named("process_status", json!({"process_id": theirs})).await.unwrap();
    assert_eq!((st["state"].as_str(), st["workspace_id"].as_str()), (Some("running"), Some("other")), "never terminated: {st}");
    d.client.call_named("terminate_process", json!({"process_id": theirs})).await.unwrap();
    wait_gone(&d, &theirs).await;
    let mine = m.ok("exec_command", json!({"command": ["sh", "-c", COMMAND]}))["process_id"].as_str().unwrap().to_owned();
    let mut out = String::new();
    let mut cursor = 0;
    loop {
        let r = m.ok("read_process", json!({"process_id": mine, "cursor": cursor, "wait_ms": 2000}));
        out.push_str(r["chunk"].as_str().unwrap());
        cursor = r["cursor"].as_u64().unwrap();
        if r["eof"] == json!(true) {
            break;
        }
    }
    assert!(out.contains(DONE), "{out}");
    assert_eq!(m.ok("process_status", json!({"process_id": mine}))["workspace_id"], "s");

    // Works: its own by id; another Space's refused (also as a coordination context).
    let work = m.ok("work_open", json!({"title": "scoped"}));
    assert_eq!(work["workspace_id"], "s");
    m.ok("steer_status", json!({"work_id": work["work_id"]}));
    let their_work = d.client.call_named("work_open", json!({"workspace_id": "other"})).await.unwrap();
    for (tool, args) in
        [("steer_claim_next", json!({"work_id": their_work["work_id"]})), ("read", json!({"path": FILE, "work_id": their_work["work_id"]}))]
    {
        assert_eq!(m.refused(tool, args)["code"], "UNAUTHORIZED", "{tool}");
    }

    // Operations: checked on the record's workspace.
    let add = "*** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch\n";
    let op = d.client.call_named("apply_patch", json!({"workspace_id": "other", "patch": add})).await.unwrap();
    assert_eq!(m.refused("operation_status", json!({"operation_id": op["operation_id"]}))["code"], "UNAUTHORIZED");
    let own = m.ok("apply_patch", json!({"patch": add, "operation_key": "k1"}));
    assert_eq!(m.ok("operation_status", json!({"operation_id": own["operation_id"]}))["workspace_id"], "s");
    assert_eq!(m.ok("operation_status", json!({"operation_key": "k1"}))["operation_id"], own["operation_id"]);

    // Holds: only those this server saw opened.
    let e = m.refused("operation_resume", json!({"approval_id": "appr-00000000-0000-0000-0000-000000000000"}));
    assert!(e["message"].as_str().unwrap().contains("cannot tell which Space"), "{e}");
    let hold = m.ok("approval_create", json!({"tool": "exec_command", "arguments": {"command": ["true"]}}));
    assert_eq!(hold["workspace_id"], "s");
    let e = m.refused("operation_resume", json!({"approval_id": hold["approval_id"]}));
    assert_eq!(e["code"], "APPROVAL_CONFLICT", "seen here, so the daemon answers (the hold is still pending): {e}");
    d.client.call_named("approval_resolve", json!({"approval_id": hold["approval_id"], "decision": "grant"})).await.unwrap();
    let resumed = m.ok("operation_resume", json!({"approval_id": hold["approval_id"]}));
    assert_eq!(resumed["state"], "consumed", "{resumed}");
}

/// With `--no-autostart` (what an agent's `spaces` server gets) and no daemon, the server still
/// initializes and lists its tools, a call is refused saying spacesd is not answering, and no
/// daemon was started for the state dir.
#[tokio::test]
async fn without_a_daemon_the_agents_server_starts_none() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let log = dir.path().join("mcp-stderr.log");
    let mut m = StdioMcp::start_with_args(&state, &["--space", "s", "--no-autostart"], &[], &log);
    m.initialize();
    assert!(!m.list_tools().is_empty());
    let e = m.refused("read", json!({"path": "a.txt"}));
    assert_eq!(e["code"], "INTERNAL", "{e}");
    assert!(e["message"].as_str().unwrap().contains("not answering"), "{e}");
    assert!(!state.join("spacesd.sock").exists(), "no daemon was started");
    m.close_stdin();
    assert!(m.wait_exit(Duration::from_secs(5)).is_some_and(|s| s.success()));
}
