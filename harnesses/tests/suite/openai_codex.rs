//! `openai-codex`: recorded output of the real codex-cli 0.171.0 (`tests/fixtures/openai_codex/`,
//! recorded by `testkit/examples/record_codex.rs`) replayed through the normalizer, with insta
//! snapshots of the events (`raw` left out of the snapshots; checked separately).
//!
//! The assertions are about our code: the events the normalizer makes of the recording, and the
//! launch plan each turn gets from the session id the normalizer captured (the way the daemon
//! chains `exec` and `exec resume`). What the recorded CLI sent to the model is the recording
//! itself, not something these tests can prove about Spaces.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use spaces_harnesses::openai_codex::OpenAiCodex;
use spaces_harnesses::{EventDraft, ExitInfo, Harness, LaunchContext};
use spaces_sdk::{EventKind, StopReason, ToolStatus};

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openai_codex")
}

fn read(name: &str) -> String {
    let path = fixture_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `<name>.run.json`: exit code, request paths and model-call summaries of one recorded turn.
fn run_info(name: &str) -> Value {
    serde_json::from_str(&read(&format!("{name}.run.json"))).unwrap()
}

/// One recorded process (= one turn) to replay.
struct Turn<'a> {
    fixture: &'a str,
    prompt: &'a str,
    /// Call `interrupt_requested` after the recorded stdout (the recording sent SIGINT there).
    interrupt: bool,
}

/// Replays turns in order through one normalizer, the way the daemon feeds it: `begin_turn`,
/// every stdout line, every stderr line, `process_exited` with the recorded exit code.
fn replay(turns: &[Turn<'_>]) -> Vec<EventDraft> {
    replay_with_plans(turns).0
}

/// [`replay`], plus the argv of each turn's process as the daemon would plan it: from the
/// session id the normalizer had captured when the turn began.
fn replay_with_plans(turns: &[Turn<'_>]) -> (Vec<EventDraft>, Vec<Vec<String>>) {
    let mut n = OpenAiCodex.normalizer();
    let mut out = Vec::new();
    let mut argvs = Vec::new();
    let env = BTreeMap::new();
    for (i, t) in turns.iter().enumerate() {
        let turn = i as u32 + 1;
        let session = n.session_id();
        let plan = OpenAiCodex.launch(&LaunchContext {
            run_id: "run-1",
            turn,
            prompt: t.prompt,
            session_id: session.as_deref(),
            binary: Path::new("codex"),
            cwd: Path::new("/w"),
            home: Path::new("/h"),
            run_dir: Path::new("/r"),
            model: None,
            base_url: Some("http://127.0.0.1:9"),
            env: &env,
            mcp_servers: &[],
            max_budget_usd: None,
            resume_at: None,
        });
        argvs.push(plan.argv);
        out.extend(n.begin_turn(turn, t.prompt));
        for line in lines(&read(&format!("{}.jsonl", t.fixture))) {
            out.extend(n.stdout_line(line));
        }
        if t.interrupt {
            out.extend(n.interrupt_requested());
        }
        let stderr = read(&format!("{}.stderr.txt", t.fixture));
        for line in lines(&stderr) {
            out.extend(n.stderr_line(line));
        }
        let code = run_info(t.fixture)["exit_code"].as_i64().map(|c| c as i32);
        out.extend(n.process_exited(&ExitInfo { code, signal: None, stderr_tail: stderr.clone(), stop_requested: false }));
    }
    (out, argvs)
}

/// The thread id a recording's `thread.started` line names.
fn thread_id(fixture: &str) -> String {
    let first = read(&format!("{fixture}.jsonl"));
    let v: Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    v["thread_id"].as_str().unwrap().to_owned()
}

/// The `text` of each `turn_ended`, by turn.
fn end_texts(events: &[EventDraft]) -> Vec<(u32, Option<&str>)> {
    events.iter().filter(|e| e.kind == EventKind::TurnEnded).map(|e| (e.turn, e.text.as_deref())).collect()
}

/// The `kind[(status|stop)]` of each event of `turn`, for compact sequence checks.
fn story_of_turn(events: &[EventDraft], turn: u32) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.turn == turn)
        .map(|e| {
            let v = serde_json::to_value(e).unwrap();
            let kind = v["kind"].as_str().unwrap().to_owned();
            match (v["tool_status"].as_str(), v["stop_reason"].as_str()) {
                (Some(x), _) | (_, Some(x)) => format!("{kind}({x})"),
                _ => kind,
            }
        })
        .collect()
}

