//! Which webhook event types a run event is (`spaces_sdk::WEBHOOK_EVENTS`), and the body posted.

use spaces_sdk::{Event, EventKind, StopReason};

/// The webhook event types of run event `e`: `turn.ended` and what its stop reason means for
/// the run, `run.started` for the first turn's start, `approval.needed` for a permission.
pub fn kinds_of(e: &Event) -> Vec<&'static str> {
    match e.kind {
        EventKind::TurnStarted if e.turn == 1 => vec!["run.started"],
        EventKind::Permission => vec!["approval.needed"],
        EventKind::TurnEnded => {
            let then = match e.stop_reason {
                Some(StopReason::EndTurn) => Some("run.idle"),
                Some(StopReason::Error | StopReason::Crashed) => Some("run.failed"),
                Some(StopReason::Stopped) => Some("run.stopped"),
                Some(StopReason::BudgetReached) => Some("budget.reached"),
                Some(StopReason::QuotaWaiting) => Some("quota.waiting"),
                Some(StopReason::Interrupted | StopReason::MaxTurns) | None => None,
            };
            std::iter::once("turn.ended").chain(then).collect()
        }
        _ => Vec::new(),
    }
}

/// Whether run event `e` makes any delivery (the scanner's filter on the event log).
pub fn wanted(e: &Event) -> bool {
    !kinds_of(e).is_empty()
}

/// The JSON body of one delivery: `{type, timestamp, data: {run_id, space, agent, event}}`
/// (Standard Webhooks' envelope; `timestamp` is RFC 3339 of the event's time).
pub fn body(kind: &str, run_id: &str, space: &str, agent: &str, e: &Event) -> String {
    let ts = rfc3339_ms(e.ts_ms);
    serde_json::json!({
        "type": kind,
        "timestamp": ts,
        "data": {"run_id": run_id, "space": space, "agent": agent, "event": e},
    })
    .to_string()
}

/// Unix ms as RFC 3339 UTC with ms (`2026-12-03T11:49:24.123Z`).
fn rfc3339_ms(ms: u64) -> String {
    chrono::DateTime::from_timestamp_millis(ms as i64).unwrap_or_default().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(1_796_298_564_123), "2026-12-03T11:49:24.123Z");
        assert_eq!(rfc3339_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
