//! One contract for every harness: the same situation gives the same events, whichever CLI
//! produced the output.
//!
//! Each row of [`cases`] is a situation written once as a script of [`Step`]s ("the session
//! starts", "a tool call starts", "the process is killed by signal 9"). A [`Wire`] per harness
//! spells the steps in its CLI's own output format; the script runs through a fresh normalizer
//! of every harness in [`spaces_harnesses::all`] and the same expectations apply to all:
//!
//! - the *story* of the run (every event except hidden control lines, `other` or `notice`, and
//!   `usage`, which the CLIs report differently), each as `kind category [tool_status|stop_reason]`, equals the
//!   row's `story` exactly;
//! - the row's `check`, if any (texts such as the final answer or the exit code in a reason);
//! - the rules every run keeps ([`invariants`]): each non-blank stdout line gives at least one
//!   event and its first event carries the line as `raw`; activity events have a one-line
//!   summary of at most 160 chars; every event belongs to the turn in flight; a `tool_update`
//!   names a tool that was called; a turn that ended is no longer in flight.
//!
//! A harness added to `all()` fails here until it has a [`Wire`] (see [`wire_for`]) and passes
//! every row. Spec: API reference `agent_events` (kinds, categories, stop reasons); CASES.md
//! E11, E12, E14, R35.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use spaces_harnesses::{EventDraft, ExitInfo, Harness};
use spaces_sdk::{Category, EventKind};

// ---- the steps of a situation -------------------------------------------------------------------

/// How the agent process ended, as the supervisor reports it.
#[derive(Debug, Clone, Copy)]
enum End {
    /// Exited normally with this code.
    Code(i32),
    /// Killed by this signal (nobody asked).
    Signal(i32),
    /// The caller stopped the run (SIGTERM to the group).
    Stopped,
    /// The process never ran or its status is unknown (neither code nor signal).
    Unknown,
}

impl End {
    fn info(self, stderr_tail: &str) -> ExitInfo {
        let mut exit = ExitInfo { stderr_tail: stderr_tail.to_owned(), ..ExitInfo::default() };
        match self {
            End::Code(c) => exit.code = Some(c),
            End::Signal(s) => exit.signal = Some(s),
            End::Stopped => {
                exit.signal = Some(15);
                exit.stop_requested = true;
            }
            End::Unknown => {}
        }
        exit
    }
}

