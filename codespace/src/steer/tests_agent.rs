//! Agent-side behaviour on real SQLite files: the whole loop, delivery rules, finishing,
//! stopped works, restart, and concurrent claims from two connections.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::sync::{Arc, Barrier};

use spaces_sdk::ErrorCode;
use tempfile::TempDir;

use super::*;

fn store() -> (TempDir, Steering) {
    let dir = TempDir::new().unwrap();
    let s = Steering::open(&dir.path().join("spaces.db")).unwrap();
    (dir, s)
}

/// Draft, queue, and return the queued intent.
fn queued(s: &Steering, work_id: &str, body: &str, delivery: Delivery) -> Intent {
    let d = s.intent_create(work_id, body, None, Some(delivery)).unwrap();
    s.intent_queue(&d.intent_id, d.revision).unwrap()
}

fn claim(s: &Steering, work_id: &str) -> Option<ClaimedItem> {
    s.steer_claim_next(work_id).unwrap().item
}

#[test]
fn happy_path_draft_edit_queue_claim_complete_finish() {
    let (_d, s) = store();
    let w = s.work_open("ws-1", Some("fix the parser")).unwrap();
    assert!(w.work_id.starts_with("work-"));
    assert_eq!((w.state, w.title.as_deref()), (WorkState::Active, Some("fix the parser")));

    let draft = s.intent_create(&w.work_id, "also add tests", None, None).unwrap();
    assert!(draft.intent_id.starts_with("intent-"));
    assert_eq!((draft.revision, draft.state), (1, IntentState::Draft));
    assert_eq!((draft.kind.as_str(), draft.delivery), ("instruction", Delivery::NextCheckpoint));
    let edited = s.intent_edit(&draft.intent_id, "also add unit tests", 1).unwrap();
    assert_eq!(edited.revision, 2);
    let q = s.intent_queue(&draft.intent_id, 2).unwrap();
    assert_eq!(q.state, IntentState::Queued);

    let st = s.steer_status(&w.work_id).unwrap();
    assert_eq!(
        st,
        SteerStatus { work_id: w.work_id.clone(), state: WorkState::Active, queued: 1, claimed: 0, claimable_now: 1, queue_revision: 1 }
    );
    assert_eq!(s.coordination(&w.work_id).unwrap().pending_user_items, 1);

    let item = claim(&s, &w.work_id).unwrap();
    assert_eq!(
        item,
        ClaimedItem {
            intent_id: draft.intent_id.clone(),
            revision: 2,
            kind: "instruction".into(),
            delivery: Delivery::NextCheckpoint,
            content: "also add unit tests".into(),
        }
    );
    assert_eq!(claim(&s, &w.work_id), None);
    let done = s.steer_complete(&w.work_id, &item.intent_id, Outcome::Done).unwrap();
    assert_eq!(done.state, IntentState::Done);
    // Retrying the same completion is harmless.
    assert_eq!(s.steer_complete(&w.work_id, &item.intent_id, Outcome::Done).unwrap(), done);

    let fin = s.work_finish(&w.work_id).unwrap();
    assert_eq!((fin.closed, fin.reason, fin.state), (true, None, WorkState::Closed));
    assert!(s.work_finish(&w.work_id).unwrap().closed);
    assert_eq!(s.steer_status(&w.work_id).unwrap().queue_revision, 3);
}

#[test]
fn drafts_are_never_delivered() {
    let (_d, s) = store();
    let w = s.work_open("ws", None).unwrap();
    s.intent_create(&w.work_id, "not yet", None, None).unwrap();
    let st = s.steer_status(&w.work_id).unwrap();
    assert_eq!((st.queued, st.claimable_now), (0, 0));
    assert_eq!(claim(&s, &w.work_id), None);
    assert!(s.work_finish(&w.work_id).unwrap().closed);
}

#[test]
fn finish_refuses_while_instructions_are_queued_or_claimed() {
    let (_d, s) = store();
    let w = s.work_open("ws", None).unwrap();
    queued(&s, &w.work_id, "one", Delivery::NextCheckpoint);
    let fin = s.work_finish(&w.work_id).unwrap();
    assert_eq!(
        fin,
        WorkFinishResult { closed: false, reason: Some(FinishReason::PendingUserInput), queued: 1, claimed: 0, state: WorkState::Active }
    );
    let item = claim(&s, &w.work_id).unwrap();
    let fin = s.work_finish(&w.work_id).unwrap();
    assert_eq!((fin.closed, fin.queued, fin.claimed), (false, 0, 1));
    s.steer_complete(&w.work_id, &item.intent_id, Outcome::Blocked).unwrap();
    assert!(s.work_finish(&w.work_id).unwrap().closed);
    let err = s.steer_claim_next(&w.work_id).unwrap_err();
    assert_eq!(err.code(), ErrorCode::WorkClosed);
}

