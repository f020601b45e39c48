//! The service over a temp workspace: the typed methods and coordination.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use spaces_sdk::tools::{ApplyPatchRequest, ApplyPatchResult, ApprovalCreateRequest, OperationStatus, ReadRequest, WorkOpenRequest};
use spaces_sdk::{ApiError, Approvals, ErrorCode, SpaceNetwork};
use tempfile::TempDir;

use super::{CodeSpace, ExecSettings, WorkspacePolicy, WorkspaceRegistry};

/// The test registry ([`WorkspaceRegistry`] below).
struct Demo(PathBuf);

/// One workspace, `demo`, at `<dir>/demo`; `offline` is the same folder with `network: none`.
impl WorkspaceRegistry for Demo {
    fn workspace(&self, id: &str) -> crate::error::Result<Option<WorkspacePolicy>> {
        Ok(matches!(id, "demo" | "offline").then(|| WorkspacePolicy {
            workspace_id: id.to_owned(),
            root: self.0.clone(),
            read_only: false,
            approvals: Approvals::Off,
            network: if id == "offline" { SpaceNetwork::None } else { SpaceNetwork::Enabled },
        }))
    }
}

fn service() -> (TempDir, PathBuf, CodeSpace) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("demo");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    let cs = CodeSpace::open(&dir.path().join("db.sqlite"), Arc::new(Demo(root.clone())), ExecSettings::with_defaults()).unwrap();
    (dir, root, cs)
}

fn read_request(path: &str) -> ReadRequest {
    ReadRequest { workspace_id: "demo".into(), path: path.into(), offset: None, limit: None, work_id: None }
}

#[tokio::test]
async fn the_typed_read_answers_the_wire_shape() {
    let (_dir, _root, cs) = service();
    let typed = cs.read(read_request("a.txt")).await.unwrap();
    assert_eq!(typed.content, "a\n");
    let wire = serde_json::to_value(&typed).unwrap();
    assert_eq!(wire["path"], "a.txt");
    assert!(wire["version"].as_str().unwrap().starts_with("sha256:"));
}

#[tokio::test]
async fn case_c1_a_misspelt_argument_is_refused_naming_it() {
    let (_dir, _root, cs) = service();
    let e = spaces_sdk::decode::<ReadRequest>("read", json!({"workspace_id": "demo", "paht": "a.txt"})).unwrap_err();
    assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidArgument, Some("paht")));
    assert!(e.message.contains("did you mean `path`?"), "{}", e.message);
    // approval_create checks the held arguments the same way, under `arguments.`
    let req = spaces_sdk::decode::<ApprovalCreateRequest>(
        "approval_create",
        json!({"tool": "exec_command", "arguments": {"workspace_id": "demo", "cmd": ["ls"]}}),
    )
    .unwrap();
    let e = ApiError::from(cs.approval_create(req).await.unwrap_err());
    assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidArgument, Some("arguments.cmd")));
}

#[tokio::test]
async fn an_unknown_work_is_refused_before_the_tool_runs() {
    let (_dir, root, cs) = service();
    let patch = "*** Begin Patch\n*** Add File: b.txt\n+b\n*** End Patch\n";
    let req = ApplyPatchRequest {
        workspace_id: "demo".into(),
        patch: patch.into(),
        expected_versions: Default::default(),
        operation_key: None,
        check_only: false,
        work_id: Some("work-nope".into()),
    };
    let e = cs.coordinated(req.work_id.clone(), cs.apply_patch(req)).await.unwrap_err();
    assert!(matches!(&e, crate::error::Error::WorkNotFound { work_id } if work_id == "work-nope"), "{e:?}");
    assert_eq!(e.code(), ErrorCode::WorkNotFound);
    assert!(!Path::new(&root.join("b.txt")).exists());
}

#[tokio::test]
async fn a_known_work_adds_coordination_beside_the_result() {
    let (_dir, _root, cs) = service();
    let work = cs.work_open(WorkOpenRequest { workspace_id: "demo".into(), title: None }).await.unwrap();
    let work_id = work.work_id.clone();
    let out = cs.coordinated(Some(work_id.clone()), cs.read(read_request("a.txt"))).await.unwrap();
    assert_eq!(out.result.content, "a\n");
    let c = out.coordination.unwrap();
    assert_eq!((c.work_id.as_str(), c.pending_user_items), (work_id.as_str(), 0));
    // without a work the result is bare
    assert!(cs.coordinated(None, cs.read(read_request("a.txt"))).await.unwrap().coordination.is_none());
    let req = ApplyPatchRequest {
        workspace_id: "demo".into(),
        patch: "*** Begin Patch\n*** Delete File: a.txt\n*** End Patch\n".into(),
        expected_versions: Default::default(),
        operation_key: None,
        check_only: true,
        work_id: Some(work_id.clone()),
    };
    let patched = cs.coordinated(req.work_id.clone(), cs.apply_patch(req)).await.unwrap();
    let wire = serde_json::to_value(&patched).unwrap();
    assert_eq!(wire["status"], OperationStatus::Checked.as_str());
    assert_eq!(wire["coordination"]["work_id"], work_id.as_str());
}

