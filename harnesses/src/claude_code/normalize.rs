//! [`ClaudeNormalizer`]: Claude Code stream-json lines to normalized events.
//!
//! Line types (`--output-format stream-json --verbose`, 2.1.197):
//! - `system` `init` (every turn: `session_id`, `cwd`, `model`, `tools`) becomes `session`
//!   (hidden); `status` (`requesting`, before each model call) a hidden control line; other
//!   `system` subtypes (`api_retry`, `task_started`, `task_notification`, `compact_boundary`,
//!   ...) become `notice`;
//! - `assistant` content blocks: `text` becomes `message` (or `error` for the CLI's synthetic
//!   "API Error: ..." message after a failed model call), `thinking` becomes `thought`,
//!   `tool_use` becomes `tool_call` (`in_progress`; `TodoWrite` also gives a `plan`);
//! - `user` `tool_result` blocks become `tool_update` (`completed`, or `failed` when `is_error`);
//! - `result` becomes `usage` (tokens, cost, time) then exactly one `turn_ended` (see [`stop_reason`]);
//! - `stream_event` (`--include-partial-messages`: the model's stream, one SSE event a line, as
//!   `{"type":"stream_event","event":{...},"parent_tool_use_id":...}`): a `content_block_delta`
//!   with a `text_delta` of the agent itself (not a sub-agent) becomes a `message_delta` with
//!   the piece as text ([`wording::text_delta`]); the whole text still comes as the visible
//!   `message` of the `assistant` line that follows the pieces. Every other stream event
//!   (`message_start`, `content_block_start|stop`, `input_json_delta`, `thinking_delta`,
//!   `message_delta`, `message_stop`) is a control line, as is `system` `status`;
//! - `control_response` (a failed one is a visible `notice`), `control_request`,
//!   `rate_limit_event` and `keep_alive` are control lines nobody needs to read: hidden `notice`
//!   events ([`wording::control`]); an unparseable line or unknown type becomes `other` with the
//!   line as text.
//!
//! Summaries follow the one style of [`crate::wording`].
//!
//! Every non-blank line yields at least one event; the first event of a line carries the line as
//! `raw`. A trailing `\r` (PTY output) is ignored. Blank lines carry nothing and yield nothing.

use serde_json::Value;
use spaces_sdk::{Category, EventKind, StopReason, ToolStatus, Usage};

use super::tools;
use crate::draft::EventDraft;
use crate::harness::Normalizer;
use crate::lines::{self, StderrTail};
use crate::plan::ExitInfo;
use crate::{ending, wording};

/// A tool call seen in this turn without its result yet.
#[derive(Debug, Clone)]
struct OpenTool {
    id: String,
    title: String,
    kind: &'static str,
}

/// Per-run state of the Claude Code stream (one process, many turns; survives respawns).
#[derive(Debug, Default)]
pub struct ClaudeNormalizer {
    /// The current turn (or the last one, between turns); 0 before the first.
    turn: u32,
    in_flight: bool,
    interrupt_requested: bool,
    session_id: Option<String>,
    /// The CLI's working directory (from `init`), to show file paths relative to it.
    cwd: Option<String>,
    open_tools: Vec<OpenTool>,
    stderr_tail: StderrTail,
    /// The `uuid` of the last `assistant` or `user` line: the session's newest message, where
    /// `--resume-session-at` can resume (`turn_point`).
    last_message: Option<String>,
}

impl ClaudeNormalizer {
    /// A normalizer for a fresh run.
    pub fn new() -> Self {
        Self::default()
    }

    fn ev(&self, kind: EventKind) -> EventDraft {
        EventDraft::new(self.turn, kind)
    }