/// One thing that happens to a run, independent of the CLI.
#[derive(Debug, Clone)]
enum Step {
    /// The daemon begins turn `n` with this prompt.
    Begin(u32, &'static str),
    /// The CLI's lines that open a turn's session (Claude `system/init`; Codex `thread.started`
    /// and `turn.started`).
    Init,
    /// The agent says something (a complete assistant message).
    Text(&'static str),
    /// A shell tool call with this id starts.
    ToolStart(&'static str),
    /// The tool call with this id finishes, successfully or not.
    ToolDone(&'static str, bool),
    /// The CLI's final line of a successful turn whose answer is this text.
    Result(&'static str),
    /// This exact stdout line, whatever the harness.
    Line(&'static str),
    /// A well-formed line of a type this CLI version does not know.
    UnknownType,
    /// A stderr line.
    Stderr(&'static str),
    /// The caller asks to interrupt.
    Interrupt,
    /// What the CLI does after an interrupt reaches it mid-turn, up to its process ending.
    InterruptTakesEffect,
    /// The process ends.
    Exit(End),
}

/// What a step becomes for one harness: a stdout line, or the process ending.
enum Input {
    Stdout(String),
    Exit(ExitInfo),
}

/// A harness's output format for the steps of the contract.
trait Wire {
    /// Lines that open a turn's session.
    fn init(&self) -> Vec<String>;
    /// A complete assistant message.
    fn text(&self, text: &str) -> Vec<String>;
    /// A shell tool call (`echo hi`) starting.
    fn tool_start(&self, id: &str) -> Vec<String>;
    /// That tool call finishing.
    fn tool_done(&self, id: &str, ok: bool) -> Vec<String>;
    /// The final line of a successful turn (the answer was the last `text`).
    fn result(&self, answer: &str) -> Vec<String>;
    /// A line of a type the CLI does not have.
    fn unknown_type(&self) -> String;
    /// What the real CLI prints after an interrupt mid-turn, and how its process then ends.
    fn interrupt_takes_effect(&self) -> Vec<Input>;
}

/// Claude Code `--output-format stream-json --verbose` (2.1.197).
struct ClaudeWire;

impl Wire for ClaudeWire {
    fn init(&self) -> Vec<String> {
        vec![json!({"type": "system", "subtype": "init", "cwd": "/w", "session_id": "sid-1",
            "model": "m", "tools": []})
        .to_string()]
    }

    fn text(&self, text: &str) -> Vec<String> {
        vec![json!({"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}}).to_string()]
    }

    fn tool_start(&self, id: &str) -> Vec<String> {
        vec![json!({"type": "assistant", "message": {"content": [{"type": "tool_use", "id": id,
            "name": "Bash", "input": {"command": "echo hi"}}]}})
        .to_string()]
    }

    fn tool_done(&self, id: &str, ok: bool) -> Vec<String> {
        vec![json!({"type": "user", "message": {"content": [{"type": "tool_result",
            "tool_use_id": id, "content": if ok { "hi" } else { "exit 1" }, "is_error": !ok}]}})
        .to_string()]
    }

    fn result(&self, answer: &str) -> Vec<String> {
        vec![json!({"type": "result", "subtype": "success", "is_error": false, "result": answer,
            "session_id": "sid-1", "usage": {"input_tokens": 3, "output_tokens": 1}})
        .to_string()]
    }

    fn unknown_type(&self) -> String {
        json!({"type": "brand_new_event", "payload": {"x": 1}}).to_string()
    }

    /// The interrupt `control_request` is acknowledged, the turn ends with an aborted `result`;
    /// the process would stay for the next turn, and exits 0 when its stdin closes.
    fn interrupt_takes_effect(&self) -> Vec<Input> {
        vec![
            Input::Stdout(
                json!({"type": "control_response", "response": {"subtype": "success",
                    "request_id": "spaces-interrupt"}})
                .to_string(),
            ),
            Input::Stdout(
                json!({"type": "result", "subtype": "error_during_execution", "is_error": true,
                    "terminal_reason": "aborted_tools", "errors": [], "session_id": "sid-1"})
                .to_string(),
            ),
            Input::Exit(End::Code(0).info("")),
        ]
    }
}

/// `codex exec --json` (codex-cli 0.171.0).
struct CodexWire;

impl CodexWire {
    fn command(id: &str, status: &str, exit_code: Option<i32>, output: &str) -> serde_json::Value {
        json!({"id": id, "type": "command_execution", "command": "/bin/bash -lc 'echo hi'",
            "aggregated_output": output, "exit_code": exit_code, "status": status})
    }
}

impl Wire for CodexWire {
    fn init(&self) -> Vec<String> {
        vec![json!({"type": "thread.started", "thread_id": "t-1"}).to_string(), json!({"type": "turn.started"}).to_string()]
    }

    fn text(&self, text: &str) -> Vec<String> {
        vec![json!({"type": "item.completed", "item": {"id": "msg", "type": "agent_message",
            "text": text}})
        .to_string()]
    }

    fn tool_start(&self, id: &str) -> Vec<String> {
        vec![json!({"type": "item.started", "item": Self::command(id, "in_progress", None, "")}).to_string()]
    }

    fn tool_done(&self, id: &str, ok: bool) -> Vec<String> {
        let item = if ok { Self::command(id, "completed", Some(0), "hi\n") } else { Self::command(id, "failed", Some(1), "exit 1\n") };
        vec![json!({"type": "item.completed", "item": item}).to_string()]
    }

    fn result(&self, _answer: &str) -> Vec<String> {
        vec![json!({"type": "turn.completed", "usage": {"input_tokens": 3, "output_tokens": 1}}).to_string()]
    }

    fn unknown_type(&self) -> String {
        json!({"type": "thread.renamed", "title": "x"}).to_string()
    }

    /// SIGINT to the group: nothing more on stdout, the process exits 1 (HARNESS-NOTES).
    fn interrupt_takes_effect(&self) -> Vec<Input> {
        vec![Input::Exit(End::Code(1).info(""))]
    }
}

/// The Agent Client Protocol (opencode, Gemini CLI): JSON-RPC lines. The normalizer numbers
/// Spaces's requests: `initialize` 0 (the launch plan's first line), `session/new` 1, the first
/// `session/prompt` 2. The session opens once per process: a later turn's "init" prints
/// nothing (the normalizer reports the session going on when the turn begins).
struct AcpWire {
    inits: std::cell::Cell<u32>,
}

impl AcpWire {
    fn update(update: serde_json::Value) -> String {
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s-1", "update": update}}).to_string()
    }
}

impl Wire for AcpWire {
    fn init(&self) -> Vec<String> {
        let n = self.inits.get();
        self.inits.set(n + 1);
        if n > 0 {
            return Vec::new();
        }
        vec![
            json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": {"loadSession": false}}}).to_string(),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s-1"}}).to_string(),
        ]
    }

    fn text(&self, text: &str) -> Vec<String> {
        vec![Self::update(json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}))]
    }

    fn tool_start(&self, id: &str) -> Vec<String> {
        vec![Self::update(json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": "echo hi", "kind": "execute",
            "status": "pending", "rawInput": {"command": "echo hi"}}))]
    }

    fn tool_done(&self, id: &str, ok: bool) -> Vec<String> {
        vec![Self::update(json!({"sessionUpdate": "tool_call_update", "toolCallId": id,
            "status": if ok { "completed" } else { "failed" },
            "content": [{"type": "content", "content": {"type": "text", "text": if ok { "hi" } else { "exit 1" }}}]}))]
    }

    fn result(&self, _answer: &str) -> Vec<String> {
        vec![json!({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn",
            "usage": {"inputTokens": 3, "outputTokens": 1, "totalTokens": 4}}})
        .to_string()]
    }

    fn unknown_type(&self) -> String {
        Self::update(json!({"sessionUpdate": "brand_new_update", "x": 1}))
    }

    /// `session/cancel` reaches the agent: the prompt is answered `cancelled`; the process
    /// would stay for the next prompt, and exits 0 when its stdin closes.
    fn interrupt_takes_effect(&self) -> Vec<Input> {
        vec![
            Input::Stdout(json!({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "cancelled"}}).to_string()),
            Input::Exit(End::Code(0).info("")),
        ]
    }
}

/// `codex app-server` (codex-cli 0.171.0): JSON-RPC lines without `jsonrpc`. A session opens
/// with the answer to `thread/start` (the normalizer reads the thread from the answer's shape when
/// it did not send the request itself, as here) and `turn/started`; a turn ends with
/// `thread/tokenUsage/updated` and `turn/completed`.
struct AppServerWire;

impl AppServerWire {
    fn note(method: &str, params: serde_json::Value) -> String {
        json!({"method": method, "params": params}).to_string()
    }