fn append_patch(path: &str, line: &str) -> String {
    format!("*** Begin Patch\n*** Update File: {path}\n@@\n v1\n+{line}\n*** End Patch\n")
}

/// CASES.md X19 through the service: a read version that went stale is a `VERSION_CONFLICT`
/// naming the current version; a retry with the same `operation_key` after a lost response is
/// the one application again (`replayed: true`, the file changed once); the same key on another
/// patch is `OPERATION_KEY_CONFLICT`.
#[tokio::test]
async fn case_x19_stale_version_conflicts_and_a_retried_key_replays_once() {
    let (_dir, root, cs) = service();
    std::fs::write(root.join("n.md"), "v1\n").unwrap();
    let v1 = cs.read(read_request("n.md")).await.unwrap().version;
    // Another process appends to the file after our read.
    std::fs::write(root.join("n.md"), "v1\nappended elsewhere\n").unwrap();
    let current = cs.read(read_request("n.md")).await.unwrap().version;
    let stale = ApplyPatchRequest {
        workspace_id: "demo".into(),
        patch: append_patch("n.md", "ours"),
        expected_versions: [("n.md".to_owned(), v1.clone())].into(),
        operation_key: None,
        check_only: false,
        work_id: None,
    };
    let err = cs.apply_patch(stale).await.unwrap_err();
    let conflict = match &err {
        crate::error::Error::InOperation { error, .. } => &**error,
        other => other,
    };
    match conflict {
        crate::error::Error::Patch(spaces_v4a::Error::VersionConflict { path, expected, current: now }) => {
            assert_eq!((path.as_str(), expected, now), ("n.md", &v1, &current), "{err}")
        }
        other => panic!("expected VERSION_CONFLICT, got {other:?}"),
    }
    assert_eq!(err.to_api().code, ErrorCode::VersionConflict);
    assert_eq!(std::fs::read_to_string(root.join("n.md")).unwrap(), "v1\nappended elsewhere\n");

    let keyed = ApplyPatchRequest {
        workspace_id: "demo".into(),
        patch: append_patch("n.md", "once"),
        expected_versions: [("n.md".to_owned(), current.clone())].into(),
        operation_key: Some("x19".into()),
        check_only: false,
        work_id: None,
    };
    let first = cs.apply_patch(keyed.clone()).await.unwrap();
    // The response is lost in transit; the caller retries the very same request.
    let retried = cs.apply_patch(keyed.clone()).await.unwrap();
    assert_eq!((first.status, first.replayed), (OperationStatus::Applied, false), "{first:?}");
    assert_eq!(retried, ApplyPatchResult { replayed: true, ..first.clone() });
    assert_eq!(std::fs::read_to_string(root.join("n.md")).unwrap(), "v1\nonce\nappended elsewhere\n", "applied exactly once");

    let other = ApplyPatchRequest { patch: append_patch("n.md", "different"), ..keyed };
    let err = cs.apply_patch(other).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::OperationKeyConflict, "{err}");
    assert_eq!(std::fs::read_to_string(root.join("n.md")).unwrap(), "v1\nonce\nappended elsewhere\n");
}

#[tokio::test]
async fn without_a_sandbox_a_network_none_workspace_refuses_commands_and_says_so() {
    use spaces_sdk::tools::{Enforcement, ExecCommandRequest, NetworkPolicy, WorkspaceInfoRequest};
    // This test process never sets up a sandbox: the level is `off`, as with SPACES_SANDBOX=off.
    assert_eq!(spaces_os::sandbox::level(), spaces_os::sandbox::Level::Off);
    let (_dir, root, cs) = service();
    let info = |id: &str| cs.workspace_info(WorkspaceInfoRequest { workspace_id: id.into(), work_id: None });
    let offline = info("offline").await.unwrap().execution;
    assert_eq!((offline.network.policy, offline.network.enforcement), (NetworkPolicy::Restricted, Enforcement::None));
    assert!(!offline.network.client_may_escalate);
    assert!(!offline.permissions.exec && !offline.process.available && offline.process.capabilities.is_none(), "{offline:?}");
    assert!(offline.permissions.write, "files stay writable: only commands need the network kept off");
    let open = info("demo").await.unwrap().execution;
    assert_eq!((open.network.policy, open.network.enforcement), (NetworkPolicy::Enabled, Enforcement::None));
    assert!(open.permissions.exec && open.process.available);

    let touch =
        |id: &str| ExecCommandRequest { workspace_id: id.into(), command: vec!["touch".into(), "ran".into()], tty: false, work_id: None };
    let e = cs.exec_command(touch("offline")).await.unwrap_err();
    assert!(matches!(&e, crate::error::Error::NetworkUnenforced { tool: "exec_command", .. }), "{e:?}");
    let wire = e.to_api();
    assert_eq!(wire.code, ErrorCode::Unauthorized);
    assert!(wire.message.contains("network: none") && wire.message.contains("SPACES_SANDBOX=off"), "{}", wire.message);
    assert!(!root.join("ran").exists(), "nothing ran");
}
