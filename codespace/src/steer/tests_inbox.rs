//! User-side rules on real SQLite files: revisions, what can be edited, queued, cancelled and
//! reordered, and argument checks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use spaces_sdk::ErrorCode;
use tempfile::TempDir;

use super::*;

fn store() -> (TempDir, Steering, Work) {
    let dir = TempDir::new().unwrap();
    let s = Steering::open(&dir.path().join("spaces.db")).unwrap();
    let w = s.work_open("ws", None).unwrap();
    (dir, s, w)
}

fn ids(intents: &[Intent]) -> Vec<String> {
    intents.iter().map(|i| i.intent_id.clone()).collect()
}

#[test]
fn stale_revisions_conflict_on_edit_and_queue() {
    let (_d, s, w) = store();
    let i = s.intent_create(&w.work_id, "v1", Some("question"), None).unwrap();
    assert_eq!(i.kind, "question");
    s.intent_edit(&i.intent_id, "v2", 1).unwrap();
    let code = |r: crate::error::Result<Intent>| r.unwrap_err().code();
    assert_eq!(code(s.intent_edit(&i.intent_id, "v3", 1)), ErrorCode::IntentRevisionConflict);
    assert_eq!(code(s.intent_queue(&i.intent_id, 1)), ErrorCode::IntentRevisionConflict);
    let q = s.intent_queue(&i.intent_id, 2).unwrap();
    assert_eq!((q.state, q.content.as_str()), (IntentState::Queued, "v2"));
    // Queue again at the same revision: unchanged, queue_revision not bumped.
    assert_eq!(s.intent_queue(&i.intent_id, 2).unwrap(), q);
    assert_eq!(s.steer_status(&w.work_id).unwrap().queue_revision, 1);
    // Queued intents are not editable.
    assert_eq!(code(s.intent_edit(&i.intent_id, "v3", 2)), ErrorCode::IntentNotEditable);
}

#[test]
fn cancel_rules_follow_the_state() {
    let (_d, s, w) = store();
    let code = |r: crate::error::Result<Intent>| r.unwrap_err().code();
    let draft = s.intent_create(&w.work_id, "d", None, None).unwrap();
    assert_eq!(s.intent_cancel(&draft.intent_id).unwrap().state, IntentState::Cancelled);
    assert_eq!(s.steer_status(&w.work_id).unwrap().queue_revision, 0);
    assert_eq!(code(s.intent_queue(&draft.intent_id, 1)), ErrorCode::IntentNotEditable);

    let q = s.intent_create(&w.work_id, "q", None, None).unwrap();
    s.intent_queue(&q.intent_id, 1).unwrap();
    let c = s.intent_cancel(&q.intent_id).unwrap();
    assert_eq!(c.state, IntentState::Cancelled);
    assert_eq!(s.intent_cancel(&q.intent_id).unwrap(), c);
    assert_eq!(s.steer_claim_next(&w.work_id).unwrap().item, None);

    let k = s.intent_create(&w.work_id, "k", None, None).unwrap();
    s.intent_queue(&k.intent_id, 1).unwrap();
    s.steer_claim_next(&w.work_id).unwrap().item.unwrap();
    assert_eq!(code(s.intent_cancel(&k.intent_id)), ErrorCode::IntentAlreadyClaimed);
    assert_eq!(code(s.intent_edit(&k.intent_id, "x", 1)), ErrorCode::IntentAlreadyClaimed);
    s.steer_complete(&w.work_id, &k.intent_id, Outcome::Done).unwrap();
    assert_eq!(code(s.intent_cancel(&k.intent_id)), ErrorCode::IntentNotEditable);
    assert_eq!(code(s.steer_complete(&w.work_id, &k.intent_id, Outcome::Blocked)), ErrorCode::IntentNotEditable);
}

#[test]
fn complete_needs_a_claim_on_the_same_work() {
    let (_d, s, w) = store();
    let other = s.work_open("ws", None).unwrap();
    let i = s.intent_create(&w.work_id, "x", None, None).unwrap();
    s.intent_queue(&i.intent_id, 1).unwrap();
    let code = |r: crate::error::Result<Intent>| r.unwrap_err().code();
    assert_eq!(code(s.steer_complete(&w.work_id, &i.intent_id, Outcome::Done)), ErrorCode::InvalidArgument);
    assert_eq!(code(s.steer_complete(&other.work_id, &i.intent_id, Outcome::Done)), ErrorCode::IntentNotFound);
    assert_eq!(code(s.steer_complete(&w.work_id, "intent-nope", Outcome::Done)), ErrorCode::IntentNotFound);
}

