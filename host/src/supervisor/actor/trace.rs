//! The actor's spans (issue 33, [`crate::traces`]): it sees every event it stores, so it knows
//! when a turn and each tool call started and ended; a tool call's span goes when it ends, a
//! turn's with its ledger row, the run's when the run stops or is done. Nothing when the
//! operator set no OTLP endpoint.

use std::collections::HashMap;

use spaces_harnesses::EventDraft;
use spaces_sdk::{EventKind, ToolStatus, TurnUsage};

use super::Actor;

/// What the actor keeps of the turn in flight for its spans.
#[derive(Debug, Default)]
pub struct TurnTrace {
    /// When the turn in flight started, Unix ms.
    pub started_ms: Option<u64>,
    /// Tool calls open: id -> (started, title, kind).
    pub tools: HashMap<String, (u64, String, String)>,
    /// A caller's `traceparent` given with the message that started the turn.
    pub link: Option<String>,
    /// The `traceparent` of the message being taken (it becomes `link` if it starts a turn now).
    pub pending_link: Option<String>,
}

/// The file in the run directory keeping the caller's `traceparent` of `agent_start`.
pub const TRACEPARENT_FILE: &str = "traceparent";

impl Actor {
    /// The run's trace, when traces are on (the caller's `traceparent` kept at start).
    pub(super) fn load_trace(&mut self) {
        if self.inner.traces.is_none() {
            return;
        }
        let kept = std::fs::read_to_string(self.inner.cfg.run_dir(&self.run.run_id).join(TRACEPARENT_FILE)).ok();
        self.trace = Some(crate::traces::run_trace(&self.run.run_id, kept.as_deref()));
    }

    /// The `TRACEPARENT` of the agent process starting turn `turn`.
    pub(super) fn traceparent_env(&self, turn: u32) -> Option<String> {
        self.trace.as_ref().map(|rt| crate::traces::traceparent_of(rt, &self.run.run_id, turn))
    }

    /// Events about to be stored: turn starts and tool calls are timed; a finished tool call's
    /// span goes.
    pub(super) fn trace_events(&mut self, drafts: &[EventDraft]) {
        let (Some(traces), Some(rt)) = (self.inner.traces.clone(), self.trace) else { return };
        let now = spaces_store::now_ms();
        for d in drafts {
            match (d.kind, d.tool_id.as_deref()) {
                (EventKind::TurnStarted, _) => self.turn_trace.started_ms = Some(now),
                (EventKind::ToolCall, Some(id)) => {
                    let title = d.tool_title.clone().unwrap_or_default();
                    self.turn_trace.tools.insert(id.to_owned(), (now, title, d.tool_kind.clone().unwrap_or_default()));
                }
                (EventKind::ToolUpdate, Some(id)) if matches!(d.tool_status, Some(ToolStatus::Completed | ToolStatus::Failed)) => {
                    if let Some((start, title, kind)) = self.turn_trace.tools.remove(id) {
                        let ok = d.tool_status == Some(ToolStatus::Completed);
                        traces.tool(&rt, &self.run.run_id, d.turn, id, &title, &kind, start, now, ok);
                    }
                }
                _ => {}
            }
        }
    }

    /// A turn ended with ledger row `row`, after `duration_ms`: its span.
    pub(super) fn trace_turn(&mut self, row: &TurnUsage, duration_ms: u64) {
        let (Some(traces), Some(rt)) = (self.inner.traces.clone(), self.trace) else { return };
        let start = self.turn_trace.started_ms.take().unwrap_or(row.ended_ms.saturating_sub(duration_ms));
        let link = self.turn_trace.link.take();
        traces.turn(&rt, &self.run.run_id, start, row, link.as_deref());
        self.turn_trace.tools.clear();
    }

    /// The run stopped or is done: its span.
    pub(super) fn trace_run_end(&self) {
        let (Some(traces), Some(rt)) = (self.inner.traces.clone(), self.trace) else { return };
        let r = &self.run;
        traces.run(&rt, &r.run_id, &r.agent, &r.space, r.created_ms, spaces_store::now_ms(), self.ledger.spent());
    }
}
