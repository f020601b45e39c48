//! User-side calls (HTTP `/inbox`): list works and intents, draft, edit, queue, cancel, reorder,
//! stop a work. Rules: see the `steer` module docs.

use spaces_sdk::bounded;
use std::collections::HashSet;

use rusqlite::params;

use super::rows;
use super::types::{Delivery, Intent, IntentState, Work, WorkState};
use super::{new_id, Steering};
use crate::error::{Error, Result};

fn check_body(body: &str) -> Result<()> {
    if body.trim().is_empty() {
        return Err(Error::invalid("body is empty; write the instruction text"));
    }
    Ok(())
}

fn check_revision(intent: &Intent, revision: u64) -> Result<()> {
    if intent.revision != revision {
        return Err(Error::IntentRevisionConflict { intent_id: intent.intent_id.clone(), current: intent.revision, given: revision });
    }
    Ok(())
}

fn refuse_state(intent: &Intent, doing: &'static str) -> Error {
    if intent.state == IntentState::Claimed {
        return Error::IntentAlreadyClaimed { intent_id: intent.intent_id.clone(), doing };
    }
    Error::IntentNotEditable {
        intent_id: intent.intent_id.clone(),
        reason: format!("{}; only drafts can be {doing} (cancel it and write a new one)", intent.state.as_str()),
    }
}

impl Steering {
    /// Works in creation order, all or those of `workspace_id`. Errors: `INTERNAL`.
    pub fn works(&self, workspace_id: Option<&str>) -> Result<Vec<Work>> {
        self.read(|tx| rows::list_works(tx, workspace_id))
    }

    /// One work. Errors: `WORK_NOT_FOUND`.
    pub fn work(&self, work_id: &str) -> Result<Work> {
        self.read(|tx| rows::load_work(tx, work_id).map(|r| r.work))
    }

    /// Every intent of the work, in queue order. Errors: `WORK_NOT_FOUND`.
    pub fn intents(&self, work_id: &str) -> Result<Vec<Intent>> {
        self.read(|tx| {
            rows::load_work(tx, work_id)?;
            rows::list_intents(tx, work_id, &[])
        })
    }

