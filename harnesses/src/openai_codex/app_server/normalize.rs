//! [`AppServerNormalizer`]: `codex app-server` lines to normalized events, and what to answer.
//!
//! The events are those of the `codex exec --json` normalizer for the same things
//! ([`crate::openai_codex::normalize`]), items being read through [`super::items::as_exec_item`]:
//!
//! | line | events |
//! |---|---|
//! | answer to `thread/start` / `thread/resume` | `session` (hidden, `text` = thread id) |
//! | answer to `initialize`, `turn/start`, `turn/interrupt`, `turn/steer`; `turn/started`, `thread/started`, status and rate-limit notifications | hidden `notice` (control line) |
//! | `item/agentMessage/delta` | `message_delta` with the piece ([`wording::text_delta`], as Claude Code's partial messages) |
//! | `item/completed` `agentMessage` | `message` |
//! | `item/completed` `reasoning` | `thought` |
//! | `item/*` tools (`commandExecution`, `fileChange`, `mcpToolCall`, `webSearch`) | `tool_call` in_progress, then `tool_update` completed/failed |
//! | `item/commandExecution/outputDelta` | hidden `tool_update` in_progress with the piece |
//! | `turn/plan/updated` | `plan` |
//! | `thread/tokenUsage/updated` | control line; its `total` is kept for the turn's `usage` |
//! | `account/rateLimits/updated` | control line; the reset of a window at 100% is kept for a quota wait |
//! | `turn/completed{status: failed}` with `codexErrorInfo: usageLimitExceeded` (or a limit's words) | `turn_ended` `quota_waiting` |
//! | `turn/diff/updated` | hidden `notice` with the diff as text (also [`AppServerNormalizer::turn_diff`]) |
//! | `turn/completed{turn: {status}}` | `usage` (thread totals, as exec's `turn.completed`), then `turn_ended`: `end_turn` with the last message, `interrupted`, or `error` with `turn.error.message` |
//! | `error{error, willRetry}` | `notice` when it will retry, else `error` (the turn goes on) |
//! | `warning`, `configWarning`, `deprecationNotice` | `notice` |
//! | a request of the server (approvals, user input) | `notice`; answered with a JSON-RPC error ([`Conversation::refuse`]) |
//! | an error answer to `thread/*` or `turn/start` | `turn_ended` `error` |
//! | anything else | `other` with the line as text |
//!
//! Every event keeps its line in `raw`; a blank line yields nothing. `turn/interrupt` ends the
//! turn with `turn/completed` `interrupted`, and items it cut off never get `item/completed`
//! (HARNESS-NOTES): tools still open when a turn ends are closed `failed`. The process exit
//! follows [`crate::ending`] like every harness.

use serde_json::Value;
use spaces_sdk::{Category, EventKind, StopReason, ToolStatus, Usage};

use super::conversation::{Conversation, Sent};
use super::items::{as_exec_item, plan_as_todo_list, reasoning_text};
use crate::draft::EventDraft;
use crate::harness::Normalizer;
use crate::lines::StderrTail;
use crate::openai_codex::items::{self as exec_items, ToolView};
use crate::openai_codex::normalize::{is_harmless, other};
use crate::plan::{ExitInfo, LaunchContext};
use crate::{ending, wording};

/// Notifications that are bookkeeping: hidden `notice` events named by their method.
const CONTROL: [&str; 14] = [
    "turn/started",
    "thread/started",
    "thread/status/changed",
    "thread/tokenUsage/updated",
    "account/rateLimits/updated",
    "remoteControl/status/changed",
    "mcpServer/startupStatus/updated",
    "serverRequest/resolved",
    "thread/name/updated",
    "thread/settings/updated",
    "thread/goal/updated",
    "thread/goal/cleared",
    "item/reasoning/summaryTextDelta",
    "item/reasoning/summaryPartAdded",
];

/// A tool call that started and has not finished.
#[derive(Debug, Clone)]
struct OpenTool {
    id: String,
    view: ToolView,
}

