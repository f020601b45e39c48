//! `openai-codex` on `codex app-server`: recorded conversations of the real codex-cli 0.171.0
//! (`tests/fixtures/openai_codex_app_server/`, recorded by
//! `testkit/examples/record_codex_app_server.rs`, which drove the server with this normalizer)
//! replayed through a fresh normalizer, with insta snapshots of the events (`raw` left out).
//!
//! Each fixture is `<name>.jsonl` (the server's stdout), `<name>.stderr.txt`, and
//! `<name>.driver.jsonl`: the calls the recorder made on the normalizer, in order. The replay
//! makes the same calls and checks that the normalizer asks to write exactly the lines that
//! were written to the real server (`sent`): the conversation is deterministic given what the
//! server said, so a change to it shows here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use spaces_harnesses::openai_codex::app_server::AppServerNormalizer;
use spaces_harnesses::{EventDraft, ExitInfo, LaunchContext, Normalizer};
use spaces_sdk::{Category, EventKind, StopReason, ToolStatus};

fn read(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openai_codex_app_server").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What a replay gave: the events, the lines the normalizer asked to write, and the lines the
/// recording wrote.
struct Replay {
    events: Vec<EventDraft>,
    sent: Vec<String>,
    recorded_sent: Vec<String>,
}

fn replay(name: &str) -> Replay {
    let stdout = read(&format!("{name}.jsonl"));
    let mut lines = stdout.lines();
    let stderr = read(&format!("{name}.stderr.txt"));
    let env = BTreeMap::new();
    let mut n = AppServerNormalizer::default();
    let (mut events, mut sent, mut recorded_sent) = (Vec::new(), Vec::new(), Vec::new());
    let mut prompt = String::new();
    let mut turn = 0;
    for op in read(&format!("{name}.driver.jsonl")).lines() {
        let op: Value = serde_json::from_str(op).unwrap();
        match op["op"].as_str().unwrap() {
            "begin" => {
                turn = op["turn"].as_u64().unwrap() as u32;
                prompt = op["text"].as_str().unwrap().to_owned();
                events.extend(n.begin_turn(turn, &prompt));
            }
            "launched" => {
                let cwd = PathBuf::from(op["cwd"].as_str().unwrap());
                n.launched(&LaunchContext {
                    run_id: "run-1",
                    turn,
                    prompt: &prompt,
                    session_id: op["session"].as_str(),
                    binary: Path::new("codex"),
                    cwd: &cwd,
                    home: Path::new("/h"),
                    run_dir: Path::new("/r"),
                    model: None,
                    base_url: Some("http://127.0.0.1:9"),
                    env: &env,
                    mcp_servers: &[],
                    max_budget_usd: None,
                    resume_at: None,
                });
            }
            "stdout" => {
                for _ in 0..op["lines"].as_u64().unwrap() {
                    events.extend(n.stdout_line(lines.next().expect("the driver feeds more lines than were recorded")));
                    sent.extend(n.take_outgoing());
                }
            }
            "interrupt" => events.extend(n.interrupt_requested()),
            "interrupt_input" => sent.extend(n.interrupt_input()),
            "turn_input" => sent.extend(n.turn_input(op["text"].as_str().unwrap())),
            "sent" => recorded_sent.push(op["line"].as_str().unwrap().to_owned()),
            "exit" => {
                let code = op["code"].as_i64().map(|c| c as i32);
                events.extend(n.process_exited(&ExitInfo { code, signal: None, stderr_tail: stderr.clone(), stop_requested: false }));
            }
            other => panic!("unknown driver op {other}"),
        }
        sent.extend(n.take_outgoing());
    }
    assert!(lines.next().is_none(), "{name}: recorded lines the driver never fed");
    Replay { events, sent, recorded_sent }
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

/// `kind[(status|stop)]` of the events shown to a reader (not hidden).
fn visible(events: &[EventDraft]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.category != Category::Hidden)
        .map(|e| match (e.tool_status, e.stop_reason) {
            (Some(s), _) => format!("{}({})", e.kind.as_str(), serde_json::to_value(s).unwrap().as_str().unwrap()),
            (_, Some(r)) => format!("{}({})", e.kind.as_str(), r.as_str()),
            _ => e.kind.as_str().to_owned(),
        })
        .collect()
}

/// Checks every replay shares: the normalizer wrote what the recording wrote, every line is
/// known (no `other`), every line's first event carries it as `raw`.
fn common(name: &str, r: &Replay) {
    assert_eq!(r.sent, r.recorded_sent, "{name}: the conversation differs from the recorded one");
    let others: Vec<_> = r.events.iter().filter(|e| e.kind == EventKind::Other).map(|e| e.raw.clone()).collect();
    assert!(others.is_empty(), "{name}: lines read as other: {others:?}");
    let answers: Vec<_> = r.events.iter().filter(|e| e.category == Category::Message).collect();
    assert!(answers.iter().all(|e| e.kind == EventKind::Message), "{name}");
}

fn turn_ends(events: &[EventDraft]) -> Vec<(u32, StopReason, Option<&str>)> {
    events.iter().filter(|e| e.kind == EventKind::TurnEnded).map(|e| (e.turn, e.stop_reason.unwrap(), e.text.as_deref())).collect()
}

#[test]
fn a_text_answer_then_a_follow_up_in_the_same_process() {
    let r = replay("text");
    common("text", &r);
    insta::assert_json_snapshot!("openai_codex_app_server_text", without_raw(&r.events));
    let story = ["turn_started", "user_message", "message", "usage", "turn_ended(end_turn)"];
    let mut want: Vec<String> = story.iter().chain(story.iter()).map(|s| s.to_string()).collect();
    want.push("exited".into());
    assert_eq!(visible(&r.events), want);
    assert_eq!(
        turn_ends(&r.events),
        [(1, StopReason::EndTurn, Some("The answer is 42.")), (2, StopReason::EndTurn, Some("You asked about the answer; it was 42."))]
    );
    // One process: one handshake; turn 2 is a turn/start in the same thread.
    let methods: Vec<String> =
        r.sent.iter().map(|l| serde_json::from_str::<Value>(l).unwrap()["method"].as_str().unwrap().to_owned()).collect();
    assert_eq!(methods, ["initialized", "thread/start", "turn/start", "turn/start"]);
    let sessions: Vec<_> = r.events.iter().filter(|e| e.kind == EventKind::Session).collect();
    assert_eq!(sessions.len(), 1);
    let thread = sessions[0].text.clone().unwrap();
    for l in &r.sent[2..] {
        assert_eq!(serde_json::from_str::<Value>(l).unwrap()["params"]["threadId"], thread.as_str());
    }
    // The streamed pieces are hidden messages; the answer itself is shown once per turn.
    let shown: Vec<_> = r.events.iter().filter(|e| e.category == Category::Message).map(|e| e.text.clone().unwrap()).collect();
    assert_eq!(shown, ["The answer is 42.", "You asked about the answer; it was 42."]);
    let usage: Vec<_> = r.events.iter().filter(|e| e.kind == EventKind::Usage).map(|e| e.usage.clone().unwrap()).collect();
    assert!(usage.iter().all(|u| u.input_tokens.unwrap() > 0 && u.output_tokens.unwrap() > 0), "{usage:?}");
    assert!(usage[1].input_tokens > usage[0].input_tokens, "thread totals, as exec's turn.completed");
}

#[test]
fn a_shell_call_is_a_tool_with_its_output() {
    let r = replay("exec_command");
    common("exec_command", &r);
    insta::assert_json_snapshot!("openai_codex_app_server_exec_command", without_raw(&r.events));
    assert_eq!(
        visible(&r.events),
        [
            "turn_started",
            "user_message",
            "tool_call(in_progress)",
            "tool_update(completed)",
            "message",
            "usage",
            "turn_ended(end_turn)",
            "exited"
        ]
    );
    let call = r.events.iter().find(|e| e.kind == EventKind::ToolCall).unwrap();
    assert_eq!(call.tool_kind.as_deref(), Some("execute"));
    assert_eq!(call.tool_title.as_deref(), Some(r"Run: printf 'hello\n' > hello.txt && ls"));
    let done = r.events.iter().find(|e| e.kind == EventKind::ToolUpdate && e.tool_status == Some(ToolStatus::Completed)).unwrap();
    assert_eq!(done.tool_id, call.tool_id);
    assert_eq!(done.text.as_deref(), Some("hello.txt\n"));
    assert_eq!(turn_ends(&r.events), [(1, StopReason::EndTurn, Some("Created hello.txt with one line."))]);
}

#[test]
fn turn_interrupt_ends_the_turn_interrupted_and_the_process_takes_the_next_turn() {
    let r = replay("interrupt");
    common("interrupt", &r);
    insta::assert_json_snapshot!("openai_codex_app_server_interrupt", without_raw(&r.events));
    let ends = turn_ends(&r.events);
    assert_eq!(ends[0], (1, StopReason::Interrupted, Some("interrupted by the caller (turn/interrupt)")));
    assert_eq!(ends[1], (2, StopReason::EndTurn, Some("Resumed after the interrupt.")));
    let interrupt: Value = serde_json::from_str(r.sent.iter().find(|l| l.contains("turn/interrupt")).unwrap()).unwrap();
    let turn_id = interrupt["params"]["turnId"].as_str().unwrap();
    assert!(!turn_id.is_empty());
    // The cut-off answer was streamed (hidden pieces) and never shown as a message of turn 1.
    assert!(r.events.iter().any(|e| e.turn == 1 && e.kind == EventKind::MessageDelta));
    assert!(!r.events.iter().any(|e| e.turn == 1 && e.category == Category::Message));
}

#[test]
fn a_new_process_resumes_the_thread() {
    let r = replay("resume");
    common("resume", &r);
    insta::assert_json_snapshot!("openai_codex_app_server_resume", without_raw(&r.events));
    let requests: Vec<Value> = r.sent.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let methods: Vec<_> = requests.iter().map(|v| v["method"].as_str().unwrap()).collect();
    assert_eq!(methods, ["initialized", "thread/start", "turn/start", "initialized", "thread/resume", "turn/start"]);
    let sessions: Vec<_> = r.events.iter().filter(|e| e.kind == EventKind::Session).map(|e| e.text.clone().unwrap()).collect();
    assert_eq!(sessions.len(), 2);
    assert_eq!(sessions[0], sessions[1], "the resumed thread is the same thread");
    assert_eq!(requests[4]["params"]["threadId"], sessions[0].as_str());
    assert_eq!(turn_ends(&r.events)[1], (2, StopReason::EndTurn, Some("You asked about the answer; it was 42.")));
}

#[test]
fn an_endpoint_error_fails_the_turn_with_its_message() {
    let r = replay("http_error");
    common("http_error", &r);
    insta::assert_json_snapshot!("openai_codex_app_server_http_error", without_raw(&r.events));
    let ends = turn_ends(&r.events);
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0].1, StopReason::Error);
    // Codex's own words for a 500, as `codex exec` gives them in `turn.failed`.
    assert_eq!(ends[0].2, Some("We’re currently experiencing high demand, which may cause temporary errors."));
    assert!(r.events.iter().any(|e| e.kind == EventKind::Error), "the error notification is shown");
}
