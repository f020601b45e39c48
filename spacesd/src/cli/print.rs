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

/// Print `rows` under `header` as left-aligned columns two spaces apart; the last column is not
/// padded and is cut to fit 120 characters a line.
pub fn table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i + 1 < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 < cells.len() {
                out.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            } else {
                out.push_str(cell);
            }
        }
        let cut: String = out.chars().take(120).collect();
        cut.trim_end().to_owned()
    };
    println!("{}", line(header.to_vec()));
    for row in rows {
        println!("{}", line(row.iter().map(String::as_str).collect()));
    }
}

/// `12s`, `5m`, `3h`, `2d`: how long ago `ms` (ms since the epoch) was.
pub fn age(ms: u64) -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    let s = now.saturating_sub(ms) / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// `text` on one line, cut to `max` characters with `…`.
pub fn excerpt(text: &str, max: usize) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() <= max {
        one
    } else {
        format!("{}…", one.chars().take(max.saturating_sub(1)).collect::<String>())
    }
}
