//! Commit: end to end on disk (read -> plan -> commit -> read back), re-check, rollback.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use spaces_sdk::ErrorCode;

use super::{put, snapshot, workspace};
use crate::error::Error;
use crate::fs::commit::Step;
use crate::fs::{ChangeRecord, CommitStatus, Root};

fn patch_text(body: &str) -> String {
    format!("*** Begin Patch\n{body}*** End Patch\n")
}

fn bytes(base: &Path, rel: &str) -> Vec<u8> {
    std::fs::read(base.join(rel)).unwrap()
}

fn mode(base: &Path, rel: &str) -> u32 {
    std::fs::metadata(base.join(rel)).unwrap().permissions().mode() & 0o7777
}

/// Read the version, plan with it as expected, commit, and check the report says applied.
fn apply(root: &Root, path: &str, body: &str) {
    let v = root.read(path, None, None).unwrap().version;
    let expected = BTreeMap::from([(path.to_owned(), v)]);
    let plan = root.plan_patch(&patch_text(body), &expected).unwrap();
    let report = root.commit(&plan);
    assert_eq!(report.status, CommitStatus::Applied, "{:?}", report.error);
    let after = root.read(path, None, None).unwrap().version;
    assert_eq!(report.changes[0].after_version.as_deref(), Some(after.as_str()));
}

#[test]
fn case_x17_crlf_and_missing_final_newline_survive_on_disk() {
    let (dir, root) = workspace();
    put(dir.path(), "crlf.txt", b"a\r\nb\r\nc");
    apply(&root, "crlf.txt", "*** Update File: crlf.txt\n@@\n a\n-b\n+B\n c\n");
    assert_eq!(bytes(dir.path(), "crlf.txt"), b"a\r\nB\r\nc");
}

#[test]
fn case_x18_end_of_file_anchor_and_loose_context_on_disk() {
    let (dir, root) = workspace();
    put(dir.path(), "m.txt", b"marker\nend\nmiddle\nmarker\nend\n");
    apply(&root, "m.txt", "*** Update File: m.txt\n@@\n-marker\n+MARKER\n end\n*** End of File\n");
    assert_eq!(bytes(dir.path(), "m.txt"), b"marker\nend\nmiddle\nMARKER\nend\n");
    put(dir.path(), "k.txt", b"one\nkeep  \ntwo\n");
    apply(&root, "k.txt", "*** Update File: k.txt\n@@\n keep\n-two\n+TWO\n");
    assert_eq!(bytes(dir.path(), "k.txt"), b"one\nkeep  \nTWO\n");
}

#[test]
fn add_move_delete_are_committed_and_verified() {
    let (dir, root) = workspace();
    put(dir.path(), "old.txt", b"old\n");
    put(dir.path(), "gone.txt", b"bye\n");
    put(dir.path(), "run.sh", b"echo 1\n");
    std::fs::set_permissions(dir.path().join("old.txt"), PermissionsExt::from_mode(0o640)).unwrap();
    std::fs::set_permissions(dir.path().join("run.sh"), PermissionsExt::from_mode(0o755)).unwrap();
    let text = patch_text(
        "*** Add File: new/dir/n.txt\n+fresh\n\
         *** Update File: old.txt\n*** Move to: moved/old.txt\n@@\n-old\n+OLD\n\
         *** Delete File: gone.txt\n\
         *** Update File: run.sh\n@@\n-echo 1\n+echo 2\n",
    );
    let expected = BTreeMap::from([("new/dir/n.txt".to_owned(), spaces_v4a::ABSENT.to_owned())]);
    let plan = root.plan_patch(&text, &expected).unwrap();
    let report = root.commit(&plan);
    assert_eq!(report.status, CommitStatus::Applied, "{:?}", report.error);
    assert_eq!(
        report.changes[1],
        ChangeRecord {
            path: "old.txt".into(),
            kind: spaces_sdk::tools::ChangeKind::Move,
            to: Some("moved/old.txt".into()),
            before_version: Some(spaces_v4a::version(b"old\n")),
            after_version: Some(spaces_v4a::version(b"OLD\n")),
        }
    );
    let kinds: Vec<&str> = report.changes.iter().map(|c| c.kind.as_str()).collect();
    assert_eq!(kinds, ["add", "move", "delete", "update"]);
    assert_eq!(report.status, CommitStatus::Applied);
    let json = serde_json::to_value(&report.changes).unwrap();
    assert!(json[0].get("to").is_none() && json[0].get("before_version").is_none());

    assert_eq!(bytes(dir.path(), "new/dir/n.txt"), b"fresh\n");
    assert_eq!(bytes(dir.path(), "moved/old.txt"), b"OLD\n");
    assert_eq!(mode(dir.path(), "moved/old.txt"), 0o640);
    assert_eq!(mode(dir.path(), "run.sh"), 0o755);
    assert!(!dir.path().join("old.txt").exists() && !dir.path().join("gone.txt").exists());
    let listed = snapshot(dir.path());
    assert!(listed.keys().all(|k| !k.contains("spaces-tmp")), "{listed:?}");
}

