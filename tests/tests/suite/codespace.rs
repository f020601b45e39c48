//! The CodeSpace tools over a real daemon's HTTP API: the seed's acceptance loop (read →
//! preview → apply → read back → run → collect output → cancel a long command → recover a patch
//! by key, plus a failing command and an oversized log), X19 over the wire, approvals,
//! steering through `/inbox`, and a read-only workspace.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use spaces_sdk::client::{ClientError, Method};
use spaces_sdk::{Approvals, ErrorCode, SpaceAddRequest};

use crate::support::TestDaemon;

async fn tool(d: &TestDaemon, name: &str, args: Value) -> Value {
    match d.client.call_named(name, args.clone()).await {
        Ok(v) => v,
        Err(e) => panic!("{name} {args} failed: {e}"),
    }
}

async fn tool_err(d: &TestDaemon, name: &str, args: Value) -> spaces_sdk::ApiError {
    match d.client.call_named(name, args.clone()).await {
        Err(ClientError::Api(e)) => e,
        other => panic!("{name} {args}: expected a typed error, got {other:?}"),
    }
}

/// Reads a process's output from `cursor` until `eof`, long-polling.
async fn drain(d: &TestDaemon, process_id: &str, mut cursor: u64) -> (String, Value) {
    let mut out = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = tool(d, "read_process", json!({"process_id": process_id, "cursor": cursor, "wait_ms": 2000})).await;
        out.push_str(r["chunk"].as_str().unwrap());
        cursor = r["cursor"].as_u64().unwrap();
        if r["eof"] == json!(true) {
            return (out, r);
        }
        assert!(Instant::now() < deadline, "no eof within 30 s; output so far: {out:?}");
    }
}

