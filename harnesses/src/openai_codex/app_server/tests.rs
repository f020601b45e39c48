//! The conversation of [`AppServerNormalizer`] on hand-written server lines: what goes out, in
//! which order, with which ids. Replays of real recordings are in `tests/suite/openai_codex_app_server.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};
use spaces_sdk::{EventKind, StopReason, ToolStatus};

use super::conversation::INITIALIZE_ID;
use super::{launch, AppServerNormalizer};
use crate::draft::EventDraft;
use crate::harness::Normalizer;
use crate::plan::{LaunchContext, StdinMode};

fn ctx<'a>(session: Option<&'a str>, model: Option<&'a str>, env: &'a BTreeMap<String, String>) -> LaunchContext<'a> {
    LaunchContext {
        run_id: "run-1",
        turn: 1,
        prompt: "hello",
        session_id: session,
        binary: Path::new("/tools/codex"),
        cwd: Path::new("/w"),
        home: Path::new("/h"),
        run_dir: Path::new("/r"),
        model,
        base_url: Some("http://127.0.0.1:9"),
        env,
        mcp_servers: &[],
        max_budget_usd: None,
        resume_at: None,
    }
}

fn parse(lines: &[String]) -> Vec<Value> {
    lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Feed `v` as one stdout line; return the events and what the normalizer wants written.
fn feed(n: &mut AppServerNormalizer, v: Value) -> (Vec<EventDraft>, Vec<Value>) {
    let events = n.stdout_line(&v.to_string());
    (events, parse(&n.take_outgoing()))
}

fn init_answer() -> Value {
    json!({"id": INITIALIZE_ID, "result": {"userAgent": "spaces/0.171.0", "codexHome": "/h/.codex", "platformFamily": "unix", "platformOs": "linux"}})
}

/// A normalizer through the handshake of turn 1 ("hello"), with thread `t-1` and server turn
/// `u-1`; returns it and the `turn/start` it sent.
fn started(session: Option<&str>) -> (AppServerNormalizer, Value) {
    let env = BTreeMap::new();
    let mut n = AppServerNormalizer::default();
    n.begin_turn(1, "hello");
    n.launched(&ctx(session, None, &env));
    assert!(n.take_outgoing().is_empty(), "nothing before initialize is answered");
    let (_, out) = feed(&mut n, init_answer());
    let thread_req = out[1]["id"].clone();
    let (events, out) = feed(&mut n, json!({"id": thread_req, "result": {"thread": {"id": "t-1"}}}));
    assert_eq!(events[0].kind, EventKind::Session);
    assert_eq!(out.len(), 1);
    let turn_start = out[0].clone();
    feed(&mut n, json!({"id": turn_start["id"], "result": {"turn": {"id": "u-1", "status": "inProgress", "items": []}}}));
    (n, turn_start)
}

#[test]
fn the_launch_plan_runs_app_server_and_opens_with_initialize() {
    let env = BTreeMap::new();
    let plan = launch(&ctx(None, None, &env));
    assert_eq!(plan.argv, ["/tools/codex", "app-server"]);
    assert_eq!(plan.stdin, StdinMode::Pipe);
    assert_eq!(plan.env.get("CODEX_HOME").map(String::as_str), Some("/h/.codex"));
    let config = &plan.files[0].1;
    assert!(config.contains("base_url = \"http://127.0.0.1:9/v1\""), "{config}");
    let stdin = String::from_utf8(plan.initial_stdin.unwrap()).unwrap();
    assert!(stdin.ends_with('\n') && stdin.matches('\n').count() == 1);
    let init: Value = serde_json::from_str(stdin.trim_end()).unwrap();
    assert_eq!((init["id"].as_i64(), init["method"].as_str()), (Some(INITIALIZE_ID), Some("initialize")));
    assert_eq!(init["params"]["clientInfo"]["name"], "spaces");
    assert!(!stdin.contains("hello"), "the prompt goes as turn/start, not on stdin at launch");
}

#[test]
fn the_handshake_is_initialize_initialized_thread_start_turn_start() {
    let env = BTreeMap::new();
    let mut n = AppServerNormalizer::default();
    n.begin_turn(1, "hello");
    n.launched(&ctx(None, Some("gpt-5.5"), &env));
    let (_, out) = feed(&mut n, init_answer());
    let methods: Vec<_> = out.iter().map(|v| v["method"].as_str().unwrap()).collect();
    assert_eq!(methods, ["initialized", "thread/start"]);
    assert!(out[0].get("id").is_none(), "initialized is a notification");
    let params = &out[1]["params"];
    assert_eq!(params["cwd"], "/w");
    assert_eq!(params["approvalPolicy"], "never");
    assert_eq!(params["sandbox"], "danger-full-access");
    assert_eq!(params["model"], "gpt-5.5");
    let (events, out) = feed(&mut n, json!({"id": out[1]["id"], "result": {"thread": {"id": "t-1"}}}));
    assert_eq!(n.session_id().as_deref(), Some("t-1"));
    assert_eq!(events[0].text.as_deref(), Some("t-1"));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["method"], "turn/start");
    assert_eq!(out[0]["params"], json!({"threadId": "t-1", "input": [{"type": "text", "text": "hello"}]}));
    assert_eq!(out[0]["id"].as_i64(), Some(INITIALIZE_ID + 2), "ids count up from initialize's");
}