    fn system(&mut self, v: &Value) -> Vec<EventDraft> {
        let subtype = str_of(v, "subtype").unwrap_or("");
        if subtype == "init" {
            if let Some(sid) = str_of(v, "session_id") {
                self.session_id = Some(sid.to_owned());
            }
            if let Some(cwd) = str_of(v, "cwd") {
                self.cwd = Some(cwd.to_owned());
            }
            let model = str_of(v, "model").unwrap_or("?");
            let sid = self.session_id.as_deref().unwrap_or("?");
            let version = str_of(v, "claude_code_version").unwrap_or("?");
            return vec![self.ev(EventKind::Session).text(format!("session {sid}, model {model}, claude {version}"))];
        }
        if subtype == "api_retry" {
            // A failed model call the CLI will retry (`CLAUDE_CODE_MAX_RETRIES`).
            let num = |k: &str| v.get(k).and_then(Value::as_f64).map_or("?".to_owned(), |x| format!("{x:.0}"));
            let summary = format!(
                "model call failed ({} {}); retry {} of {} in {} ms",
                num("error_status"),
                str_of(v, "error").unwrap_or("error"),
                num("attempt"),
                num("max_retries"),
                num("retry_delay_ms"),
            );
            return vec![self.ev(EventKind::Notice).summary(summary)];
        }
        let detail = ["description", "summary", "message", "status"].iter().find_map(|k| str_of(v, k));
        let summary = match detail {
            Some(d) => format!("{subtype}: {d}"),
            None => subtype.to_owned(),
        };
        if subtype == "status" {
            // `requesting` before every model call (with partial messages): bookkeeping.
            return vec![wording::control(self.turn, &summary)];
        }
        vec![self.ev(EventKind::Notice).summary(summary)]
    }

    fn assistant(&mut self, v: &Value) -> Vec<EventDraft> {
        let sub_agent = v.get("parent_tool_use_id").is_some_and(|p| !p.is_null());
        // A failed model call is reported as a synthetic assistant message ("API Error: ...")
        // with a top-level `error` (e.g. `server_error`): an `error` event, not the agent's words.
        let api_error = str_of(v, "error").is_some() || v.pointer("/message/model").and_then(Value::as_str) == Some("<synthetic>");
        let mut out = Vec::new();
        for block in content_blocks(v) {
            match str_of(block, "type") {
                Some("text") => {
                    let text = str_of(block, "text").unwrap_or("");
                    if text.is_empty() {
                        continue;
                    }
                    if api_error {
                        out.push(self.ev(EventKind::Error).text(text).summary(text));
                        continue;
                    }
                    let ev = self.ev(EventKind::Message).text(text);
                    // A sub-agent's words are progress of its Task call, not the answer.
                    out.push(if sub_agent { ev.category(Category::Activity).summary(text) } else { ev });
                }
                Some("thinking") => {
                    let text = str_of(block, "thinking").unwrap_or("");
                    out.push(self.ev(EventKind::Thought).text(text).summary(text));
                }
                Some("redacted_thinking") => {
                    out.push(self.ev(EventKind::Thought).category(Category::Hidden));
                }
                Some("tool_use" | "server_tool_use" | "mcp_tool_use") => {
                    out.extend(self.tool_call(block));
                }
                _ => out.push(self.ev(EventKind::Other).text(block.to_string())),
            }
        }
        out
    }

    fn tool_call(&mut self, block: &Value) -> Vec<EventDraft> {
        let id = str_of(block, "id").unwrap_or("").to_owned();
        let name = str_of(block, "name").unwrap_or("tool");
        let input = block.get("input").cloned().unwrap_or(Value::Null);
        let label = tools::label(name, &input, self.cwd.as_deref());
        let text = match (name, input.get("command").and_then(Value::as_str)) {
            ("Bash", Some(cmd)) => cmd.to_owned(),
            _ => input.to_string(),
        };
        let mut out = vec![self
            .ev(EventKind::ToolCall)
            .tool(id.clone(), Some(label.title.clone()), Some(label.kind.to_owned()), ToolStatus::InProgress)
            .text(tools::cap(&text))
            .summary(&label.title)];
        if name == "TodoWrite" {
            if let Some(plan) = tools::todo_plan(&input) {
                out.push(self.ev(EventKind::Plan).summary(tools::todo_summary(&input)).text(plan));
            }
        }
        self.open_tools.retain(|t| t.id != id);
        self.open_tools.push(OpenTool { id, title: label.title, kind: label.kind });
        out
    }

