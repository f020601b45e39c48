//! [`EventDraft`]: a normalized event before the daemon gives it a `seq` and a timestamp.

use spaces_sdk::{Category, EventKind, StopReason, ToolStatus};

/// Longest `summary`, in characters (API reference: one line of at most 160 chars).
pub const SUMMARY_MAX_CHARS: usize = 160;

/// A normalized event without `seq`/`ts_ms` (the event log assigns those when it stores it).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EventDraft {
    pub turn: u32,
    pub kind: EventKind,
    pub category: Category,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_status: Option<ToolStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<spaces_sdk::Usage>,
    /// A `turn_diff` event's files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<spaces_sdk::FileChange>>,
    /// The harness's original line (redacted); stored, returned only when asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

impl EventDraft {
    /// An event of `kind` in `turn` with the kind's default category and nothing else set.
    pub fn new(turn: u32, kind: EventKind) -> Self {
        Self {
            turn,
            kind,
            category: kind.default_category(),
            text: None,
            tool_id: None,
            tool_title: None,
            tool_kind: None,
            tool_status: None,
            stop_reason: None,
            summary: None,
            usage: None,
            files: None,
            raw: None,
        }
    }

    /// Set `text`.
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// Set `summary`, cut to one line of at most [`SUMMARY_MAX_CHARS`] characters.
    pub fn summary(mut self, summary: impl AsRef<str>) -> Self {
        self.summary = Some(one_line(summary.as_ref()));
        self
    }

    /// Set `raw`.
    pub fn raw(mut self, raw: impl Into<String>) -> Self {
        self.raw = Some(raw.into());
        self
    }

    /// Set `category`.
    pub fn category(mut self, category: Category) -> Self {
        self.category = category;
        self
    }

    /// Set the tool fields of a `tool_call`/`tool_update`.
    pub fn tool(mut self, id: impl Into<String>, title: Option<String>, kind: Option<String>, status: ToolStatus) -> Self {
        self.tool_id = Some(id.into());
        self.tool_title = title;
        self.tool_kind = kind;
        self.tool_status = Some(status);
        self
    }

    /// Set `stop_reason`.
    pub fn stop(mut self, reason: StopReason) -> Self {
        self.stop_reason = Some(reason);
        self
    }

    /// Set `usage`.
    pub fn usage(mut self, usage: spaces_sdk::Usage) -> Self {
        self.usage = Some(usage);
        self
    }
}

/// First line of `s`, trimmed, cut to [`SUMMARY_MAX_CHARS`] characters (with `…` when cut).
pub fn one_line(s: &str) -> String {
    let line = s.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    if line.chars().count() <= SUMMARY_MAX_CHARS {
        line.to_owned()
    } else {
        let mut out: String = line.chars().take(SUMMARY_MAX_CHARS - 1).collect();
        out.push('…');
        out
    }
}
