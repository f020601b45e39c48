//! `session/update` notifications to events (ACP schema `SessionUpdate`, discriminated by
//! `sessionUpdate`), and the answer that streams in pieces.
//!
//! - `agent_message_chunk`: each piece is a `message_delta` with the piece as text
//!   ([`wording::text_delta`], as Claude Code's partial messages); the whole answer becomes one
//!   visible `message` when it is over: at the next update of another kind, a permission request,
//!   an interrupt, the prompt's answer, or the process's end (`AcpNormalizer::flush`). ACP has
//!   no "message complete" update, so that is where an answer ends.
//! - `agent_thought_chunk`: pieces are hidden control lines; the whole thought becomes one
//!   `thought` (activity) at the same boundaries.
//! - `tool_call`: a `tool_call` (`in_progress`; ACP `pending` too), titled like the other
//!   harnesses (`Run: <command>` for kind `execute`, else the agent's title); one already
//!   `completed`/`failed` also gets its `tool_update`.
//! - `tool_call_update`: `completed`/`failed` close the tool (`tool_update` with its output as
//!   text); an `in_progress` one with a new title or content is an `in_progress` `tool_update`,
//!   anything else a control line.
//! - `plan`: a `plan` event (`[status] content` lines, `plan: D/T done`).
//! - `user_message_chunk` (an echo, or the history a `session/load` replays),
//!   `available_commands_update`, `current_mode_update`, `config_option_update`,
//!   `session_info_update`, `usage_update`: hidden control lines. While a `session/load`
//!   replays the history every update is a control line (nothing of it is new).
//! - Any other `sessionUpdate`: hidden `other` with the line.

use serde_json::Value;
use spaces_sdk::{Category, EventKind, ToolStatus};

use super::normalize::{str_of, AcpNormalizer, OpenTool};
use crate::draft::EventDraft;
use crate::wording;

/// Longest tool output kept in an event's text, in characters.
pub const TOOL_TEXT_MAX_CHARS: usize = 8000;

impl AcpNormalizer {
    /// The events of one `session/update` notification's `params`.
    pub(super) fn session_update(&mut self, params: &Value, line: &str) -> Vec<EventDraft> {
        let update = params.get("update").unwrap_or(&Value::Null);
        let kind = str_of(update, "sessionUpdate").unwrap_or("");
        if self.loading {
            return vec![wording::control(self.turn, &format!("replayed {kind}"))];
        }
        match kind {
            "agent_message_chunk" => {
                let mut out = self.flush_thought();
                match chunk_text(update) {
                    Some(piece) if !piece.is_empty() => {
                        self.answer.push_str(piece);
                        out.push(wording::text_delta(self.turn, piece));
                    }
                    _ => out.push(wording::control(self.turn, "agent_message_chunk (not text)")),
                }
                out
            }
            "agent_thought_chunk" => {
                let mut out = self.flush_answer();
                if let Some(piece) = chunk_text(update) {
                    self.thought.push_str(piece);
                }
                out.push(wording::control(self.turn, "agent_thought_chunk"));
                out
            }
            "tool_call" => {
                let mut out = self.flush();
                out.extend(self.tool_call(update));
                out
            }
            "tool_call_update" => {
                let mut out = self.flush();
                out.extend(self.tool_call_update(update));
                out
            }
            "plan" => {
                let mut out = self.flush();
                out.push(plan_event(self.turn, update));
                out
            }
            "usage_update" => {
                let used = update.get("used").and_then(Value::as_u64);
                let size = update.get("size").and_then(Value::as_u64);
                let what = match (used, size) {
                    (Some(u), Some(s)) => format!("usage_update: context {u} of {s} tokens"),
                    _ => "usage_update".to_owned(),
                };
                vec![wording::control(self.turn, &what)]
            }
            "user_message_chunk"
            | "available_commands_update"
            | "current_mode_update"
            | "config_option_update"
            | "session_info_update"
            | "current_model_update" => vec![wording::control(self.turn, kind)],
            _ => vec![EventDraft::new(self.turn, EventKind::Other).text(line)],
        }
    }