    fn command(id: &str, status: &str, exit_code: Option<i32>, output: Option<&str>) -> serde_json::Value {
        json!({"type": "commandExecution", "id": id, "command": "/bin/bash -lc 'echo hi'", "cwd": "/w",
            "commandActions": [], "status": status, "aggregatedOutput": output, "exitCode": exit_code})
    }
}

impl Wire for AppServerWire {
    fn init(&self) -> Vec<String> {
        vec![
            json!({"id": 2, "result": {"thread": {"id": "t-1"}}}).to_string(),
            Self::note("turn/started", json!({"threadId": "t-1", "turn": {"id": "u-1", "status": "inProgress", "items": []}})),
        ]
    }

    fn text(&self, text: &str) -> Vec<String> {
        vec![
            Self::note("item/agentMessage/delta", json!({"threadId": "t-1", "turnId": "u-1", "itemId": "msg", "delta": text})),
            Self::note(
                "item/completed",
                json!({"threadId": "t-1", "turnId": "u-1", "item": {"type": "agentMessage", "id": "msg", "text": text}}),
            ),
        ]
    }

    fn tool_start(&self, id: &str) -> Vec<String> {
        vec![Self::note("item/started", json!({"threadId": "t-1", "turnId": "u-1", "item": Self::command(id, "inProgress", None, None)}))]
    }

    fn tool_done(&self, id: &str, ok: bool) -> Vec<String> {
        let item =
            if ok { Self::command(id, "completed", Some(0), Some("hi\n")) } else { Self::command(id, "failed", Some(1), Some("exit 1\n")) };
        vec![Self::note("item/completed", json!({"threadId": "t-1", "turnId": "u-1", "item": item}))]
    }

    fn result(&self, _answer: &str) -> Vec<String> {
        let b = json!({"inputTokens": 3, "outputTokens": 1, "cachedInputTokens": 0, "reasoningOutputTokens": 0, "totalTokens": 4});
        vec![
            Self::note("thread/tokenUsage/updated", json!({"threadId": "t-1", "turnId": "u-1", "tokenUsage": {"total": b, "last": b}})),
            Self::note("turn/completed", json!({"threadId": "t-1", "turn": {"id": "u-1", "status": "completed", "items": []}})),
        ]
    }

