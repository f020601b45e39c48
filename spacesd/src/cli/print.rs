//! Human-readable event lines for the CLI.

use spaces_sdk::{Category, Event, EventKind, ToolStatus};

/// How event lines are shown.
#[derive(Debug, Clone, Copy, Default)]
pub struct View {
    /// Prefix each line with its time (UTC, `HH:MM:SS.mmm`).
    pub timestamps: bool,
    /// Also show `hidden` events: the harness's own bookkeeping lines and the pieces of an
    /// answer as it streams (`message_delta` events; the whole answer is always shown). Lines
    /// the harness could not parse (`other`) are always shown: they are never dropped.
    pub verbose: bool,
}

/// Lines of a tool's output shown under its line.
const TOOL_OUTPUT_LINES: usize = 3;

/// The lines for `event`: `#seq turn N kind  text-or-summary`, then up to three lines of a
/// finished tool call's output and where the rest is; usage as tokens, cost and time. `None`
/// for a hidden control event unless `view.verbose`.
pub fn event_lines(e: &Event, view: View) -> Option<String> {
    if e.category == Category::Hidden && e.kind != EventKind::Other && !view.verbose {
        return None;
    }
    let mut detail = match e.kind {
        EventKind::Message | EventKind::MessageDelta | EventKind::UserMessage | EventKind::Thought => {
            e.text.clone().or_else(|| e.summary.clone())
        }
        EventKind::Usage => e.usage.as_ref().map(spaces_harnesses::wording::usage),
        _ => e.summary.clone().or_else(|| e.text.clone()),
    }
    .unwrap_or_default();
    if let Some(status) = e.tool_status {
        detail = format!("[{}] {detail}", serde_json::to_value(status).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default());
    }
    if let Some(stop) = e.stop_reason {
        detail = format!("({}) {detail}", stop.as_str());
    }
    let when = if view.timestamps { format!("{} ", clock(e.ts_ms)) } else { String::new() };
    let mut out = format!("{when}#{:<4} turn {:<2} {:<16} {}", e.seq, e.turn, e.kind.as_str(), detail.trim_end());
    for f in e.files.iter().flatten() {
        out.push_str(&format!("\n        {}", file_line(f)));
    }
    let tool_done = matches!(e.tool_status, Some(ToolStatus::Completed | ToolStatus::Failed));
    if tool_done && matches!(e.kind, EventKind::ToolUpdate | EventKind::ToolCall) {
        if let Some(text) = e.text.as_deref().filter(|t| !t.trim().is_empty()) {
            let lines: Vec<&str> = text.lines().collect();
            for line in lines.iter().take(TOOL_OUTPUT_LINES) {
                out.push_str(&format!("\n        | {}", excerpt(line, 150)));
            }
            if lines.len() > TOOL_OUTPUT_LINES {
                out.push_str(&format!(
                    "\n        | ... {} more lines (the whole output: `agent events --json`, event #{})",
                    lines.len() - TOOL_OUTPUT_LINES,
                    e.seq
                ));
            }
        }
    }
    Some(out)
}

/// One changed file as `A path (+3 -0)`: `A`dded, `M` changed, `D` removed; `binary` instead
/// of line counts for a binary file.
pub fn file_line(f: &spaces_sdk::FileChange) -> String {
    let letter = match f.change {
        spaces_sdk::FileChangeKind::Added => 'A',
        spaces_sdk::FileChangeKind::Changed => 'M',
        spaces_sdk::FileChangeKind::Removed => 'D',
    };
    let lines = if f.binary { "binary".to_owned() } else { format!("+{} -{}", f.added_lines, f.removed_lines) };
    format!("{letter} {} ({lines})", f.path)
}

/// `agent diff`'s text: a line naming the checkpoints, a line per changed file, then (unless
/// `stat`) the unified diff.
pub fn diff_report(r: &spaces_sdk::DiffReport, stat: bool) -> String {
    let mut out = format!("run {}: checkpoint {} -> {}: ", r.run_id, r.from_turn, r.to_turn);
    if r.files.is_empty() {
        out.push_str("no file changed\n");
        return out;
    }
    let (added, removed) = r.files.iter().fold((0, 0), |(a, d), f| (a + f.added_lines, d + f.removed_lines));
    out.push_str(&format!("{} file(s) changed, +{added} -{removed}\n", r.files.len()));
    for f in &r.files {
        out.push_str(&format!("  {}\n", file_line(f)));
    }
    if !stat && !r.diff.is_empty() {
        out.push('\n');
        out.push_str(&r.diff);
    }
    out
}

/// `HH:MM:SS.mmm` (UTC) of `ms` since the epoch.
fn clock(ms: u64) -> String {
    let s = ms / 1000;
    format!("{:02}:{:02}:{:02}.{:03}", (s / 3600) % 24, (s / 60) % 60, s % 60, ms % 1000)
}

/// Lines longer than this are cut when stdout is not a terminal (a pipe, a file).
const PIPE_WIDTH: usize = 120;

/// The width, in characters, that human output is cut to: the terminal's columns when stdout is
/// a terminal (at least 40), else 120. Cut lines end with `…`; `--json` is never cut.
pub fn width() -> usize {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        if let Ok((cols, _)) = crossterm::terminal::size() {
            return usize::from(cols).max(40);
        }
    }
    PIPE_WIDTH
}

