//! The ACP harnesses (`opencode`, `gemini-cli`): recorded stdout of the real CLIs
//! (`tests/fixtures/acp/`, recorded by `testkit/examples/record_acp.rs` with the normalizer
//! driving the conversation) replayed through a fresh normalizer, with insta snapshots of the
//! events (`raw` left out; checked separately). `<fixture>.sent.jsonl` beside each recording is
//! what the recorder wrote on the agent's stdin.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use serde_json::Value;
use spaces_harnesses::{EventDraft, ExitInfo, Harness};
use spaces_sdk::{Category, EventKind, StopReason};

fn read(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/acp").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn harness(id: &str) -> &'static dyn Harness {
    spaces_harnesses::acp_harnesses().into_iter().find(|h| h.id() == id).unwrap()
}

/// Replays `<fixture>.jsonl` the way the recorder fed it: turn 1 begins, every line, the next
/// prompt after each `turn_ended`, an interrupt after the first piece of the answer when
/// `interrupt`, and an exit 0 at the end.
fn replay(id: &str, fixture: &str, prompts: &[&str], interrupt: bool) -> Vec<EventDraft> {
    let mut n = harness(id).normalizer();
    let mut out = n.begin_turn(1, prompts[0]);
    let mut turn = 1;
    let mut interrupted = false;
    for line in read(&format!("{fixture}.jsonl")).lines() {
        let events = n.stdout_line(line);
        assert_eq!(events.first().and_then(|e| e.raw.as_deref()), Some(line), "the first event of a line carries it");
        let ended = events.iter().any(|e| e.kind == EventKind::TurnEnded);
        let piece = events.iter().any(|e| e.kind == EventKind::MessageDelta);
        out.extend(events);
        if interrupt && !interrupted && piece {
            interrupted = true;
            out.extend(n.interrupt_requested());
        }
        if ended && turn < prompts.len() {
            turn += 1;
            out.extend(n.begin_turn(turn as u32, prompts[turn - 1]));
        }
    }
    out.extend(n.process_exited(&ExitInfo { code: Some(0), ..ExitInfo::default() }));
    out
}

fn without_raw(events: &[EventDraft]) -> Vec<EventDraft> {
    events
        .iter()
        .cloned()
        .map(|mut e| {
            e.raw = None;
            e
        })
        .collect()
}

fn ends(events: &[EventDraft]) -> Vec<StopReason> {
    events.iter().filter(|e| e.kind == EventKind::TurnEnded).filter_map(|e| e.stop_reason).collect()
}

fn answers(events: &[EventDraft]) -> Vec<&str> {
    events.iter().filter(|e| e.kind == EventKind::Message && e.category == Category::Message).filter_map(|e| e.text.as_deref()).collect()
}

