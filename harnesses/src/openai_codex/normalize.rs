//! [`CodexNormalizer`]: `codex exec --json` lines to normalized events.
//!
//! Line types (codex-cli 0.171.0) and what they become:
//!
//! | line | events |
//! |---|---|
//! | `thread.started{thread_id}` | `session` (hidden, `text` = thread id) |
//! | `turn.started` | hidden `notice` (a control line: `turn_started` came from [`Normalizer::begin_turn`]) |
//! | `item.*` `agent_message` | `message` on completion (`item.started|updated`: hidden `notice`) |
//! | `item.*` `reasoning` | `thought` on completion |
//! | `item.*` tools (`command_execution`, `file_change`, `mcp_tool_call`, `web_search`) | `tool_call` in_progress, then `tool_update` completed/failed |
//! | `item.*` `todo_list` | `plan` |
//! | `item.*` `error` | `error` (the turn goes on) |
//! | `turn.completed{usage}` | `usage` (cumulative for the thread), then `turn_ended` `end_turn` with the last agent message |
//! | `turn.failed{error}` | `turn_ended` `error` with the message (`quota_waiting` for a provider's limit, [`crate::quota`]) |
//! | `error{message}` | `notice` for `Reconnecting...` retries, else `error`; never ends the turn (`turn.failed` or the exit does) |
//! | anything else | `other` with the line as text |
//!
//! Every event keeps its line in `raw`; a blank line yields nothing. A turn ends exactly once: at `turn.completed`,
//! `turn.failed`, or [`Normalizer::process_exited`] (each process serves one turn; one that
//! exits mid-turn, e.g. after SIGINT, which prints nothing more, ends it `interrupted`,
//! `stopped` or `error`). Tools still open when a turn ends are closed `failed`.

use serde_json::Value;
use spaces_sdk::{Category, EventKind, StopReason, ToolStatus, Usage};

use super::items::{self, ToolView};
use crate::draft::EventDraft;
use crate::harness::Normalizer;
use crate::lines::StderrTail;
use crate::plan::ExitInfo;
use crate::{ending, wording};

/// Stderr lines every run prints that say nothing about a failure (prefixes).
const HARMLESS_STDERR: [&str; 2] =
    ["Reading additional input from stdin", "WARNING: proceeding, even though we could not create PATH aliases"];

/// A tool call that started and has not finished.
#[derive(Debug, Clone)]
struct OpenTool {
    id: String,
    view: ToolView,
}

/// Per-run state of the Codex event mapping. See the module docs for the mapping.
#[derive(Debug, Default)]
pub struct CodexNormalizer {
    turn: u32,
    in_flight: bool,
    interrupt: bool,
    session: Option<String>,
    last_message: Option<String>,
    last_error: Option<String>,
    open: Vec<OpenTool>,
    stderr_tail: StderrTail,
}

impl CodexNormalizer {
    fn ev(&self, kind: EventKind) -> EventDraft {
        EventDraft::new(self.turn, kind)
    }

    fn start_turn(&mut self, turn: u32) -> EventDraft {
        self.turn = turn;
        self.in_flight = true;
        self.interrupt = false;
        self.last_message = None;
        self.last_error = None;
        self.open.clear();
        self.ev(EventKind::TurnStarted).summary(wording::turn_started(turn))
    }

    /// Close open tools as `failed` and emit the turn's one `turn_ended`.
    fn end_turn(&mut self, reason: StopReason, text: Option<String>) -> Vec<EventDraft> {
        let mut out: Vec<EventDraft> =
            std::mem::take(&mut self.open).into_iter().map(|t| items::unfinished(self.turn, t.id, t.view)).collect();
        let summary = wording::turn_ended(self.turn, reason, text.as_deref());
        let mut ended = self.ev(EventKind::TurnEnded).stop(reason).summary(summary);
        if let Some(t) = text {
            ended = ended.text(t);
        }
        out.push(ended);
        self.in_flight = false;
        self.interrupt = false;
        out
    }

