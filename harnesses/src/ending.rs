//! How a turn ends when its agent process does, and the `exited` event: one rule for every
//! harness, so the same exit reads the same whichever CLI it was.
//!
//! What the CLI printed decides a turn that it finished itself (each normalizer reads its own
//! result line). When the process ends with a turn still in flight, only the daemon's view
//! counts, in this order:
//! 1. the caller stopped the run: `stopped` (a stop is the last word, even over an interrupt);
//! 2. the caller interrupted the turn: `interrupted` (whatever the exit status: Codex exits 1 on
//!    SIGINT, a CLI may also die of the signal);
//! 3. the process was killed by a signal nobody asked for (SIGKILL, OOM, a segfault): `crashed`;
//! 4. anything else (an exit code, even 0, without the final result line; or no status at all):
//!    `error`.

use spaces_sdk::{Event, EventKind, StopReason, ToolStatus};

use crate::draft::EventDraft;
use crate::plan::ExitInfo;

/// Why a turn still in flight ends when the process exits as `exit`, given whether the caller
/// asked to interrupt it. See the module docs for the order.
pub fn stop_reason_at_exit(exit: &ExitInfo, interrupt_requested: bool) -> StopReason {
    if exit.stop_requested {
        StopReason::Stopped
    } else if interrupt_requested {
        StopReason::Interrupted
    } else if exit.code.is_none() && exit.signal.is_some() {
        StopReason::Crashed
    } else {
        StopReason::Error
    }
}

/// How the process ended, in words: `exited with code 1`, `was killed by signal 9`, `ended`.
pub fn how(exit: &ExitInfo) -> String {
    match (exit.code, exit.signal) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        (None, None) => "ended".to_owned(),
    }
}

/// The `exited` event of `turn` (the turn in flight or the last one): `activity`, summary `the
/// agent exited with code 0`, and the stderr `tail` (already filtered by the harness) as text
/// when there is one.
pub fn exited(turn: u32, exit: &ExitInfo, tail: &str) -> EventDraft {
    let ev = EventDraft::new(turn, EventKind::Exited).summary(format!("the agent {}", how(exit)));
    if tail.trim().is_empty() {
        ev
    } else {
        ev.text(tail.trim_end())
    }
}

/// The `tool_update` closing a tool still open when `turn` ends (every normalizer's rule: never
/// `completed`): `failed`, with the tool's `id`, `title` and `kind`, summary
/// [`crate::wording::tool_unfinished`].
pub fn unfinished_tool(turn: u32, id: String, title: String, kind: String) -> EventDraft {
    let summary = crate::wording::tool_unfinished(&title);
    EventDraft::new(turn, EventKind::ToolUpdate).tool(id, Some(title), Some(kind), ToolStatus::Failed).summary(summary)
}