    fn user(&mut self, v: &Value) -> Vec<EventDraft> {
        let mut out = Vec::new();
        for block in content_blocks(v) {
            if str_of(block, "type") != Some("tool_result") {
                // Echoed prompts and the CLI's own notes ("[Request interrupted by user]").
                let text = str_of(block, "text").map(str::to_owned).unwrap_or(block.to_string());
                out.push(self.ev(EventKind::Other).text(text));
                continue;
            }
            let id = str_of(block, "tool_use_id").unwrap_or("").to_owned();
            let failed = block.get("is_error").and_then(Value::as_bool).unwrap_or(false);
            let text = tools::result_text(block.get("content"));
            let open = self.take_tool(&id);
            let (title, kind) = match &open {
                Some(t) => (Some(t.title.clone()), Some(t.kind.to_owned())),
                None => (None, None),
            };
            let name = title.clone().unwrap_or_else(|| format!("tool {id}"));
            let status = if failed { ToolStatus::Failed } else { ToolStatus::Completed };
            let summary = wording::tool_finished(&name, !failed, None, Some(&text));
            out.push(self.ev(EventKind::ToolUpdate).tool(id, title, kind, status).text(tools::cap(&text)).summary(summary));
        }
        if out.is_empty() {
            // A user line with plain string content (an echo of the prompt).
            let text = v.pointer("/message/content").and_then(Value::as_str).unwrap_or("");
            out.push(self.ev(EventKind::Other).text(text));
        }
        out
    }

    fn result(&mut self, v: &Value) -> Vec<EventDraft> {
        if let Some(sid) = str_of(v, "session_id") {
            self.session_id = Some(sid.to_owned());
        }
        let mut out = vec![wording::usage_event(self.turn, usage_of(v))];
        if !self.in_flight {
            // A result with no turn of ours in flight (the turn already ended): keep, never a
            // second `turn_ended`.
            out.push(self.ev(EventKind::Other).text("result outside a turn"));
            return out;
        }
        let (reason, text) = stop_reason(v, self.interrupt_requested);
        out.extend(self.end_turn(reason, text));
        out
    }

    /// Close open tools as `failed`, then the single `turn_ended` of the turn in flight.
    fn end_turn(&mut self, reason: StopReason, text: Option<String>) -> Vec<EventDraft> {
        let mut out = Vec::new();
        for tool in std::mem::take(&mut self.open_tools) {
            out.push(ending::unfinished_tool(self.turn, tool.id, tool.title, tool.kind.to_owned()));
        }
        let summary = wording::turn_ended(self.turn, reason, text.as_deref());
        let mut ended = self.ev(EventKind::TurnEnded).stop(reason).summary(summary);
        if let Some(text) = text {
            ended = ended.text(text);
        }
        out.push(ended);
        self.in_flight = false;
        self.interrupt_requested = false;
        out
    }

    fn take_tool(&mut self, id: &str) -> Option<OpenTool> {
        let pos = self.open_tools.iter().position(|t| t.id == id)?;
        Some(self.open_tools.remove(pos))
    }

    /// A `stream_event` line: the agent's own text pieces become [`wording::text_delta`], the
    /// rest control lines named by their event (and delta) type.
    fn stream_event(&self, v: &Value) -> Vec<EventDraft> {
        let event = v.get("event").unwrap_or(&Value::Null);
        let kind = str_of(event, "type").unwrap_or("?");
        let delta = event.get("delta").unwrap_or(&Value::Null);
        let sub_agent = v.get("parent_tool_use_id").is_some_and(|p| !p.is_null());
        let own_text = !sub_agent && kind == "content_block_delta";
        match (str_of(delta, "type"), str_of(delta, "text")) {
            (Some("text_delta"), Some(piece)) if own_text && !piece.is_empty() => {
                vec![wording::text_delta(self.turn, piece)]
            }
            (Some(delta_type), _) => {
                vec![wording::control(self.turn, &format!("stream_event {kind} {delta_type}"))]
            }
            _ => vec![wording::control(self.turn, &format!("stream_event {kind}"))],
        }
    }

