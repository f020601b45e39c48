//! Claude Code: recorded real output replayed through the normalizer (insta snapshots), and the
//! edge cases of the contract (E11, E12, E14) on hand-written lines.
//!
//! Fixtures in `tests/fixtures/claude_code/` were recorded from `claude` 2.1.197 against the
//! scripted model server by `testkit/examples/record_claude.rs` (see its header to re-record).
//! Each has `<name>.stdout.jsonl` (stdout byte for byte) and `<name>.steps.json` (when the driver
//! began a turn or asked for an interrupt, relative to stdout lines, and how the process exited).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use serde_json::{json, Value};
use spaces_harnesses::claude_code::ClaudeCode;
use spaces_harnesses::{EventDraft, ExitInfo, Harness, Normalizer};

fn fixture(name: &str, ext: &str) -> String {
    let path: PathBuf =
        [env!("CARGO_MANIFEST_DIR"), "tests", "fixtures", "claude_code"].iter().collect::<PathBuf>().join(format!("{name}.{ext}"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Replays a recording: steps at their line positions, every stdout line, then the exit.
fn replay(name: &str) -> (Vec<EventDraft>, Box<dyn Normalizer>) {
    let stdout = fixture(name, "stdout.jsonl");
    let steps: Vec<Value> = serde_json::from_str(&fixture(name, "steps.json")).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    let mut n = ClaudeCode.normalizer();
    let mut events = Vec::new();
    let mut turn = 0;
    for i in 0..=lines.len() {
        for step in steps.iter().filter(|s| s["before_line"] == json!(i)) {
            if let Some(text) = step["begin_turn"].as_str() {
                turn += 1;
                events.extend(n.begin_turn(turn, text));
            }
            if step.get("interrupt").is_some() {
                events.extend(n.interrupt_requested());
            }
            if let Some(exit) = step.get("exit") {
                let tail = exit["stderr_tail"].as_str().unwrap_or("");
                for l in tail.lines() {
                    events.extend(n.stderr_line(l));
                }
                let info = ExitInfo {
                    code: exit["code"].as_i64().map(|c| c as i32),
                    signal: exit["signal"].as_i64().map(|c| c as i32),
                    stderr_tail: tail.to_owned(),
                    stop_requested: false,
                };
                events.extend(n.process_exited(&info));
            }
        }
        if let Some(line) = lines.get(i) {
            let out = n.stdout_line(line);
            assert!(!out.is_empty(), "line {i} of {name} yielded no event");
            assert_eq!(out[0].raw.as_deref(), Some(*line), "line {i} of {name} keeps its raw");
            events.extend(out);
        }
    }
    (events, n)
}

/// The events as JSON without `raw` (the recorded lines themselves are the fixture).
fn snapshot_view(events: &[EventDraft]) -> Value {
    let mut v = serde_json::to_value(events).unwrap();
    for e in v.as_array_mut().unwrap() {
        e.as_object_mut().unwrap().remove("raw");
    }
    v
}

/// `kind` plus tool status or stop reason, for compact sequence checks.
fn kinds(events: &[EventDraft]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let v = serde_json::to_value(e).unwrap();
            let kind = v["kind"].as_str().unwrap().to_owned();
            match (v["tool_status"].as_str(), v["stop_reason"].as_str()) {
                (Some(s), _) => format!("{kind}({s})"),
                (_, Some(r)) => format!("{kind}({r})"),
                _ => kind,
            }
        })
        .collect()
}

fn field(e: &EventDraft, key: &str) -> Value {
    serde_json::to_value(e).unwrap()[key].clone()
}

fn ended(events: &[EventDraft]) -> Vec<&EventDraft> {
    events.iter().filter(|e| field(e, "kind") == "turn_ended").collect()
}

// ---- recorded runs ----------------------------------------------------------------------------

#[test]
fn write_tool_turn_calls_write_then_answers() {
    let (events, n) = replay("write_tool");
    assert_eq!(
        kinds(&events),
        [
            "turn_started",
            "user_message",
            "session",
            "tool_call(in_progress)",
            "tool_update(completed)",
            "message",
            "usage",
            "turn_ended(end_turn)",
            "exited"
        ]
    );
    let call = &events[3];
    assert_eq!(call.tool_title.as_deref(), Some("Write hello.txt"));
    assert_eq!(call.tool_kind.as_deref(), Some("edit"));
    assert_eq!(events[4].tool_id, call.tool_id);
    assert_eq!(ended(&events)[0].text.as_deref(), Some("I wrote hello.txt."));
    assert!(n.session_id().is_some());
    assert!(!n.turn_in_flight());
    insta::assert_json_snapshot!("write_tool", snapshot_view(&events));
}

#[test]
fn followup_runs_a_second_turn_in_the_same_session() {
    let (events, n) = replay("followup");
    let turn_ends = ended(&events);
    assert_eq!(turn_ends.len(), 2);
    assert_eq!(turn_ends[0].turn, 1);
    assert_eq!(turn_ends[1].turn, 2);
    assert_eq!(turn_ends[1].text.as_deref(), Some("Doubled, that is 8."));
    let sessions: Vec<_> = events.iter().filter(|e| field(e, "kind") == "session").collect();
    assert_eq!(sessions.len(), 2, "the CLI prints init for every turn");
    assert!(sessions[1].text.as_deref().unwrap().contains(&n.session_id().unwrap()));
    insta::assert_json_snapshot!("followup", snapshot_view(&events));
}

#[test]
fn bash_tool_results_complete_or_fail() {
    let (events, _) = replay("bash_tool");
    let tools: Vec<_> = events
        .iter()
        .filter(|e| e.tool_id.is_some())
        .map(|e| (e.tool_title.clone().unwrap(), kinds(std::slice::from_ref(e))[0].clone()))
        .collect();
    assert_eq!(
        tools,
        [
            ("Run: ls".to_owned(), "tool_call(in_progress)".to_owned()),
            ("Run: ls".to_owned(), "tool_update(completed)".to_owned()),
            ("Run: cat missing.txt".to_owned(), "tool_call(in_progress)".to_owned()),
            ("Run: cat missing.txt".to_owned(), "tool_update(failed)".to_owned()),
        ]
    );
    insta::assert_json_snapshot!("bash_tool", snapshot_view(&events));
}

#[test]
fn interrupt_mid_stream_ends_interrupted_and_the_next_turn_works() {
    let (events, _) = replay("interrupt_stream");
    let turn_ends = ended(&events);
    assert_eq!(turn_ends.len(), 2);
    assert_eq!(field(turn_ends[0], "stop_reason"), "interrupted");
    assert_eq!(field(turn_ends[1], "stop_reason"), "end_turn");
    assert!(kinds(&events).contains(&"cancel_requested".to_owned()));
    // The pieces streamed before the interrupt are a prefix of the partial answer the CLI
    // prints as the turn's visible message.
    let t1: Vec<_> = events.iter().filter(|e| e.turn == 1).collect();
    let pieces: String = t1.iter().filter(|e| is_delta(e)).filter_map(|e| e.text.clone()).collect();
    let partial = t1.iter().find(|e| is_answer(e)).and_then(|e| e.text.clone()).unwrap();
    assert!(partial.starts_with(&pieces), "{pieces:?} is not a prefix of {partial:?}");
    insta::assert_json_snapshot!("interrupt_stream", snapshot_view(&events));
}

/// A piece of the answer as it streams (`--include-partial-messages`): a `message_delta`.
fn is_delta(e: &EventDraft) -> bool {
    field(e, "kind") == "message_delta" && field(e, "category") == "hidden"
}

/// The visible answer.
fn is_answer(e: &EventDraft) -> bool {
    field(e, "kind") == "message" && field(e, "category") == "message"
}

#[test]
fn partial_messages_stream_the_answer_as_hidden_pieces_before_the_one_visible_message() {
    let (events, _) = replay("partial_text");
    let answer = "The command printed hi, as asked.";
    let deltas: Vec<&EventDraft> = events.iter().filter(|e| is_delta(e)).collect();
    assert!(deltas.len() >= 2, "the slow answer comes in pieces: {:?}", kinds(&events));
    assert!(deltas.iter().all(|e| e.summary.is_none() && e.turn == 1));
    let joined: String = deltas.iter().filter_map(|e| e.text.clone()).collect();
    assert_eq!(joined, answer, "the pieces add up to the answer, no more");
    let answers: Vec<&EventDraft> = events.iter().filter(|e| is_answer(e)).collect();
    assert_eq!(answers.len(), 1, "one visible message");
    assert_eq!(answers[0].text.as_deref(), Some(answer));
    let at = |p: &dyn Fn(&EventDraft) -> bool| events.iter().position(p).unwrap();
    let last_delta = events.iter().rposition(is_delta).unwrap();
    assert!(at(&|e| e.tool_status.is_some() && field(e, "kind") == "tool_update") < at(&is_delta));
    assert!(last_delta < at(&is_answer), "the pieces come before the whole message");
    // Everything else the stream adds (message_start, input_json_delta, status, ...) is
    // bookkeeping nobody reads by default.
    let shown: Vec<String> =
        events.iter().filter(|e| field(e, "category") != "hidden").map(|e| kinds(std::slice::from_ref(e))[0].clone()).collect();
    assert_eq!(
        shown,
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
    assert_eq!(ended(&events)[0].text.as_deref(), Some(answer));
    insta::assert_json_snapshot!("partial_text", snapshot_view(&events));
}

#[test]
fn interrupt_during_a_tool_fails_the_tool_and_ends_interrupted() {
    let (events, _) = replay("interrupt_tool");
    let k = kinds(&events);
    assert!(k.contains(&"tool_update(failed)".to_owned()));
    assert!(!k.contains(&"tool_update(completed)".to_owned()));
    assert_eq!(k.iter().filter(|k| k.starts_with("turn_ended")).count(), 1);
    assert!(k.contains(&"turn_ended(interrupted)".to_owned()));
    insta::assert_json_snapshot!("interrupt_tool", snapshot_view(&events));
}

#[test]
fn failing_endpoint_ends_the_turn_with_the_api_error() {
    let (events, _) = replay("http_error");
    let end = ended(&events)[0];
    assert_eq!(field(end, "stop_reason"), "error");
    assert!(end.text.as_deref().unwrap().starts_with("API Error: 500"), "{:?}", end.text);
    let k = kinds(&events);
    assert!(k.contains(&"error".to_owned()), "the synthetic API error message is an error event");
    assert!(!k.contains(&"message".to_owned()), "it is not the agent's words");
    insta::assert_json_snapshot!("http_error", snapshot_view(&events));
}

#[test]
fn resume_of_an_unknown_session_ends_with_the_cli_error() {
    let (events, _) = replay("resume_missing");
    let end = ended(&events)[0];
    assert_eq!(field(end, "stop_reason"), "error");
    assert!(end.text.as_deref().unwrap().contains("No conversation found"));
    insta::assert_json_snapshot!("resume_missing", snapshot_view(&events));
}

// ---- contract edge cases ----------------------------------------------------------------------

const INIT: &str = r#"{"type":"system","subtype":"init","cwd":"/w","session_id":"sid-1","model":"m","tools":[]}"#;

fn started() -> Box<dyn Normalizer> {
    let mut n = ClaudeCode.normalizer();
    n.begin_turn(1, "go");
    n
}

#[test]
fn case_e11_long_output_without_result_then_exit_0_ends_error_and_keeps_every_line() {
    let mut n = started();
    let mut events = n.stdout_line(INIT);
    let text = "x".repeat(180);
    let line = json!({"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}}).to_string();
    let count = 200_000 / line.len() + 1;
    for _ in 0..count {
        events.extend(n.stdout_line(&line));
    }
    // The final line came without its newline; the supervisor still hands it over.
    events.extend(n.stdout_line(r#"{"type":"assistant","message":{"content":[{"type":"text","text":"last"}]}}"#));
    events.extend(n.process_exited(&ExitInfo { code: Some(0), ..ExitInfo::default() }));

    let k = kinds(&events);
    assert_eq!(k.iter().filter(|k| *k == "message").count(), count + 1);
    assert_eq!(k[k.len() - 2..], ["turn_ended(error)", "exited"]);
    let end = ended(&events)[0];
    assert!(end.text.as_deref().unwrap().contains("exited with code 0"), "{:?}", end.text);
    assert!(!n.turn_in_flight());
}

#[test]
fn case_e11_json_cut_at_64k_becomes_other_with_its_text() {
    let mut n = started();
    let full = json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "y".repeat(70_000)}]}}).to_string();
    let cut = &full[..65_536];
    let events = n.stdout_line(cut);
    assert_eq!(kinds(&events), ["other"]);
    assert_eq!(events[0].text.as_deref(), Some(cut));
    let exit = n.process_exited(&ExitInfo { code: Some(0), ..ExitInfo::default() });
    assert_eq!(kinds(&exit), ["turn_ended(error)", "exited"]);
}

#[test]
fn case_e12_crlf_lines_parse_and_capture_the_session() {
    let mut n = started();
    let init = n.stdout_line(&format!("{INIT}\r"));
    assert_eq!(kinds(&init), ["session"]);
    assert_eq!(n.session_id().as_deref(), Some("sid-1"));
    let result =
        n.stdout_line("{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"ok\",\"session_id\":\"sid-1\"}\r");
    assert_eq!(kinds(&result), ["usage", "turn_ended(end_turn)"]);
    assert_eq!(result[1].text.as_deref(), Some("ok"));
    let junk = n.stdout_line("Welcome to the banner\r");
    assert_eq!(kinds(&junk), ["other"]);
    assert_eq!(junk[0].text.as_deref(), Some("Welcome to the banner"));
}

#[test]
fn case_e14a_result_without_result_field_after_interrupt_ends_interrupted() {
    let mut n = started();
    n.stdout_line(INIT);
    assert_eq!(kinds(&n.interrupt_requested()), ["cancel_requested"]);
    let events = n.stdout_line(r#"{"type":"result","subtype":"error_during_execution","is_error":true,"session_id":"sid-1"}"#);
    assert_eq!(kinds(&events), ["usage", "turn_ended(interrupted)"]);

    // Even a result claiming success is the abort when it lacks the answer after an interrupt.
    n.begin_turn(2, "again");
    n.interrupt_requested();
    let events = n.stdout_line(r#"{"type":"result","subtype":"success","is_error":false}"#);
    assert_eq!(kinds(&events), ["usage", "turn_ended(interrupted)"]);
}

#[test]
fn case_e14a_aborted_terminal_reason_is_interrupted_even_without_our_request() {
    let mut n = started();
    let events = n.stdout_line(r#"{"type":"result","subtype":"error_during_execution","is_error":true,"terminal_reason":"aborted_tools"}"#);
    assert_eq!(kinds(&events), ["usage", "turn_ended(interrupted)"]);
}

#[test]
fn case_e14b_auth_error_on_stderr_and_exit_52_ends_error_with_code_and_tail() {
    let mut n = started();
    assert!(n.stderr_line("Invalid API key · Please run /login").is_empty());
    let events =
        n.process_exited(&ExitInfo { code: Some(52), stderr_tail: "Invalid API key · Please run /login\n".into(), ..ExitInfo::default() });
    assert_eq!(kinds(&events), ["turn_ended(error)", "exited"]);
    assert_eq!(
        events[0].text.as_deref(),
        Some("the agent exited with code 52 before finishing the turn: Invalid API key · Please run /login")
    );
    assert_eq!(events[1].text.as_deref(), Some("Invalid API key · Please run /login"));
    assert!(!n.turn_in_flight());
}

#[test]
fn case_e14b_stderr_lines_are_the_tail_when_the_exit_has_none() {
    let mut n = started();
    n.stderr_line("fatal: no credentials");
    let events = n.process_exited(&ExitInfo { code: Some(52), ..ExitInfo::default() });
    assert!(events[0].text.as_deref().unwrap().ends_with("code 52 before finishing the turn: fatal: no credentials"));
}

#[test]
fn case_e14c_tool_open_at_turn_end_is_closed_failed() {
    let mut n = started();
    n.stdout_line(INIT);
    let call = n.stdout_line(
        r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"make"}}]}}"#,
    );
    assert_eq!(kinds(&call), ["tool_call(in_progress)"]);
    assert_eq!(call[0].tool_title.as_deref(), Some("Run: make"));
    assert_eq!(call[0].tool_kind.as_deref(), Some("execute"));
    let events = n.stdout_line(r#"{"type":"result","subtype":"success","is_error":false,"result":"done"}"#);
    assert_eq!(kinds(&events), ["usage", "tool_update(failed)", "turn_ended(end_turn)"]);
    assert_eq!(events[1].tool_id.as_deref(), Some("t1"));

    // Same when the process dies mid-tool.
    n.begin_turn(2, "again");
    n.stdout_line(
        r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t2","name":"Read","input":{"file_path":"/w/a.rs"}}]}}"#,
    );
    let events = n.process_exited(&ExitInfo { signal: Some(9), ..ExitInfo::default() });
    assert_eq!(kinds(&events), ["tool_update(failed)", "turn_ended(crashed)", "exited"]);
    assert_eq!(events[0].tool_title.as_deref(), Some("Read a.rs"));
}

