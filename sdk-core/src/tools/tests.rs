#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use super::*;
use crate::decode;
use crate::error::ErrorCode;

/// Decodes `valid`, checks it encodes back to the same JSON, then checks that the same
/// object with one extra key is refused naming that key.
fn strict<T: DeserializeOwned + Serialize + std::fmt::Debug>(op: &str, valid: Value) {
    let req: T = decode(op, valid.clone()).unwrap_or_else(|e| panic!("{op}: {e}"));
    assert_eq!(serde_json::to_value(&req).unwrap(), valid, "{op}: round trip");
    let mut bad = valid;
    bad.as_object_mut().unwrap().insert("zz_unknown".into(), json!(true));
    let e = decode::<T>(op, bad).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument, "{op}");
    assert_eq!(e.field.as_deref(), Some("zz_unknown"), "{op}: {}", e.message);
    assert!(e.message.contains("zz_unknown"), "{op}: {}", e.message);
}

#[test]
fn every_request_refuses_an_unknown_key_naming_it() {
    let ws = "demo";
    strict::<WorkspaceInfoRequest>("workspace_info", json!({"workspace_id": ws}));
    strict::<ReadRequest>("read", json!({"workspace_id": ws, "path": "a.txt", "offset": 1, "limit": 2}));
    strict::<FindRequest>("find", json!({"workspace_id": ws, "glob": "*.rs"}));
    strict::<ApplyPatchRequest>(
        "apply_patch",
        json!({"workspace_id": ws, "patch": "P", "expected_versions": {"a": "absent"}, "check_only": true}),
    );
    strict::<OperationStatusRequest>("operation_status", json!({"operation_key": "k"}));
    strict::<ExecCommandRequest>("exec_command", json!({"workspace_id": ws, "command": ["ls"], "tty": false}));
    strict::<ReadProcessRequest>("read_process", json!({"process_id": "proc-1", "cursor": 0, "wait_ms": 10}));
    strict::<ProcessStatusRequest>("process_status", json!({"process_id": "proc-1"}));
    strict::<WriteStdinRequest>("write_stdin", json!({"process_id": "proc-1", "data": "hi\n"}));
    strict::<ProcessResizeRequest>("process_resize", json!({"process_id": "proc-1", "rows": 30, "cols": 100}));
    strict::<TerminateProcessRequest>("terminate_process", json!({"process_id": "proc-1"}));
    strict::<ApprovalCreateRequest>(
        "approval_create",
        json!({"tool": "exec_command", "arguments": {"workspace_id": ws, "command": ["ls"]}}),
    );
    strict::<ApprovalResolveRequest>("approval_resolve", json!({"approval_id": "appr-1", "decision": "grant"}));
    strict::<OperationResumeRequest>("operation_resume", json!({"approval_id": "appr-1", "work_id": "work-1"}));
    strict::<WorkOpenRequest>("work_open", json!({"workspace_id": ws, "title": "t"}));
    strict::<SteerStatusRequest>("steer_status", json!({"work_id": "work-1"}));
    strict::<SteerClaimNextRequest>("steer_claim_next", json!({"work_id": "work-1"}));
    strict::<SteerCompleteRequest>("steer_complete", json!({"work_id": "work-1", "intent_id": "intent-1", "outcome": "blocked"}));
    strict::<WorkFinishRequest>("work_finish", json!({"work_id": "work-1"}));
    strict::<IntentCreateRequest>("intent_create", json!({"work_id": "work-1", "body": "b", "delivery": "next_work"}));
    strict::<IntentEditRequest>("intent_edit", json!({"intent_id": "intent-1", "body": "b", "revision": 2}));
    strict::<IntentQueueRequest>("intent_queue", json!({"intent_id": "intent-1", "revision": 2}));
    strict::<IntentReorderRequest>("intent_reorder", json!({"work_id": "work-1", "intent_ids": ["intent-1"]}));
}

#[test]
fn a_misspelt_key_is_refused_with_the_key_it_resembles() {
    // Case C1.
    let e = decode::<ReadRequest>("read", json!({"workspace_id": "demo", "paht": "a.txt"})).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    assert_eq!(e.field.as_deref(), Some("paht"));
    assert!(e.message.contains("did you mean `path`?"), "{}", e.message);
    let e = decode::<ExecCommandRequest>("exec_command", json!({"workspaceId": "demo", "command": ["ls"]})).unwrap_err();
    assert!(e.message.contains("did you mean `workspace_id`?"), "{}", e.message);
}

