use serde_json::json;
use spaces_sdk::ErrorCode;

use super::{ledger_file, open};
use crate::ledger::{ApprovalState, Decision, HoldableTool, Ledger, ResumeStart};

fn exec_args() -> serde_json::Value {
    json!({"workspace_id": "demo", "command": ["/bin/echo", "hi"]})
}

#[test]
fn a_retry_reuses_the_pending_or_granted_hold() {
    let (_dir, _path, ledger) = open();
    let hold = ledger.approval_hold("demo", HoldableTool::ExecCommand, &exec_args()).unwrap();
    assert!(hold.approval_id.starts_with("appr-"));
    assert_eq!(hold.state, ApprovalState::Pending);
    // Same arguments in another key order: the same hold.
    let reordered = json!({"command": ["/bin/echo", "hi"], "workspace_id": "demo"});
    assert_eq!(ledger.approval_hold("demo", HoldableTool::ExecCommand, &reordered).unwrap().approval_id, hold.approval_id);
    ledger.approval_resolve(&hold.approval_id, Decision::Grant).unwrap();
    assert_eq!(ledger.approval_hold("demo", HoldableTool::ExecCommand, &exec_args()).unwrap().approval_id, hold.approval_id);
    // Different tool, workspace or arguments: a new hold.
    let other_args = json!({"workspace_id": "demo", "command": ["/bin/echo", "bye"]});
    for (ws, tool, args) in [
        ("demo", HoldableTool::ApplyPatch, exec_args()),
        ("other", HoldableTool::ExecCommand, exec_args()),
        ("demo", HoldableTool::ExecCommand, other_args),
    ] {
        assert_ne!(ledger.approval_hold(ws, tool, &args).unwrap().approval_id, hold.approval_id);
    }
    // Once resumed, a retry opens a fresh hold.
    ledger.approval_begin_resume(&hold.approval_id).unwrap();
    assert_ne!(ledger.approval_hold("demo", HoldableTool::ExecCommand, &exec_args()).unwrap().approval_id, hold.approval_id);
}

#[test]
fn resolve_only_a_pending_hold_and_unknown_ids_are_not_found() {
    let (_dir, _path, ledger) = open();
    let id = ledger.approval_hold("demo", HoldableTool::ExecCommand, &exec_args()).unwrap().approval_id;
    let granted = ledger.approval_resolve(&id, Decision::Grant).unwrap();
    assert_eq!(granted.state, ApprovalState::Granted);
    let err = ledger.approval_resolve(&id, Decision::Deny).unwrap_err();
    assert_eq!((err.code(), err.to_api().approval_id.as_deref()), (ErrorCode::ApprovalConflict, Some(id.as_str())));
    assert_eq!(ledger.approval("appr-nope").unwrap_err().code(), ErrorCode::ApprovalNotFound);
    assert_eq!(ledger.approval_resolve("appr-nope", Decision::Grant).unwrap_err().code(), ErrorCode::ApprovalNotFound);
    assert_eq!(ledger.approval_begin_resume("appr-nope").unwrap_err().code(), ErrorCode::ApprovalNotFound);
    let wire = serde_json::to_value(ledger.approval(&id).unwrap().record).unwrap();
    assert_eq!((wire["state"].as_str(), wire["tool"].as_str()), (Some("granted"), Some("exec_command")));
}

#[test]
fn deny_is_terminal_and_pending_cannot_resume() {
    let (_dir, _path, ledger) = open();
    let id = ledger.approval_hold("demo", HoldableTool::ApplyPatch, &json!({"patch": "P"})).unwrap().approval_id;
    assert_eq!(ledger.approval_begin_resume(&id).unwrap_err().code(), ErrorCode::ApprovalConflict);
    assert_eq!(ledger.approval_resolve(&id, Decision::Deny).unwrap().state, ApprovalState::Denied);
    assert_eq!(ledger.approval_resolve(&id, Decision::Grant).unwrap_err().code(), ErrorCode::ApprovalConflict);
    assert_eq!(ledger.approval_begin_resume(&id).unwrap_err().code(), ErrorCode::ApprovalConflict);
    assert_eq!(ledger.approval_consume(&id, &json!({})).unwrap_err().code(), ErrorCode::ApprovalConflict);
    assert_eq!(ledger.approval(&id).unwrap().record.state, ApprovalState::Denied);
}