#[test]
fn case_e14d_unknown_event_type_passes_through_as_other() {
    let mut n = started();
    let line = r#"{"type":"brand_new_event","payload":{"x":1}}"#;
    let events = n.stdout_line(line);
    assert_eq!(kinds(&events), ["other"]);
    assert_eq!(events[0].text.as_deref(), Some(line));
    assert_eq!(events[0].raw.as_deref(), Some(line));
    assert_eq!(field(&events[0], "category"), "hidden");
}

#[test]
fn idle_interrupt_is_not_remembered() {
    let mut n = ClaudeCode.normalizer();
    assert!(n.interrupt_requested().is_empty());
    let ack = n.stdout_line(r#"{"type":"control_response","response":{"subtype":"success","request_id":"spaces-interrupt"}}"#);
    // The acknowledgement is a control line nobody needs: a hidden notice, not a shown `other`.
    assert_eq!(kinds(&ack), ["notice"]);
    assert_eq!(field(&ack[0], "category"), "hidden");
    n.begin_turn(1, "go");
    let events = n.stdout_line(r#"{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["boom"]}"#);
    assert_eq!(kinds(&events), ["usage", "turn_ended(error)"]);
    assert_eq!(events[1].text.as_deref(), Some("boom"));
}

#[test]
fn stop_and_interrupt_decide_how_an_exit_mid_turn_ends() {
    let mut n = started();
    let events = n.process_exited(&ExitInfo { signal: Some(15), stop_requested: true, ..ExitInfo::default() });
    assert_eq!(kinds(&events), ["turn_ended(stopped)", "exited"]);

    let mut n = started();
    n.interrupt_requested();
    let events = n.process_exited(&ExitInfo { code: Some(0), ..ExitInfo::default() });
    assert_eq!(kinds(&events), ["turn_ended(interrupted)", "exited"]);

    // Between turns an exit only reports itself.
    let events = n.process_exited(&ExitInfo { code: Some(0), ..ExitInfo::default() });
    assert_eq!(kinds(&events), ["exited"]);
}

#[test]
fn max_turns_result_ends_max_turns() {
    let mut n = started();
    let events = n.stdout_line(r#"{"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":3}"#);
    assert_eq!(kinds(&events), ["usage", "turn_ended(max_turns)"]);
}

#[test]
fn thinking_and_todos_become_thought_and_plan() {
    let mut n = started();
    let events = n.stdout_line(r#"{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"Let me see.\nMore."}]}}"#);
    assert_eq!(kinds(&events), ["thought"]);
    assert_eq!(events[0].summary.as_deref(), Some("Let me see."));
    let events = n.stdout_line(
        r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t9","name":"TodoWrite","input":{"todos":[{"content":"a","status":"completed"},{"content":"b","status":"pending"}]}}]}}"#,
    );
    assert_eq!(kinds(&events), ["tool_call(in_progress)", "plan"]);
    assert_eq!(events[1].text.as_deref(), Some("[completed] a\n[pending] b"));
}

#[test]
fn only_the_agents_own_text_pieces_stream_other_stream_events_are_control_lines() {
    let mut n = started();
    let line = |parent: &str, delta: &str| {
        format!(
            r#"{{"type":"stream_event","event":{{"type":"content_block_delta","index":0,"delta":{delta}}},"parent_tool_use_id":{parent}}}"#
        )
    };
    let own = n.stdout_line(&line("null", r#"{"type":"text_delta","text":"Hel"}"#));
    assert!(is_delta(&own[0]) && own[0].text.as_deref() == Some("Hel") && own.len() == 1);
    // A sub-agent's words are progress of its Task call, never the answer.
    let sub = n.stdout_line(&line(r#""toolu_1""#, r#"{"type":"text_delta","text":"sub"}"#));
    let thinking = n.stdout_line(&line("null", r#"{"type":"thinking_delta","thinking":"hmm"}"#));
    let empty = n.stdout_line(&line("null", r#"{"type":"text_delta","text":""}"#));
    for (events, summary) in [
        (&sub, "stream_event content_block_delta text_delta"),
        (&thinking, "stream_event content_block_delta thinking_delta"),
        (&empty, "stream_event content_block_delta text_delta"),
    ] {
        assert_eq!((kinds(events), field(&events[0], "category")), (vec!["notice".to_owned()], json!("hidden")));
        assert_eq!(events[0].summary.as_deref(), Some(summary));
    }
    let status = n.stdout_line(r#"{"type":"system","subtype":"status","status":"requesting"}"#);
    assert_eq!((field(&status[0], "category"), status[0].summary.as_deref()), (json!("hidden"), Some("status: requesting")));
}

#[test]
fn harness_identity() {
    assert_eq!(ClaudeCode.id(), "claude-code");
    let spec = ClaudeCode.install_spec();
    assert_eq!(spec.packages, ["@anthropic-ai/claude-code@2.1.197"]);
    assert_eq!(spec.binary, "node_modules/@anthropic-ai/claude-code-linux-x64/claude");
    assert!(spaces_harnesses::by_id("claude-code").is_some());
}
