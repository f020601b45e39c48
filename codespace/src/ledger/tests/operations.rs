use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};

use serde_json::{json, Value};
use spaces_sdk::ErrorCode;

use super::{ledger_file, open};
use spaces_sdk::tools::ChangeKind;

use crate::fs::ChangeRecord;
use crate::ledger::{EventName, Ledger, Minted, OperationRef, OperationStatus};

fn fp(patch: &str) -> String {
    crate::ledger::fingerprint("demo", patch, &BTreeMap::from([("n.md".to_string(), "v1".to_string())]), false)
}

fn new_id(m: Minted) -> String {
    match m {
        Minted::New { operation_id } => operation_id,
        other => panic!("expected New, got {other:?}"),
    }
}

/// What a service layer would store as the replayable `apply_patch` response.
fn applied(id: &str) -> (Vec<String>, Vec<ChangeRecord>, Value) {
    let changes = vec![ChangeRecord {
        path: "n.md".into(),
        kind: ChangeKind::Update,
        to: None,
        before_version: Some("v1".into()),
        after_version: Some("v2".into()),
    }];
    let result = json!({"status": "applied", "operation_id": id, "replayed": false, "files": ["n.md"], "changes": changes});
    (vec!["n.md".to_string()], changes, result)
}

fn finish_applied(ledger: &Ledger, id: &str) -> Value {
    let (files, changes, result) = applied(id);
    ledger.finish(id, OperationStatus::Applied, &files, &changes, &result, None).unwrap();
    result
}

#[test]
fn mint_finish_then_same_key_replays_the_stored_result() {
    let (_dir, _path, ledger) = open();
    let id = new_id(ledger.mint("demo", Some("k1"), &fp("P")).unwrap());
    assert!(id.starts_with("op-"));
    let stored = finish_applied(&ledger, &id);
    let Minted::Replay(rec) = ledger.mint("demo", Some("k1"), &fp("P")).unwrap() else { panic!("expected Replay") };
    assert_eq!(rec.record.operation_id, id);
    assert_eq!(rec.record.status, OperationStatus::Applied);
    assert_eq!(rec.result, Some(stored));
    assert_eq!(rec.key.as_deref(), Some("k1"));
    let names: Vec<_> = rec.record.events.iter().map(|e| (e.name, e.status)).collect();
    assert_eq!(names, vec![(EventName::Minted, None), (EventName::Finished, Some(OperationStatus::Applied))]);
}

#[test]
fn requests_without_a_key_are_never_replayed() {
    let (_dir, _path, ledger) = open();
    let a = new_id(ledger.mint("demo", None, &fp("P")).unwrap());
    let b = new_id(ledger.mint("demo", None, &fp("P")).unwrap());
    assert_ne!(a, b);
}

#[test]
fn same_key_with_a_different_fingerprint_is_a_key_conflict() {
    let (_dir, _path, ledger) = open();
    let id = new_id(ledger.mint("demo", Some("k"), &fp("P")).unwrap());
    // A preview and its apply differ only by check_only: they cannot share a key.
    let preview = crate::ledger::fingerprint("demo", "P", &BTreeMap::new(), true);
    let err = ledger.mint("demo", Some("k"), &preview).unwrap_err();
    assert_eq!(err.code(), ErrorCode::OperationKeyConflict);
    assert_eq!(err.to_api().operation_id.as_deref(), Some(id.as_str()));
    assert!(err.to_string().contains("different keys"), "{}", err);
}

#[test]
fn crash_mid_apply_reads_unknown_and_is_never_reapplied() {
    let (_dir, path) = ledger_file();
    let first = Ledger::open(&path).unwrap();
    let id = new_id(first.mint("demo", Some("k"), &fp("P")).unwrap());
    drop(first); // the daemon dies before `finish`

    let second = Ledger::open(&path).unwrap();
    let rec = second.operation(OperationRef::Id(id.clone())).unwrap();
    assert_eq!(rec.record.status, OperationStatus::Unknown);
    assert!(rec.record.finished_at.is_some());
    let last = rec.record.events.last().unwrap();
    assert_eq!((last.name, last.status, last.reason.as_deref()), (EventName::Finished, Some(OperationStatus::Unknown), Some("unknown")));
    let wire = serde_json::to_value(&rec.record).unwrap();
    assert_eq!(wire["status"], "unknown");
    assert_eq!(wire["kind"], "patch");
    assert_eq!(wire["events"][1], json!({"at": last.at, "name": "finished", "status": "unknown", "reason": "unknown"}));
    assert!(wire.get("key").is_none() && wire.get("result").is_none());

    let Minted::Unfinished(again) = second.mint("demo", Some("k"), &fp("P")).unwrap() else { panic!("must not re-apply") };
    assert_eq!(again.record.operation_id, id);
    // A later finish from the dead daemon's work cannot overwrite the recorded outcome.
    let (files, changes, result) = applied(&id);
    assert_eq!(second.finish(&id, OperationStatus::Applied, &files, &changes, &result, None).unwrap_err().code(), ErrorCode::Internal);
    // Recovery ran once: a third boot adds no second finished event.
    drop(second);
    let third = Ledger::open(&path).unwrap();
    assert_eq!(third.operation(OperationRef::Key("k".into())).unwrap().record.events.len(), 2);
}

