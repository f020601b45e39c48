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
    Thought,
    UserMessage,
    ToolCall,
    ToolUpdate,
    Plan,
    Usage,
    Permission,
    Notice,
    CancelRequested,
    TurnEnded,
    Error,
    Exited,
    Other,
}

impl EventKind {
    /// Every kind, in contract order (for `agent_capabilities.event_kinds`).
    pub const ALL: [EventKind; 17] = [
        EventKind::Install,
        EventKind::Session,
        EventKind::TurnStarted,
        EventKind::Message,
        EventKind::Thought,
        EventKind::UserMessage,
        EventKind::ToolCall,
        EventKind::ToolUpdate,
        EventKind::Plan,
        EventKind::Usage,
        EventKind::Permission,
        EventKind::Notice,
        EventKind::CancelRequested,
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
            EventKind::Thought => "thought",
            EventKind::UserMessage => "user_message",
            EventKind::ToolCall => "tool_call",
            EventKind::ToolUpdate => "tool_update",
            EventKind::Plan => "plan",
            EventKind::Usage => "usage",
            EventKind::Permission => "permission",
            EventKind::Notice => "notice",
            EventKind::CancelRequested => "cancel_requested",
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
            EventKind::Session | EventKind::Usage | EventKind::Other => Category::Hidden,
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
        }
    }
}

/// One normalized event of a run's durable log.
///
/// `seq` starts at 1 per run and never repeats; `ts_ms` is Unix time in milliseconds when the
/// daemon stored it; `turn` is the 1-based turn number (0 for events before the first turn, such as
/// `install`). Optional fields are omitted from JSON when absent. `raw` (the harness's original
/// line) is only filled when the caller asks for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Event {
    pub seq: u64,
    pub ts_ms: u64,
    pub turn: u32,
    pub kind: EventKind,
    pub category: Category,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_status: Option<ToolStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

/// The `agent_events` answer: `{"events": [...], "cursor": N, "caught_up": bool, "status": "..."}`.
///
/// `cursor` is the seq of the last event returned (or the caller's cursor when none were), to be
/// passed back unchanged; `caught_up` is true when no later event exists yet (it does not mean the
/// run ended); `status` is the run's status at the time of the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EventsPage {
    pub events: Vec<Event>,
    pub cursor: u64,
    pub caught_up: bool,
    pub status: crate::run::Status,
}
