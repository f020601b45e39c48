//! The ACP conversation, step by step: what goes out when, and the events.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};
use spaces_sdk::{Category, EventKind, StopReason, ToolStatus};

use super::*;
use crate::draft::EventDraft;
use crate::harness::Normalizer;
use crate::plan::{ExitInfo, LaunchContext};

const FLAVOR: Flavor = Flavor { name: "test-agent", load_in_new_process: true };

fn ctx<'a>(prompt: &'a str, session: Option<&'a str>, env: &'a BTreeMap<String, String>) -> LaunchContext<'a> {
    LaunchContext {
        run_id: "r1",
        turn: 1,
        prompt,
        session_id: session,
        binary: Path::new("/tools/agent"),
        cwd: Path::new("/space"),
        home: Path::new("/home/run"),
        run_dir: Path::new("/run/r1"),
        model: None,
        base_url: None,
        env,
        mcp_servers: &[],
        max_budget_usd: None,
        resume_at: None,
    }
}

fn out(n: &mut AcpNormalizer) -> Vec<Value> {
    n.take_outgoing().iter().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn line(v: Value) -> String {
    v.to_string()
}

fn update(u: Value) -> String {
    line(json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": u}}))
}

fn kinds(events: &[EventDraft]) -> Vec<(EventKind, Category)> {
    events.iter().map(|e| (e.kind, e.category)).collect()
}

/// A normalizer through the handshake of turn 1 (`initialize`, `session/new`), its prompt out.
fn started(caps: Value) -> AcpNormalizer {
    let env = BTreeMap::new();
    let mut n = AcpNormalizer::new(FLAVOR, PermissionPolicy::Allow);
    n.launched(&ctx("hello", None, &env));
    n.begin_turn(1, "hello");
    n.stdout_line(&line(json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": caps}})));
    let sent = out(&mut n);
    assert_eq!(sent[0]["method"], "session/new");
    assert_eq!(sent[0]["params"], json!({"cwd": "/space", "mcpServers": []}));
    let ev = n.stdout_line(&line(json!({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s1"}})));
    assert_eq!(ev[0].kind, EventKind::Session);
    let sent = out(&mut n);
    assert_eq!(
        sent,
        [
            json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "hello"}]}})
        ]
    );
    n
}

#[test]
fn the_answer_streams_in_hidden_pieces_and_lands_once_whole() {
    let mut n = started(json!({}));
    let a = n.stdout_line(&update(json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hel"}})));
    let b = n.stdout_line(&update(json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "lo"}})));
    assert_eq!(kinds(&a), [(EventKind::MessageDelta, Category::Hidden)]);
    assert_eq!((b[0].text.as_deref(), b[0].raw.is_some()), (Some("lo"), true));
    let end = n.stdout_line(&line(json!({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn",
        "usage": {"inputTokens": 3, "outputTokens": 1, "totalTokens": 4}}})));
    assert_eq!(
        kinds(&end),
        [(EventKind::Message, Category::Message), (EventKind::Usage, Category::Activity), (EventKind::TurnEnded, Category::Activity)]
    );
    assert_eq!(end[0].text.as_deref(), Some("Hello"));
    assert_eq!(end[2].stop_reason, Some(StopReason::EndTurn));
    assert_eq!(end[2].text.as_deref(), Some("Hello"));
    assert_eq!(end[1].usage.as_ref().and_then(|u| u.input_tokens), Some(3));
    assert!(!n.turn_in_flight());
}

#[test]
fn a_tool_call_ends_the_answer_before_it_and_closes_with_its_output() {
    let mut n = started(json!({}));
    n.stdout_line(&update(json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Let me look."}})));
    let ev = n.stdout_line(&update(json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "bash", "kind": "execute",
        "status": "pending", "rawInput": {"command": "ls -la"}})));
    assert_eq!(kinds(&ev), [(EventKind::Message, Category::Message), (EventKind::ToolCall, Category::Activity)]);
    assert_eq!(ev[1].summary.as_deref(), Some("Run: ls -la"));
    assert!(n.tool_running());
    let ev = n.stdout_line(&update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": "a.txt"}}]})));
    assert_eq!((ev[0].kind, ev[0].tool_status), (EventKind::ToolUpdate, Some(ToolStatus::Completed)));
    assert_eq!((ev[0].summary.as_deref(), ev[0].text.as_deref()), (Some("Run: ls -la done"), Some("a.txt")));
    assert!(!n.tool_running());
}

#[test]
fn permissions_are_allowed_once_and_shown() {
    let mut n = started(json!({}));
    let ev = n.stdout_line(&line(json!({"jsonrpc": "2.0", "id": 7, "method": "session/request_permission", "params": {
        "sessionId": "s1", "toolCall": {"toolCallId": "t1", "title": "Write a.txt"},
        "options": [{"optionId": "always", "name": "Always", "kind": "allow_always"},
                    {"optionId": "once", "name": "Once", "kind": "allow_once"},
                    {"optionId": "no", "name": "No", "kind": "reject_once"}]}})));
    assert_eq!((ev[0].kind, ev[0].summary.as_deref()), (EventKind::Permission, Some("permission for Write a.txt: allow_once")));
    assert_eq!(out(&mut n), [json!({"jsonrpc": "2.0", "id": 7, "result": {"outcome": {"outcome": "selected", "optionId": "once"}}})]);
}

#[test]
fn unknown_agent_requests_get_an_error_answer() {
    let mut n = started(json!({}));
    let ev = n.stdout_line(&line(json!({"jsonrpc": "2.0", "id": "x", "method": "fs/read_text_file", "params": {"path": "/a"}})));
    assert_eq!(ev[0].kind, EventKind::Notice);
    let sent = out(&mut n);
    assert_eq!((sent[0]["id"].clone(), sent[0]["error"]["code"].clone()), (json!("x"), json!(-32601)));
}

#[test]
fn an_interrupt_is_a_cancel_and_the_cancelled_answer_ends_interrupted() {
    let mut n = started(json!({}));
    n.stdout_line(&update(json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "part"}})));
    let cancel = n.interrupt_input().map(|l| serde_json::from_str::<Value>(&l).unwrap());
    assert_eq!(cancel, Some(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s1"}})));
    let ev = n.interrupt_requested();
    assert_eq!(kinds(&ev), [(EventKind::Message, Category::Message), (EventKind::CancelRequested, Category::Activity)]);
    // A permission asked after the cancel is answered `cancelled`, as ACP asks.
    n.stdout_line(&line(json!({"jsonrpc": "2.0", "id": 9, "method": "session/request_permission", "params": {"options": [{"optionId": "a", "kind": "allow_once"}]}})));
    assert_eq!(out(&mut n)[0]["result"]["outcome"]["outcome"], "cancelled");
    let ev = n.stdout_line(&line(json!({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "cancelled"}})));
    assert_eq!(ev.last().and_then(|e| e.stop_reason), Some(StopReason::Interrupted));
    assert_eq!(n.interrupt_input(), None, "nothing left to cancel");
}