    /// `POST /inbox/works/{id}/intents {body, kind?, delivery?}`: a draft at revision 1 at the end
    /// of the queue; `kind` defaults to `"instruction"`, `delivery` to `next_checkpoint`.
    /// Errors: `INVALID_ARGUMENT` (empty body or kind), `WORK_NOT_FOUND`, `WORK_CLOSED`.
    pub fn intent_create(&self, work_id: &str, body: &str, kind: Option<&str>, delivery: Option<Delivery>) -> Result<Intent> {
        check_body(body)?;
        let kind = kind.unwrap_or("instruction");
        if kind.trim().is_empty() {
            return Err(Error::invalid("kind is empty; omit it or name the kind, e.g. \"instruction\""));
        }
        self.write(|tx, now| {
            rows::active_work(tx, work_id)?;
            let intent = Intent {
                intent_id: new_id("intent"),
                work_id: work_id.to_owned(),
                revision: 1,
                kind: kind.to_owned(),
                delivery: delivery.unwrap_or_default(),
                state: IntentState::Draft,
                content: body.to_owned(),
                created_at: now,
                updated_at: now,
            };
            let position = rows::next_position(tx, work_id)?;
            tx.execute(
                "INSERT INTO steer_intents (intent_id, work_id, revision, kind, delivery, state,
                 content, position, created_at, updated_at)
                 VALUES (?1, ?2, 1, ?3, ?4, 'draft', ?5, ?6, ?7, ?7)",
                params![intent.intent_id, work_id, intent.kind, intent.delivery.as_str(), intent.content, position, now as i64],
            )?;
            Ok(intent)
        })
    }

    /// Replace a draft's body; `revision` must be the current one; the revision goes up by one.
    /// Errors: `INVALID_ARGUMENT`, `INTENT_NOT_FOUND`, `WORK_CLOSED`, `INTENT_ALREADY_CLAIMED`,
    /// `INTENT_NOT_EDITABLE` (not a draft), `INTENT_REVISION_CONFLICT`.
    pub fn intent_edit(&self, intent_id: &str, body: &str, revision: u64) -> Result<Intent> {
        check_body(body)?;
        self.write(|tx, now| {
            let intent = rows::load_intent(tx, intent_id)?;
            rows::active_work(tx, &intent.work_id)?;
            if intent.state != IntentState::Draft {
                return Err(refuse_state(&intent, "edited"));
            }
            check_revision(&intent, revision)?;
            tx.execute(
                "UPDATE steer_intents SET content = ?2, revision = revision + 1, updated_at = ?3
                 WHERE intent_id = ?1",
                params![intent_id, body, now as i64],
            )?;
            rows::load_intent(tx, intent_id)
        })
    }

    /// `POST /inbox/intents/{id}/queue {revision}`: draft -> queued, so the agent may claim it.
    /// Queuing an already queued intent at the same revision returns it unchanged.
    /// Errors: `INTENT_NOT_FOUND`, `WORK_CLOSED`, `INTENT_REVISION_CONFLICT`,
    /// `INTENT_ALREADY_CLAIMED`, `INTENT_NOT_EDITABLE` (ended or cancelled).
    pub fn intent_queue(&self, intent_id: &str, revision: u64) -> Result<Intent> {
        self.write(|tx, now| {
            let intent = rows::load_intent(tx, intent_id)?;
            rows::active_work(tx, &intent.work_id)?;
            match intent.state {
                IntentState::Draft => check_revision(&intent, revision)?,
                IntentState::Queued => {
                    check_revision(&intent, revision)?;
                    return Ok(intent);
                }
                _ => return Err(refuse_state(&intent, "queued")),
            }
            rows::set_intent_state(tx, intent_id, IntentState::Queued, now)?;
            rows::bump_queue(tx, &intent.work_id, now)?;
            rows::load_intent(tx, intent_id)
        })
    }

    /// Cancel a draft or queued intent (also on a closed or stopped work); cancelling a cancelled
    /// intent returns it unchanged. Errors: `INTENT_NOT_FOUND`, `INTENT_ALREADY_CLAIMED`,
    /// `INTENT_NOT_EDITABLE` (done or blocked).
    pub fn intent_cancel(&self, intent_id: &str) -> Result<Intent> {
        self.write(|tx, now| {
            let intent = rows::load_intent(tx, intent_id)?;
            match intent.state {
                IntentState::Cancelled => return Ok(intent),
                IntentState::Draft => {}
                IntentState::Queued => rows::bump_queue(tx, &intent.work_id, now)?,
                _ => return Err(refuse_state(&intent, "cancelled")),
            }
            rows::set_intent_state(tx, intent_id, IntentState::Cancelled, now)?;
            rows::load_intent(tx, intent_id)
        })
    }

    /// Put the work's open (draft and queued) intents in the order of `intent_ids`, which must
    /// name each of them exactly once; they follow every ended intent in the listing. Returns
    /// all intents of the work in the new queue order. Errors: `WORK_NOT_FOUND`, `WORK_CLOSED`,
    /// `INVALID_ARGUMENT` (not a permutation of the open intents).
    pub fn intent_reorder(&self, work_id: &str, intent_ids: &[String]) -> Result<Vec<Intent>> {
        self.write(|tx, now| {
            rows::active_work(tx, work_id)?;
            let open = rows::list_intents(tx, work_id, &[IntentState::Draft, IntentState::Queued])?;
            let want: HashSet<&str> = open.iter().map(|i| i.intent_id.as_str()).collect();
            let got: HashSet<&str> = intent_ids.iter().map(String::as_str).collect();
            if got.len() != intent_ids.len() || got != want {
                return Err(Error::invalid(format!(
                    "intent_ids must list each open (draft or queued) intent of work {:?} \
                     exactly once; it has {} open intents",
                    bounded(work_id),
                    open.len()
                )));
            }
            let start = rows::next_position(tx, work_id)?;
            for (position, id) in (start..).zip(intent_ids) {
                tx.execute(
                    "UPDATE steer_intents SET position = ?2, updated_at = ?3 WHERE intent_id = ?1",
                    params![id, position, now as i64],
                )?;
            }
            rows::bump_queue(tx, work_id, now)?;
            rows::list_intents(tx, work_id, &[])
        })
    }

    /// Stop a work: state `stopped`; agent calls on it then fail with `WORK_CLOSED`. Its queued
    /// `next_work` intents go to the next work of the workspace. Stopping a closed or stopped
    /// work returns it unchanged. Errors: `WORK_NOT_FOUND`.
    pub fn work_stop(&self, work_id: &str) -> Result<Work> {
        self.write(|tx, now| {
            let row = rows::load_work(tx, work_id)?;
            if row.work.state == WorkState::Active {
                rows::set_work_state(tx, work_id, WorkState::Stopped, row.finish_requested, now)?;
            }
            rows::load_work(tx, work_id).map(|r| r.work)
        })
    }
}