/// Per-run state of the app-server event mapping and dialogue. See the module docs.
#[derive(Debug, Default)]
pub struct AppServerNormalizer {
    turn: u32,
    in_flight: bool,
    interrupt: bool,
    session: Option<String>,
    last_message: Option<String>,
    last_error: Option<String>,
    /// Thread totals of the last `thread/tokenUsage/updated` of the turn in flight.
    usage: Option<Usage>,
    /// The last `turn/diff/updated` diff of the turn in flight (or the last turn).
    diff: Option<String>,
    /// When a rate-limit window at its limit resets, Unix ms (`account/rateLimits/updated`:
    /// the latest `resetsAt` of a window at 100%).
    limit_resets_at_ms: Option<u64>,
    open: Vec<OpenTool>,
    stderr_tail: StderrTail,
    conv: Conversation,
    /// Texts of `turn/steer` requests not answered yet, oldest first (the server answers its
    /// requests in order).
    steering: std::collections::VecDeque<String>,
    /// Texts of steers the server refused, for [`Normalizer::take_refused_steers`].
    refused: Vec<String>,
}

impl AppServerNormalizer {
    /// `turn/steer{threadId, expectedTurnId, input}` adding `text` to the turn in flight, when
    /// the server's turn id is known; `None` otherwise (then start a turn instead). The answer
    /// is a control line; an error answer becomes a `notice` and the text goes back to the caller
    /// ([`Normalizer::take_refused_steers`]) to run as the next turn.
    pub fn steer_input(&mut self, text: &str) -> Option<String> {
        if !self.in_flight {
            return None;
        }
        let line = self.conv.turn_steer(text)?;
        self.steering.push_back(text.to_owned());
        Some(line)
    }

    /// The whole-turn diff of the last `turn/diff/updated` (a unified diff of every file the
    /// turn changed so far), if the turn changed files.
    pub fn turn_diff(&self) -> Option<&str> {
        self.diff.as_deref()
    }

    fn ev(&self, kind: EventKind) -> EventDraft {
        EventDraft::new(self.turn, kind)
    }

    fn start_turn(&mut self, turn: u32) -> EventDraft {
        self.turn = turn;
        self.in_flight = true;
        self.interrupt = false;
        self.last_message = None;
        self.last_error = None;
        self.usage = None;
        self.diff = None;
        self.open.clear();
        self.ev(EventKind::TurnStarted).summary(wording::turn_started(turn))
    }

    /// Close open tools as `failed` and emit the turn's one `turn_ended`.
    fn end_turn(&mut self, reason: StopReason, text: Option<String>) -> Vec<EventDraft> {
        let mut out: Vec<EventDraft> =
            std::mem::take(&mut self.open).into_iter().map(|t| exec_items::unfinished(self.turn, t.id, t.view)).collect();
        let mut ended = self.ev(EventKind::TurnEnded).stop(reason).summary(wording::turn_ended(self.turn, reason, text.as_deref()));
        if let Some(t) = text {
            ended = ended.text(t);
        }
        out.push(ended);
        self.in_flight = false;
        self.interrupt = false;
        self.conv.waiting_text = None;
        out
    }

    fn control(&self, what: &str) -> Vec<EventDraft> {
        vec![wording::control(self.turn, what)]
    }

    fn on_line(&mut self, v: &Value, line: &str) -> Vec<EventDraft> {
        let method = v.get("method").and_then(Value::as_str);
        match (v.get("id"), method) {
            (Some(id), Some(method)) => self.on_server_request(&id.clone(), method),
            (None, Some(method)) => self.on_notification(method, v.get("params").unwrap_or(&Value::Null), line),
            (Some(id), None) if v.get("result").is_some() || v.get("error").is_some() => self.on_answer(&id.clone(), v),
            _ => vec![other(self.turn, line)],
        }
    }

    fn on_server_request(&mut self, id: &Value, method: &str) -> Vec<EventDraft> {
        self.conv.refuse(id, method);
        let text = format!("codex asked {method}; spaces answered that it does not handle it");
        vec![self.ev(EventKind::Notice).text(text.clone()).summary(text)]
    }