#[test]
fn follow_ups_are_prompts_in_the_same_session() {
    let mut n = started(json!({}));
    n.stdout_line(&line(json!({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}})));
    let ev = n.begin_turn(2, "again");
    assert_eq!(kinds(&ev).last(), Some(&(EventKind::Session, Category::Hidden)));
    let input: Value = serde_json::from_str(&n.turn_input("again").unwrap()).unwrap();
    assert_eq!(
        (input["id"].clone(), input["method"].clone(), input["params"]["prompt"][0]["text"].clone()),
        (json!(3), json!("session/prompt"), json!("again"))
    );
    assert!(out(&mut n).is_empty());
}

#[test]
fn a_resume_loads_the_session_when_the_agent_can_and_hides_the_replay() {
    let env = BTreeMap::new();
    let mut n = AcpNormalizer::new(FLAVOR, PermissionPolicy::Allow);
    n.launched(&ctx("next", Some("s0"), &env));
    n.begin_turn(3, "next");
    n.stdout_line(&line(json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": {"loadSession": true}}})));
    let sent = out(&mut n);
    assert_eq!((sent[0]["method"].clone(), sent[0]["params"]["sessionId"].clone()), (json!("session/load"), json!("s0")));
    let replay = n.stdout_line(&update(json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "old"}})));
    assert_eq!(kinds(&replay), [(EventKind::Notice, Category::Hidden)]);
    n.stdout_line(&line(json!({"jsonrpc": "2.0", "id": 1, "result": {}})));
    assert_eq!(n.session_id().as_deref(), Some("s0"));
    assert_eq!(out(&mut n)[0]["params"]["prompt"][0]["text"], "next");
}