    /// Both pieces of text the agent may be streaming, each as its one whole event.
    pub(super) fn flush(&mut self) -> Vec<EventDraft> {
        let mut out = self.flush_thought();
        out.extend(self.flush_answer());
        out
    }

    /// The answer streamed so far as one visible `message` (nothing when none).
    pub(super) fn flush_answer(&mut self) -> Vec<EventDraft> {
        if self.answer.is_empty() {
            return Vec::new();
        }
        let text = std::mem::take(&mut self.answer);
        self.last_answer = Some(text.clone());
        vec![EventDraft::new(self.turn, EventKind::Message).text(text)]
    }

    fn flush_thought(&mut self) -> Vec<EventDraft> {
        if self.thought.trim().is_empty() {
            self.thought.clear();
            return Vec::new();
        }
        let text = std::mem::take(&mut self.thought);
        vec![EventDraft::new(self.turn, EventKind::Thought).summary(&text).text(text)]
    }

    fn tool_call(&mut self, update: &Value) -> Vec<EventDraft> {
        let id = str_of(update, "toolCallId").unwrap_or("").to_owned();
        let kind = str_of(update, "kind").unwrap_or("other").to_owned();
        let title = tool_title(update, &kind);
        let input = update.get("rawInput").filter(|v| !v.is_null());
        // A command's text is the command; an `execute` call announced before its command is
        // known (opencode: `pending` with only `{cwd}`) has none yet.
        let text = match input.map(|i| (command_of(i), i)) {
            Some((Some(command), _)) => command,
            Some((None, i)) if kind != "execute" => i.to_string(),
            _ => String::new(),
        };
        let mut call = EventDraft::new(self.turn, EventKind::ToolCall)
            .tool(id.clone(), Some(title.clone()), Some(kind.clone()), ToolStatus::InProgress)
            .summary(&title);
        if !text.is_empty() {
            call = call.text(cap(&text));
        }
        self.open_tools.retain(|t| t.id != id);
        self.open_tools.push(OpenTool { id, title, kind });
        let mut out = vec![call];
        if matches!(str_of(update, "status"), Some("completed" | "failed")) {
            out.extend(self.tool_call_update(update));
        }
        out
    }

    fn tool_call_update(&mut self, update: &Value) -> Vec<EventDraft> {
        let id = str_of(update, "toolCallId").unwrap_or("").to_owned();
        let mut out = Vec::new();
        if !self.open_tools.iter().any(|t| t.id == id) {
            // An update of a call never announced (or already closed): announce it first so
            // every `tool_update` names a called tool.
            out.extend(self.tool_call(&without_status(update)));
        }
        let Some(pos) = self.open_tools.iter().position(|t| t.id == id) else {
            return out;
        };
        if let Some(kind) = str_of(update, "kind") {
            self.open_tools[pos].kind = kind.to_owned();
        }
        let kind = self.open_tools[pos].kind.clone();
        let new_title = (update.get("title").is_some() || update.get("rawInput").is_some()).then(|| tool_title(update, &kind));
        if let Some(t) = new_title.clone().filter(|t| t != "tool") {
            self.open_tools[pos].title = t;
        }
        let text = output_text(update);
        match str_of(update, "status") {
            Some(status @ ("completed" | "failed")) => {
                let tool = self.open_tools.remove(pos);
                let ok = status == "completed";
                let summary = wording::tool_finished(&tool.title, ok, None, text.as_deref());
                let status = if ok { ToolStatus::Completed } else { ToolStatus::Failed };
                let mut ev = EventDraft::new(self.turn, EventKind::ToolUpdate)
                    .tool(tool.id, Some(tool.title), Some(tool.kind), status)
                    .summary(summary);
                if let Some(t) = text {
                    ev = ev.text(cap(&t));
                }
                out.push(ev);
            }
            _ if text.is_some() || new_title.is_some() => {
                let tool = &self.open_tools[pos];
                let mut ev = EventDraft::new(self.turn, EventKind::ToolUpdate)
                    .tool(tool.id.clone(), Some(tool.title.clone()), Some(tool.kind.clone()), ToolStatus::InProgress)
                    .summary(&tool.title);
                if let Some(t) = text {
                    ev = ev.text(cap(&t));
                }
                out.push(ev);
            }
            _ => out.push(wording::control(self.turn, &format!("tool_call_update {id}"))),
        }
        out
    }
}