    fn on_answer(&mut self, id: &Value, v: &Value) -> Vec<EventDraft> {
        let sent = self.conv.answered(id);
        let result = v.get("result").unwrap_or(&Value::Null);
        if let Some(err) = v.get("error") {
            let msg = err.get("message").and_then(Value::as_str).unwrap_or("unknown error").to_owned();
            let method = sent.map_or("a request", Sent::method);
            let text = format!("codex app-server refused {method}: {msg}");
            return match sent {
                Some(Sent::Initialize | Sent::ThreadStart | Sent::ThreadResume | Sent::ThreadFork | Sent::TurnStart) if self.in_flight => {
                    self.conv.on_turn_completed();
                    self.end_turn(StopReason::Error, Some(text))
                }
                Some(Sent::TurnInterrupt) => vec![self.ev(EventKind::Notice).text(text.clone()).summary(text)],
                Some(Sent::TurnSteer) => {
                    // The message is not lost: the caller runs it as the next turn.
                    self.refused.extend(self.steering.pop_front());
                    let text = format!("{text}; the message runs as the next turn");
                    vec![self.ev(EventKind::Notice).text(text.clone()).summary(text)]
                }
                _ => vec![self.ev(EventKind::Error).text(text.clone()).summary(text)],
            };
        }
        if sent == Some(Sent::TurnSteer) {
            self.steering.pop_front();
        }
        let thread = result.pointer("/thread/id").and_then(Value::as_str);
        let turn = result.pointer("/turn/id").and_then(Value::as_str);
        match (sent, thread, turn) {
            (Some(Sent::Initialize), _, _) => {
                self.conv.on_initialized();
                self.control("initialize answered")
            }
            (Some(Sent::ThreadStart | Sent::ThreadResume | Sent::ThreadFork) | None, Some(thread), _) => {
                let thread = thread.to_owned();
                self.session = Some(thread.clone());
                if sent.is_some() {
                    self.conv.on_thread(&thread);
                } else {
                    // Re-fed output (no request of this normalizer): remember, send nothing.
                    self.conv.thread = Some(thread.clone());
                }
                vec![self.ev(EventKind::Session).text(thread)]
            }
            (Some(Sent::TurnStart) | None, _, Some(turn)) => {
                if self.in_flight && self.conv.turn_id.is_none() {
                    self.conv.on_turn_id(turn);
                }
                self.control("turn/start answered")
            }
            (Some(sent), _, _) => self.control(&format!("{} answered", sent.method())),
            (None, _, _) => self.control("answer"),
        }
    }