#[test]
fn a_resume_uses_thread_resume_with_the_session_id() {
    let env = BTreeMap::new();
    let mut n = AppServerNormalizer::default();
    n.begin_turn(2, "go on");
    n.launched(&ctx(Some("t-old"), None, &env));
    let (_, out) = feed(&mut n, init_answer());
    assert_eq!(out[1]["method"], "thread/resume");
    assert_eq!(out[1]["params"]["threadId"], "t-old");
    assert_eq!(out[1]["params"]["excludeTurns"], true);
    let (_, out) = feed(&mut n, json!({"id": out[1]["id"], "result": {"thread": {"id": "t-old"}}}));
    assert_eq!(out[0]["params"]["threadId"], "t-old");
    assert_eq!(out[0]["params"]["input"][0]["text"], "go on");
}

/// Issue 34: a rewind's launch forks the thread through the turn rewound to, and the fork's
/// thread is the session from then on; a completed turn's id is the point a rewind goes back to.
#[test]
fn a_rewind_forks_the_thread_through_its_turn() {
    let (mut n, _) = started(None);
    feed(
        &mut n,
        json!({"method": "turn/completed", "params": {"threadId": "t-1", "turn": {"id": "u-1", "status": "completed", "items": []}}}),
    );
    assert_eq!(n.turn_point().as_deref(), Some("u-1"));
    let env = BTreeMap::new();
    n.begin_turn(3, "again");
    n.launched(&LaunchContext { resume_at: Some("u-1"), ..ctx(Some("t-1"), None, &env) });
    let (_, out) = feed(&mut n, init_answer());
    assert_eq!(out[1]["method"], "thread/fork");
    assert_eq!((&out[1]["params"]["threadId"], &out[1]["params"]["lastTurnId"]), (&json!("t-1"), &json!("u-1")));
    let (events, out) = feed(&mut n, json!({"id": out[1]["id"], "result": {"thread": {"id": "t-fork"}}}));
    assert!(events.iter().any(|e| e.kind == EventKind::Session && e.text.as_deref() == Some("t-fork")), "{events:?}");
    assert_eq!(n.session_id().as_deref(), Some("t-fork"));
    assert_eq!(out[0]["params"]["threadId"], "t-fork");
    assert_eq!(out[0]["params"]["input"][0]["text"], "again");
}

#[test]
fn a_follow_up_is_turn_start_in_the_same_thread() {
    let (mut n, first) = started(None);
    feed(
        &mut n,
        json!({"method": "turn/completed", "params": {"threadId": "t-1", "turn": {"id": "u-1", "status": "completed", "items": []}}}),
    );
    assert!(!n.turn_in_flight());
    n.begin_turn(2, "and then?");
    assert!(n.take_outgoing().is_empty(), "a live process's turn goes by turn_input");
    let line: Value = serde_json::from_str(&n.turn_input("and then?").unwrap()).unwrap();
    assert_eq!(line["method"], "turn/start");
    assert_eq!(line["params"]["threadId"], "t-1");
    assert_eq!(line["params"]["input"][0]["text"], "and then?");
    assert!(line["id"].as_i64() > first["id"].as_i64());
    assert!(n.take_outgoing().is_empty(), "sent once");
}