/// Lines as the daemon splits them: on `\n`, an unterminated last line included.
fn lines(text: &str) -> Vec<&str> {
    let mut v: Vec<&str> = text.split('\n').collect();
    if v.last() == Some(&"") {
        v.pop();
    }
    v
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

fn turn_ends(events: &[EventDraft]) -> Vec<(u32, StopReason)> {
    events.iter().filter(|e| e.kind == EventKind::TurnEnded).map(|e| (e.turn, e.stop_reason.unwrap())).collect()
}

#[test]
fn exec_command_turn() {
    let events = replay(&[Turn { fixture: "exec_command", prompt: "Create hello.txt", interrupt: false }]);
    insta::assert_json_snapshot!("openai_codex_exec_command", without_raw(&events));
    // The visible story of the turn, in order.
    let visible: Vec<&str> = events.iter().filter(|e| e.category != spaces_sdk::Category::Hidden).map(|e| e.kind.as_str()).collect();
    assert_eq!(visible, ["turn_started", "user_message", "tool_call", "tool_update", "message", "usage", "turn_ended", "exited"]);
    let call = events.iter().find(|e| e.kind == EventKind::ToolCall).unwrap();
    assert_eq!(call.tool_kind.as_deref(), Some("execute"));
    assert_eq!(call.tool_title.as_deref(), Some(r"Run: printf 'hello\n' > hello.txt && ls -la"));
    let update = events.iter().find(|e| e.kind == EventKind::ToolUpdate).unwrap();
    assert_eq!(update.tool_status, Some(ToolStatus::Completed));
    assert_eq!(update.tool_id, call.tool_id);
    let ended = events.iter().find(|e| e.kind == EventKind::TurnEnded).unwrap();
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(ended.text.as_deref(), Some("Created hello.txt with one line."));
}

#[test]
fn exec_failed_turn_marks_the_tool_failed() {
    let events = replay(&[Turn { fixture: "exec_failed", prompt: "List missing-dir", interrupt: false }]);
    insta::assert_json_snapshot!("openai_codex_exec_failed", without_raw(&events));
    let update = events.iter().find(|e| e.kind == EventKind::ToolUpdate).unwrap();
    assert_eq!(update.tool_status, Some(ToolStatus::Failed));
    assert_eq!(turn_ends(&events), [(1, StopReason::EndTurn)]);
}

#[test]
fn apply_patch_turn_is_an_edit_tool() {
    let events = replay(&[Turn { fixture: "apply_patch", prompt: "Write notes.md", interrupt: false }]);
    insta::assert_json_snapshot!("openai_codex_apply_patch", without_raw(&events));
    let call = events.iter().find(|e| e.kind == EventKind::ToolCall).unwrap();
    assert_eq!(call.tool_kind.as_deref(), Some("edit"));
    assert!(call.tool_title.as_deref().unwrap().ends_with("/work/notes.md"));
    let update = events.iter().find(|e| e.kind == EventKind::ToolUpdate).unwrap();
    assert_eq!(update.tool_status, Some(ToolStatus::Completed));
    assert_eq!(turn_ends(&events), [(1, StopReason::EndTurn)]);
}

#[test]
fn resumed_second_turn_keeps_the_thread_and_history() {
    let (events, argvs) = replay_with_plans(&[
        Turn { fixture: "resume.turn1", prompt: "What is the answer?", interrupt: false },
        Turn { fixture: "resume.turn2", prompt: "What did I ask?", interrupt: false },
    ]);
    insta::assert_json_snapshot!("openai_codex_resume", without_raw(&events));
    assert_eq!(end_texts(&events), [(1, Some("The answer is 42.")), (2, Some("You asked about the answer; it was 42."))]);
    assert_eq!(turn_ends(&events), [(1, StopReason::EndTurn), (2, StopReason::EndTurn)]);
    // Turn 1 starts a thread; turn 2 resumes the one the normalizer captured from turn 1.
    let thread = thread_id("resume.turn1");
    assert_eq!(argvs[0][1..3], ["exec", "--json"]);
    assert_eq!(argvs[1][1..4], ["exec", "resume", thread.as_str()]);
    // The prompt itself travels on stdin (`-`), never on the command line.
    assert_eq!(argvs[1].last().map(String::as_str), Some("-"));
    let sessions: Vec<_> = events.iter().filter(|e| e.kind == EventKind::Session).map(|e| (e.turn, e.text.as_deref())).collect();
    assert_eq!(sessions, [(1, Some(thread.as_str())), (2, Some(thread.as_str()))]);
}

#[test]
fn sigint_mid_stream_ends_the_turn_interrupted_and_resume_continues() {
    let (events, argvs) = replay_with_plans(&[
        Turn { fixture: "interrupt.turn1", prompt: "Count to ten", interrupt: true },
        Turn { fixture: "interrupt.turn2", prompt: "Go on", interrupt: false },
    ]);
    insta::assert_json_snapshot!("openai_codex_interrupt", without_raw(&events));
    // SIGINT: Codex prints nothing more and exits 1; that exit is the interrupt, not a failure.
    assert_eq!(
        story_of_turn(&events, 1),
        ["turn_started", "user_message", "session", "notice", "cancel_requested", "turn_ended(interrupted)", "exited"]
    );
    assert_eq!(end_texts(&events), [(1, Some("interrupted (exit code 1)")), (2, Some("Resumed after the interrupt."))]);
    assert_eq!(turn_ends(&events), [(1, StopReason::Interrupted), (2, StopReason::EndTurn)]);
    // The session survives the interrupt: turn 2 resumes the same thread.
    let thread = thread_id("interrupt.turn1");
    assert_eq!(argvs[1][1..4], ["exec", "resume", thread.as_str()]);
}

#[test]
fn failing_endpoint_ends_the_turn_with_an_error() {
    let events = replay(&[Turn { fixture: "http_error", prompt: "Say hi", interrupt: false }]);
    insta::assert_json_snapshot!("openai_codex_http_error", without_raw(&events));
    // The `error` line is shown as it comes; `turn.failed` ends the turn once, with its message;
    // the exit 1 that follows only reports itself.
    assert_eq!(story_of_turn(&events, 1), ["turn_started", "user_message", "session", "notice", "error", "turn_ended(error)", "exited"]);
    let msg = "We’re currently experiencing high demand, which may cause temporary errors.";
    let error = events.iter().find(|e| e.kind == EventKind::Error).unwrap();
    assert_eq!((error.text.as_deref(), error.summary.as_deref()), (Some(msg), Some(msg)));
    assert_eq!(end_texts(&events), [(1, Some(msg))]);
}

#[test]
fn every_recorded_stdout_line_yields_an_event_with_raw() {
    for fixture in
        ["exec_command", "exec_failed", "apply_patch", "resume.turn1", "resume.turn2", "interrupt.turn1", "interrupt.turn2", "http_error"]
    {
        let mut n = OpenAiCodex.normalizer();
        n.begin_turn(1, "x");
        for line in lines(&read(&format!("{fixture}.jsonl"))) {
            let events = n.stdout_line(line);
            assert!(!events.is_empty(), "{fixture}: no event for {line}");
            assert!(events.iter().all(|e| e.raw.as_deref() == Some(line)), "{fixture}: {line}");
            // Bookkeeping lines are hidden `other`s named by their type; an unrecognised line
            // is an `other` carrying the whole line.
            assert!(
                !events.iter().any(|e| e.kind == EventKind::Other && e.text.as_deref() == Some(line)),
                "{fixture}: a real line fell through unrecognised: {line}"
            );
        }
    }
}

#[test]
fn activity_events_have_short_summaries() {
    let events = replay(&[
        Turn { fixture: "exec_command", prompt: "Create hello.txt", interrupt: false },
        Turn { fixture: "http_error", prompt: "Say hi", interrupt: false },
    ]);
    for e in events.iter().filter(|e| e.category == spaces_sdk::Category::Activity) {
        let s = e.summary.as_deref().unwrap_or_else(|| panic!("no summary: {e:?}"));
        assert!(!s.is_empty() && s.chars().count() <= 160 && !s.contains('\n'), "{s}");
    }
}