    fn on_notification(&mut self, method: &str, p: &Value, line: &str) -> Vec<EventDraft> {
        match method {
            "turn/started" => {
                let mut out = Vec::new();
                if !self.in_flight {
                    // Output without a `begin_turn` (the caller did not announce the turn).
                    out.push(self.start_turn(self.turn + 1));
                }
                if let Some(id) = p.pointer("/turn/id").and_then(Value::as_str) {
                    if self.conv.turn_id.as_deref() != Some(id) {
                        self.conv.on_turn_id(id);
                    }
                }
                out.extend(self.control(method));
                out
            }
            "item/started" | "item/completed" => match p.get("item") {
                Some(item) => self.on_item(method == "item/completed", item),
                None => vec![other(self.turn, line)],
            },
            "item/agentMessage/delta" => match p.get("delta").and_then(Value::as_str) {
                Some(piece) if !piece.is_empty() => vec![wording::text_delta(self.turn, piece)],
                _ => self.control(method),
            },
            "item/commandExecution/outputDelta" => {
                let id = p.get("itemId").and_then(Value::as_str).unwrap_or("");
                match self.open.iter().find(|t| t.id == id) {
                    Some(t) => {
                        let piece = p.get("delta").and_then(Value::as_str).unwrap_or("");
                        vec![self
                            .ev(EventKind::ToolUpdate)
                            .tool(id, Some(t.view.title.clone()), Some(t.view.kind.into()), ToolStatus::InProgress)
                            .category(Category::Hidden)
                            .text(piece)]
                    }
                    None => self.control(method),
                }
            }
            "account/rateLimits/updated" => {
                let full = ["primary", "secondary"]
                    .iter()
                    .filter_map(|w| p.pointer(&format!("/rateLimits/{w}")))
                    .filter(|w| w.get("usedPercent").and_then(Value::as_f64).is_some_and(|u| u >= 100.0))
                    .filter_map(|w| w.get("resetsAt").and_then(Value::as_u64))
                    .max();
                self.limit_resets_at_ms = full.map(|secs| secs.saturating_mul(1000));
                self.control(method)
            }
            "thread/tokenUsage/updated" => {
                if let Some(total) = p.pointer("/tokenUsage/total") {
                    self.usage = Some(usage_of(total));
                }
                self.control(method)
            }
            "turn/diff/updated" => {
                let diff = p.get("diff").and_then(Value::as_str).unwrap_or("").to_owned();
                self.diff = Some(diff.clone());
                vec![wording::control(self.turn, method).text(diff)]
            }
            "turn/plan/updated" => {
                let (text, summary) = exec_items::plan_text(&plan_as_todo_list(p));
                vec![self.ev(EventKind::Plan).text(text).summary(summary)]
            }
            "turn/completed" => self.on_turn_completed(p),
            "error" => {
                let msg = p.pointer("/error/message").and_then(Value::as_str).unwrap_or("error").to_owned();
                if p.get("willRetry").and_then(Value::as_bool).unwrap_or(false) {
                    vec![self.ev(EventKind::Notice).text(msg.clone()).summary(msg)]
                } else {
                    self.last_error = Some(msg.clone());
                    vec![self.ev(EventKind::Error).text(msg.clone()).summary(msg)]
                }
            }
            "warning" | "configWarning" | "deprecationNotice" | "guardianWarning" => {
                let msg = ["message", "summary", "details"]
                    .iter()
                    .find_map(|k| p.get(*k).and_then(Value::as_str))
                    .map_or_else(|| p.to_string(), str::to_owned);
                vec![self.ev(EventKind::Notice).text(msg.clone()).summary(format!("{method}: {msg}"))]
            }
            m if CONTROL.contains(&m) || m.starts_with("item/") => self.control(method),
            _ => vec![other(self.turn, line)],
        }
    }

    fn on_turn_completed(&mut self, p: &Value) -> Vec<EventDraft> {
        self.conv.on_turn_completed();
        if let Some(id) = p.pointer("/turn/id").and_then(Value::as_str) {
            self.conv.last_turn = Some(id.to_owned());
        }
        let mut out = Vec::new();
        if let Some(mut usage) = self.usage.take() {
            usage.duration_ms = p.pointer("/turn/durationMs").and_then(Value::as_u64);
            out.push(wording::usage_event(self.turn, usage));
        }
        if !self.in_flight {
            out.extend(self.control("turn/completed"));
            return out;
        }
        let status = p.pointer("/turn/status").and_then(Value::as_str).unwrap_or("completed");
        let error = p.pointer("/turn/error/message").and_then(Value::as_str).map(str::to_owned);
        let (reason, text) = match status {
            // Claude Code's wording for the same thing; the cut-off answer is in the message
            // pieces (hidden `message` events), never a `message` of its own.
            "interrupted" if self.interrupt => (StopReason::Interrupted, Some("interrupted by the caller (turn/interrupt)".to_owned())),
            "interrupted" => (StopReason::Interrupted, Some("codex interrupted the turn".to_owned())),
            "failed" => {
                let info = p.pointer("/turn/error/codexErrorInfo").and_then(Value::as_str).unwrap_or("");
                let limited = matches!(info, "usageLimitExceeded")
                    || error.as_deref().or(self.last_error.as_deref()).is_some_and(crate::quota::is_limit);
                let reason = match (self.interrupt, limited) {
                    (true, _) => StopReason::Interrupted,
                    (false, true) => StopReason::QuotaWaiting,
                    (false, false) => StopReason::Error,
                };
                (reason, Some(error.or_else(|| self.last_error.clone()).unwrap_or_else(|| "the turn failed".to_owned())))
            }
            // An interrupt that raced a normal finish: the final answer decides.
            _ => {
                let reason = if self.interrupt && self.last_message.is_none() { StopReason::Interrupted } else { StopReason::EndTurn };
                (reason, self.last_message.clone())
            }
        };
        out.extend(self.end_turn(reason, text));
        out
    }