#[test]
fn in_flight_retry_is_unfinished_and_has_no_finished_at() {
    let (_dir, _path, ledger) = open();
    let id = new_id(ledger.mint("demo", Some("k"), &fp("P")).unwrap());
    let Minted::Unfinished(rec) = ledger.mint("demo", Some("k"), &fp("P")).unwrap() else { panic!("expected Unfinished") };
    assert_eq!((rec.record.operation_id.as_str(), rec.record.finished_at, rec.record.events.len()), (id.as_str(), None, 1));
    assert!(serde_json::to_value(&rec.record).unwrap().get("finished_at").is_none());
}

#[test]
fn operation_by_id_and_key_and_not_found() {
    let (_dir, _path, ledger) = open();
    let id = new_id(ledger.mint("demo", Some("k"), &fp("P")).unwrap());
    finish_applied(&ledger, &id);
    let by_id = ledger.operation(OperationRef::Id(id.clone())).unwrap();
    let by_key = ledger.operation(OperationRef::Key("k".into())).unwrap();
    assert_eq!(by_id, by_key);
    assert_eq!((by_id.record.workspace_id.as_str(), by_id.record.files.as_slice()), ("demo", ["n.md".to_string()].as_slice()));
    assert_eq!(by_id.record.changes[0].after_version.as_deref(), Some("v2"));
    for missing in [OperationRef::Id("op-nope".into()), OperationRef::Key("nope".into())] {
        assert_eq!(ledger.operation(missing).unwrap_err().code(), ErrorCode::OperationNotFound);
    }
    assert_eq!(
        ledger.finish("op-nope", OperationStatus::Applied, &[], &[], &json!({}), None).unwrap_err().code(),
        ErrorCode::OperationNotFound
    );
}

#[test]
fn two_threads_minting_the_same_key_get_exactly_one_new() {
    let (_dir, path) = ledger_file();
    let shared = Arc::new(Ledger::open(&path).unwrap());
    // Half share one connection; half use their own ledger (connection) on the same file.
    let others: Vec<Arc<Ledger>> = (0..4).map(|_| Arc::new(Ledger::open(&path).unwrap())).collect();
    let ledgers: Vec<Arc<Ledger>> = (0..4).map(|_| shared.clone()).chain(others).collect();
    let barrier = Arc::new(Barrier::new(ledgers.len()));
    let handles: Vec<_> = ledgers
        .into_iter()
        .map(|ledger| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                ledger.mint("demo", Some("race"), &fp("P")).unwrap()
            })
        })
        .collect();
    let results: Vec<Minted> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let news = results.iter().filter(|m| matches!(m, Minted::New { .. })).count();
    let unfinished = results.iter().filter(|m| matches!(m, Minted::Unfinished(_))).count();
    assert_eq!((news, unfinished), (1, results.len() - 1));
}

#[test]
fn a_plan_recorded_before_the_commit_names_the_files_after_a_crash() {
    let (_dir, path) = ledger_file();
    let first = Ledger::open(&path).unwrap();
    let id = new_id(first.mint("demo", Some("big"), &fp("P")).unwrap());
    let (files, changes, _) = applied(&id);
    first.record_plan(&id, &files, &changes).unwrap();
    drop(first); // the daemon dies mid-commit

    let second = Ledger::open(&path).unwrap();
    let rec = second.operation(OperationRef::Key("big".into())).unwrap();
    assert_eq!(
        (rec.record.status, rec.record.files.clone(), rec.record.changes.clone()),
        (OperationStatus::Unknown, files.clone(), changes.clone())
    );
    // a finished record is never rewritten
    assert_eq!(second.record_plan(&id, &[], &[]).unwrap_err().code(), ErrorCode::Internal);
    assert_eq!(second.record_plan("op-nope", &files, &changes).unwrap_err().code(), ErrorCode::OperationNotFound);
}