async fn wait_exited(d: &TestDaemon, process_id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = tool(d, "process_status", json!({"process_id": process_id})).await;
        if s["state"] == "exited" {
            return s;
        }
        assert!(Instant::now() < deadline, "process did not exit: {s}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn acceptance_loop_over_http() {
    let d = TestDaemon::start().await;
    let root = d.space("demo").await;
    std::fs::write(root.join("hello.txt"), "hi\n").unwrap();

    let tools: Value = d.client.call(Method::GET, "/v1/tools", None::<&()>).await.unwrap();
    let tools: Vec<&str> = tools["tools"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(tools.contains(&"apply_patch") && tools.contains(&"work_finish"), "{tools:?}");

    let info = tool(&d, "workspace_info", json!({"workspace_id": "demo"})).await;
    let ex = &info["execution"];
    assert_eq!(ex["files"]["patch"]["available"], true);
    assert_eq!(ex["process"]["available"], true);
    assert_eq!(ex["process"]["capabilities"]["lifetime"]["client_disconnect"], "keep_running");
    assert_eq!(ex["isolation"]["command_sandbox"], "bubblewrap", "commands start in the host's sandbox");
    assert_eq!(ex["approvals"], "off");

    // read -> preview -> apply -> read back
    let read = tool(&d, "read", json!({"workspace_id": "demo", "path": "hello.txt"})).await;
    assert_eq!(read["content"], "hi\n");
    let v1 = read["version"].as_str().unwrap().to_owned();
    assert!(v1.starts_with("sha256:"));
    let patch = "*** Begin Patch\n*** Update File: hello.txt\n@@\n-hi\n+hello\n*** End Patch\n";
    let preview = tool(
        &d,
        "apply_patch",
        json!({"workspace_id": "demo", "patch": patch,
        "expected_versions": {"hello.txt": v1}, "operation_key": "hello-preview-1", "check_only": true}),
    )
    .await;
    assert_eq!(preview["status"], "checked");
    assert_eq!(std::fs::read_to_string(root.join("hello.txt")).unwrap(), "hi\n", "a preview writes nothing");
    // A preview and its apply cannot share a key.
    let e = tool_err(
        &d,
        "apply_patch",
        json!({"workspace_id": "demo", "patch": patch,
        "expected_versions": {"hello.txt": v1}, "operation_key": "hello-preview-1"}),
    )
    .await;
    assert_eq!(e.code, ErrorCode::OperationKeyConflict);
    let apply_args = json!({"workspace_id": "demo", "patch": patch,
        "expected_versions": {"hello.txt": v1}, "operation_key": "hello-apply-1"});
    let applied = tool(&d, "apply_patch", apply_args.clone()).await;
    assert_eq!(applied["status"], "applied", "{applied}");
    assert_eq!(applied["replayed"], false);
    assert_eq!(applied["changes"][0]["kind"], "update");
    assert_eq!(applied["changes"][0]["before_version"], v1);
    let back = tool(&d, "read", json!({"workspace_id": "demo", "path": "hello.txt"})).await;
    assert_eq!(back["content"], "hello\n");
    assert_eq!(back["version"], applied["changes"][0]["after_version"]);

    // recover the patch by key (as after a lost response): the ledger, and a replay
    let status = tool(&d, "operation_status", json!({"operation_key": "hello-apply-1"})).await;
    assert_eq!(status["status"], "applied");
    assert_eq!(status["operation_id"], applied["operation_id"]);
    let names: Vec<&str> = status["events"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["minted", "finished"]);
    let replay = tool(&d, "apply_patch", apply_args).await;
    assert_eq!(replay["replayed"], true);
    assert_eq!(replay["operation_id"], applied["operation_id"]);
    assert_eq!(std::fs::read_to_string(root.join("hello.txt")).unwrap(), "hello\n", "a replay never re-applies");

    // run -> collect output
    let run = tool(&d, "exec_command", json!({"workspace_id": "demo", "command": ["/bin/echo", "agent-smoke"]})).await;
    assert_eq!(run["dispatch_status"], "confirmed");
    let pid = run["process_id"].as_str().unwrap().to_owned();
    assert!(pid.starts_with("proc-"));
    let (out, last) = drain(&d, &pid, 0).await;
    assert_eq!(out, "agent-smoke\n");
    assert_eq!(last["output_lost"], false);
    let st = wait_exited(&d, &pid).await;
    assert_eq!((st["termination"].as_str(), st["exit_code"].as_i64()), (Some("exited"), Some(0)));

    // a failing command: exited, non-zero, its stderr in the combined stream
    let fail = tool(&d, "exec_command", json!({"workspace_id": "demo", "command": ["sh", "-c", "echo oops >&2; exit 3"]})).await;
    let fail_id = fail["process_id"].as_str().unwrap().to_owned();
    let (out, _) = drain(&d, &fail_id, 0).await;
    assert_eq!(out, "oops\n");
    let st = wait_exited(&d, &fail_id).await;
    assert_eq!((st["termination"].as_str(), st["exit_code"].as_i64()), (Some("exited"), Some(3)));

    // an oversized log: only the last 256 KiB are retained and the result says so
    let big = tool(
        &d,
        "exec_command",
        json!({"workspace_id": "demo",
        "command": ["sh", "-c", "head -c 400000 /dev/zero | tr '\\0' a; echo END"]}),
    )
    .await;
    let big_id = big["process_id"].as_str().unwrap().to_owned();
    wait_exited(&d, &big_id).await;
    let (out, last) = drain(&d, &big_id, 0).await;
    assert_eq!(last["output_lost"], true);
    let dropped = last["retained_from"].as_u64().unwrap();
    assert_eq!(dropped + out.len() as u64, 400_004, "retained window + dropped bytes = everything written");
    assert_eq!(out.len(), 256 * 1024);
    assert!(out.ends_with("aaaEND\n"));

    // cancel a long command; meanwhile the workspace is busy for mutations, not for reads
    let long = tool(&d, "exec_command", json!({"workspace_id": "demo", "command": ["sleep", "100"]})).await;
    let long_id = long["process_id"].as_str().unwrap().to_owned();
    let e = tool_err(&d, "exec_command", json!({"workspace_id": "demo", "command": ["true"]})).await;
    assert_eq!(e.code, ErrorCode::WorkspaceBusy);
    let e = tool_err(
        &d,
        "apply_patch",
        json!({"workspace_id": "demo",
        "patch": "*** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch\n"}),
    )
    .await;
    assert_eq!(e.code, ErrorCode::WorkspaceBusy);
    assert!(!root.join("x.txt").exists());
    tool(&d, "read", json!({"workspace_id": "demo", "path": "hello.txt"})).await;
    let found = tool(&d, "find", json!({"workspace_id": "demo", "glob": "*.txt"})).await;
    assert_eq!(found["paths"], json!(["hello.txt"]));
    assert_eq!(tool(&d, "terminate_process", json!({"process_id": long_id})).await["ok"], true);
    let st = tool(&d, "process_status", json!({"process_id": long_id})).await;
    assert_eq!(st["state"], "exited");
    assert_eq!(st["termination"], "terminated");
    assert!(st.get("exit_code").is_none(), "exit_code only when exited normally: {st}");
    let added = tool(
        &d,
        "apply_patch",
        json!({"workspace_id": "demo",
        "patch": "*** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch\n"}),
    )
    .await;
    assert_eq!(added["status"], "applied");

    // unknown ids are typed
    let e = tool_err(&d, "read_process", json!({"process_id": "proc-00000000-0000-0000-0000-000000000000"})).await;
    assert_eq!(e.code, ErrorCode::ProcessNotFound);
    let e = tool_err(&d, "operation_status", json!({"operation_key": "never-used"})).await;
    assert_eq!(e.code, ErrorCode::OperationNotFound);
    let e = tool_err(&d, "no_such_tool", json!({})).await;
    assert_eq!(e.code, ErrorCode::InvalidArgument);
}

#[tokio::test]
async fn case_x19_version_conflict_and_key_replay_over_http() {
    let d = TestDaemon::start().await;
    let root = d.space("notes").await;
    std::fs::write(root.join("n.md"), "# notes\none\n").unwrap();
    let v1 = tool(&d, "read", json!({"workspace_id": "notes", "path": "n.md"})).await["version"].clone();
    // another process appends
    std::process::Command::new("sh").arg("-c").arg(format!("echo two >> {}", root.join("n.md").display())).status().unwrap();
    let patch = "*** Begin Patch\n*** Update File: n.md\n@@\n-one\n+ONE\n*** End Patch\n";
    let e = tool_err(&d, "apply_patch", json!({"workspace_id": "notes", "patch": patch, "expected_versions": {"n.md": v1}})).await;
    assert_eq!(e.code, ErrorCode::VersionConflict);
    let current = tool(&d, "read", json!({"workspace_id": "notes", "path": "n.md"})).await["version"].as_str().unwrap().to_owned();
    assert!(e.message.contains(&current), "the conflict names the current version: {}", e.message);
    assert_eq!(std::fs::read_to_string(root.join("n.md")).unwrap(), "# notes\none\ntwo\n");

    let args = json!({"workspace_id": "notes", "patch": patch, "expected_versions": {"n.md": current}, "operation_key": "k1"});
    let first = tool(&d, "apply_patch", args.clone()).await;
    assert_eq!(first["status"], "applied");
    // the response was "lost": the same call again replays, never re-applies
    let again = tool(&d, "apply_patch", args).await;
    assert_eq!(again["replayed"], true);
    assert_eq!(std::fs::read_to_string(root.join("n.md")).unwrap(), "# notes\nONE\ntwo\n");
    let e = tool_err(
        &d,
        "apply_patch",
        json!({"workspace_id": "notes", "operation_key": "k1",
        "patch": "*** Begin Patch\n*** Add File: other.md\n+x\n*** End Patch\n"}),
    )
    .await;
    assert_eq!(e.code, ErrorCode::OperationKeyConflict);
    assert!(!root.join("other.md").exists());
}

#[tokio::test]
async fn approvals_hold_grant_resume_once() {
    let d = TestDaemon::start().await;
    let root = d.dir.path().join("held");
    std::fs::create_dir_all(&root).unwrap();
    d.client
        .space_add(&SpaceAddRequest {
            name: "held".into(),
            root: root.display().to_string(),
            read_only: false,
            approvals: Approvals::Confirm,
            network: Default::default(),
            replace: false,
        })
        .await
        .unwrap();
    let info = tool(&d, "workspace_info", json!({"workspace_id": "held"})).await;
    assert_eq!(info["execution"]["approvals"], "confirm");

    let args = json!({"workspace_id": "held", "patch": "*** Begin Patch\n*** Add File: a.txt\n+a\n*** End Patch\n"});
    let e = tool_err(&d, "apply_patch", args.clone()).await;
    assert_eq!(e.code, ErrorCode::ApprovalRequired);
    let appr = e.approval_id.clone().expect("approval_id");
    // a retry reuses the hold
    let e2 = tool_err(&d, "apply_patch", args.clone()).await;
    assert_eq!((e2.code, e2.approval_id.as_deref()), (ErrorCode::ApprovalRequired, Some(appr.as_str())));
    // an extra argument grants nothing: it is refused, naming the key (case C1)
    let mut sneaky = args.clone();
    sneaky["approved"] = json!(true);
    let e3 = tool_err(&d, "apply_patch", sneaky).await;
    assert_eq!(e3.code, ErrorCode::InvalidArgument, "{e3:?}");
    assert!(e3.message.contains("approved") && e3.approval_id.is_none(), "{e3:?}");
    assert!(!root.join("a.txt").exists());
    // a preview needs no approval and writes nothing
    let mut preview = args.clone();
    preview["check_only"] = json!(true);
    assert_eq!(tool(&d, "apply_patch", preview).await["status"], "checked");

    let e = tool_err(&d, "operation_resume", json!({"approval_id": appr})).await;
    assert_eq!(e.code, ErrorCode::ApprovalConflict, "a pending hold cannot be resumed");
    let r = tool(&d, "approval_resolve", json!({"approval_id": appr, "decision": "grant"})).await;
    assert_eq!(r["state"], "granted");
    let e = tool_err(&d, "approval_resolve", json!({"approval_id": appr, "decision": "deny"})).await;
    assert_eq!(e.code, ErrorCode::ApprovalConflict);
    let done = tool(&d, "operation_resume", json!({"approval_id": appr})).await;
    assert_eq!(done["state"], "consumed");
    assert_eq!(done["apply_patch"]["status"], "applied");
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "a\n");
    let again = tool(&d, "operation_resume", json!({"approval_id": appr})).await;
    assert_eq!(again["apply_patch"]["operation_id"], done["apply_patch"]["operation_id"]);

    // a held command: deny is terminal
    let e = tool_err(&d, "exec_command", json!({"workspace_id": "held", "command": ["touch", "ran"]})).await;
    let cmd_appr = e.approval_id.expect("approval_id");
    tool(&d, "approval_resolve", json!({"approval_id": cmd_appr, "decision": "deny"})).await;
    let e = tool_err(&d, "operation_resume", json!({"approval_id": cmd_appr})).await;
    assert_eq!(e.code, ErrorCode::ApprovalConflict);
    assert!(!root.join("ran").exists());
    // approval_create opens a hold explicitly; granted and resumed, the command runs once
    let hold = tool(
        &d,
        "approval_create",
        json!({"tool": "exec_command",
        "arguments": {"workspace_id": "held", "command": ["sh", "-c", "echo once >> ran"]}}),
    )
    .await;
    let id = hold["approval_id"].as_str().unwrap().to_owned();
    tool(&d, "approval_resolve", json!({"approval_id": id, "decision": "grant"})).await;
    let done = tool(&d, "operation_resume", json!({"approval_id": id})).await;
    let pid = done["exec_command"]["process_id"].as_str().unwrap().to_owned();
    wait_exited(&d, &pid).await;
    let again = tool(&d, "operation_resume", json!({"approval_id": id})).await;
    assert_eq!(again["exec_command"]["process_id"], pid.as_str(), "a repeat returns the stored result");
    assert_eq!(std::fs::read_to_string(root.join("ran")).unwrap(), "once\n", "never re-spawned");
}

#[tokio::test]
async fn steering_through_the_inbox() {
    let d = TestDaemon::start().await;
    d.space("steer").await;
    let work = tool(&d, "work_open", json!({"workspace_id": "steer", "title": "refactor"})).await;
    assert_eq!(work["state"], "active");
    let work_id = work["work_id"].as_str().unwrap().to_owned();

    let draft: Value = d
        .client
        .call(Method::POST, &format!("/inbox/works/{work_id}/intents"), Some(&json!({"body": "also update the README"})))
        .await
        .unwrap();
    assert_eq!(draft["state"], "draft");
    let intent_id = draft["intent_id"].as_str().unwrap().to_owned();
    // drafts are never delivered
    let claim = tool(&d, "steer_claim_next", json!({"work_id": work_id})).await;
    assert!(claim.get("item").is_none_or(Value::is_null), "a draft was delivered: {claim}");
    // a tool given a work_id carries coordination hints
    let info = tool(&d, "workspace_info", json!({"workspace_id": "steer", "work_id": work_id})).await;
    assert_eq!(info["coordination"]["work_id"], work_id.as_str());

    let rev = draft["revision"].as_u64().unwrap();
    let e =
        d.client.call::<_, Value>(Method::POST, &format!("/inbox/intents/{intent_id}/queue"), Some(&json!({"revision": rev + 7}))).await;
    assert!(matches!(e, Err(ClientError::Api(ref e)) if e.code == ErrorCode::IntentRevisionConflict), "{e:?}");
    let queued: Value =
        d.client.call(Method::POST, &format!("/inbox/intents/{intent_id}/queue"), Some(&json!({"revision": rev}))).await.unwrap();
    assert_eq!(queued["state"], "queued");

    let status = tool(&d, "steer_status", json!({"work_id": work_id})).await;
    assert_eq!(status["queued"], 1);
    let fin = tool(&d, "work_finish", json!({"work_id": work_id})).await;
    assert_eq!((fin["closed"].as_bool(), fin["reason"].as_str()), (Some(false), Some("pending_user_input")));
    let claim = tool(&d, "steer_claim_next", json!({"work_id": work_id})).await;
    assert_eq!(claim["item"]["content"], "also update the README");
    assert_eq!(claim["item"]["intent_id"], intent_id.as_str());
    tool(&d, "steer_complete", json!({"work_id": work_id, "intent_id": intent_id, "outcome": "done"})).await;
    let fin = tool(&d, "work_finish", json!({"work_id": work_id})).await;
    assert_eq!(fin["closed"], true);

    let listed: Value = d.client.call(Method::GET, &format!("/inbox/works/{work_id}"), None::<&()>).await.unwrap();
    assert_eq!(listed["intents"][0]["state"], "done");
    let e = d.client.call::<_, Value>(Method::GET, "/inbox/works/work-nope", None::<&()>).await;
    assert!(matches!(e, Err(ClientError::Api(ref e)) if e.code == ErrorCode::WorkNotFound), "{e:?}");
}

#[tokio::test]
async fn read_only_workspace_reads_but_never_writes_or_runs() {
    let d = TestDaemon::start().await;
    let root = d.dir.path().join("ro");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("f.txt"), "f\n").unwrap();
    d.client
        .space_add(&SpaceAddRequest {
            name: "ro".into(),
            root: root.display().to_string(),
            read_only: true,
            approvals: Approvals::Off,
            network: Default::default(),
            replace: false,
        })
        .await
        .unwrap();
    let info = tool(&d, "workspace_info", json!({"workspace_id": "ro"})).await;
    assert_eq!(info["execution"]["process"]["available"], false);
    assert!(info["execution"]["process"].get("capabilities").is_none());
    assert_eq!(info["execution"]["files"]["patch"]["available"], false);
    assert_eq!(tool(&d, "read", json!({"workspace_id": "ro", "path": "f.txt"})).await["content"], "f\n");
    let delete = "*** Begin Patch\n*** Delete File: f.txt\n*** End Patch\n";
    let e = tool_err(&d, "apply_patch", json!({"workspace_id": "ro", "patch": delete})).await;
    assert_eq!(e.code, ErrorCode::Unauthorized);
    let e = tool_err(&d, "apply_patch", json!({"workspace_id": "ro", "approved": true, "patch": delete})).await;
    assert_eq!(e.code, ErrorCode::InvalidArgument, "an extra key grants nothing: {e:?}");
    let e = tool_err(&d, "exec_command", json!({"workspace_id": "ro", "command": ["rm", "f.txt"]})).await;
    assert_eq!(e.code, ErrorCode::Unauthorized);
    assert!(root.join("f.txt").exists());
    let e = tool_err(&d, "read", json!({"workspace_id": "nope", "path": "f.txt"})).await;
    assert_eq!(e.code, ErrorCode::WorkspaceNotFound);
}