    fn on_item(&mut self, completed: bool, item: &Value) -> Vec<EventDraft> {
        let ty = item.get("type").and_then(Value::as_str).unwrap_or("");
        let phase = if completed { "item/completed" } else { "item/started" };
        let Some(exec) = as_exec_item(item) else {
            return match ty {
                "plan" if completed => {
                    let text = exec_items::str_field(item, "text").to_owned();
                    vec![self.ev(EventKind::Plan).summary(&text).text(text)]
                }
                "userMessage" | "plan" | "contextCompaction" | "hookPrompt" => self.control(&format!("{phase} {ty}")),
                _ => vec![self.ev(EventKind::Other).text(item.to_string())],
            };
        };
        let id = exec_items::str_field(item, "id").to_owned();
        if let Some(view) = exec_items::tool_view(&exec) {
            return self.on_tool(completed, id, view, &exec);
        }
        match ty {
            "agentMessage" if completed => {
                let text = exec_items::str_field(item, "text").to_owned();
                self.last_message = Some(text.clone());
                vec![self.ev(EventKind::Message).text(text)]
            }
            "reasoning" if completed => {
                let text = reasoning_text(item);
                if text.trim().is_empty() {
                    return self.control(&format!("{phase} {ty}"));
                }
                vec![self.ev(EventKind::Thought).summary(&text).text(text)]
            }
            _ => self.control(&format!("{phase} {ty}")),
        }
    }

    fn on_tool(&mut self, completed: bool, id: String, view: ToolView, exec: &Value) -> Vec<EventDraft> {
        let known = self.open.iter().any(|t| t.id == id);
        let mut out = Vec::new();
        let (title, kind) = (Some(view.title.clone()), Some(view.kind.to_owned()));
        if !known {
            // First sight of this tool (a completed item may come without a started one).
            out.push(
                self.ev(EventKind::ToolCall).tool(id.clone(), title.clone(), kind.clone(), ToolStatus::InProgress).summary(&view.title),
            );
        }
        if completed {
            self.open.retain(|t| t.id != id);
            let ok = exec_items::tool_succeeded(exec);
            let status = if ok { ToolStatus::Completed } else { ToolStatus::Failed };
            let mut ev =
                self.ev(EventKind::ToolUpdate).tool(id, title, kind, status).summary(exec_items::finished_summary(&view, exec, ok));
            if let Some(text) = exec_items::tool_output(exec) {
                ev = ev.text(text);
            }
            out.push(ev);
        } else if known {
            out.push(self.ev(EventKind::ToolUpdate).tool(id, title, kind, ToolStatus::InProgress).category(Category::Hidden));
        } else {
            self.open.push(OpenTool { id, view });
        }
        out
    }
}

/// `TokenUsageBreakdown` (camelCase) as the [`Usage`] exec's `turn.completed.usage` gives.
fn usage_of(b: &Value) -> Usage {
    let n = |k: &str| b.get(k).and_then(Value::as_u64);
    Usage {
        input_tokens: n("inputTokens"),
        output_tokens: n("outputTokens"),
        cached_input_tokens: n("cachedInputTokens"),
        cache_creation_input_tokens: n("cacheWriteInputTokens"),
        reasoning_output_tokens: n("reasoningOutputTokens"),
        ..Usage::default()
    }
}

impl Normalizer for AppServerNormalizer {
    /// Starts the turn's events; its text waits for the thread (sent as `turn/start` via
    /// [`Normalizer::take_outgoing`] once the handshake named it, or by
    /// [`Normalizer::turn_input`] in a live process).
    fn steer(&mut self, text: &str) -> Option<(String, Vec<EventDraft>)> {
        let line = self.steer_input(text)?;
        let note = format!("steered into turn {} (turn/steer)", self.turn);
        Some((line, vec![self.ev(EventKind::UserMessage).text(text), self.ev(EventKind::Notice).summary(note)]))
    }

    fn take_refused_steers(&mut self) -> Vec<String> {
        std::mem::take(&mut self.refused)
    }