#[test]
fn chained_operations_on_one_file_commit_the_last_content() {
    let (dir, root) = workspace();
    let text = patch_text("*** Add File: n.txt\n+one\n*** Update File: n.txt\n@@\n-one\n+two\n");
    let report = root.commit(&root.plan_patch(&text, &BTreeMap::new()).unwrap());
    assert_eq!(report.status, CommitStatus::Applied, "{:?}", report.error);
    assert_eq!(bytes(dir.path(), "n.txt"), b"two\n");
}

#[test]
fn a_file_changed_after_planning_is_rejected_untouched() {
    let (dir, root) = workspace();
    put(dir.path(), "n.md", b"v1\n");
    let plan = root.plan_patch(&patch_text("*** Update File: n.md\n@@\n-v1\n+v2\n"), &BTreeMap::new()).unwrap();
    put(dir.path(), "n.md", b"v1\nappended\n");
    let report = root.commit(&plan);
    assert_eq!(report.status, CommitStatus::Rejected);
    let err = report.error.unwrap();
    assert_eq!(err.code(), ErrorCode::VersionConflict);
    assert!(err.to_string().contains(&spaces_v4a::version(b"v1\nappended\n")), "{err}");
    assert_eq!(bytes(dir.path(), "n.md"), b"v1\nappended\n");

    // An add whose destination appeared meanwhile is refused the same way.
    let plan = root.plan_patch(&patch_text("*** Add File: x.txt\n+x\n"), &BTreeMap::new()).unwrap();
    put(dir.path(), "x.txt", b"theirs\n");
    assert_eq!(root.commit(&plan).status, CommitStatus::Rejected);
    assert_eq!(bytes(dir.path(), "x.txt"), b"theirs\n");
}

/// A workspace and a patch touching every kind of change, for the failure tests.
fn rollback_fixture() -> (tempfile::TempDir, Root, spaces_v4a::Plan) {
    let (dir, root) = workspace();
    put(dir.path(), "a.txt", b"a\r\nline\r\n");
    put(dir.path(), "b.txt", b"b\nno final newline");
    put(dir.path(), "c.txt", b"c\n");
    put(dir.path(), "m.txt", b"m\n");
    std::fs::set_permissions(dir.path().join("a.txt"), PermissionsExt::from_mode(0o600)).unwrap();
    let text = patch_text(
        "*** Update File: a.txt\n@@\n-a\n+A\n\
         *** Add File: new/deep/x.txt\n+x\n\
         *** Update File: b.txt\n@@\n-b\n+B\n\
         *** Update File: m.txt\n*** Move to: mv/m.txt\n@@\n-m\n+M\n\
         *** Delete File: c.txt\n",
    );
    let plan = root.plan_patch(&text, &BTreeMap::new()).unwrap();
    (dir, root, plan)
}