    fn unknown_type(&self) -> String {
        Self::note("thread/brandNew", json!({"threadId": "t-1"}))
    }

    /// `turn/interrupt` is answered and the turn completes `interrupted` within ~20 ms; the
    /// process would stay for the next turn, and exits 0 when its stdin closes.
    fn interrupt_takes_effect(&self) -> Vec<Input> {
        vec![
            Input::Stdout(json!({"id": 4, "result": {}}).to_string()),
            Input::Stdout(Self::note(
                "turn/completed",
                json!({"threadId": "t-1", "turn": {"id": "u-1", "status": "interrupted", "items": []}}),
            )),
            Input::Exit(End::Code(0).info("")),
        ]
    }
}

/// Every harness the contract holds: [`spaces_harnesses::all`] (the ACP harnesses and Codex on
/// `codex app-server` among them; kept explicit so none can drop out of the table unnoticed).
fn harnesses() -> Vec<&'static dyn Harness> {
    spaces_harnesses::all()
}

/// The wire of a harness. A harness without one fails the contract: add it here.
fn wire_for(harness: &dyn Harness) -> Box<dyn Wire> {
    match harness.id() {
        "claude-code" => Box::new(ClaudeWire),
        spaces_harnesses::openai_codex::EXEC_ID => Box::new(CodexWire),
        spaces_harnesses::openai_codex::app_server::ID => Box::new(AppServerWire),
        "opencode" | "gemini-cli" => Box::new(AcpWire { inits: std::cell::Cell::new(0) }),
        other => panic!("harness {other} has no contract wire: add one in tests/suite/contract.rs"),
    }
}

// ---- running a script -------------------------------------------------------------------------

/// What one script produced, with what is needed to check the invariants.
struct Run {
    events: Vec<EventDraft>,
    problems: Vec<String>,
}

/// Feeds `script` through a fresh normalizer of `harness`, checking the per-call rules as it goes.
fn run(harness: &dyn Harness, script: &[Step]) -> Run {
    let wire = wire_for(harness);
    let mut n = harness.normalizer();
    let mut events = Vec::new();
    let mut problems = Vec::new();
    let mut turn = 0;
    for step in script {
        let inputs = match step {
            Step::Begin(t, prompt) => {
                turn = *t;
                events.extend(n.begin_turn(*t, prompt));
                continue;
            }
            Step::Interrupt => {
                events.extend(n.interrupt_requested());
                continue;
            }
            Step::Stderr(line) => {
                let out = n.stderr_line(line);
                if !out.is_empty() {
                    problems.push(format!("stderr line {line:?} gave events {out:?}"));
                }
                continue;
            }
            Step::Init => wire.init().into_iter().map(Input::Stdout).collect(),
            Step::Text(t) => wire.text(t).into_iter().map(Input::Stdout).collect(),
            Step::ToolStart(id) => wire.tool_start(id).into_iter().map(Input::Stdout).collect(),
            Step::ToolDone(id, ok) => wire.tool_done(id, *ok).into_iter().map(Input::Stdout).collect(),
            Step::Result(a) => wire.result(a).into_iter().map(Input::Stdout).collect(),
            Step::Line(l) => vec![Input::Stdout((*l).to_owned())],
            Step::UnknownType => vec![Input::Stdout(wire.unknown_type())],
            Step::InterruptTakesEffect => wire.interrupt_takes_effect(),
            Step::Exit(end) => {
                let tail = script
                    .iter()
                    .filter_map(|s| match s {
                        Step::Stderr(l) => Some(format!("{l}\n")),
                        _ => None,
                    })
                    .collect::<String>();
                vec![Input::Exit(end.info(&tail))]
            }
        };
        for input in inputs {
            let out = match input {
                Input::Stdout(line) => {
                    let out = n.stdout_line(&line);
                    let bare = line.strip_suffix('\r').unwrap_or(&line);
                    if bare.trim().is_empty() {
                        if !out.is_empty() {
                            problems.push(format!("blank line {line:?} gave events {out:?}"));
                        }
                    } else if out.first().and_then(|e| e.raw.as_deref()) != Some(bare) {
                        problems.push(format!("line {line:?}: first event lacks raw: {out:?}"));
                    }
                    out
                }
                Input::Exit(exit) => n.process_exited(&exit),
            };
            events.extend(out);
        }
        if events.last().is_some_and(|e| e.kind == EventKind::TurnEnded) && n.turn_in_flight() {
            problems.push(format!("turn {turn} ended but is still in flight"));
        }
    }
    problems.extend(invariants(&events));
    Run { events, problems }
}

