//! The delivery rules: what a work still owes the user, what is claimable now, and how
//! `next_work` intents move to the next work of their workspace.

use rusqlite::{params, Connection};

use super::rows::{self, WorkRow, INTENT_COLS};
use super::types::{Delivery, Intent, IntentState, WorkState};
use crate::error::Result;

/// What a work still owes: `queued` deliverable intents (not `next_work`), `claimed` ones not yet
/// completed, and the queued intents claimable right now, in queue order.
#[derive(Debug, Clone)]
pub struct Pending {
    pub queued: u64,
    pub claimed: u64,
    pub claimable: Vec<Intent>,
}

impl Pending {
    /// Queued deliverable plus claimed: what `work_finish` waits for.
    pub fn items(&self) -> u64 {
        self.queued + self.claimed
    }
}

/// Compute [`Pending`] for `work`. Nothing is claimable unless the work is active.
/// Rule: `next_checkpoint` is always claimable; `after_current_work` once no `next_checkpoint`
/// intent is queued or claimed, or once `work_finish` was called; `next_work` never.
pub fn pending(c: &Connection, work: &WorkRow) -> Result<Pending> {
    let open = rows::list_intents(c, &work.work.work_id, &[IntentState::Queued, IntentState::Claimed])?;
    let deliverable = |i: &&Intent| i.delivery != Delivery::NextWork;
    let queued = open.iter().filter(deliverable).filter(|i| i.state == IntentState::Queued);
    let claimed = open.iter().filter(|i| i.state == IntentState::Claimed).count() as u64;
    let checkpoint_open = open.iter().any(|i| i.delivery == Delivery::NextCheckpoint);
    let after_ok = !checkpoint_open || work.finish_requested;
    let active = work.work.state == WorkState::Active;
    let claimable = queued
        .clone()
        .filter(|i| match i.delivery {
            Delivery::NextCheckpoint => active,
            Delivery::AfterCurrentWork => active && after_ok,
            Delivery::NextWork => false,
        })
        .cloned()
        .collect();
    Ok(Pending { queued: queued.count() as u64, claimed, claimable })
}

/// Move every queued `next_work` intent of closed or stopped works in `workspace_id` to the new
/// work `to_work_id`, oldest work first, keeping their order. A moved intent becomes
/// `next_checkpoint` (so it is delivered in the new work), keeps its revision (the body is
/// unchanged) and goes to the end of the new queue. Both works' `queue_revision` are bumped.
/// Returns how many moved.
pub fn carry_next_work(c: &Connection, workspace_id: &str, to_work_id: &str, now: u64) -> Result<usize> {
    let sql = format!(
        "SELECT {} FROM steer_intents i JOIN steer_works w ON w.work_id = i.work_id
         WHERE w.workspace_id = ?1 AND w.state != 'active' AND w.work_id != ?2
           AND i.state = 'queued' AND i.delivery = 'next_work'
         ORDER BY w.seq, i.position, i.seq",
        INTENT_COLS.split(", ").map(|col| format!("i.{col}")).collect::<Vec<_>>().join(", ")
    );
    let mut stmt = c.prepare(&sql)?;
    let carried: Vec<Intent> = stmt.query_map(params![workspace_id, to_work_id], rows::intent_row)?.collect::<rusqlite::Result<_>>()?;
    let start = rows::next_position(c, to_work_id)?;
    for (position, intent) in (start..).zip(&carried) {
        c.execute(
            "UPDATE steer_intents SET work_id = ?2, delivery = ?3, position = ?4, updated_at = ?5
             WHERE intent_id = ?1",
            params![intent.intent_id, to_work_id, Delivery::NextCheckpoint.as_str(), position, now as i64],
        )?;
        rows::bump_queue(c, &intent.work_id, now)?;
    }
    if !carried.is_empty() {
        rows::bump_queue(c, to_work_id, now)?;
    }
    Ok(carried.len())
}