/// What the recorder sent, as JSON.
fn sent(fixture: &str) -> Vec<Value> {
    read(&format!("{fixture}.sent.jsonl")).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn opencode_text() {
    let events = replay("opencode", "opencode_text", &["Say hello."], false);
    assert_eq!(ends(&events), [StopReason::EndTurn]);
    assert_eq!(answers(&events), ["Hello from the scripted model."]);
    assert!(events.iter().any(|e| e.kind == EventKind::Usage), "opencode reports usage with the prompt's answer");
    let methods: Vec<Value> = sent("opencode_text").iter().map(|m| m["method"].clone()).collect();
    assert_eq!(methods, ["initialize", "session/new", "session/prompt"]);
    insta::assert_json_snapshot!("acp_opencode_text", without_raw(&events));
}

#[test]
fn opencode_tool() {
    let events = replay("opencode", "opencode_tool", &["Make a file."], false);
    assert_eq!(ends(&events), [StopReason::EndTurn]);
    let done: Vec<_> =
        events.iter().filter(|e| e.kind == EventKind::ToolUpdate && e.tool_status == Some(spaces_sdk::ToolStatus::Completed)).collect();
    assert_eq!(done.len(), 1);
    assert!(done[0].text.as_deref().unwrap_or("").contains("hi"), "{:?}", done[0].text);
    insta::assert_json_snapshot!("acp_opencode_tool", without_raw(&events));
}

#[test]
fn opencode_two_turns() {
    let events = replay("opencode", "opencode_two_turns", &["One.", "Two."], false);
    assert_eq!(ends(&events), [StopReason::EndTurn, StopReason::EndTurn]);
    assert_eq!(answers(&events), ["First answer.", "Second answer."]);
    insta::assert_json_snapshot!("acp_opencode_two_turns", without_raw(&events));
}

#[test]
fn opencode_interrupt() {
    let events = replay("opencode", "opencode_interrupt", &["Talk slowly."], true);
    assert_eq!(ends(&events), [StopReason::Interrupted]);
    assert_eq!(sent("opencode_interrupt").iter().filter(|m| m["method"] == "session/cancel").count(), 1);
    insta::assert_json_snapshot!("acp_opencode_interrupt", without_raw(&events));
}

#[test]
fn gemini_cli_text() {
    let events = replay("gemini-cli", "gemini_cli_text", &["Say hello."], false);
    assert_eq!(ends(&events), [StopReason::EndTurn]);
    assert_eq!(answers(&events), ["Hello from the scripted model."]);
    insta::assert_json_snapshot!("acp_gemini_cli_text", without_raw(&events));
}

#[test]
fn gemini_cli_tool_asks_permission_and_is_allowed() {
    let events = replay("gemini-cli", "gemini_cli_tool", &["Make a file."], false);
    assert_eq!(ends(&events), [StopReason::EndTurn]);
    assert!(events.iter().any(|e| e.kind == EventKind::Permission));
    let answer = sent("gemini_cli_tool").into_iter().find(|m| m.get("result").is_some()).unwrap();
    assert_eq!(answer["result"]["outcome"]["outcome"], "selected");
    insta::assert_json_snapshot!("acp_gemini_cli_tool", without_raw(&events));
}

#[test]
fn gemini_cli_two_turns() {
    let events = replay("gemini-cli", "gemini_cli_two_turns", &["One.", "Two."], false);
    assert_eq!(ends(&events), [StopReason::EndTurn, StopReason::EndTurn]);
    assert_eq!(answers(&events), ["First answer.", "Second answer."]);
    insta::assert_json_snapshot!("acp_gemini_cli_two_turns", without_raw(&events));
}

#[test]
fn gemini_cli_interrupt() {
    let events = replay("gemini-cli", "gemini_cli_interrupt", &["Talk slowly."], true);
    assert_eq!(ends(&events), [StopReason::Interrupted]);
    insta::assert_json_snapshot!("acp_gemini_cli_interrupt", without_raw(&events));
}

/// Turn 1 in one process, turn 2 in a second one launched with the session id the normalizer
/// captured (the daemon's respawn): opencode loads the session (`session/load`, its replay
/// hidden); Gemini CLI gets a fresh session and a visible notice.
fn replay_resume(id: &str, fixture: &str) -> Vec<EventDraft> {
    let h = harness(id);
    let mut n = h.normalizer();
    let env = std::collections::BTreeMap::new();
    let dir = std::path::Path::new("/w");
    let mut out = n.begin_turn(1, "One.");
    for line in read(&format!("{fixture}.jsonl")).lines() {
        out.extend(n.stdout_line(line));
    }
    out.extend(n.process_exited(&ExitInfo { code: Some(0), ..ExitInfo::default() }));
    let session = n.session_id();
    let ctx = spaces_harnesses::LaunchContext {
        run_id: "r",
        turn: 2,
        prompt: "Two.",
        session_id: session.as_deref(),
        binary: dir,
        cwd: dir,
        home: dir,
        run_dir: dir,
        model: None,
        base_url: None,
        env: &env,
        mcp_servers: &[],
        max_budget_usd: None,
        resume_at: None,
    };
    n.launched(&ctx);
    out.extend(n.begin_turn(2, "Two."));
    let mut sent = Vec::new();
    for line in read(&format!("{fixture}.2.jsonl")).lines() {
        out.extend(n.stdout_line(line));
        sent.extend(n.take_outgoing());
    }
    let methods: Vec<String> =
        sent.iter().filter_map(|l| serde_json::from_str::<Value>(l).ok()?["method"].as_str().map(str::to_owned)).collect();
    let want = if id == "opencode" { ["session/load", "session/prompt"] } else { ["session/new", "session/prompt"] };
    assert_eq!(methods, want, "what the normalizer sends the second process");
    out.extend(n.process_exited(&ExitInfo { code: Some(0), ..ExitInfo::default() }));
    out
}

#[test]
fn opencode_resume_loads_the_session_in_a_new_process() {
    let events = replay_resume("opencode", "opencode_resume");
    assert_eq!(ends(&events), [StopReason::EndTurn, StopReason::EndTurn]);
    assert_eq!(answers(&events), ["First answer.", "Second answer."], "the replayed history is no new answer");
    insta::assert_json_snapshot!("acp_opencode_resume", without_raw(&events));
}

#[test]
fn gemini_cli_resume_is_a_fresh_session_with_a_notice() {
    let events = replay_resume("gemini-cli", "gemini_cli_resume");
    assert_eq!(ends(&events), [StopReason::EndTurn, StopReason::EndTurn]);
    assert!(events.iter().any(|e| e.kind == EventKind::Notice && e.category == Category::Activity));
    insta::assert_json_snapshot!("acp_gemini_cli_resume", without_raw(&events));
}