/// Rules every run keeps, whatever the situation.
fn invariants(events: &[EventDraft]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut turn = 0;
    let mut called = Vec::new();
    for e in events {
        if e.kind == EventKind::TurnStarted {
            turn = e.turn;
        }
        if e.turn != turn {
            problems.push(format!("event of turn {} during turn {turn}: {e:?}", e.turn));
        }
        if e.category == Category::Activity {
            match e.summary.as_deref() {
                Some(s) if !s.is_empty() && !s.contains('\n') && s.chars().count() <= 160 => {}
                _ => problems.push(format!("activity event without a one-line summary: {e:?}")),
            }
        }
        match e.kind {
            EventKind::ToolCall => called.push(e.tool_id.clone()),
            EventKind::ToolUpdate if !called.contains(&e.tool_id) => {
                problems.push(format!("update of a tool never called: {e:?}"));
            }
            EventKind::TurnEnded if e.stop_reason.is_none() => {
                problems.push(format!("turn_ended without stop_reason: {e:?}"));
            }
            _ => {}
        }
    }
    problems
}

/// The run's story: every event but hidden `other` and `notice` (control lines), hidden
/// `message` (a streamed answer's pieces) and `usage`
/// (reported per model call by one CLI, per turn by another), as `kind category [status|stop]`.
fn story(events: &[EventDraft]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.kind != EventKind::Usage)
        // `message_delta`s are pieces of an answer as it streams (`wording::text_delta`): an
        // answer counts once, as its visible `message`.
        .filter(|e| e.kind != EventKind::MessageDelta)
        .filter(|e| !(matches!(e.kind, EventKind::Other | EventKind::Notice) && e.category == Category::Hidden))
        .map(|e| {
            let v = serde_json::to_value(e).unwrap();
            let mut s = format!("{} {}", v["kind"].as_str().unwrap(), v["category"].as_str().unwrap());
            for key in ["tool_status", "stop_reason"] {
                if let Some(x) = v[key].as_str() {
                    s.push(' ');
                    s.push_str(x);
                }
            }
            s
        })
        .collect()
}

// ---- the table ----------------------------------------------------------------------------------

/// A further check on a case's events: a problem, or nothing.
type Check = fn(&[EventDraft]) -> Option<String>;

/// One situation and what every harness must make of it.
struct Case {
    /// What happens, in words (and the CASES.md id when there is one).
    name: &'static str,
    script: Vec<Step>,
    /// The expected [`story`].
    story: &'static [&'static str],
    /// Further checks on the events (texts); returns a problem or nothing.
    check: Option<Check>,
}

const STARTED: [&str; 2] = ["turn_started activity", "user_message user"];

fn ended(events: &[EventDraft]) -> Vec<&EventDraft> {
    events.iter().filter(|e| e.kind == EventKind::TurnEnded).collect()
}

/// The text of the only `turn_ended`, or a problem.
fn end_text(events: &[EventDraft]) -> Result<String, String> {
    match ended(events)[..] {
        [e] => Ok(e.text.clone().unwrap_or_default()),
        ref all => Err(format!("expected one turn_ended, got {}", all.len())),
    }
}

fn end_text_has(events: &[EventDraft], parts: &[&str]) -> Option<String> {
    match end_text(events) {
        Ok(t) if parts.iter().all(|p| t.contains(p)) => None,
        Ok(t) => Some(format!("turn_ended text {t:?} lacks one of {parts:?}")),
        Err(e) => Some(e),
    }
}