/// Waits until at least `n` processes carry `marker` and returns them.
async fn wait_alive(marker: &str, n: usize) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pids = spaces_os::process::alive_with_marker(marker);
        if pids.len() >= n {
            return pids;
        }
        assert!(Instant::now() < deadline, "{n} processes with {marker} did not start: {}", ps(&pids));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `pid: command line` of each of `pids`, for assertion messages.
fn ps(pids: &[i32]) -> String {
    pids.iter()
        .map(|p| format!("{p}: {:?}", std::fs::read_to_string(format!("/proc/{p}/cmdline")).unwrap_or_default().replace('\0', " ")))
        .collect::<Vec<_>>()
        .join(", ")
}

#[tokio::test]
async fn a_daemon_shutdown_keeps_running_commands_and_the_next_daemon_reattaches_them() {
    let mut d = TestDaemon::start().await;
    let root = d.space("life").await;
    let applied = tool(
        &d,
        "apply_patch",
        json!({"workspace_id": "life", "operation_key": "before-restart",
        "patch": "*** Begin Patch\n*** Add File: a.txt\n+a\n*** End Patch\n"}),
    )
    .await;
    let run = tool(&d, "exec_command", json!({"workspace_id": "life", "command": ["sh", "-c", "sleep 1000 & sleep 1000"]})).await;
    let pid = run["process_id"].as_str().unwrap().to_owned();
    let marker = spaces_os::process::tag_marker(&format!("exec/{pid}"));
    let pids = wait_alive(&marker, 2).await;

    d.terminate();
    let alive = spaces_os::process::alive_with_marker(&marker);
    assert!(pids.iter().all(|p| alive.contains(p)), "a shutdown leaves commands running under their shims: {}", ps(&alive));
    d.start_again().await;
    let info = tool(&d, "workspace_info", json!({"workspace_id": "life"})).await;
    let lifetime = &info["execution"]["process"]["capabilities"]["lifetime"];
    assert_eq!((lifetime["gateway_shutdown"].as_str(), lifetime["restart_recovery"].as_str()), (Some("keep_running"), Some("reattach")));
    // the handle is back, still running and still occupying its workspace; the ledger survived
    let status = tool(&d, "process_status", json!({"process_id": pid})).await;
    assert_eq!(status["state"], "running", "{status}");
    let e = tool_err(&d, "exec_command", json!({"workspace_id": "life", "command": ["true"]})).await;
    assert_eq!(e.code, ErrorCode::WorkspaceBusy, "{}", e.message);
    let status = tool(&d, "operation_status", json!({"operation_key": "before-restart"})).await;
    assert_eq!((status["status"].as_str(), &status["operation_id"]), (Some("applied"), &applied["operation_id"]));
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "a\n");
    // terminate_process reaches a re-adopted command and all of its processes
    tool(&d, "terminate_process", json!({"process_id": pid})).await;
    let alive = spaces_os::process::alive_with_marker(&marker);
    assert!(alive.is_empty(), "terminate ends every process of the command: {}", ps(&alive));
    let status = wait_exited(&d, &pid).await;
    assert_eq!(status["termination"], "terminated", "{status}");
    let again = tool(&d, "exec_command", json!({"workspace_id": "life", "command": ["true"]})).await;
    assert_eq!(again["dispatch_status"], "confirmed");
    let status = wait_exited(&d, again["process_id"].as_str().unwrap()).await;
    assert_eq!(status["exit_code"], 0, "{status}");

    // a command whose shim was killed while the daemon was down is held by nobody: the next
    // daemon ends it, and its handle reads exited with an unknown status
    let orphan = tool(&d, "exec_command", json!({"workspace_id": "life", "command": ["sh", "-c", "sleep 1000 & sleep 1000"]})).await;
    let orphan = orphan["process_id"].as_str().unwrap().to_owned();
    let marker = spaces_os::process::tag_marker(&format!("exec/{orphan}"));
    let pids = wait_alive(&marker, 2).await;
    d.kill();
    // The shim is the nearest `spacesd shim` above the command's processes (bubblewrap's
    // processes stand between them; in a warm sandbox they do not carry the command's tag).
    let parent = |pid: i32| -> i32 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        stat.rsplit_once(')').unwrap().1.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    let is_shim = |pid: i32| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        cmdline.split(|b| *b == 0).nth(1) == Some(b"shim".as_slice())
    };
    let shim_of = |mut pid: i32| -> i32 {
        while pid > 1 && !is_shim(pid) {
            pid = parent(pid);
        }
        pid
    };
    let mut shims: Vec<i32> = pids.iter().map(|p| shim_of(*p)).collect();
    shims.sort_unstable();
    shims.dedup();
    assert!(shims.len() == 1 && shims[0] > 1, "one shim holds the command: {shims:?}");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(shims[0]), nix::sys::signal::Signal::SIGKILL).unwrap();
    d.start_again().await;
    let status = wait_exited(&d, &orphan).await;
    assert_eq!(status["termination"], "unknown", "{status}");
    let alive = spaces_os::process::alive_with_marker(&marker);
    assert!(alive.is_empty(), "leftover commands end at start-up: {}", ps(&alive));
}