/// Print `rows` under `header` as left-aligned columns two spaces apart; the last column is not
/// padded and is cut (with `…`) so that a line fits [`width`] characters.
pub fn table(header: &[&str], rows: &[Vec<String>]) {
    for line in table_lines(header, rows, width()) {
        println!("{line}");
    }
}

/// The lines [`table`] prints, each at most `max` characters.
fn table_lines(header: &[&str], rows: &[Vec<String>], max: usize) -> Vec<String> {
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
                let room = max.saturating_sub(out.chars().count());
                out.push_str(&excerpt(cell, room));
            }
        }
        excerpt_line(out.trim_end(), max)
    };
    let mut lines = vec![line(header.to_vec())];
    lines.extend(rows.iter().map(|row| line(row.iter().map(String::as_str).collect())));
    lines
}

/// `12s`, `5m`, `3h`, `2d`: how long ago `ms` (ms since the epoch) was.
pub fn age(ms: u64) -> String {
    span(spaces_store::now_ms().saturating_sub(ms) / 1000)
}

/// How long until `ms` (ms since the Unix epoch), like [`age`]: `40s`, `3m`, `2h`, `1d`;
/// `0s` once it has passed.
pub fn until(ms: u64) -> String {
    span(ms.saturating_sub(spaces_store::now_ms()) / 1000)
}

/// `s` seconds in the largest whole unit: `40s`, `3m`, `2h`, `1d`.
fn span(s: u64) -> String {
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

pub use spaces_sdk::run::excerpt;

/// `line` as it is, or cut to `max` characters with `…` when longer.
pub fn excerpt_line(line: &str, max: usize) -> String {
    if line.chars().count() <= max {
        line.to_owned()
    } else {
        format!("{}…", line.chars().take(max.saturating_sub(1)).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: EventKind, category: Category) -> Event {
        Event {
            seq: 7,
            ts_ms: 3_723_004,
            turn: 1,
            kind,
            category,
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

    #[test]
    fn a_table_fits_80_columns_and_cuts_its_last_column_with_an_ellipsis() {
        let long = "x".repeat(200);
        let rows = vec![
            vec!["run-0123456789ab".to_owned(), "idle".to_owned(), long.clone()],
            vec!["run-1".into(), "running".into(), "short".into()],
        ];
        let lines = table_lines(&["RUN", "STATUS", "PROMPT"], &rows, 80);
        assert_eq!(lines[0], "RUN               STATUS   PROMPT");
        assert!(lines.iter().all(|l| l.chars().count() <= 80), "{lines:#?}");
        assert_eq!(lines[1].chars().count(), 80);
        assert!(lines[1].ends_with("x…"), "{}", lines[1]);
        assert!(lines[2].ends_with("running  short"), "{}", lines[2]);
    }

    #[test]
    fn usage_shows_tokens_cost_and_time() {
        let mut e = ev(EventKind::Usage, Category::Activity);
        e.usage = Some(spaces_sdk::Usage {
            input_tokens: Some(1200),
            output_tokens: Some(34),
            cached_input_tokens: Some(1000),
            total_cost_usd: Some(0.01234),
            duration_ms: Some(4200),
            ..Default::default()
        });
        let line = event_lines(&e, View::default()).unwrap_or_default();
        assert!(line.contains("tokens in 1200 out 34 (cached 1000) · $0.0123 · 4.2 s"), "{line}");
    }

    #[test]
    fn a_finished_tool_shows_its_first_lines_and_where_the_rest_is() {
        let mut e = ev(EventKind::ToolUpdate, Category::Activity);
        e.tool_status = Some(ToolStatus::Completed);
        e.summary = Some("Run: ls".into());
        e.text = Some("a\nb\nc\nd\ne".into());
        let out = event_lines(&e, View { timestamps: true, verbose: false }).unwrap_or_default();
        assert!(out.starts_with("01:02:03.004 #7"), "{out}");
        assert!(out.contains("| a") && out.contains("| c") && !out.contains("| d"), "{out}");
        assert!(out.contains("2 more lines"), "{out}");
    }

    #[test]
    fn hidden_control_events_only_when_verbose_and_unparsed_lines_always() {
        let e = ev(EventKind::Session, Category::Hidden);
        assert!(event_lines(&e, View::default()).is_none());
        assert!(event_lines(&e, View { timestamps: false, verbose: true }).is_some());
        assert!(event_lines(&ev(EventKind::Other, Category::Hidden), View::default()).is_some());
        // A control line (Claude's control_response) is a hidden notice: not shown by default.
        assert!(event_lines(&ev(EventKind::Notice, Category::Hidden), View::default()).is_none());
        // A piece of a streaming answer: only with --verbose, as its text.
        let mut piece = ev(EventKind::MessageDelta, Category::Hidden);
        piece.text = Some("The ans".into());
        assert!(event_lines(&piece, View::default()).is_none());
        let shown = event_lines(&piece, View { timestamps: false, verbose: true }).unwrap_or_default();
        assert!(shown.contains("message_delta") && shown.ends_with(" The ans"), "{shown}");
    }
}