#[test]
fn an_interrupt_names_the_turn_and_closes_cut_off_tools() {
    let (mut n, _) = started(None);
    let item = json!({"type": "commandExecution", "id": "c1", "command": "sleep 30", "status": "inProgress"});
    let (events, _) = feed(&mut n, json!({"method": "item/started", "params": {"item": item, "threadId": "t-1", "turnId": "u-1"}}));
    assert_eq!(events[0].kind, EventKind::ToolCall);
    assert!(n.tool_running());
    assert_eq!(n.interrupt_requested()[0].kind, EventKind::CancelRequested);
    let line: Value = serde_json::from_str(&n.interrupt_input().unwrap()).unwrap();
    assert_eq!(line["method"], "turn/interrupt");
    assert_eq!(line["params"], json!({"threadId": "t-1", "turnId": "u-1"}));
    feed(&mut n, json!({"id": line["id"], "result": {}}));
    let (events, _) = feed(
        &mut n,
        json!({"method": "turn/completed", "params": {"threadId": "t-1", "turn": {"id": "u-1", "status": "interrupted", "items": []}}}),
    );
    let got: Vec<_> = events.iter().map(|e| (e.kind, e.tool_status, e.stop_reason)).collect();
    assert_eq!(got, [(EventKind::ToolUpdate, Some(ToolStatus::Failed), None), (EventKind::TurnEnded, None, Some(StopReason::Interrupted))]);
}

#[test]
fn an_interrupt_before_the_turn_id_goes_out_when_the_server_names_it() {
    let env = BTreeMap::new();
    let mut n = AppServerNormalizer::default();
    n.begin_turn(1, "hello");
    n.launched(&ctx(None, None, &env));
    let (_, out) = feed(&mut n, init_answer());
    let (_, out) = feed(&mut n, json!({"id": out[1]["id"], "result": {"thread": {"id": "t-1"}}}));
    n.interrupt_requested();
    assert_eq!(n.interrupt_input(), None, "no turn id yet");
    let (_, sent) = feed(&mut n, json!({"id": out[0]["id"], "result": {"turn": {"id": "u-9", "status": "inProgress", "items": []}}}));
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["params"], json!({"threadId": "t-1", "turnId": "u-9"}));
}

#[test]
fn an_interrupt_during_the_handshake_ends_the_turn_and_never_starts_it() {
    let env = BTreeMap::new();
    let mut n = AppServerNormalizer::default();
    n.begin_turn(1, "hello");
    n.launched(&ctx(None, None, &env));
    let events = n.interrupt_requested();
    assert_eq!(events.last().unwrap().stop_reason, Some(StopReason::Interrupted));
    assert!(!n.turn_in_flight());
    let (_, out) = feed(&mut n, init_answer());
    let (_, out) = feed(&mut n, json!({"id": out[1]["id"], "result": {"thread": {"id": "t-1"}}}));
    assert!(out.is_empty(), "no turn/start for an interrupted turn: {out:?}");
}

#[test]
fn steer_names_the_expected_turn() {
    let (mut n, _) = started(None);
    let line: Value = serde_json::from_str(&n.steer_input("also this").unwrap()).unwrap();
    assert_eq!(line["method"], "turn/steer");
    assert_eq!(line["params"], json!({"threadId": "t-1", "expectedTurnId": "u-1", "input": [{"type": "text", "text": "also this"}]}));
    let (events, _) = feed(&mut n, json!({"id": line["id"], "error": {"code": -32600, "message": "no active turn"}}));
    assert_eq!(events[0].kind, EventKind::Notice);
    assert!(events[0].summary.as_deref().unwrap().contains("runs as the next turn"), "{events:?}");
    assert!(n.turn_in_flight(), "a refused steer does not end the turn");
    assert_eq!(n.take_refused_steers(), ["also this"], "the refused text goes back to the caller");
    assert!(n.take_refused_steers().is_empty());
}

#[test]
fn a_steer_is_the_callers_message_in_the_turn_in_flight_and_an_accepted_one_is_not_returned() {
    let (mut n, _) = started(None);
    let (line, events) = Normalizer::steer(&mut n, "also this").unwrap();
    let line: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(line["method"], "turn/steer");
    assert_eq!((events[0].kind, events[0].turn, events[0].text.as_deref()), (EventKind::UserMessage, 1, Some("also this")));
    feed(&mut n, json!({"id": line["id"], "result": {"turnId": "u-1"}}));
    assert!(n.take_refused_steers().is_empty());
    let mut idle = AppServerNormalizer::default();
    assert!(Normalizer::steer(&mut idle, "x").is_none(), "no turn in flight: no steer");
}