#[tokio::test]
async fn one_root_one_busy_slot_and_a_busy_resume_keeps_its_grant() {
    let d = TestDaemon::start().await;
    let root = d.space("one").await;
    // a second name for the same directory, with approvals on
    d.client
        .space_add(&SpaceAddRequest {
            name: "alias".into(),
            root: root.display().to_string(),
            read_only: false,
            approvals: Approvals::Confirm,
            network: Default::default(),
            replace: false,
        })
        .await
        .unwrap();
    let hold = tool_err(&d, "exec_command", json!({"workspace_id": "alias", "command": ["sh", "-c", "echo held >> log"]})).await;
    let appr = hold.approval_id.expect("approval_id");
    tool(&d, "approval_resolve", json!({"approval_id": appr, "decision": "grant"})).await;

    let long = tool(&d, "exec_command", json!({"workspace_id": "one", "command": ["sleep", "100"]})).await;
    let long_id = long["process_id"].as_str().unwrap().to_owned();
    let e = tool_err(&d, "exec_command", json!({"workspace_id": "alias", "command": ["true"]})).await;
    assert_eq!(e.code, ErrorCode::ApprovalRequired);
    let e = tool_err(&d, "operation_resume", json!({"approval_id": appr})).await;
    assert_eq!(e.code, ErrorCode::WorkspaceBusy, "the same directory under another name is busy: {}", e.message);
    // a preview writes nothing, so it works while a command runs
    let preview = tool(
        &d,
        "apply_patch",
        json!({"workspace_id": "one", "check_only": true,
        "patch": "*** Begin Patch\n*** Add File: p.txt\n+p\n*** End Patch\n"}),
    )
    .await;
    assert_eq!(preview["status"], "checked");

    tool(&d, "terminate_process", json!({"process_id": long_id})).await;
    let done = tool(&d, "operation_resume", json!({"approval_id": appr})).await;
    assert_eq!(done["state"], "consumed", "the grant survived the busy answer: {done}");
    let pid = done["exec_command"]["process_id"].as_str().unwrap().to_owned();
    wait_exited(&d, &pid).await;
    assert_eq!(std::fs::read_to_string(root.join("log")).unwrap(), "held\n");
}

