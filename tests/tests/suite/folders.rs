//! A Space is bound to its path (case R43): its folder renamed away and replaced by another
//! while the daemon runs, the file tools, commands and agent runs act on the folder now at the
//! registered path, and the renamed one is never touched again; a folder gone or replaced by a
//! symlink is refused with a typed error naming the change, and nothing is followed elsewhere.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use spaces_sdk::client::ClientError;
use spaces_sdk::ErrorCode;

use crate::support::{wait_until, TestDaemon};

/// A daemon whose `claude-code` is a fake that writes what it sees of its working directory
/// (`ls`) into `agent-saw.txt` there, then sleeps. The fake's directory lives with the daemon.
async fn daemon() -> (TestDaemon, tempfile::TempDir) {
    let bin_dir = tempfile::tempdir().unwrap();
    let fake = bin_dir.path().join("fake-claude");
    std::fs::write(&fake, "#!/bin/sh\nls > .agent-listing && mv .agent-listing agent-saw.txt\nexec sleep 60\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let d = TestDaemon::start_with_env(vec![("SPACES_HARNESS_BIN_CLAUDE_CODE".into(), fake.display().to_string())]).await;
    (d, bin_dir)
}

/// Every file under `dir` with its contents (relative paths), to compare whole.
fn tree(dir: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.insert(rel, std::fs::read_to_string(&p).unwrap_or_default());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn refused(r: Result<Value, ClientError>) -> (ErrorCode, String) {
    match r {
        Err(ClientError::Api(e)) => (e.code, e.message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// `exec_command` in Space `space`, read to its end: the output.
async fn run_command(d: &TestDaemon, space: &str, script: &str) -> String {
    let started = d.client.call_named("exec_command", json!({"workspace_id": space, "command": ["sh", "-c", script]})).await.unwrap();
    let id = started["process_id"].as_str().unwrap().to_owned();
    let (mut out, mut cursor) = (String::new(), 0);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = d.client.call_named("read_process", json!({"process_id": id, "cursor": cursor, "wait_ms": 2000})).await.unwrap();
        out.push_str(r["chunk"].as_str().unwrap());
        cursor = r["cursor"].as_u64().unwrap();
        if r["eof"] == json!(true) {
            return out;
        }
        assert!(Instant::now() < deadline, "{script}: no end within 30 s: {out}");
    }
}

fn add_file(space: &str, path: &str, line: &str) -> Value {
    json!({"workspace_id": space, "patch": format!("*** Begin Patch\n*** Add File: {path}\n+{line}\n*** End Patch\n")})
}

/// Case R43: the Space's folder `ws` is used (read, patch, command), then renamed to `ws-old`
/// and a new `ws` with other files made in its place. `read`, `apply_patch`, `exec_command` and
/// an agent run started after the swap act on the new `ws`; `ws-old` stays exactly as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_r43_a_space_folder_renamed_and_replaced_is_used_at_its_path_and_the_old_one_never_touched() {
    let (d, _bin) = daemon().await;
    let ws = d.space("ws").await;
    std::fs::write(ws.join("old.txt"), "old\n").unwrap();
    // The daemon has used the folder before the swap.
    let r = d.client.call_named("read", json!({"workspace_id": "ws", "path": "old.txt"})).await.unwrap();
    assert_eq!(r["content"], "old\n");
    d.client.call_named("apply_patch", add_file("ws", "before.txt", "before the swap")).await.unwrap();
    assert_eq!(run_command(&d, "ws", "ls").await, "before.txt\nold.txt\n");

    let old = ws.with_file_name("space-ws-old");
    std::fs::rename(&ws, &old).unwrap();
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("new.txt"), "new\n").unwrap();
    let old_tree = tree(&old);

    let r = d.client.call_named("read", json!({"workspace_id": "ws", "path": "new.txt"})).await.unwrap();
    assert_eq!(r["content"], "new\n");
    let (code, message) = refused(d.client.call_named("read", json!({"workspace_id": "ws", "path": "old.txt"})).await);
    assert_eq!(code, ErrorCode::FileNotFound, "old.txt is in ws-old only: {message}");
    let found = d.client.call_named("find", json!({"workspace_id": "ws"})).await.unwrap();
    assert_eq!(found["paths"], json!(["new.txt"]), "{found}");

    d.client.call_named("apply_patch", add_file("ws", "patched.txt", "after the swap")).await.unwrap();
    let update = "*** Begin Patch\n*** Update File: new.txt\n@@\n-new\n+new, patched\n*** End Patch\n";
    d.client.call_named("apply_patch", json!({"workspace_id": "ws", "patch": update})).await.unwrap();
    assert_eq!(run_command(&d, "ws", "ls; echo made > from-exec.txt").await, "new.txt\npatched.txt\n");

    let run = d.client.call_named("agent_start", json!({"space": "ws", "agent": "claude-code", "prompt": "hi"})).await.unwrap();
    let saw = ws.join("agent-saw.txt");
    wait_until("the agent to list its folder", Duration::from_secs(30), || saw.is_file()).await;
    assert_eq!(std::fs::read_to_string(&saw).unwrap(), "from-exec.txt\nnew.txt\npatched.txt\n");
    d.client.call_named("agent_stop", json!({"space": "ws", "run_id": run["run_id"]})).await.unwrap();

    assert_eq!(
        tree(&ws),
        BTreeMap::from([
            ("agent-saw.txt".to_owned(), "from-exec.txt\nnew.txt\npatched.txt\n".to_owned()),
            ("from-exec.txt".to_owned(), "made\n".to_owned()),
            ("new.txt".to_owned(), "new, patched\n".to_owned()),
            ("patched.txt".to_owned(), "after the swap\n".to_owned()),
        ])
    );
    assert_eq!(tree(&old), old_tree, "ws-old was touched");
    assert_eq!(
        old_tree,
        BTreeMap::from([("before.txt".to_owned(), "before the swap\n".to_owned()), ("old.txt".to_owned(), "old\n".to_owned())])
    );
}

/// R43's kind with other changes: the folder renamed away and nothing put back is
/// `WORKSPACE_NOT_FOUND` for every tool and for an agent start, naming the folder; a symlink put
/// in its place (to the renamed folder) is `SYMLINK_REJECTED` for every tool and for an agent
/// start, and nothing is read or written through it; a directory put back works again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_space_folder_gone_or_replaced_by_a_symlink_is_refused_naming_the_change() {
    let (d, _bin) = daemon().await;
    let ws = d.space("ws").await;
    std::fs::write(ws.join("a.txt"), "a\n").unwrap();
    assert_eq!(run_command(&d, "ws", "cat a.txt").await, "a\n");
    let elsewhere = ws.with_file_name("elsewhere");
    std::fs::rename(&ws, &elsewhere).unwrap();
    let elsewhere_tree = tree(&elsewhere);
    let calls = [
        ("read", json!({"workspace_id": "ws", "path": "a.txt"})),
        ("find", json!({"workspace_id": "ws"})),
        ("apply_patch", add_file("ws", "b.txt", "b")),
        ("exec_command", json!({"workspace_id": "ws", "command": ["sh", "-c", "echo x > c.txt"]})),
        ("agent_start", json!({"space": "ws", "agent": "claude-code", "prompt": "hi"})),
    ];
    for (op, args) in &calls {
        let (code, message) = refused(d.client.call_named(op, args.clone()).await);
        assert_eq!(code, ErrorCode::WorkspaceNotFound, "{op}: {message}");
        assert!(message.contains(&ws.display().to_string()) && message.contains("gone"), "{op}: {message}");
    }

    std::os::unix::fs::symlink(&elsewhere, &ws).unwrap();
    for (op, args) in &calls {
        let (code, message) = refused(d.client.call_named(op, args.clone()).await);
        assert_eq!(code, ErrorCode::SymlinkRejected, "{op}: {message}");
        assert!(message.contains(&ws.display().to_string()) && message.contains("symlink"), "{op}: {message}");
    }
    assert!(d.client.call_named("agent_list", json!({"space": "ws"})).await.unwrap().as_array().unwrap().is_empty());
    assert_eq!(tree(&elsewhere), elsewhere_tree, "something went through the symlink");

    // A directory back at the path is the Space's folder again.
    std::fs::remove_file(&ws).unwrap();
    std::fs::create_dir(&ws).unwrap();
    d.client.call_named("apply_patch", add_file("ws", "b.txt", "b")).await.unwrap();
    assert_eq!(run_command(&d, "ws", "cat b.txt").await, "b\n");
    assert_eq!(tree(&elsewhere), elsewhere_tree);
}