#[test]
fn a_resume_the_agent_cannot_do_is_a_fresh_session_with_a_notice() {
    let env = BTreeMap::new();
    for (flavor, caps) in [(FLAVOR, json!({})), (Flavor { name: "g", load_in_new_process: false }, json!({"loadSession": true}))] {
        let mut n = AcpNormalizer::new(flavor, PermissionPolicy::Allow);
        n.launched(&ctx("next", Some("s0"), &env));
        n.begin_turn(2, "next");
        let ev = n.stdout_line(&line(json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": caps}})));
        assert!(
            ev.iter().any(|e| e.kind == EventKind::Notice
                && e.category == Category::Activity
                && e.summary.as_deref().is_some_and(|s| s.contains("starts fresh"))),
            "{ev:?}"
        );
        assert_eq!(out(&mut n)[0]["method"], "session/new");
    }
    // A load that fails falls back the same way.
    let mut n = AcpNormalizer::new(FLAVOR, PermissionPolicy::Allow);
    n.launched(&ctx("next", Some("s0"), &env));
    n.stdout_line(&line(json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": {"loadSession": true}}})));
    out(&mut n);
    let ev = n.stdout_line(&line(json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "Session not found"}})));
    assert!(ev[0].summary.as_deref().is_some_and(|s| s.contains("Session not found")));
    assert_eq!(out(&mut n)[0]["method"], "session/new");
}

#[test]
fn an_interrupt_before_the_prompt_went_out_ends_the_turn_at_once() {
    let env = BTreeMap::new();
    let mut n = AcpNormalizer::new(FLAVOR, PermissionPolicy::Allow);
    n.launched(&ctx("hi", None, &env));
    n.begin_turn(1, "hi");
    assert_eq!(n.interrupt_input(), None);
    let ev = n.interrupt_requested();
    assert_eq!(ev.last().and_then(|e| e.stop_reason), Some(StopReason::Interrupted));
    n.stdout_line(&line(json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}})));
    n.stdout_line(&line(json!({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s1"}})));
    let sent = out(&mut n);
    assert!(sent.iter().all(|m| m["method"] != "session/prompt"), "the prompt is never sent: {sent:?}");
}

#[test]
fn stop_reasons_map_to_the_projects() {
    use StopReason::*;
    for (acp, want) in [
        ("end_turn", EndTurn),
        ("cancelled", Interrupted),
        ("max_turn_requests", MaxTurns),
        ("max_tokens", Error),
        ("refusal", Error),
        ("odd", Error),
    ] {
        assert_eq!(normalize::stop_reason(acp, false, None).0, want, "{acp}");
    }
    assert_eq!(normalize::stop_reason("odd", true, None).0, Interrupted);
}

#[test]
fn a_failed_session_new_ends_the_turn_with_the_reason() {
    let env = BTreeMap::new();
    let mut n = AcpNormalizer::new(FLAVOR, PermissionPolicy::Allow);
    n.launched(&ctx("hi", None, &env));
    n.begin_turn(1, "hi");
    n.stdout_line(&line(json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}})));
    let ev = n.stdout_line(&line(json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "Authentication required"}})));
    let end = ev.last().unwrap();
    assert_eq!(end.stop_reason, Some(StopReason::Error));
    assert!(end.text.as_deref().unwrap().contains("Authentication required"));
    let exit = n.process_exited(&ExitInfo { code: Some(0), ..ExitInfo::default() });
    assert_eq!(kinds(&exit), [(EventKind::Exited, Category::Activity)]);
}

#[test]
fn every_acp_cli_is_a_long_lived_harness_whose_stdin_starts_with_initialize() {
    let env = BTreeMap::from([("GEMINI_API_KEY".to_owned(), "k".to_owned()), ("HOME".to_owned(), "/caller".to_owned())]);
    let want = [
        ("opencode", crate::opencode::PACKAGE, crate::opencode::BINARY, "/tools/agent acp --pure --cwd /space"),
        ("gemini-cli", crate::gemini_cli::PACKAGE, crate::gemini_cli::BINARY, "/tools/agent --acp -m gemini-2.5-flash"),
    ];
    for (h, (id, package, binary, argv)) in crate::acp_harnesses().into_iter().zip(want) {
        assert_eq!(h.id(), id);
        assert_eq!((h.install_spec().packages, h.install_spec().binary), (vec![package.to_owned()], binary));
        assert_eq!((h.process_model(), h.followups()), (crate::plan::ProcessModel::LongLived, "acp"));
        assert!(h.user_message("hi").is_empty());
        assert_eq!(h.interrupt(), crate::plan::InterruptRecipe::Stdin(Vec::new()));
        let plan = h.launch(&ctx("hi", None, &env));
        assert_eq!(plan.argv.join(" "), argv);
        assert_eq!(plan.env.get("HOME").map(String::as_str), Some("/caller"), "the caller's env wins");
        assert_eq!(plan.files.len(), 1);
        assert_eq!(plan.stdin, crate::plan::StdinMode::Pipe);
        assert_eq!(plan.initial_stdin, Some(line_bytes(&rpc::initialize())));
        assert!(h.normalizer().interrupt_input().is_none());
    }
}
