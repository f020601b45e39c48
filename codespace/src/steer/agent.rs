//! Agent-side calls (MCP tools): open a work, look at its queue, claim and complete intents,
//! finish. Rules: see the `steer` module docs.

use rusqlite::params;

use super::queue;
use super::rows::{self, WorkRow};
use super::types::{
    ClaimedItem, Coordination, FinishReason, Intent, IntentState, Outcome, SteerClaimNextResult, SteerStatus, Work, WorkFinishResult,
    WorkState,
};
use super::{new_id, Steering};
use crate::error::{Error, Result};

impl Steering {
    /// `work_open{workspace_id, title?}`: a new active work `work-<uuid>`. Queued `next_work`
    /// intents left on closed or stopped works of the same workspace move to it.
    /// Errors: `INVALID_ARGUMENT` (empty `workspace_id`), `INTERNAL`.
    pub fn work_open(&self, workspace_id: &str, title: Option<&str>) -> Result<Work> {
        if workspace_id.trim().is_empty() {
            return Err(Error::invalid("workspace_id is empty; pass the id of the workspace this work is about"));
        }
        self.write(|tx, now| {
            let work = Work {
                work_id: new_id("work"),
                workspace_id: workspace_id.to_owned(),
                title: title.map(str::to_owned),
                state: WorkState::Active,
                created_at: now,
            };
            tx.execute(
                "INSERT INTO steer_works (work_id, workspace_id, title, state, created_at,
                 updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
                params![work.work_id, work.workspace_id, work.title, "active", now as i64],
            )?;
            queue::carry_next_work(tx, workspace_id, &work.work_id, now)?;
            Ok(work)
        })
    }

    /// `steer_status{work_id}`: counts only, never bodies. Answers for closed and stopped works
    /// too (nothing is claimable there). Errors: `WORK_NOT_FOUND`.
    pub fn steer_status(&self, work_id: &str) -> Result<SteerStatus> {
        self.read(|tx| {
            let row = rows::load_work(tx, work_id)?;
            let p = queue::pending(tx, &row)?;
            Ok(SteerStatus {
                work_id: row.work.work_id,
                state: row.work.state,
                queued: p.queued,
                claimed: p.claimed,
                claimable_now: p.claimable.len() as u64,
                queue_revision: row.queue_revision,
            })
        })
    }

    /// `steer_claim_next{work_id}`: claim the first claimable queued intent in queue order;
    /// `item` is absent when none is. Errors: `WORK_NOT_FOUND`, `WORK_CLOSED`.
    pub fn steer_claim_next(&self, work_id: &str) -> Result<SteerClaimNextResult> {
        self.write(|tx, now| {
            let row = rows::active_work(tx, work_id)?;
            let Some(next) = queue::pending(tx, &row)?.claimable.into_iter().next() else {
                return Ok(SteerClaimNextResult { item: None });
            };
            rows::set_intent_state(tx, &next.intent_id, IntentState::Claimed, now)?;
            rows::bump_queue(tx, work_id, now)?;
            Ok(SteerClaimNextResult {
                item: Some(ClaimedItem {
                    intent_id: next.intent_id,
                    revision: next.revision,
                    kind: next.kind,
                    delivery: next.delivery,
                    content: next.content,
                }),
            })
        })
    }

    /// `steer_complete{work_id, intent_id, outcome}`: end a claimed intent as `done` or
    /// `blocked`. Repeating the same outcome returns the intent unchanged.
    /// Errors: `WORK_NOT_FOUND`, `WORK_CLOSED`, `INTENT_NOT_FOUND` (also when the intent belongs
    /// to another work), `INVALID_ARGUMENT` (not claimed yet), `INTENT_NOT_EDITABLE` (already
    /// ended otherwise or cancelled).
    pub fn steer_complete(&self, work_id: &str, intent_id: &str, outcome: Outcome) -> Result<Intent> {
        self.write(|tx, now| {
            rows::active_work(tx, work_id)?;
            let intent = rows::load_intent(tx, intent_id)?;
            if intent.work_id != work_id {
                return Err(Error::IntentNotInWork { intent_id: intent_id.to_owned(), work_id: work_id.to_owned() });
            }
            let target = match outcome {
                Outcome::Done => IntentState::Done,
                Outcome::Blocked => IntentState::Blocked,
            };
            match intent.state {
                IntentState::Claimed => {}
                s if s == target => return Ok(intent),
                IntentState::Draft | IntentState::Queued => return Err(Error::IntentNotClaimed { intent_id: intent_id.to_owned() }),
                s => return Err(Error::IntentNotEditable { intent_id: intent_id.to_owned(), reason: format!("already {}", s.as_str()) }),
            }
            rows::set_intent_state(tx, intent_id, target, now)?;
            rows::bump_queue(tx, work_id, now)?;
            rows::load_intent(tx, intent_id)
        })
    }

    /// `work_finish{work_id}`: close the work if no deliverable intent is queued or claimed;
    /// otherwise `closed: false, reason: "pending_user_input"` (and from then on
    /// `after_current_work` intents are claimable). `next_work` intents never hold it open. On a
    /// closed work it returns `closed: true` again. Errors: `WORK_NOT_FOUND`, `WORK_CLOSED`
    /// (stopped by the user).
    pub fn work_finish(&self, work_id: &str) -> Result<WorkFinishResult> {
        self.write(|tx, now| {
            let row = rows::load_work(tx, work_id)?;
            let closed = WorkFinishResult { closed: true, reason: None, queued: 0, claimed: 0, state: WorkState::Closed };
            match row.work.state {
                WorkState::Closed => return Ok(closed),
                WorkState::Stopped => return Err(rows::work_closed(&row.work)),
                WorkState::Active => {}
            }
            let p = queue::pending(tx, &row)?;
            if p.items() > 0 {
                rows::set_work_state(tx, work_id, WorkState::Active, true, now)?;
                return Ok(WorkFinishResult {
                    closed: false,
                    reason: Some(FinishReason::PendingUserInput),
                    queued: p.queued,
                    claimed: p.claimed,
                    state: WorkState::Active,
                });
            }
            rows::set_work_state(tx, work_id, WorkState::Closed, true, now)?;
            Ok(closed)
        })
    }

    /// The `coordination{work_id, pending_user_items, queue_revision}` block the service attaches
    /// to results of tools given a `work_id`. Errors: `WORK_NOT_FOUND`.
    pub fn coordination(&self, work_id: &str) -> Result<Coordination> {
        self.read(|tx| {
            let row: WorkRow = rows::load_work(tx, work_id)?;
            let p = queue::pending(tx, &row)?;
            let pending = if row.work.state == WorkState::Active { p.items() } else { 0 };
            Ok(Coordination { work_id: row.work.work_id, pending_user_items: pending, queue_revision: row.queue_revision })
        })
    }
}