    fn begin_turn(&mut self, turn: u32, text: &str) -> Vec<EventDraft> {
        let mut out = Vec::new();
        if self.in_flight {
            let reason = format!("turn {turn} began before turn {} ended", self.turn);
            out.extend(self.end_turn(StopReason::Error, Some(reason)));
        }
        self.stderr_tail.clear();
        out.push(self.start_turn(turn));
        out.push(self.ev(EventKind::UserMessage).text(text));
        self.conv.waiting_text = Some(text.to_owned());
        out
    }

    /// A turn whose `turn/start` has not gone out yet (the handshake is still running) ends
    /// `interrupted` at once and is never sent.
    fn interrupt_requested(&mut self) -> Vec<EventDraft> {
        if !self.in_flight {
            return Vec::new();
        }
        self.interrupt = true;
        let mut out = vec![self.ev(EventKind::CancelRequested).summary(wording::INTERRUPT_REQUESTED)];
        if self.conv.live() && self.conv.waiting_text.is_some() && !self.conv.turn_sent {
            out.extend(self.end_turn(StopReason::Interrupted, Some("interrupted before codex started the turn".to_owned())));
        }
        out
    }

    fn stdout_line(&mut self, line: &str) -> Vec<EventDraft> {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            return Vec::new();
        }
        let events = match serde_json::from_str::<Value>(line) {
            Ok(v) if v.is_object() => self.on_line(&v, line),
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
            let text = crate::openai_codex::items::cut_off_text("codex app-server", reason, exit, self.last_error.as_deref(), &tail);
            out.extend(self.end_turn(reason, Some(text)));
        }
        self.conv.on_turn_completed();
        self.conv.thread = None;
        out.push(ending::exited(self.turn, exit, &tail));
        out
    }

    fn session_id(&self) -> Option<String> {
        self.session.clone()
    }

    /// The last completed turn's id: `thread/fork{lastTurnId}` of a rewind.
    fn turn_point(&self) -> Option<String> {
        self.conv.last_turn.clone()
    }

    fn tool_running(&self) -> bool {
        self.in_flight && !self.open.is_empty()
    }

    fn turn_in_flight(&self) -> bool {
        self.in_flight
    }

    /// The reset of the rate-limit window at its limit (`account/rateLimits/updated`).
    fn quota_resets_at_ms(&self) -> Option<u64> {
        self.limit_resets_at_ms
    }

    /// The thread's totals of the last `thread/tokenUsage/updated` of the turn in flight.
    fn usage_so_far(&self) -> Option<Usage> {
        self.usage.clone().filter(|_| self.in_flight)
    }

    /// Keeps the cwd, the model and the session to resume (`ctx.session_id`) for the
    /// handshake; forgets the previous process's requests, thread and turn. The process's
    /// stdin starts with [`super::conversation::initialize_line`] (see [`super::launch`]). The
    /// turn it serves is the one [`Normalizer::begin_turn`] began (called before: its text waits
    /// for the thread), not `ctx.prompt`.
    fn launched(&mut self, ctx: &LaunchContext<'_>) {
        self.conv.launched(&ctx.cwd.display().to_string(), ctx.model, ctx.session_id, ctx.resume_at);
    }

    fn take_outgoing(&mut self) -> Vec<String> {
        self.conv.take_outgoing()
    }

    /// `turn/start{threadId, input}` in the live process's thread. `None` while the handshake
    /// runs: the text then goes out via [`Normalizer::take_outgoing`] when the thread is ready
    /// (the harness's stateless `user_message` must then write nothing).
    fn turn_input(&mut self, text: &str) -> Option<String> {
        self.conv.thread.as_ref()?;
        self.conv.waiting_text = None;
        Some(self.conv.turn_start(text))
    }

    /// `turn/interrupt{threadId, turnId}` for the turn in flight. `None` when the server has not
    /// named the turn yet: the interrupt then goes out via [`Normalizer::take_outgoing`] as soon
    /// as it does (or the turn never starts, see [`Normalizer::interrupt_requested`]).
    fn interrupt_input(&mut self) -> Option<String> {
        if !self.in_flight {
            return None;
        }
        match self.conv.turn_interrupt() {
            Some(line) => Some(line),
            None => {
                self.conv.interrupt_wanted = self.conv.turn_sent || self.conv.waiting_text.is_some();
                None
            }
        }
    }
}