#[test]
fn after_current_work_waits_for_checkpoint_items_or_finish() {
    let (_d, s) = store();
    let w = s.work_open("ws", None).unwrap();
    let later = queued(&s, &w.work_id, "later", Delivery::AfterCurrentWork);
    let now = queued(&s, &w.work_id, "now", Delivery::NextCheckpoint);
    assert_eq!(s.steer_status(&w.work_id).unwrap().claimable_now, 1);
    let first = claim(&s, &w.work_id).unwrap();
    assert_eq!(first.intent_id, now.intent_id);
    // The checkpoint item is claimed, not completed: `later` still waits.
    assert_eq!(claim(&s, &w.work_id), None);
    s.steer_complete(&w.work_id, &first.intent_id, Outcome::Done).unwrap();
    assert_eq!(claim(&s, &w.work_id).unwrap().intent_id, later.intent_id);

    // After work_finish, after_current_work is claimable even with a checkpoint item open.
    let w2 = s.work_open("ws", None).unwrap();
    let a = queued(&s, &w2.work_id, "after", Delivery::AfterCurrentWork);
    let n = queued(&s, &w2.work_id, "checkpoint", Delivery::NextCheckpoint);
    s.intent_reorder(&w2.work_id, &[a.intent_id.clone(), n.intent_id.clone()]).unwrap();
    assert!(!s.work_finish(&w2.work_id).unwrap().closed);
    assert_eq!(s.steer_status(&w2.work_id).unwrap().claimable_now, 2);
    assert_eq!(claim(&s, &w2.work_id).unwrap().intent_id, a.intent_id);
}

#[test]
fn next_work_moves_to_the_next_work_of_the_workspace() {
    let (_d, s) = store();
    let w1 = s.work_open("ws", None).unwrap();
    let nw = queued(&s, &w1.work_id, "next time", Delivery::NextWork);
    let st = s.steer_status(&w1.work_id).unwrap();
    assert_eq!((st.queued, st.claimable_now), (0, 0));
    assert_eq!(claim(&s, &w1.work_id), None);
    assert!(s.work_finish(&w1.work_id).unwrap().closed);

    let other = s.work_open("other-ws", None).unwrap();
    assert!(s.intents(&other.work_id).unwrap().is_empty());
    let w2 = s.work_open("ws", None).unwrap();
    let moved = s.intents(&w2.work_id).unwrap();
    assert_eq!(moved.len(), 1);
    assert_eq!((moved[0].intent_id.as_str(), moved[0].delivery), (nw.intent_id.as_str(), Delivery::NextCheckpoint));
    assert!(s.intents(&w1.work_id).unwrap().is_empty());
    assert_eq!(claim(&s, &w2.work_id).unwrap().content, "next time");

    // A stopped work hands its next_work items on as well.
    let carried = queued(&s, &w2.work_id, "after the stop", Delivery::NextWork);
    s.work_stop(&w2.work_id).unwrap();
    let w3 = s.work_open("ws", None).unwrap();
    assert_eq!(ids_of(&s.intents(&w3.work_id).unwrap()), vec![carried.intent_id]);
    assert_eq!(s.steer_status(&w3.work_id).unwrap().queued, 1);
}

fn ids_of(intents: &[Intent]) -> Vec<String> {
    intents.iter().map(|i| i.intent_id.clone()).collect()
}

#[test]
fn stopped_work_refuses_agent_calls() {
    let (_d, s) = store();
    let w = s.work_open("ws", None).unwrap();
    let i = queued(&s, &w.work_id, "x", Delivery::NextCheckpoint);
    assert_eq!(s.work_stop(&w.work_id).unwrap().state, WorkState::Stopped);
    let codes = [
        s.steer_claim_next(&w.work_id).unwrap_err().code(),
        s.steer_complete(&w.work_id, &i.intent_id, Outcome::Done).unwrap_err().code(),
        s.work_finish(&w.work_id).unwrap_err().code(),
        s.intent_create(&w.work_id, "y", None, None).unwrap_err().code(),
    ];
    assert_eq!(codes, [ErrorCode::WorkClosed; 4]);
    assert_eq!(s.steer_status(&w.work_id).unwrap().state, WorkState::Stopped);
    assert_eq!(s.coordination(&w.work_id).unwrap().pending_user_items, 0);
    assert_eq!(s.steer_status("work-nope").unwrap_err().code(), ErrorCode::WorkNotFound);
}

#[test]
fn reopened_store_sees_everything() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("spaces.db");
    let (w, i) = {
        let s = Steering::open(&path).unwrap();
        let w = s.work_open("ws", Some("t")).unwrap();
        let i = queued(&s, &w.work_id, "survive", Delivery::NextCheckpoint);
        s.work_finish(&w.work_id).unwrap();
        (w, i)
    };
    let s = Steering::open(&path).unwrap();
    assert_eq!(s.work(&w.work_id).unwrap(), w);
    assert_eq!(s.intents(&w.work_id).unwrap(), vec![i.clone()]);
    // The finish request survived too: claim then finish closes.
    assert_eq!(claim(&s, &w.work_id).unwrap().intent_id, i.intent_id);
    s.steer_complete(&w.work_id, &i.intent_id, Outcome::Done).unwrap();
    assert!(s.work_finish(&w.work_id).unwrap().closed);
}

#[test]
fn concurrent_claims_on_two_connections_never_claim_twice() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("spaces.db");
    let setup = Steering::open(&path).unwrap();
    let w = setup.work_open("ws", None).unwrap();
    let total = 120;
    for n in 0..total {
        queued(&setup, &w.work_id, &format!("item {n}"), Delivery::NextCheckpoint);
    }
    let work_id = Arc::new(w.work_id.clone());
    let start = Arc::new(Barrier::new(2));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (path, work_id, start) = (path.clone(), Arc::clone(&work_id), Arc::clone(&start));
            std::thread::spawn(move || {
                let s = Steering::open(&path).unwrap();
                start.wait();
                let mut got = Vec::new();
                while let Some(item) = s.steer_claim_next(&work_id).unwrap().item {
                    got.push(item.intent_id);
                }
                got
            })
        })
        .collect();
    let all: Vec<String> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    let unique: HashSet<&String> = all.iter().collect();
    assert_eq!((all.len(), unique.len()), (total, total));
    assert_eq!(setup.steer_status(&w.work_id).unwrap().claimed, total as u64);
}