/// The events that end `turn` when the daemon finds it cut off with no normalizer left to ask
/// (spacesd was killed mid-turn and restarted, case R35): each tool that `stored` (the run's
/// events so far) left open in that turn is closed `failed`, then one `turn_ended` `crashed`
/// with `why` as text. The same order a live crash gives (tools first, then the turn).
pub fn cut_off(turn: u32, stored: &[Event], why: &str) -> Vec<EventDraft> {
    let mut open: Vec<&Event> = Vec::new();
    for e in stored.iter().filter(|e| e.turn == turn && e.tool_id.is_some()) {
        match (e.kind, e.tool_status) {
            (EventKind::ToolCall, _) if !open.iter().any(|o| o.tool_id == e.tool_id) => open.push(e),
            (EventKind::ToolUpdate, Some(ToolStatus::Completed | ToolStatus::Failed)) => open.retain(|o| o.tool_id != e.tool_id),
            _ => {}
        }
    }
    let mut out: Vec<EventDraft> = open
        .into_iter()
        .map(|t| {
            let name = t.tool_title.clone().or_else(|| t.tool_id.clone()).unwrap_or_default();
            EventDraft::new(turn, EventKind::ToolUpdate)
                .tool(t.tool_id.clone().unwrap_or_default(), t.tool_title.clone(), t.tool_kind.clone(), ToolStatus::Failed)
                .summary(crate::wording::tool_finished(&name, false, None, Some(&format!("the turn was cut off ({why})"))))
        })
        .collect();
    out.push(EventDraft::new(turn, EventKind::TurnEnded).stop(StopReason::Crashed).text(why).summary(crate::wording::turn_ended(
        turn,
        StopReason::Crashed,
        Some(why),
    )));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use spaces_sdk::Category;

    fn exit(code: Option<i32>, signal: Option<i32>, stop: bool) -> ExitInfo {
        ExitInfo { code, signal, stop_requested: stop, ..ExitInfo::default() }
    }

    #[test]
    fn stop_then_interrupt_then_signal_then_error() {
        use StopReason::*;
        let table = [
            (exit(None, Some(15), true), true, Stopped),
            (exit(Some(0), None, true), false, Stopped),
            (exit(None, Some(2), false), true, Interrupted),
            (exit(Some(1), None, false), true, Interrupted),
            (exit(None, Some(9), false), false, Crashed),
            (exit(Some(0), None, false), false, Error),
            (exit(Some(52), None, false), false, Error),
            (exit(None, None, false), false, Error),
        ];
        for (info, interrupt, want) in table {
            assert_eq!(stop_reason_at_exit(&info, interrupt), want, "{info:?} interrupt={interrupt}");
        }
    }

    fn stored(turn: u32, kind: EventKind, tool: &str, status: ToolStatus) -> Event {
        Event {
            seq: 0,
            ts_ms: 0,
            turn,
            kind,
            category: kind.default_category(),
            text: None,
            tool_id: Some(tool.to_owned()),
            tool_title: Some(format!("Run {tool}")),
            tool_kind: Some("execute".to_owned()),
            tool_status: Some(status),
            stop_reason: None,
            summary: None,
            usage: None,
            files: None,
            raw: None,
        }
    }

    #[test]
    fn case_r35_a_cut_off_turn_closes_its_open_tools_failed_then_ends_crashed() {
        use EventKind::{ToolCall, ToolUpdate};
        use ToolStatus::*;
        let events = [
            stored(1, ToolCall, "old", InProgress), // turn 1: another turn, left alone
            stored(2, ToolCall, "done", InProgress),
            stored(2, ToolUpdate, "done", Completed),
            stored(2, ToolCall, "sleep", InProgress),
            stored(2, ToolUpdate, "sleep", InProgress),
            stored(2, ToolCall, "bad", InProgress),
            stored(2, ToolUpdate, "bad", Failed),
        ];
        let out = cut_off(2, &events, "spacesd restarted while turn 2 was running");
        let got: Vec<_> = out.iter().map(|e| (e.turn, e.kind, e.tool_id.as_deref(), e.tool_status, e.stop_reason)).collect();
        assert_eq!(
            got,
            [(2, ToolUpdate, Some("sleep"), Some(Failed), None), (2, EventKind::TurnEnded, None, None, Some(StopReason::Crashed)),]
        );
        assert_eq!(out[0].tool_title.as_deref(), Some("Run sleep"));
        assert_eq!(out[1].text.as_deref(), Some("spacesd restarted while turn 2 was running"));
        assert_eq!(cut_off(3, &events, "x").len(), 1, "a turn without tools only ends");
    }

    #[test]
    fn exited_is_activity_with_a_summary_and_the_tail() {
        let ev = exited(3, &exit(None, Some(9), false), "boom\n");
        assert_eq!((ev.turn, ev.kind, ev.category), (3, EventKind::Exited, Category::Activity));
        assert_eq!(ev.summary.as_deref(), Some("the agent was killed by signal 9"));
        assert_eq!(ev.text.as_deref(), Some("boom"));
        assert_eq!(exited(1, &exit(Some(0), None, false), " ").text, None);
    }
}
