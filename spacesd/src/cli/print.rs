//! Human-readable event lines for the CLI.

use spaces_sdk::{Event, EventKind};

/// One line for `event`: `#seq turn N kind  text-or-summary`.
pub fn event_line(e: &Event) -> String {
    let mut detail = match e.kind {
        EventKind::Message | EventKind::UserMessage | EventKind::Thought => e.text.clone().or_else(|| e.summary.clone()),
        _ => e.summary.clone().or_else(|| e.text.clone()),
    }
    .unwrap_or_default();
    if let Some(status) = e.tool_status {
        detail = format!("[{}] {detail}", serde_json::to_value(status).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default());
    }
    if let Some(stop) = e.stop_reason {
        detail = format!("({}) {detail}", stop.as_str());
    }
    format!("#{:<4} turn {:<2} {:<16} {}", e.seq, e.turn, e.kind.as_str(), detail.trim_end())
}
