use std::time::Duration;

use serde_json::json;
use spaces_sdk::ErrorCode;

use super::ledger_file;
use crate::ledger::{Decision, HoldableTool, Ledger, Minted, OperationRef, OperationStatus, Pruned, Retention};

fn mint_finished(ledger: &Ledger, ws: &str, key: &str) -> String {
    let Minted::New { operation_id } = ledger.mint(ws, Some(key), &format!("fp-{key}")).unwrap() else { panic!("not new") };
    ledger.finish(&operation_id, OperationStatus::Applied, &[], &[], &json!({"operation_id": operation_id}), None).unwrap();
    operation_id
}

fn denied_hold(ledger: &Ledger, ws: &str, n: usize) -> String {
    let id = ledger.approval_hold(ws, HoldableTool::ExecCommand, &json!({"command": ["echo", n]})).unwrap().approval_id;
    ledger.approval_resolve(&id, Decision::Deny).unwrap();
    id
}

/// Past `keep_max` per workspace the oldest finished operations and terminal holds go (their
/// events too); an unfinished operation and a pending hold stay; another workspace's stay.
#[test]
fn finished_records_past_the_newest_n_per_workspace_are_pruned() {
    let (_dir, path) = ledger_file();
    let retention = Retention { keep_max: 3, ..Retention::default() };
    let ledger = Ledger::open_with(&path, retention).unwrap();
    let ops: Vec<String> = (0..5).map(|i| mint_finished(&ledger, "a", &format!("k{i}"))).collect();
    let other = mint_finished(&ledger, "b", "kb");
    let Minted::New { operation_id: open_op } = ledger.mint("a", Some("open"), "fp-open").unwrap() else { panic!() };
    let holds: Vec<String> = (0..5).map(|i| denied_hold(&ledger, "a", i)).collect();
    let pending = ledger.approval_hold("a", HoldableTool::ApplyPatch, &json!({"patch": "p"})).unwrap().approval_id;
    assert_eq!(ledger.prune().unwrap(), Pruned { operations: 2, approvals: 2 });
    for (i, id) in ops.iter().enumerate() {
        let found = ledger.operation(OperationRef::Id(id.clone()));
        assert_eq!(found.is_ok(), i >= 2, "operation {i}: {:?}", found.map(|o| o.record.status));
    }
    for id in [&other, &open_op] {
        ledger.operation(OperationRef::Id(id.clone())).unwrap();
    }
    for (i, id) in holds.iter().enumerate() {
        let found = ledger.approval(id);
        assert_eq!(found.is_ok(), i >= 2, "hold {i}");
        if i < 2 {
            assert_eq!(crate::error::Error::code(&found.unwrap_err()), ErrorCode::ApprovalNotFound);
        }
    }
    ledger.approval(&pending).unwrap();
    // A removed operation's key is a new key.
    assert!(matches!(ledger.mint("a", Some("k0"), "fp-k0").unwrap(), Minted::New { .. }));
    let events: i64 =
        ledger.conn().query_row("SELECT COUNT(*) FROM operation_events WHERE operation_id = ?1", [&ops[0]], |r| r.get(0)).unwrap();
    assert_eq!(events, 0, "the removed operation's events are gone too");
}

/// Records of one millisecond are told apart by the order they were written, never by their
/// random ids: the last written are the newest and stay.
#[test]
fn records_of_the_same_millisecond_keep_the_last_written() {
    let (_dir, path) = ledger_file();
    let retention = Retention { keep_max: 2, ..Retention::default() };
    let ledger = Ledger::open_with(&path, retention).unwrap();
    let ops: Vec<String> = (0..6).map(|i| mint_finished(&ledger, "a", &format!("k{i}"))).collect();
    let holds: Vec<String> = (0..6).map(|i| denied_hold(&ledger, "a", i)).collect();
    let now = crate::sqlite::now_ms() as i64;
    ledger.conn().execute("UPDATE operations SET created_at = ?1, finished_at = ?1", [now]).unwrap();
    ledger.conn().execute("UPDATE approvals SET created_at = ?1, updated_at = ?1", [now]).unwrap();
    assert_eq!(ledger.prune().unwrap(), Pruned { operations: 4, approvals: 4 });
    for (i, id) in ops.iter().enumerate() {
        assert_eq!(ledger.operation(OperationRef::Id(id.clone())).is_ok(), i >= 4, "operation {i}");
    }
    for (i, id) in holds.iter().enumerate() {
        assert_eq!(ledger.approval(id).is_ok(), i >= 4, "hold {i}");
    }
}