#[test]
fn an_unknown_server_request_gets_an_error_answer() {
    let (mut n, _) = started(None);
    let (events, out) = feed(
        &mut n,
        json!({"id": "srv-7", "method": "item/commandExecution/requestApproval", "params": {"threadId": "t-1", "turnId": "u-1", "itemId": "c1"}}),
    );
    assert_eq!(events[0].kind, EventKind::Notice);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["id"], "srv-7");
    assert_eq!(out[0]["error"]["code"], -32601);
    assert!(out[0].get("result").is_none());
}

#[test]
fn a_refused_turn_start_ends_the_turn_error() {
    let env = BTreeMap::new();
    let mut n = AppServerNormalizer::default();
    n.begin_turn(1, "hello");
    n.launched(&ctx(None, None, &env));
    let (_, out) = feed(&mut n, init_answer());
    let (_, out) = feed(&mut n, json!({"id": out[1]["id"], "result": {"thread": {"id": "t-1"}}}));
    let (events, _) = feed(&mut n, json!({"id": out[0]["id"], "error": {"code": -32600, "message": "bad input"}}));
    let end = events.last().unwrap();
    assert_eq!(end.stop_reason, Some(StopReason::Error));
    assert!(end.text.as_deref().unwrap().contains("turn/start: bad input"));
}

#[test]
fn replayed_output_sends_nothing_and_ids_move_past_it() {
    // A daemon restart re-feeds stored output to a fresh normalizer: nothing may go out.
    let mut n = AppServerNormalizer::default();
    n.begin_turn(1, "");
    for v in [init_answer(), json!({"id": 2, "result": {"thread": {"id": "t-1"}}}), json!({"id": 3, "result": {"turn": {"id": "u-1"}}})] {
        n.stdout_line(&v.to_string());
    }
    assert!(n.take_outgoing().is_empty());
    assert_eq!(n.session_id().as_deref(), Some("t-1"));
    // The re-fed turn had started: a process launched now must not start it again.
    let env = BTreeMap::new();
    let mut respawned = AppServerNormalizer::default();
    respawned.begin_turn(1, "");
    respawned.stdout_line(&json!({"method": "turn/started", "params": {"turn": {"id": "u-1"}}}).to_string());
    respawned.launched(&ctx(Some("t-1"), None, &env));
    let (_, out) = feed(&mut respawned, init_answer());
    let (_, out) = feed(&mut respawned, json!({"id": out[1]["id"], "result": {"thread": {"id": "t-1"}}}));
    assert!(out.is_empty(), "{out:?}");
    let line: Value = serde_json::from_str(&n.interrupt_input().unwrap()).unwrap();
    assert_eq!(line["params"]["turnId"], "u-1");
    assert!(line["id"].as_i64().unwrap() > 3);
}

#[test]
fn deltas_are_hidden_pieces_and_the_answer_comes_once() {
    let (mut n, _) = started(None);
    let mut events = Vec::new();
    for piece in ["Hel", "lo"] {
        events.extend(feed(&mut n, json!({"method": "item/agentMessage/delta", "params": {"itemId": "m", "delta": piece}})).0);
    }
    let done = json!({"type": "agentMessage", "id": "m", "text": "Hello"});
    events.extend(feed(&mut n, json!({"method": "item/completed", "params": {"item": done}})).0);
    let usage = json!({"total": {"inputTokens": 3, "outputTokens": 1, "cachedInputTokens": 0, "totalTokens": 4, "reasoningOutputTokens": 0},
        "last": {"inputTokens": 3, "outputTokens": 1, "cachedInputTokens": 0, "totalTokens": 4, "reasoningOutputTokens": 0}});
    events.extend(
        feed(&mut n, json!({"method": "thread/tokenUsage/updated", "params": {"threadId": "t-1", "turnId": "u-1", "tokenUsage": usage}})).0,
    );
    events
        .extend(feed(&mut n, json!({"method": "turn/completed", "params": {"turn": {"id": "u-1", "status": "completed", "items": []}}})).0);
    let shown: Vec<_> = events.iter().filter(|e| e.category == spaces_sdk::Category::Message).filter_map(|e| e.text.as_deref()).collect();
    assert_eq!(shown, ["Hello"]);
    let pieces: Vec<_> = events.iter().filter(|e| e.kind == EventKind::MessageDelta).filter_map(|e| e.text.as_deref()).collect();
    assert_eq!(pieces, ["Hel", "lo"]);
    let usage = events.iter().find(|e| e.kind == EventKind::Usage).unwrap().usage.clone().unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (Some(3), Some(1)));
    assert_eq!(events.last().unwrap().text.as_deref(), Some("Hello"));
}