/// A shim-held command that closes its output and runs on: `read_process` says `eof` only
/// once it exited, so the next command in the workspace starts at once (the kind of the CI
/// failure where `eof` came before the exit and the next `exec_command` was `WORKSPACE_BUSY`).
#[tokio::test]
async fn after_eof_the_process_has_exited_and_the_next_command_starts() {
    let d = TestDaemon::start().await;
    d.space("s").await;
    for _ in 0..3 {
        let started =
            tool(&d, "exec_command", json!({"workspace_id": "s", "command": ["sh", "-c", "echo closing; exec >&- 2>&-; sleep 0.3"]})).await;
        let id = started["process_id"].as_str().unwrap().to_owned();
        let (out, _) = drain(&d, &id, 0).await;
        assert_eq!(out, "closing\n");
        let status = tool(&d, "process_status", json!({"process_id": id})).await;
        assert_eq!(status["state"], "exited", "eof was read while the process ran: {status}");
        assert_eq!(status["eof"], json!(true), "{status}");
    }
}

#[tokio::test]
async fn large_patches_fit_over_http_and_the_cli_reads_arguments_from_a_file() {
    let d = TestDaemon::start().await;
    let root = d.space("big").await;
    let line = "x".repeat(99);
    let body: String = (0..40_000).map(|_| format!("+{line}\n")).collect(); // 4 MB of content
    let patch = format!("*** Begin Patch\n*** Add File: big.txt\n{body}*** End Patch\n");
    let out = tool(&d, "apply_patch", json!({"workspace_id": "big", "patch": patch})).await;
    assert_eq!(out["status"], "applied");
    assert_eq!(std::fs::metadata(root.join("big.txt")).unwrap().len(), 4_000_000);

    let args = d.dir.path().join("args.json");
    std::fs::write(&args, json!({"workspace_id": "big", "path": "big.txt", "limit": 5}).to_string()).unwrap();
    let (ok, stdout) = d.cli(&["tool", "read", &format!("@{}", args.display())]);
    assert!(ok, "{stdout}");
    let read: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!((read["content"].as_str(), read["truncated"].as_bool()), (Some("xxxxx"), Some(true)));
    let (ok, stdout) = d.cli(&["tool", "read", r#"{"workspace_id": "big", "path": "../etc/passwd"}"#]);
    assert!(!ok);
    assert!(stdout.contains("PATH_ESCAPE"), "{stdout}");
}