/// Records older than `keep_for` go when the ledger opens.
#[test]
fn finished_records_older_than_the_retention_go_at_open() {
    let (_dir, path) = ledger_file();
    let first = Ledger::open(&path).unwrap();
    let old = mint_finished(&first, "a", "old");
    let hold = denied_hold(&first, "a", 1);
    drop(first);
    std::thread::sleep(Duration::from_millis(30));
    let second = Ledger::open_with(&path, Retention { keep_for: Duration::from_millis(10), ..Retention::default() }).unwrap();
    assert!(second.operation(OperationRef::Id(old)).is_err());
    assert!(second.approval(&hold).is_err());
}

/// A workspace with `pending_approvals_max` pending holds gets `RESOURCE_QUEUE_FULL` for a new
/// one; a retry of an existing hold, another workspace, and a new hold after a resolve are fine.
#[test]
fn pending_holds_are_capped_per_workspace() {
    let (_dir, path) = ledger_file();
    let ledger = Ledger::open_with(&path, Retention { pending_approvals_max: 2, ..Retention::default() }).unwrap();
    let hold = |ws: &str, n: u32| ledger.approval_hold(ws, HoldableTool::ExecCommand, &json!({"command": ["echo", n]}));
    let first = hold("a", 1).unwrap().approval_id;
    hold("a", 2).unwrap();
    let full = hold("a", 3).unwrap_err();
    assert_eq!(full.code(), ErrorCode::ResourceQueueFull, "{full}");
    assert!(full.to_string().contains("2 pending"), "{full}");
    assert_eq!(hold("a", 1).unwrap().approval_id, first, "a retry reuses its hold");
    hold("b", 3).unwrap();
    ledger.approval_resolve(&first, Decision::Deny).unwrap();
    hold("a", 3).unwrap();
}

/// Pending holds are capped by the bytes of their requests too: a workspace whose pending
/// requests would pass `pending_approvals_max_bytes` gets `RESOURCE_QUEUE_FULL` for a new hold
/// (far below the count cap), and so does one request larger than the limit alone; a retry of
/// an existing hold, another workspace, and a new hold after a resolve are fine.
#[test]
fn pending_holds_are_capped_by_the_size_of_their_requests() {
    let (_dir, path) = ledger_file();
    let retention = Retention { pending_approvals_max_bytes: 10_000, ..Retention::default() };
    let ledger = Ledger::open_with(&path, retention).unwrap();
    let hold =
        |ws: &str, n: u32, size: usize| ledger.approval_hold(ws, HoldableTool::ApplyPatch, &json!({"patch": "x".repeat(size), "n": n}));
    let first = hold("a", 1, 4_000).unwrap().approval_id;
    hold("a", 2, 4_000).unwrap();
    let full = hold("a", 3, 4_000).unwrap_err();
    assert_eq!(full.code(), ErrorCode::ResourceQueueFull, "{full}");
    assert!(full.to_string().contains("limit of 10000 bytes"), "{full}");
    assert_eq!(hold("a", 1, 4_000).unwrap().approval_id, first, "a retry reuses its hold");
    hold("a", 4, 100).unwrap();
    hold("b", 3, 4_000).unwrap();
    let alone = hold("b", 5, 20_000).unwrap_err();
    assert_eq!(alone.code(), ErrorCode::ResourceQueueFull, "{alone}");
    assert!(alone.to_string().contains("this one alone is over the limit"), "{alone}");
    ledger.approval_resolve(&first, Decision::Deny).unwrap();
    hold("a", 3, 4_000).unwrap();
}