fn injected(path: &str) -> Error {
    Error::FileOperationFailed { path: path.to_owned(), action: "an injected step", source: std::io::Error::other("injected failure") }
}

#[test]
fn failure_at_any_step_rolls_back_every_byte() {
    // Fail before staging the second write, before swapping a write, before the last removal.
    for target in [Step::Stage("new/deep/x.txt"), Step::Swap("b.txt"), Step::Swap("c.txt")] {
        let (dir, root, plan) = rollback_fixture();
        let before = snapshot(dir.path());
        let report = root.commit_with(&plan, &mut |step| {
            if step == target {
                Err(injected("x"))
            } else {
                Ok(())
            }
        });
        assert_eq!(report.status, CommitStatus::FailedRolledBack, "{target:?}: {:?}", report.error);
        assert_eq!(report.error.unwrap().code(), ErrorCode::FileOperationFailed);
        assert_eq!(snapshot(dir.path()), before, "{target:?}");
    }
}

#[test]
fn a_failed_rollback_is_reported_partial() {
    let (dir, root, plan) = rollback_fixture();
    let report = root.commit_with(&plan, &mut |step| match step {
        Step::Swap("c.txt") | Step::Restore("a.txt") => Err(injected("x")),
        _ => Ok(()),
    });
    assert_eq!(report.status, CommitStatus::FailedPartial);
    let err = report.error.unwrap();
    assert!(err.to_string().contains("rolling back also failed"), "{err}");
    // The other paths were restored; a.txt keeps the new content the rollback could not undo.
    assert_eq!(bytes(dir.path(), "a.txt"), b"A\r\nline\r\n");
    assert_eq!(bytes(dir.path(), "b.txt"), b"b\nno final newline");
    assert!(!dir.path().join("new").exists());
    assert_eq!(serde_json::to_value(CommitStatus::FailedPartial).unwrap(), "failed_partial");
    assert_eq!(serde_json::to_value(CommitStatus::FailedRolledBack).unwrap(), "failed_rolled_back");
}

/// Two spellings of one file (`./g.txt`, `g.txt`, `sub//a`) are one file to the planner: a patch
/// that would touch it twice is refused whole, before any write (fresh-user trial: a Move plus an
/// Add of `./<dest>` used to commit half and lose both contents).
#[test]
fn two_spellings_of_one_path_are_one_file() {
    let (dir, root) = workspace();
    put(dir.path(), "e.txt", b"orig\n");
    put(dir.path(), "hello.txt", b"hello\n");
    let before = snapshot(dir.path());
    let move_then_add = patch_text("*** Update File: e.txt\n*** Move to: g.txt\n@@\n-orig\n+moved\n*** Add File: ./g.txt\n+added\n");
    let e = root.plan_patch(&move_then_add, &BTreeMap::new()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::AddFileExists, "{e}");
    let twice = patch_text("*** Update File: hello.txt\n@@\n-hello\n+hello2\n*** Update File: ./hello.txt\n@@\n-hello\n+hello3\n");
    let e = root.plan_patch(&twice, &BTreeMap::new()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidPatch, "{e}");
    assert_eq!(snapshot(dir.path()), before, "nothing written");

    // one spelling everywhere: in the plan, in read, and in expected_versions
    let plan = root.plan_patch(&patch_text("*** Add File: sub//./a.txt\n+a\n"), &BTreeMap::new()).unwrap();
    assert_eq!(plan.files(), ["sub/a.txt"]);
    assert_eq!(root.read("./hello.txt", None, None).unwrap().path, "hello.txt");
    let v = root.read("hello.txt", None, None).unwrap().version;
    let clash = BTreeMap::from([("hello.txt".to_owned(), v), ("./hello.txt".to_owned(), "absent".to_owned())]);
    let e = root.plan_patch(&patch_text("*** Delete File: hello.txt\n"), &clash).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
}