#[test]
fn reorder_sets_claim_order_and_checks_the_permutation() {
    let (_d, s, w) = store();
    let mk = |b: &str| {
        let i = s.intent_create(&w.work_id, b, None, None).unwrap();
        s.intent_queue(&i.intent_id, 1).unwrap()
    };
    let (a, b, c) = (mk("a"), mk("b"), mk("c"));
    let draft = s.intent_create(&w.work_id, "draft", None, None).unwrap();
    let first = s.steer_claim_next(&w.work_id).unwrap().item.unwrap();
    assert_eq!(first.intent_id, a.intent_id);

    let order = vec![draft.intent_id.clone(), c.intent_id.clone(), b.intent_id.clone()];
    let before = s.steer_status(&w.work_id).unwrap().queue_revision;
    let listed = s.intent_reorder(&w.work_id, &order).unwrap();
    // The claimed intent keeps its place ahead of the reordered open ones.
    assert_eq!(ids(&listed), [vec![a.intent_id.clone()], order.clone()].concat());
    assert_eq!(ids(&s.intents(&w.work_id).unwrap()), ids(&listed));
    assert_eq!(s.steer_status(&w.work_id).unwrap().queue_revision, before + 1);
    assert_eq!(s.steer_claim_next(&w.work_id).unwrap().item.unwrap().intent_id, c.intent_id);

    let bad = |list: Vec<String>| s.intent_reorder(&w.work_id, &list).unwrap_err().code();
    assert_eq!(bad(vec![b.intent_id.clone()]), ErrorCode::InvalidArgument);
    assert_eq!(bad(vec![b.intent_id.clone(), b.intent_id.clone()]), ErrorCode::InvalidArgument);
    assert_eq!(bad(vec![draft.intent_id.clone(), a.intent_id.clone()]), ErrorCode::InvalidArgument);
    s.intent_reorder(&w.work_id, &[b.intent_id.clone(), draft.intent_id.clone()]).unwrap();
}

#[test]
fn arguments_and_missing_records_are_refused() {
    let (_d, s, w) = store();
    let code = |r: crate::error::Result<Intent>| r.unwrap_err().code();
    assert_eq!(code(s.intent_create(&w.work_id, "  ", None, None)), ErrorCode::InvalidArgument);
    assert_eq!(code(s.intent_create(&w.work_id, "x", Some(""), None)), ErrorCode::InvalidArgument);
    assert_eq!(code(s.intent_create("work-nope", "x", None, None)), ErrorCode::WorkNotFound);
    assert_eq!(code(s.intent_edit("intent-nope", "x", 1)), ErrorCode::IntentNotFound);
    assert_eq!(code(s.intent_queue("intent-nope", 1)), ErrorCode::IntentNotFound);
    assert_eq!(code(s.intent_cancel("intent-nope")), ErrorCode::IntentNotFound);
    let i = s.intent_create(&w.work_id, "x", None, None).unwrap();
    assert_eq!(code(s.intent_edit(&i.intent_id, "", 1)), ErrorCode::InvalidArgument);
    assert_eq!("sometime".parse::<Delivery>().unwrap_err().code, ErrorCode::InvalidArgument);
    assert_eq!("next_work".parse::<Delivery>().unwrap(), Delivery::NextWork);
    assert_eq!(s.work("work-nope").unwrap_err().code(), ErrorCode::WorkNotFound);
    assert_eq!(s.work_open(" ", None).unwrap_err().code(), ErrorCode::InvalidArgument);
}

#[test]
fn works_are_listed_per_workspace_and_closed_works_take_no_new_intents() {
    let (_d, s, w) = store();
    let other = s.work_open("other", Some("elsewhere")).unwrap();
    assert_eq!(s.works(None).unwrap(), vec![w.clone(), other.clone()]);
    assert_eq!(s.works(Some("other")).unwrap(), vec![other]);
    let draft = s.intent_create(&w.work_id, "left behind", None, None).unwrap();
    assert!(s.work_finish(&w.work_id).unwrap().closed);
    let code = |r: crate::error::Result<Intent>| r.unwrap_err().code();
    assert_eq!(code(s.intent_create(&w.work_id, "x", None, None)), ErrorCode::WorkClosed);
    assert_eq!(code(s.intent_queue(&draft.intent_id, 1)), ErrorCode::WorkClosed);
    assert_eq!(s.intent_cancel(&draft.intent_id).unwrap().state, IntentState::Cancelled);
    assert_eq!(s.work_stop(&w.work_id).unwrap().state, WorkState::Closed);
}

#[test]
fn wire_shapes_use_the_api_spelling() {
    let (_d, s, w) = store();
    let v = serde_json::to_value(s.work(&w.work_id).unwrap()).unwrap();
    assert_eq!(v["state"], "active");
    assert!(v.get("title").is_none());
    let v = serde_json::to_value(s.steer_claim_next(&w.work_id).unwrap()).unwrap();
    assert_eq!(v, serde_json::json!({}));
    let i = s.intent_create(&w.work_id, "b", None, Some(Delivery::AfterCurrentWork)).unwrap();
    let v = serde_json::to_value(&i).unwrap();
    assert_eq!((v["delivery"].as_str(), v["state"].as_str()), (Some("after_current_work"), Some("draft")));
}
