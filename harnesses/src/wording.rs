//! One summary style for every harness: what a person reads on an event's line, whichever CLI
//! produced it. Lower case, subject first, the outcome after it:
//!
//! | event | summary |
//! |---|---|
//! | `turn_started` | `turn 2 started` |
//! | `turn_ended` | `turn 2 finished` (`end_turn`), else `turn 2 ended: interrupted`, with `(why)` when known |
//! | `tool_call` | the tool's title: `Run: ls -la`, `Edit notes.md`, `Read src/a.rs`, `Search rust sse`, `files: read` (an MCP tool) |
//! | `tool_update` | `Run: ls done (exit 0)`, `Run: ls failed (exit 2)`, `Edit a.md failed: why` |
//! | `cancel_requested` | `interrupt requested` |
//! | `plan` | `plan: 1/3 done` |
//! | `usage` (`activity`) | `tokens in 1200 out 34 (cached 1000) · $0.0123 · 4.2 s` |
//!
//! Control lines a person never needs (acknowledgements, stream bookkeeping) are hidden
//! `notice` events: [`control`]. A line the harness could not parse stays a (shown) `other`.
//! A piece of the answer as it streams is a `message_delta` (hidden): [`text_delta`].

use spaces_sdk::{Category, EventKind, StopReason, Usage};

use crate::draft::{one_line, EventDraft};

/// `turn N started`.
pub fn turn_started(turn: u32) -> String {
    format!("turn {turn} started")
}

/// `turn N finished` for `end_turn`, else `turn N ended: <reason>`, then ` (<why>)` (its first
/// line) when given for an `error` or a `crashed` turn (for the others `why` is the last answer
/// or the CLI's own words, left to `text`).
pub fn turn_ended(turn: u32, reason: StopReason, why: Option<&str>) -> String {
    let head = match reason {
        StopReason::EndTurn => format!("turn {turn} finished"),
        r => format!("turn {turn} ended: {}", r.as_str()),
    };
    let explains = matches!(reason, StopReason::Error | StopReason::Crashed);
    match why.map(one_line).filter(|w| !w.is_empty() && explains) {
        Some(w) => format!("{head} ({w})"),
        None => head,
    }
}

/// A finished tool call: `<title> done` or `<title> failed`, then ` (exit N)` for a command
/// with an exit code, then `: <why>` (its first line) for a failure with a reason.
pub fn tool_finished(title: &str, ok: bool, exit: Option<i64>, why: Option<&str>) -> String {
    let mut s = format!("{title} {}", if ok { "done" } else { "failed" });
    if let Some(code) = exit {
        s.push_str(&format!(" (exit {code})"));
    }
    if let Some(w) = why.filter(|_| !ok).map(one_line).filter(|w| !w.is_empty()) {
        s.push_str(&format!(": {w}"));
    }
    s
}

/// A tool call still open when its turn ended.
pub fn tool_unfinished(title: &str) -> String {
    tool_finished(title, false, None, Some("the turn ended before it finished"))
}

/// A `usage` event: category `activity` (a person reads it; the CLI shows it) with the CLI's
/// usage object as `usage` and [`usage`] as its summary.
pub fn usage_event(turn: u32, usage: Usage) -> EventDraft {
    let summary = self::usage(&usage);
    EventDraft::new(turn, EventKind::Usage).category(Category::Activity).summary(summary).usage(usage)
}

/// `tokens in 1234 out 56 (cached 1000) · $0.0123 · 4.2 s` from a [`Usage`] (what is missing
/// is left out; `usage` when nothing is known).
pub fn usage(u: &Usage) -> String {
    let mut parts = Vec::new();
    let cached = u.cached_input_tokens;
    match (u.input_tokens, u.output_tokens) {
        (Some(i), Some(o)) => {
            parts.push(format!("tokens in {i} out {o}{}", cached.filter(|c| *c > 0).map(|c| format!(" (cached {c})")).unwrap_or_default()))
        }
        (Some(i), None) => parts.push(format!("tokens in {i}")),
        (None, Some(o)) => parts.push(format!("tokens out {o}")),
        (None, None) => {}
    }
    if let Some(cost) = u.total_cost_usd {
        parts.push(format!("${cost:.4}"));
    }
    if let Some(ms) = u.duration_ms {
        parts.push(format!("{:.1} s", ms as f64 / 1000.0));
    }
    if parts.is_empty() {
        "usage".to_owned()
    } else {
        parts.join(" · ")
    }
}

