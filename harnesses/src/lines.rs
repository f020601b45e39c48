//! What normalizers do alike with the lines they are fed: the stderr tail kept for error reasons
//! ([`StderrTail`]) and the last step of a stdout line ([`finish_line`]: the crate's rule that a
//! non-blank line is never dropped, and that the line reaches the store as `raw`).

use std::collections::VecDeque;

use spaces_sdk::EventKind;

use crate::draft::EventDraft;
use crate::plan::ExitInfo;

/// How many stderr lines a normalizer keeps for error reasons.
pub const STDERR_TAIL_LINES: usize = 20;

/// The last [`STDERR_TAIL_LINES`] non-blank stderr lines of a run, oldest first: the text of an
/// `error` ending and of `exited` when the supervisor's [`ExitInfo::stderr_tail`] says nothing
/// (or, for Codex, before it: [`StderrTail::text_or_exit`]).
#[derive(Debug, Clone, Default)]
pub struct StderrTail {
    lines: VecDeque<String>,
}

impl StderrTail {
    /// Keeps `line` (a trailing `\r` dropped) unless it is blank, dropping the oldest line when
    /// [`STDERR_TAIL_LINES`] are already kept.
    pub fn push(&mut self, line: &str) {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            return;
        }
        if self.lines.len() == STDERR_TAIL_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line.to_owned());
    }

    /// Forgets every kept line.
    pub fn clear(&mut self) {
        self.lines.clear();
    }

    /// True when no line is kept.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The kept lines joined by `\n` (empty when none).
    pub fn text(&self) -> String {
        self.lines.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// The tail to report for a process that exited as `exit`: the supervisor's
    /// `exit.stderr_tail` (its end trimmed) when it has any non-blank text, else [`Self::text`].
    pub fn text_for(&self, exit: &ExitInfo) -> String {
        if exit.stderr_tail.trim().is_empty() {
            self.text()
        } else {
            exit.stderr_tail.trim_end().to_owned()
        }
    }

    /// The tail to report when the kept lines come first (Codex, whose normalizers keep only the
    /// lines that say something): [`Self::text`] when a line is kept, else the non-blank lines of
    /// `exit.stderr_tail` that `keep` accepts, joined by `\n`.
    pub fn text_or_exit(&self, exit: &ExitInfo, keep: impl Fn(&str) -> bool) -> String {
        if self.is_empty() {
            exit.stderr_tail.lines().filter(|l| !l.trim().is_empty() && keep(l)).collect::<Vec<_>>().join("\n")
        } else {
            self.text()
        }
    }
}

/// The events of the non-blank stdout `line` of `turn`, given the events `out` its content gave:
/// when it gave none, one hidden `other` event with the line as text (never dropped); then the
/// first event carries the line as `raw` (the others none).
pub fn finish_line(turn: u32, line: &str, mut out: Vec<EventDraft>) -> Vec<EventDraft> {
    if out.is_empty() {
        out.push(EventDraft::new(turn, EventKind::Other).text(line));
    }
    if let Some(first) = out.first_mut() {
        first.raw = Some(line.to_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use spaces_sdk::Category;

    #[test]
    fn the_tail_keeps_the_last_non_blank_lines() {
        let mut tail = StderrTail::default();
        assert!(tail.is_empty());
        tail.push("  ");
        tail.push("\r");
        assert!(tail.is_empty(), "blank lines are not kept");
        for i in 0..STDERR_TAIL_LINES + 2 {
            tail.push(&format!("line {i}\r"));
        }
        let text = tail.text();
        assert_eq!(text.lines().count(), STDERR_TAIL_LINES);
        assert!(text.starts_with("line 2\n") && text.ends_with(&format!("line {}", STDERR_TAIL_LINES + 1)), "{text}");
        tail.clear();
        assert_eq!(tail.text(), "");
    }

    #[test]
    fn the_exit_tail_wins_in_text_for_and_the_kept_lines_in_text_or_exit() {
        let mut tail = StderrTail::default();
        let quiet = ExitInfo { code: Some(1), stderr_tail: " \n".into(), ..ExitInfo::default() };
        let loud = ExitInfo { code: Some(1), stderr_tail: "noise\nboom\n\n".into(), ..ExitInfo::default() };
        let keep = |l: &str| !l.starts_with("noise");
        assert_eq!(tail.text_for(&quiet), "");
        assert_eq!(tail.text_for(&loud), "noise\nboom");
        assert_eq!(tail.text_or_exit(&loud, keep), "boom");
        tail.push("mine");
        assert_eq!(tail.text_for(&quiet), "mine");
        assert_eq!(tail.text_for(&loud), "noise\nboom");
        assert_eq!(tail.text_or_exit(&loud, keep), "mine");
    }

    #[test]
    fn a_line_without_events_becomes_other_and_only_the_first_event_is_raw() {
        let out = finish_line(2, "junk", Vec::new());
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].turn, out[0].kind, out[0].category), (2, EventKind::Other, Category::Hidden));
        assert_eq!((out[0].text.as_deref(), out[0].raw.as_deref()), (Some("junk"), Some("junk")));
        let two = vec![EventDraft::new(2, EventKind::Message), EventDraft::new(2, EventKind::Usage)];
        let out = finish_line(2, "{}", two);
        assert_eq!(out.iter().map(|e| e.raw.as_deref()).collect::<Vec<_>>(), [Some("{}"), None]);
    }
}