    fn bookkeeping(&self, kind: &str, v: &Value) -> Vec<EventDraft> {
        let text = match kind {
            "control_response" => {
                let resp = v.get("response");
                let subtype = resp.and_then(|r| str_of(r, "subtype")).unwrap_or("?");
                let id = resp.and_then(|r| str_of(r, "request_id")).unwrap_or("?");
                match resp.and_then(|r| str_of(r, "error")) {
                    Some(err) => {
                        let summary = format!("control request {id} failed: {err}");
                        return vec![self.ev(EventKind::Notice).summary(summary)];
                    }
                    None => format!("control_response {subtype} ({id})"),
                }
            }
            other => other.to_owned(),
        };
        vec![wording::control(self.turn, &text)]
    }
}

impl Normalizer for ClaudeNormalizer {
    fn begin_turn(&mut self, turn: u32, text: &str) -> Vec<EventDraft> {
        let mut out = Vec::new();
        if self.in_flight {
            // The daemon queues follow-ups, so this is a caller's mistake; the turn in flight
            // still ends exactly once, never silently.
            let why = format!("turn {turn} began before turn {} ended", self.turn);
            out.extend(self.end_turn(StopReason::Error, Some(why)));
        }
        self.turn = turn;
        self.in_flight = true;
        self.interrupt_requested = false;
        self.open_tools.clear();
        out.push(self.ev(EventKind::TurnStarted).summary(wording::turn_started(turn)));
        out.push(self.ev(EventKind::UserMessage).text(text));
        out
    }

    fn interrupt_requested(&mut self) -> Vec<EventDraft> {
        if !self.in_flight {
            return Vec::new();
        }
        self.interrupt_requested = true;
        vec![self.ev(EventKind::CancelRequested).summary(wording::INTERRUPT_REQUESTED)]
    }

    fn stdout_line(&mut self, line: &str) -> Vec<EventDraft> {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            return Vec::new();
        }
        let parsed: Option<Value> = serde_json::from_str(line).ok();
        if let Some(v) = parsed.as_ref().filter(|v| matches!(str_of(v, "type"), Some("assistant" | "user"))) {
            if let Some(uuid) = str_of(v, "uuid") {
                self.last_message = Some(uuid.to_owned());
            }
        }
        let out = match parsed.as_ref().and_then(|v| str_of(v, "type").map(|t| (t, v))) {
            Some(("system", v)) => self.system(v),
            Some(("assistant", v)) => self.assistant(v),
            Some(("user", v)) => self.user(v),
            Some(("result", v)) => self.result(v),
            Some(("stream_event", v)) => self.stream_event(v),
            Some((kind @ ("control_response" | "control_request" | "control_cancel_request" | "rate_limit_event" | "keep_alive"), v)) => {
                self.bookkeeping(kind, v)
            }
            // Unparseable, not an object with a type, or a type this version does not know.
            _ => vec![self.ev(EventKind::Other).text(line)],
        };
        lines::finish_line(self.turn, line, out)
    }

    fn stderr_line(&mut self, line: &str) -> Vec<EventDraft> {
        self.stderr_tail.push(line);
        Vec::new()
    }

    fn process_exited(&mut self, exit: &ExitInfo) -> Vec<EventDraft> {
        let tail = self.stderr_tail.text_for(exit);
        let how = ending::how(exit);
        let mut out = Vec::new();
        if self.in_flight {
            let reason = ending::stop_reason_at_exit(exit, self.interrupt_requested);
            let text = match reason {
                StopReason::Stopped => format!("the run was stopped; the agent {how}"),
                StopReason::Interrupted => format!("the agent {how} after an interrupt"),
                _ if tail.is_empty() => format!("the agent {how} before finishing the turn"),
                _ => format!("the agent {how} before finishing the turn: {tail}"),
            };
            out.extend(self.end_turn(reason, Some(text)));
        }
        out.push(ending::exited(self.turn, exit, &tail));
        self.open_tools.clear();
        out
    }

    fn turn_point(&self) -> Option<String> {
        self.last_message.clone()
    }

    fn session_id(&self) -> Option<String> {
        self.session_id.clone()
    }

    fn turn_in_flight(&self) -> bool {
        self.in_flight
    }

    fn tool_running(&self) -> bool {
        self.in_flight && !self.open_tools.is_empty()
    }
}