fn cases() -> Vec<Case> {
    use Step::*;
    vec![
        Case {
            name: "a turn that answers ends end_turn with the answer; the exit after it is activity",
            script: vec![Begin(1, "hi"), Init, Text("the answer"), Result("the answer"), Exit(End::Code(0))],
            story: &[STARTED[0], STARTED[1], "session hidden", "message message", "turn_ended activity end_turn", "exited activity"],
            check: Some(|ev| end_text_has(ev, &["the answer"])),
        },
        Case {
            name: "a tool call that completes, then the answer",
            script: vec![Begin(1, "hi"), Init, ToolStart("t1"), ToolDone("t1", true), Text("done"), Result("done")],
            story: &[
                STARTED[0],
                STARTED[1],
                "session hidden",
                "tool_call activity in_progress",
                "tool_update activity completed",
                "message message",
                "turn_ended activity end_turn",
            ],
            check: Some(|ev| {
                let ids: Vec<_> = ev.iter().filter_map(|e| e.tool_id.as_deref()).collect();
                (ids != ["t1", "t1"]).then(|| format!("tool ids {ids:?}"))
            }),
        },
        Case {
            name: "a tool call that fails does not fail the turn",
            script: vec![Begin(1, "hi"), Init, ToolStart("t1"), ToolDone("t1", false), Text("no"), Result("no")],
            story: &[
                STARTED[0],
                STARTED[1],
                "session hidden",
                "tool_call activity in_progress",
                "tool_update activity failed",
                "message message",
                "turn_ended activity end_turn",
            ],
            check: None,
        },
        Case {
            name: "E14c: a tool still open at the final result is closed failed before turn_ended",
            script: vec![Begin(1, "hi"), Init, ToolStart("t1"), Text("done"), Result("done")],
            story: &[
                STARTED[0],
                STARTED[1],
                "session hidden",
                "tool_call activity in_progress",
                "message message",
                "tool_update activity failed",
                "turn_ended activity end_turn",
            ],
            check: None,
        },
        Case {
            name: "SIGKILL mid-tool (R35): the tool is closed failed, the turn ends crashed",
            script: vec![Begin(1, "hi"), Init, ToolStart("t1"), Exit(End::Signal(9))],
            story: &[
                STARTED[0],
                STARTED[1],
                "session hidden",
                "tool_call activity in_progress",
                "tool_update activity failed",
                "turn_ended activity crashed",
                "exited activity",
            ],
            check: Some(|ev| end_text_has(ev, &["signal 9"])),
        },
        Case {
            name: "SIGKILL while the agent writes: crashed",
            script: vec![Begin(1, "hi"), Init, Text("half"), Exit(End::Signal(9))],
            story: &[STARTED[0], STARTED[1], "session hidden", "message message", "turn_ended activity crashed", "exited activity"],
            check: None,
        },
        Case {
            name: "a stop mid-tool: the tool is closed failed, the turn ends stopped",
            script: vec![Begin(1, "hi"), Init, ToolStart("t1"), Exit(End::Stopped)],
            story: &[
                STARTED[0],
                STARTED[1],
                "session hidden",
                "tool_call activity in_progress",
                "tool_update activity failed",
                "turn_ended activity stopped",
                "exited activity",
            ],
            check: None,
        },
        Case {
            name: "a stop while an interrupt is pending ends stopped (the stop is the last word)",
            script: vec![Begin(1, "hi"), Init, Interrupt, Exit(End::Stopped)],
            story: &[
                STARTED[0],
                STARTED[1],
                "session hidden",
                "cancel_requested activity",
                "turn_ended activity stopped",
                "exited activity",
            ],
            check: None,
        },
        Case {
            name: "an interrupt mid-tool: the tool is closed failed, the turn ends interrupted",
            script: vec![Begin(1, "hi"), Init, ToolStart("t1"), Interrupt, InterruptTakesEffect],
            story: &[
                STARTED[0],
                STARTED[1],
                "session hidden",
                "tool_call activity in_progress",
                "cancel_requested activity",
                "tool_update activity failed",
                "turn_ended activity interrupted",
                "exited activity",
            ],
            check: None,
        },
        Case {
            name: "an interrupt then a kill by signal still ends interrupted",
            script: vec![Begin(1, "hi"), Init, Interrupt, Exit(End::Signal(2))],
            story: &[
                STARTED[0],
                STARTED[1],
                "session hidden",
                "cancel_requested activity",
                "turn_ended activity interrupted",
                "exited activity",
            ],
            check: None,
        },
        Case {
            name: "an interrupt that loses the race to the final answer ends end_turn",
            script: vec![Begin(1, "hi"), Init, Text("made it"), Interrupt, Result("made it")],
            story: &[
                STARTED[0],
                STARTED[1],
                "session hidden",
                "message message",
                "cancel_requested activity",
                "turn_ended activity end_turn",
            ],
            check: Some(|ev| end_text_has(ev, &["made it"])),
        },
        Case {
            name: "an idle interrupt gives nothing and is never remembered",
            script: vec![Interrupt, Begin(1, "hi"), Init, Text("ok"), Result("ok"), Interrupt],
            story: &[STARTED[0], STARTED[1], "session hidden", "message message", "turn_ended activity end_turn"],
            check: None,
        },
        Case {
            name: "E11: no final result line and exit 0 is an error, not a success",
            script: vec![Begin(1, "hi"), Init, Text("partial"), Exit(End::Code(0))],
            story: &[STARTED[0], STARTED[1], "session hidden", "message message", "turn_ended activity error", "exited activity"],
            check: Some(|ev| end_text_has(ev, &["code 0"])),
        },
        Case {
            name: "E11: a JSON line cut in half is kept as hidden other with its text",
            script: vec![Begin(1, "hi"), Init, Line(r#"{"type":"assistant","message":{"content":[{"ty"#), Exit(End::Code(0))],
            story: &[STARTED[0], STARTED[1], "session hidden", "turn_ended activity error", "exited activity"],
            check: Some(|ev| {
                let cut = r#"{"type":"assistant","message":{"content":[{"ty"#;
                (!ev.iter().any(|e| e.kind == EventKind::Other && e.text.as_deref() == Some(cut)))
                    .then(|| "the cut line is not an other event with its text".to_owned())
            }),
        },
        Case {
            name: "E14b: an auth error on stderr and exit 52: error with the code and the stderr tail",
            script: vec![Begin(1, "hi"), Stderr("Error: 401 Unauthorized: invalid api key"), Exit(End::Code(52))],
            story: &[STARTED[0], STARTED[1], "turn_ended activity error", "exited activity"],
            check: Some(|ev| end_text_has(ev, &["52", "401 Unauthorized: invalid api key"])),
        },
        Case {
            name: "an exit with neither code nor signal (the process never ran) is an error",
            script: vec![Begin(1, "hi"), Exit(End::Unknown)],
            story: &[STARTED[0], STARTED[1], "turn_ended activity error", "exited activity"],
            check: None,
        },
        Case {
            name: "E12/E14d: junk, CRLF and unknown types pass as hidden other; blank lines give nothing",
            script: vec![
                Begin(1, "hi"),
                Init,
                Line("Welcome to the banner\r"),
                Line(""),
                Line("\r"),
                UnknownType,
                Text("still here"),
                Result("still here"),
            ],
            story: &[STARTED[0], STARTED[1], "session hidden", "message message", "turn_ended activity end_turn"],
            check: Some(|ev| {
                let others: Vec<_> = ev.iter().filter(|e| e.kind == EventKind::Other).filter_map(|e| e.text.as_deref()).collect();
                (!others.contains(&"Welcome to the banner")).then(|| format!("the junk line is not an other with its text: {others:?}"))
            }),
        },
        Case {
            name: "the exit of an idle process only reports itself, even when it was killed",
            script: vec![Begin(1, "hi"), Init, Text("ok"), Result("ok"), Exit(End::Signal(9))],
            story: &[STARTED[0], STARTED[1], "session hidden", "message message", "turn_ended activity end_turn", "exited activity"],
            check: None,
        },
        Case {
            name: "two turns each end once, in order",
            script: vec![Begin(1, "one"), Init, Text("1"), Result("1"), Begin(2, "two"), Init, Text("2"), Result("2")],
            story: &[
                STARTED[0],
                STARTED[1],
                "session hidden",
                "message message",
                "turn_ended activity end_turn",
                STARTED[0],
                STARTED[1],
                "session hidden",
                "message message",
                "turn_ended activity end_turn",
            ],
            check: Some(|ev| {
                let ends: Vec<_> = ended(ev).iter().map(|e| (e.turn, e.text.clone())).collect();
                let want = vec![(1, Some("1".to_owned())), (2, Some("2".to_owned()))];
                (ends != want).then(|| format!("turn ends {ends:?}"))
            }),
        },
        Case {
            name: "a turn begun while one is in flight ends that one first (error), never silently",
            script: vec![Begin(1, "one"), Init, ToolStart("t1"), Begin(2, "two"), Init, Text("2"), Result("2")],
            story: &[
                STARTED[0],
                STARTED[1],
                "session hidden",
                "tool_call activity in_progress",
                "tool_update activity failed",
                "turn_ended activity error",
                STARTED[0],
                STARTED[1],
                "session hidden",
                "message message",
                "turn_ended activity end_turn",
            ],
            check: Some(|ev| {
                let turns: Vec<_> = ended(ev).iter().map(|e| e.turn).collect();
                (turns != [1, 2]).then(|| format!("turn_ended turns {turns:?}"))
            }),
        },
    ]
}

// ---- the test -------------------------------------------------------------------------------------

#[test]
fn every_harness_meets_the_same_contract() {
    let harnesses = harnesses();
    assert!(harnesses.len() >= 2, "the contract compares harnesses: {}", harnesses.len());
    let mut failures = Vec::new();
    for case in cases() {
        for h in &harnesses {
            let Run { events, mut problems } = run(*h, &case.script);
            let got = story(&events);
            if got != case.story {
                problems.push(format!("story:\n    got  {got:?}\n    want {:?}", case.story));
            }
            if let Some(problem) = case.check.and_then(|check| check(&events)) {
                problems.push(problem);
            }
            for p in problems {
                failures.push(format!("[{}] {}: {p}", h.id(), case.name));
            }
        }
    }
    assert!(failures.is_empty(), "{} contract failure(s):\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn every_harness_has_a_contract_wire() {
    for h in harnesses() {
        // Panics with the harness id when one is missing.
        let wire = wire_for(h);
        assert!(!wire.init().is_empty(), "{}: a session opens with at least one line", h.id());
    }
}

/// Issue 13, event wording: the same situation reads the same whichever CLI produced it. The
/// summaries of turns, interrupts and tools follow `spaces_harnesses::wording` alike (a
/// finished tool as `<title> done` / `<title> failed`); `usage` is an `activity` event carrying
/// the token counts, its summary naming them; control lines (Claude's `control_response`,
/// Codex's `turn.started`) are hidden `notice` events, never a shown `other`.
#[test]
fn every_harness_words_its_events_alike() {
    use Step::*;
    let scripts: [Vec<Step>; 2] = [
        vec![
            Begin(1, "hi"),
            Init,
            ToolStart("t1"),
            ToolDone("t1", true),
            ToolStart("t2"),
            ToolDone("t2", false),
            Text("done"),
            Result("done"),
            Exit(End::Code(0)),
        ],
        vec![Begin(1, "hi"), Init, Text("partial"), Interrupt, InterruptTakesEffect],
    ];
    let mut failures = Vec::new();
    for script in &scripts {
        let mut wordings: Vec<(&str, Vec<String>)> = Vec::new();
        for h in harnesses() {
            let events = run(h, script).events;
            let mut said = Vec::new();
            let mut counted = 0;
            for e in &events {
                let summary = e.summary.clone().unwrap_or_default();
                match e.kind {
                    EventKind::TurnStarted | EventKind::TurnEnded | EventKind::CancelRequested | EventKind::ToolCall => {
                        said.push(format!("{}: {summary}", e.kind.as_str()))
                    }
                    EventKind::ToolUpdate => {
                        let title = e.tool_title.clone().unwrap_or_default();
                        let done = matches!(e.tool_status, Some(spaces_sdk::ToolStatus::Completed));
                        let head = format!("{title} {}", if done { "done" } else { "failed" });
                        if !summary.starts_with(&head) {
                            failures.push(format!("[{}] tool_update summary {summary:?} does not start with {head:?}", h.id()));
                        }
                        said.push(format!("tool_update: {head}"));
                    }
                    // Usage is compared by what it carries: an aborted turn's CLI may report
                    // none (Codex's process just exits), so it is not part of the wording.
                    EventKind::Usage => {
                        let u = e.usage.clone().unwrap_or_default();
                        if e.category != Category::Activity {
                            failures.push(format!("[{}] usage is {:?}, not activity", h.id(), e.category));
                        }
                        if u.input_tokens == Some(3) && u.output_tokens == Some(1) && summary.starts_with("tokens in 3 out 1") {
                            counted += 1;
                        }
                    }
                    EventKind::Other => failures.push(format!("[{}] a known line became other: {:?}", h.id(), e.text)),
                    _ => {}
                }
            }
            if script.iter().any(|s| matches!(s, Result(_))) && counted != 1 {
                failures.push(format!(
                    "[{}] a finished turn has {counted} usage events with its token counts in usage and summary, not 1",
                    h.id()
                ));
            }
            wordings.push((h.id(), said));
        }
        for pair in wordings.windows(2) {
            if pair[0].1 != pair[1].1 {
                failures.push(format!("{} says {:?}\n  but {} says {:?}", pair[0].0, pair[0].1, pair[1].0, pair[1].1));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