#[test]
fn resume_runs_once_then_returns_the_stored_result() {
    let (_dir, _path, ledger) = open();
    let id = ledger.approval_hold("demo", HoldableTool::ExecCommand, &exec_args()).unwrap().approval_id;
    ledger.approval_resolve(&id, Decision::Grant).unwrap();
    let ResumeStart::Run(rec) = ledger.approval_begin_resume(&id).unwrap() else { panic!("expected Run") };
    assert_eq!((rec.record.state, rec.record.arguments.clone()), (ApprovalState::Resuming, exec_args()));
    // A second resume while this one runs is a conflict, not a second run.
    assert_eq!(ledger.approval_begin_resume(&id).unwrap_err().code(), ErrorCode::ApprovalConflict);
    let result = json!({"process_id": "p-1", "dispatch_status": "confirmed"});
    assert_eq!(ledger.approval_consume(&id, &result).unwrap().state, ApprovalState::Consumed);
    assert_eq!(ledger.approval_begin_resume(&id).unwrap(), ResumeStart::Done(result.clone()));
    assert_eq!(ledger.approval_begin_resume(&id).unwrap(), ResumeStart::Done(result));
    assert_eq!(ledger.approval_consume(&id, &json!({})).unwrap_err().code(), ErrorCode::ApprovalConflict);
}

#[test]
fn resume_interrupted_by_a_crash_is_reported_the_same_way_every_time() {
    let (_dir, path) = ledger_file();
    let first = Ledger::open(&path).unwrap();
    let id = first.approval_hold("demo", HoldableTool::ExecCommand, &exec_args()).unwrap().approval_id;
    first.approval_resolve(&id, Decision::Grant).unwrap();
    assert!(matches!(first.approval_begin_resume(&id).unwrap(), ResumeStart::Run(_)));
    drop(first); // the daemon dies while the command is being spawned

    let second = Ledger::open(&path).unwrap();
    for _ in 0..2 {
        let ResumeStart::Interrupted(rec) = second.approval_begin_resume(&id).unwrap() else { panic!("expected Interrupted") };
        assert_eq!((rec.record.state, rec.record.tool), (ApprovalState::Resuming, HoldableTool::ExecCommand));
    }
    drop(second);
    let third = Ledger::open(&path).unwrap();
    assert!(matches!(third.approval_begin_resume(&id).unwrap(), ResumeStart::Interrupted(_)));
}

#[test]
fn interrupted_patch_resume_recovers_the_linked_operation() {
    let (_dir, path) = ledger_file();
    let first = Ledger::open(&path).unwrap();
    let id = first.approval_hold("demo", HoldableTool::ApplyPatch, &json!({"patch": "P"})).unwrap().approval_id;
    first.approval_resolve(&id, Decision::Grant).unwrap();
    first.approval_begin_resume(&id).unwrap();
    let crate::ledger::Minted::New { operation_id } = first.mint("demo", None, "fp").unwrap() else { panic!() };
    first.approval_link_operation(&id, &operation_id).unwrap();
    drop(first);

    let second = Ledger::open(&path).unwrap();
    let ResumeStart::Interrupted(rec) = second.approval_begin_resume(&id).unwrap() else { panic!("expected Interrupted") };
    let op = second.operation(crate::ledger::OperationRef::Id(rec.operation_id.clone().unwrap())).unwrap();
    assert_eq!(op.record.status, crate::ledger::OperationStatus::Unknown);
    let answer = json!({"status": "unknown", "operation_id": operation_id, "replayed": true});
    second.approval_consume(&id, &answer).unwrap();
    assert_eq!(second.approval_begin_resume(&id).unwrap(), ResumeStart::Done(answer));
}