/// Why a `result` line ends the turn, and the `turn_ended` text.
///
/// - `success` without `is_error`: `end_turn`, text the final answer (`result`);
/// - `terminal_reason` `aborted_*`, or any non-success result after an interrupt request, or a
///   result without its `result` field after one (the interrupt result has `subtype:
///   error_during_execution`, no `result` field, `terminal_reason` `aborted_streaming` or
///   `aborted_tools`): `interrupted`;
/// - `error_max_turns`: `max_turns`;
/// - `error_max_budget_usd` (the run's budget passed as `--max-budget-usd`): `budget_reached`;
/// - a provider's limit (`api_error_status: 429`, or `usage limit reached` in the text):
///   `quota_waiting`, text the CLI's (its plan message names the reset, [`crate::quota`]);
/// - anything else (including `success` with `is_error: true`, which a failed model call gives):
///   `error`, text the CLI's `result` ("API Error: 500 ..."), else its `errors`, else the subtype.
pub fn stop_reason(v: &Value, interrupt_requested: bool) -> (StopReason, Option<String>) {
    let subtype = str_of(v, "subtype").unwrap_or("");
    let is_error = v.get("is_error").and_then(Value::as_bool).unwrap_or(false);
    let result = str_of(v, "result").map(str::to_owned);
    let terminal = str_of(v, "terminal_reason");
    let aborted = terminal.is_some_and(|r| r.starts_with("aborted"));
    // After an interrupt, a result without its `result` field is the abort (case E14a).
    let cut_short = interrupt_requested && result.is_none();
    if subtype == "success" && !is_error && !aborted && !cut_short {
        return (StopReason::EndTurn, Some(result.unwrap_or_default()));
    }
    if aborted || interrupt_requested {
        let text = match terminal {
            Some(t) => format!("interrupted by the caller ({t})"),
            None => "interrupted by the caller".to_owned(),
        };
        return (StopReason::Interrupted, Some(text));
    }
    let limited = v.get("api_error_status").and_then(Value::as_u64) == Some(429)
        || result.as_deref().is_some_and(|r| r.to_ascii_lowercase().contains("usage limit reached"));
    if limited && !interrupt_requested {
        let why = result.clone().unwrap_or_else(|| "the provider's rate limit was reached (429)".to_owned());
        return (StopReason::QuotaWaiting, Some(why));
    }
    if subtype == "error_max_budget_usd" {
        let cost = v.get("total_cost_usd").and_then(Value::as_f64).unwrap_or(0.0);
        return (
            StopReason::BudgetReached,
            Some(format!("the run's budget was reached (the CLI's --max-budget-usd; ${cost:.4} spent by this process)")),
        );
    }
    if subtype == "error_max_turns" {
        let turns = v.get("num_turns").and_then(Value::as_u64).unwrap_or(0);
        return (StopReason::MaxTurns, Some(format!("stopped after {turns} model turns (max turns)")));
    }
    let errors: Vec<String> = v
        .get("errors")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|e| e.as_str().map_or(e.to_string(), str::to_owned)).collect())
        .unwrap_or_default();
    let why = if let Some(r) = result.filter(|r| !r.is_empty()) {
        r
    } else if !errors.is_empty() {
        errors.join("; ")
    } else if subtype.is_empty() {
        "the turn failed without a reason".to_owned()
    } else {
        format!("the turn failed ({subtype})")
    };
    (StopReason::Error, Some(why))
}

/// The `usage` of a `result`: its `usage` object (tokens of this turn) plus `total_cost_usd`
/// (cumulative for the process, USD), `num_turns` (model calls of this turn), `duration_ms` and
/// `duration_api_ms` when present.
fn usage_of(v: &Value) -> Usage {
    let tokens = v.get("usage").map(Usage::from_json).unwrap_or_default();
    let totals = Usage::from_json(v);
    Usage {
        total_cost_usd: totals.total_cost_usd,
        num_turns: totals.num_turns,
        duration_ms: totals.duration_ms,
        duration_api_ms: totals.duration_api_ms,
        ..tokens
    }
}

fn content_blocks(v: &Value) -> &[Value] {
    v.pointer("/message/content").and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}
