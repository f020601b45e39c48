//! Normalized run events and the `agent_events` page (API reference, "Agent runs",
//! `Space.agent_events`).

use serde::{Deserialize, Serialize};

/// What happened. A closed set; anything a harness cannot classify is [`EventKind::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Install,
    Session,
    TurnStarted,
    Message,
    /// A piece of the agent's answer as the model streams it (`text` is the new piece only;
    /// category `hidden`). The whole answer still comes once as a `message`, so whatever reads
    /// `message` events sees each answer once; a live view appends the pieces.
    MessageDelta,
    Thought,
    UserMessage,
    ToolCall,
    ToolUpdate,
    Plan,
    Usage,
    Permission,
    Notice,
    CancelRequested,
    /// What the turn changed in the run's working folder, from the daemon's checkpoints
    /// (`files`; `summary` like `2 files changed, +3 -1`). Stored just before the turn's
    /// `turn_ended`, so a caller that sees the end has the diff.
    TurnDiff,
    TurnEnded,
    Error,
    Exited,
    Other,
}

impl EventKind {
    /// Every kind, in contract order (for `agent_capabilities.event_kinds`).
    pub const ALL: [EventKind; 19] = [
        EventKind::Install,
        EventKind::Session,
        EventKind::TurnStarted,
        EventKind::Message,
        EventKind::MessageDelta,
        EventKind::Thought,
        EventKind::UserMessage,
        EventKind::ToolCall,
        EventKind::ToolUpdate,
        EventKind::Plan,
        EventKind::Usage,
        EventKind::Permission,
        EventKind::Notice,
        EventKind::CancelRequested,
        EventKind::TurnDiff,
        EventKind::TurnEnded,
        EventKind::Error,
        EventKind::Exited,
        EventKind::Other,
    ];

    /// The wire spelling (`"turn_ended"`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Install => "install",
            EventKind::Session => "session",
            EventKind::TurnStarted => "turn_started",
            EventKind::Message => "message",
            EventKind::MessageDelta => "message_delta",
            EventKind::Thought => "thought",
            EventKind::UserMessage => "user_message",
            EventKind::ToolCall => "tool_call",
            EventKind::ToolUpdate => "tool_update",
            EventKind::Plan => "plan",
            EventKind::Usage => "usage",
            EventKind::Permission => "permission",
            EventKind::Notice => "notice",
            EventKind::CancelRequested => "cancel_requested",
            EventKind::TurnDiff => "turn_diff",
            EventKind::TurnEnded => "turn_ended",
            EventKind::Error => "error",
            EventKind::Exited => "exited",
            EventKind::Other => "other",
        }
    }

    /// The default category of this kind: the agent's words are `message`, the caller's are
    /// `user`, everything with a one-line summary is `activity`, bookkeeping is `hidden`.
    pub fn default_category(self) -> Category {
        match self {
            EventKind::Message => Category::Message,
            EventKind::UserMessage => Category::User,
            EventKind::Session | EventKind::Usage | EventKind::Other | EventKind::MessageDelta => Category::Hidden,
            _ => Category::Activity,
        }
    }
}

/// Who the event is for: `message` (the agent's words), `user`, `activity` (with a one-line
/// `summary` of at most 160 chars), `hidden`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Message,
    User,
    Activity,
    Hidden,
}

/// State of a tool call: `pending | in_progress | completed | failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Pending,
    InProgress,
    Completed,
    Failed,
}

/// Why a turn ended (`turn_ended.stop_reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    Interrupted,
    Error,
    MaxTurns,
    Crashed,
    Stopped,
    /// The run reached its budget (`options.budget`) during the turn: the CLI's own limit
    /// ended it, or the daemon interrupted it.
    BudgetReached,
    /// The provider refused the turn for a rate or usage limit (HTTP 429, a plan's usage
    /// limit): the run waits `quota_waiting` until the limit resets, then continues the session
    /// by itself with one "continue" turn.
    QuotaWaiting,
}

impl StopReason {
    /// The wire spelling (`"end_turn"`).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::Interrupted => "interrupted",
            StopReason::Error => "error",
            StopReason::MaxTurns => "max_turns",
            StopReason::Crashed => "crashed",
            StopReason::Stopped => "stopped",
            StopReason::BudgetReached => "budget_reached",
            StopReason::QuotaWaiting => "quota_waiting",
        }
    }
}

/// One normalized event of a run's durable log (API reference, "Events").
///
/// Optional fields are omitted from JSON when absent. Which fields a kind carries: `message`,
/// `user`, `notice`, `error` and `turn_ended` have `text`; `tool_*` kinds have the `tool_` fields;
/// `turn_ended` has `stop_reason`; `usage` has `usage`; `activity` events have `summary`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Event {
    /// Position in the run's log: starts at 1 per run, never repeats, never reused. A cursor is
    /// the `seq` of the last event a caller has.
    pub seq: u64,
    /// When the daemon stored the event: Unix time, milliseconds.
    pub ts_ms: u64,
    /// The 1-based turn the event belongs to (0 before the first turn, e.g. `install`).
    pub turn: u32,
    /// What happened (`EventKind`).
    pub kind: EventKind,
    /// Who it is for (`Category`): `message`, `user`, `activity` or `hidden`.
    pub category: Category,
    /// The words: the agent's message, the user's prompt, a notice or an error's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The tool call's id, the same on its `tool_call` and every `tool_update`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_id: Option<String>,
    /// A one-line title of the tool call (`Bash: echo hi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_title: Option<String>,
    /// The tool's kind as the harness names it (`execute`, `edit`, `read`, `mcp`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_kind: Option<String>,
    /// The tool call's state (`ToolStatus`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_status: Option<ToolStatus>,
    /// Why the turn ended (`turn_ended` only; `StopReason`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// One line of at most 160 characters for `activity` events (`tokens in 12 out 3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Tokens, cost and time as the CLI reported them (`usage` events only; `Usage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The files the turn changed (`turn_diff` events only; `FileChange`), sorted by path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<crate::timetravel::FileChange>>,
    /// The harness's original line, redacted; only when the caller asked (`raw: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