    fn on_json(&mut self, v: &Value, line: &str) -> Vec<EventDraft> {
        let ty = v.get("type").and_then(Value::as_str).unwrap_or("");
        match ty {
            "thread.started" => {
                let id = items::str_field(v, "thread_id").to_owned();
                if !id.is_empty() {
                    self.session = Some(id.clone());
                }
                vec![self.ev(EventKind::Session).text(id)]
            }
            "turn.started" => {
                let mut out = Vec::new();
                if !self.in_flight {
                    // Output without a `begin_turn` (the caller did not announce the turn).
                    out.push(self.start_turn(self.turn + 1));
                }
                // Bookkeeping: the visible turn start is `begin_turn`'s `turn_started`.
                out.push(wording::control(self.turn, ty));
                out
            }
            "item.started" | "item.updated" | "item.completed" => match v.get("item") {
                Some(item) => self.on_item(ty, item),
                None => vec![other(self.turn, line)],
            },
            "turn.completed" => {
                let mut out = Vec::new();
                if let Some(usage) = v.get("usage") {
                    out.push(wording::usage_event(self.turn, Usage::from_json(usage)));
                }
                if self.in_flight {
                    // An interrupt that raced a normal finish: the final answer decides.
                    let reason = if self.interrupt && self.last_message.is_none() { StopReason::Interrupted } else { StopReason::EndTurn };
                    let text = self.last_message.clone();
                    out.extend(self.end_turn(reason, text));
                } else if out.is_empty() {
                    out.push(other(self.turn, ty));
                }
                out
            }
            "turn.failed" => {
                let msg = v
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .or_else(|| self.last_error.clone())
                    .unwrap_or_else(|| "the turn failed".to_owned());
                if !self.in_flight {
                    return vec![self.ev(EventKind::Error).text(msg.clone()).summary(msg)];
                }
                let reason = match (self.interrupt, crate::quota::is_limit(&msg)) {
                    (true, _) => StopReason::Interrupted,
                    (false, true) => StopReason::QuotaWaiting,
                    (false, false) => StopReason::Error,
                };
                self.end_turn(reason, Some(msg))
            }
            "error" => {
                let msg = items::str_field(v, "message").to_owned();
                if msg.starts_with("Reconnecting") {
                    vec![self.ev(EventKind::Notice).text(msg.clone()).summary(msg)]
                } else {
                    self.last_error = Some(msg.clone());
                    vec![self.ev(EventKind::Error).text(msg.clone()).summary(msg)]
                }
            }
            _ => vec![other(self.turn, line)],
        }
    }

    fn on_item(&mut self, phase: &str, item: &Value) -> Vec<EventDraft> {
        let id = items::str_field(item, "id").to_owned();
        let ty = items::str_field(item, "type");
        let completed = phase == "item.completed";
        if let Some(view) = items::tool_view(item) {
            return self.on_tool(phase, id, view, item);
        }
        match ty {
            "agent_message" if completed => {
                let text = items::str_field(item, "text").to_owned();
                self.last_message = Some(text.clone());
                vec![self.ev(EventKind::Message).text(text)]
            }
            "reasoning" if completed => {
                let text = items::str_field(item, "text").to_owned();
                vec![self.ev(EventKind::Thought).summary(&text).text(text)]
            }
            // Progress of a message or thought shown once it completes: bookkeeping.
            "agent_message" | "reasoning" => vec![wording::control(self.turn, &format!("{phase} {ty}"))],
            "todo_list" => {
                let (text, summary) = items::plan_text(item);
                vec![self.ev(EventKind::Plan).text(text).summary(summary)]
            }
            "error" => {
                let msg = items::str_field(item, "message").to_owned();
                vec![self.ev(EventKind::Error).text(msg.clone()).summary(msg)]
            }
            _ => vec![EventDraft::new(self.turn, EventKind::Other).text(item.to_string())],
        }
    }