#[test]
fn closed_sets_refuse_other_values() {
    let e = decode::<ApprovalResolveRequest>("approval_resolve", json!({"approval_id": "a", "decision": "maybe"})).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("decision"));
    let e = decode::<ApprovalCreateRequest>("approval_create", json!({"tool": "read", "arguments": {}})).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("tool"));
    let e = decode::<SteerCompleteRequest>("steer_complete", json!({"work_id": "w", "intent_id": "i", "outcome": "finished"})).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("outcome"));
}

#[test]
fn optional_fields_are_omitted_and_defaults_apply() {
    let req: ApplyPatchRequest = decode("apply_patch", json!({"workspace_id": "w", "patch": "P"})).unwrap();
    assert!(req.expected_versions.is_empty() && req.operation_key.is_none() && !req.check_only);
    // The shape a held call is stored with: empty and absent fields left out, check_only kept.
    assert_eq!(serde_json::to_value(&req).unwrap(), json!({"workspace_id": "w", "patch": "P", "check_only": false}));
    let req: ExecCommandRequest = decode("exec_command", json!({"workspace_id": "w", "command": ["ls"]})).unwrap();
    assert_eq!(serde_json::to_value(&req).unwrap(), json!({"workspace_id": "w", "command": ["ls"], "tty": false}));
    let req: OperationStatusRequest = decode("operation_status", Value::Null).unwrap();
    assert_eq!(req, OperationStatusRequest { operation_id: None, operation_key: None, work_id: None });
}

#[test]
fn coordination_sits_beside_the_result_fields() {
    let ok = Coordinated::bare(OkResult { ok: true });
    assert_eq!(serde_json::to_value(&ok).unwrap(), json!({"ok": true}));
    let with = Coordinated {
        result: SteerClaimNextResult { item: None },
        coordination: Some(Coordination { work_id: "work-1".into(), pending_user_items: 2, queue_revision: 7 }),
    };
    let wire = serde_json::to_value(&with).unwrap();
    assert_eq!(wire, json!({"coordination": {"work_id": "work-1", "pending_user_items": 2, "queue_revision": 7}}));
    let back: Coordinated<SteerClaimNextResult> = serde_json::from_value(wire).unwrap();
    assert_eq!(back, with);
}

#[test]
fn result_shapes_spell_closed_sets_in_snake_case() {
    let fin =
        WorkFinishResult { closed: false, reason: Some(FinishReason::PendingUserInput), queued: 1, claimed: 0, state: WorkState::Active };
    assert_eq!(
        serde_json::to_value(&fin).unwrap(),
        json!({"closed": false, "reason": "pending_user_input", "queued": 1, "claimed": 0, "state": "active"})
    );
    let status = ProcessStatus {
        process_id: "proc-1".into(),
        workspace_id: "ws".into(),
        state: ProcessState::Exited,
        termination: Some(Termination::Signaled),
        exit_code: None,
        signal: Some(9),
        output_total: 3,
        output_retained_from: 0,
        eof: true,
    };
    assert_eq!(
        serde_json::to_value(&status).unwrap(),
        json!({"process_id": "proc-1", "workspace_id": "ws", "state": "exited", "termination": "signaled", "signal": 9,
               "output_total": 3, "output_retained_from": 0, "eof": true})
    );
    for s in OperationStatus::ALL {
        assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        assert_eq!(OperationStatus::parse(s.as_str()), Some(s));
    }
    for s in ApprovalState::ALL {
        assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
    }
    assert_eq!(serde_json::to_value(ChangeKind::Move).unwrap(), "move");
    assert_eq!("after_current_work".parse::<Delivery>().unwrap(), Delivery::AfterCurrentWork);
    assert_eq!("nope".parse::<Outcome>().unwrap_err().code, ErrorCode::InvalidArgument);
}

#[test]
fn every_tool_type_has_a_schema() {
    // Requests refuse unknown keys in their schema too.
    let schema = schemars::schema_for!(ReadRequest);
    assert_eq!(schema.get("additionalProperties"), Some(&json!(false)));
    let schema = serde_json::to_value(schemars::schema_for!(Coordinated<ReadResult>)).unwrap();
    assert!(schema["properties"].get("content").is_some() && schema["properties"].get("coordination").is_some());
    let schema = serde_json::to_value(schemars::schema_for!(WorkspaceInfoResult)).unwrap();
    assert!(schema.to_string().contains("WORKSPACE_BUSY"));
}