/// Tokens, cost and time of a turn as the agent's CLI reported them: the `usage` of a `usage`
/// event. Every field is optional (a CLI reports what it knows) and omitted when absent; what
/// a CLI reports beyond these stays in the event's `raw` line.
///
/// Sources (docs/harnesses.md, from the CLIs' own output): Claude Code's `result` line (`usage` of
/// the turn plus `total_cost_usd`, `num_turns`, `duration_ms`, `duration_api_ms`); Codex CLI's
/// `turn.completed{usage}`, whose token counts are cumulative for the thread.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Usage {
    /// Input (prompt) tokens. Claude Code: this turn's, without cache reads and writes; Codex
    /// CLI: the thread's so far, cached ones included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Output tokens (Claude Code: this turn's; Codex CLI: the thread's so far).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Input tokens read from the provider's prompt cache (Claude Code's
    /// `cache_read_input_tokens`, accepted under that name too).
    #[serde(default, alias = "cache_read_input_tokens", skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// Input tokens written to the prompt cache (Claude Code; Codex CLI's
    /// `cache_write_input_tokens`, accepted under that name too).
    #[serde(default, alias = "cache_write_input_tokens", skip_serializing_if = "Option::is_none")]
    pub cache_creation_input_tokens: Option<u64>,
    /// Output tokens spent on reasoning (Codex CLI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_output_tokens: Option<u64>,
    /// Cost in US dollars as the CLI computed it (Claude Code: cumulative for the agent
    /// process, so it grows across the turns of one process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_cost_usd: Option<f64>,
    /// Model calls the turn made (Claude Code's `num_turns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_turns: Option<u32>,
    /// Wall time of the turn as the CLI measured it, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Time spent in model API calls, ms (Claude Code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_api_ms: Option<u64>,
}

impl Usage {
    /// The figures found in a CLI's JSON object under these names (or the aliases above); a
    /// missing or mistyped value is left out, never an error.
    pub fn from_json(v: &serde_json::Value) -> Usage {
        let n = |k: &str| v.get(k).and_then(serde_json::Value::as_u64);
        Usage {
            input_tokens: n("input_tokens"),
            output_tokens: n("output_tokens"),
            cached_input_tokens: n("cached_input_tokens").or_else(|| n("cache_read_input_tokens")),
            cache_creation_input_tokens: n("cache_creation_input_tokens").or_else(|| n("cache_write_input_tokens")),
            reasoning_output_tokens: n("reasoning_output_tokens"),
            total_cost_usd: v.get("total_cost_usd").and_then(serde_json::Value::as_f64),
            num_turns: n("num_turns").and_then(|t| u32::try_from(t).ok()),
            duration_ms: n("duration_ms"),
            duration_api_ms: n("duration_api_ms"),
        }
    }

    /// True when no figure is known.
    pub fn is_empty(&self) -> bool {
        *self == Usage::default()
    }
}

/// The `agent_events` answer: `{"events": [...], "cursor": N, "caught_up": bool, "status": "..."}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EventsPage {
    /// The events after the caller's cursor, in `seq` order (at most the request's `max`).
    pub events: Vec<Event>,
    /// The `seq` of the last event returned, or the caller's cursor when none were: pass it back
    /// unchanged.
    pub cursor: u64,
    /// True when no later event exists yet (it does not mean the run ended).
    pub caught_up: bool,
    /// The run's status at the time of the answer.
    pub status: crate::run::Status,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Events stored before `usage` was typed carry the CLIs' own objects: they still read, under
    /// the typed names, with what the record does not name left out.
    #[test]
    fn usage_stored_as_the_clis_objects_reads_typed() {
        let stored = r#"{"seq":3,"ts_ms":1,"turn":1,"kind":"usage","category":"activity",
            "usage":{"input_tokens":12,"output_tokens":3,"cache_read_input_tokens":7,
                     "cache_creation":{"ephemeral_5m_input_tokens":0},"service_tier":"standard",
                     "total_cost_usd":0.25,"duration_ms":4200}}"#;
        let e: Event = serde_json::from_str(stored).unwrap();
        let u = e.usage.unwrap();
        assert_eq!((u.input_tokens, u.output_tokens, u.cached_input_tokens), (Some(12), Some(3), Some(7)));
        assert_eq!((u.total_cost_usd, u.duration_ms, u.num_turns), (Some(0.25), Some(4200), None));
        let again = serde_json::to_value(&u).unwrap();
        assert_eq!(
            again,
            serde_json::json!({"input_tokens":12,"output_tokens":3,"cached_input_tokens":7,"total_cost_usd":0.25,"duration_ms":4200})
        );
    }

    /// A CLI's object with a mistyped figure loses that figure only.
    #[test]
    fn usage_from_json_skips_what_it_cannot_read() {
        let u = Usage::from_json(
            &serde_json::json!({"input_tokens": "many", "output_tokens": 2, "cache_write_input_tokens": 5, "num_turns": -1}),
        );
        assert_eq!(u, Usage { output_tokens: Some(2), cache_creation_input_tokens: Some(5), ..Usage::default() });
        assert!(Usage::from_json(&serde_json::json!([])).is_empty());
    }
}