    fn on_tool(&mut self, phase: &str, id: String, view: ToolView, item: &Value) -> Vec<EventDraft> {
        let known = self.open.iter().any(|t| t.id == id);
        let mut out = Vec::new();
        let title = Some(view.title.clone());
        let kind = Some(view.kind.to_owned());
        if !known {
            // First sight of this tool (a completed item may arrive without a started one).
            out.push(
                self.ev(EventKind::ToolCall).tool(id.clone(), title.clone(), kind.clone(), ToolStatus::InProgress).summary(&view.title),
            );
        }
        match phase {
            "item.completed" => {
                self.open.retain(|t| t.id != id);
                let ok = items::tool_succeeded(item);
                let status = if ok { ToolStatus::Completed } else { ToolStatus::Failed };
                let mut ev = self.ev(EventKind::ToolUpdate).tool(id, title, kind, status).summary(items::finished_summary(&view, item, ok));
                if let Some(text) = items::tool_output(item) {
                    ev = ev.text(text);
                }
                out.push(ev);
            }
            _ if known => {
                out.push(self.ev(EventKind::ToolUpdate).tool(id, title, kind, ToolStatus::InProgress).category(Category::Hidden));
            }
            _ => self.open.push(OpenTool { id, view }),
        }
        out
    }
}

/// True for the stderr lines every run prints (both Codex wires).
pub(crate) fn is_harmless(line: &str) -> bool {
    HARMLESS_STDERR.iter().any(|h| line.starts_with(h))
}

/// A hidden `other` event: an unparseable or unknown line with the line as its text, or a
/// bookkeeping line (`turn.started`, `item.started` of a message) with its type.
pub(crate) fn other(turn: u32, line: &str) -> EventDraft {
    EventDraft::new(turn, EventKind::Other).text(line)
}

impl Normalizer for CodexNormalizer {
    fn begin_turn(&mut self, turn: u32, text: &str) -> Vec<EventDraft> {
        let mut out = Vec::new();
        if self.in_flight {
            let reason = format!("turn {turn} began before turn {} ended", self.turn);
            out.extend(self.end_turn(StopReason::Error, Some(reason)));
        }
        self.stderr_tail.clear();
        out.push(self.start_turn(turn));
        out.push(self.ev(EventKind::UserMessage).text(text));
        out
    }

    fn interrupt_requested(&mut self) -> Vec<EventDraft> {
        if !self.in_flight {
            return Vec::new();
        }
        self.interrupt = true;
        vec![self.ev(EventKind::CancelRequested).summary(wording::INTERRUPT_REQUESTED)]
    }

    fn stdout_line(&mut self, line: &str) -> Vec<EventDraft> {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            // A blank line carries nothing (the raw journal keeps it).
            return Vec::new();
        }
        let events = match serde_json::from_str::<Value>(line) {
            Ok(v) if v.get("type").and_then(Value::as_str).is_some() => self.on_json(&v, line),
            _ => vec![other(self.turn, line)],
        };
        events.into_iter().map(|e| e.raw(line)).collect()
    }

    fn stderr_line(&mut self, line: &str) -> Vec<EventDraft> {
        if !is_harmless(line) {
            self.stderr_tail.push(line);
        }
        Vec::new()
    }

    fn process_exited(&mut self, exit: &ExitInfo) -> Vec<EventDraft> {
        let tail = self.stderr_tail.text_or_exit(exit, |l| !is_harmless(l));
        let mut out = Vec::new();
        if self.in_flight {
            let reason = ending::stop_reason_at_exit(exit, self.interrupt);
            let text = items::cut_off_text("codex", reason, exit, self.last_error.as_deref(), &tail);
            out.extend(self.end_turn(reason, Some(text)));
        }
        out.push(ending::exited(self.turn, exit, &tail));
        out
    }

    fn session_id(&self) -> Option<String> {
        self.session.clone()
    }

    fn turn_in_flight(&self) -> bool {
        self.in_flight
    }

    fn tool_running(&self) -> bool {
        self.in_flight && !self.open.is_empty()
    }
}