/// The title of a tool call: `Run: <command>` for kind `execute` (the command from `rawInput`,
/// else the agent's title), else the agent's `title`, else `tool`.
pub fn tool_title(update: &Value, kind: &str) -> String {
    let title = str_of(update, "title").filter(|t| !t.trim().is_empty());
    if kind == "execute" {
        let command = update.get("rawInput").and_then(command_of);
        return match (command, title) {
            (Some(c), _) => wording::run_title(&c),
            (None, Some(t)) => wording::run_title(t),
            (None, None) => "Run".to_owned(),
        };
    }
    title.map(crate::draft::one_line).unwrap_or_else(|| "tool".to_owned())
}

/// The shell command in a tool's `rawInput` (`command` as a string or an argv list).
fn command_of(input: &Value) -> Option<String> {
    match input.get("command")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(a) => Some(a.iter().map(|x| x.as_str().map_or(x.to_string(), str::to_owned)).collect::<Vec<_>>().join(" ")),
        _ => None,
    }
}

/// The text of a tool's result: its `content` (text blocks, `diff PATH` for diffs, `terminal
/// ID` for terminals), else its `rawOutput` (a string, its `output`/`stdout`/`error`, or the JSON).
pub fn output_text(update: &Value) -> Option<String> {
    let mut parts = Vec::new();
    for item in update.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]) {
        match str_of(item, "type") {
            Some("content") => {
                if let Some(t) = item.get("content").and_then(|c| str_of(c, "text")) {
                    parts.push(t.to_owned());
                }
            }
            Some("diff") => parts.push(format!("diff {}", str_of(item, "path").unwrap_or("?"))),
            Some("terminal") => parts.push(format!("terminal {}", str_of(item, "terminalId").unwrap_or("?"))),
            _ => {}
        }
    }
    if !parts.is_empty() {
        return Some(parts.join("\n"));
    }
    let raw = update.get("rawOutput").filter(|v| !v.is_null())?;
    Some(match raw {
        Value::String(s) => s.clone(),
        _ => ["output", "stdout", "error"].iter().find_map(|k| str_of(raw, k)).map_or_else(|| raw.to_string(), str::to_owned),
    })
}

/// The `plan` update's entries as `[status] content` lines, summary `plan: D/T done`.
fn plan_event(turn: u32, update: &Value) -> EventDraft {
    let entries = update.get("entries").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    let done = entries.iter().filter(|e| str_of(e, "status") == Some("completed")).count();
    let lines: Vec<String> =
        entries.iter().map(|e| format!("[{}] {}", str_of(e, "status").unwrap_or("pending"), str_of(e, "content").unwrap_or(""))).collect();
    EventDraft::new(turn, EventKind::Plan).category(Category::Activity).summary(wording::plan(done, entries.len())).text(lines.join("\n"))
}

fn chunk_text(update: &Value) -> Option<&str> {
    let content = update.get("content")?;
    (str_of(content, "type") == Some("text")).then(|| str_of(content, "text")).flatten()
}

fn without_status(update: &Value) -> Value {
    let mut v = update.clone();
    if let Some(obj) = v.as_object_mut() {
        obj.remove("status");
    }
    v
}

/// `text` cut to [`TOOL_TEXT_MAX_CHARS`] characters (with `…` when cut).
pub fn cap(text: &str) -> String {
    if text.chars().count() <= TOOL_TEXT_MAX_CHARS {
        text.to_owned()
    } else {
        let mut out: String = text.chars().take(TOOL_TEXT_MAX_CHARS - 1).collect();
        out.push('…');
        out
    }
}