/// `interrupt requested`.
pub const INTERRUPT_REQUESTED: &str = "interrupt requested";

/// `plan: D/T done`.
pub fn plan(done: usize, total: usize) -> String {
    format!("plan: {done}/{total} done")
}

/// The title of a call to MCP server `server`'s tool `tool`: `server: tool`.
pub fn mcp_title(server: &str, tool: &str) -> String {
    format!("{server}: {tool}")
}

/// The title of a shell command: `Run: <first line of the command>`.
pub fn run_title(command: &str) -> String {
    let line = one_line(command);
    if line.is_empty() {
        "Run".to_owned()
    } else {
        format!("Run: {line}")
    }
}

/// A control line nobody needs to read (an acknowledgement, stream bookkeeping): a `notice` of
/// category `hidden`, summary `what` (shown with `--verbose`; the line itself is in `raw`).
pub fn control(turn: u32, what: &str) -> EventDraft {
    EventDraft::new(turn, EventKind::Notice).category(Category::Hidden).summary(what)
}

/// A piece of the agent's answer as the model streams it: kind `message_delta`, category `hidden`,
/// `text` the new piece only (no summary). A live view appends the pieces of the turn in flight
/// to one growing line and drops that line when the visible `message` with the whole text lands
/// (or the turn ends); whatever reads answers (the `message` category, `result_text`) never sees
/// them, so nothing is counted twice.
pub fn text_delta(turn: u32, piece: &str) -> EventDraft {
    EventDraft::new(turn, EventKind::MessageDelta).category(Category::Hidden).text(piece)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_one_style() {
        assert_eq!(turn_started(2), "turn 2 started");
        assert_eq!(turn_ended(2, StopReason::EndTurn, Some("the answer")), "turn 2 finished");
        assert_eq!(turn_ended(1, StopReason::Interrupted, Some("partial answer")), "turn 1 ended: interrupted");
        assert_eq!(turn_ended(1, StopReason::Error, Some("boom\nmore")), "turn 1 ended: error (boom)");
        assert_eq!(tool_finished("Run: ls", true, Some(0), None), "Run: ls done (exit 0)");
        assert_eq!(tool_finished("Run: ls x", false, Some(2), Some("no such file")), "Run: ls x failed (exit 2): no such file");
        assert_eq!(tool_unfinished("Edit a.md"), "Edit a.md failed: the turn ended before it finished");
        assert_eq!(plan(1, 3), "plan: 1/3 done");
        assert_eq!(run_title("ls\nwc"), "Run: ls");
        let u = usage_event(
            1,
            Usage::from_json(
                &serde_json::json!({"input_tokens": 1200, "output_tokens": 34, "cache_read_input_tokens": 1000, "total_cost_usd": 0.01234, "duration_ms": 4200}),
            ),
        );
        assert_eq!((u.kind, u.category), (EventKind::Usage, Category::Activity));
        assert_eq!(u.summary.as_deref(), Some("tokens in 1200 out 34 (cached 1000) · $0.0123 · 4.2 s"));
        assert_eq!(
            usage(&Usage::from_json(&serde_json::json!({"input_tokens": 5, "cached_input_tokens": 0, "output_tokens": 2}))),
            "tokens in 5 out 2"
        );
        assert_eq!(usage(&Usage::default()), "usage");
        let c = control(3, "control_response success");
        assert_eq!((c.kind, c.category, c.turn), (EventKind::Notice, Category::Hidden, 3));
        let d = text_delta(2, "The ans");
        assert_eq!((d.kind, d.category, d.text.as_deref(), d.summary), (EventKind::MessageDelta, Category::Hidden, Some("The ans"), None));
    }
}
