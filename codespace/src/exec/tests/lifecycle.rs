//! Handles: typed errors, one live process per owner, eviction of exited handles.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use spaces_sdk::ErrorCode;
use tempfile::TempDir;

use super::support::{limits, spec};
use crate::exec::{ExecLimits, ProcessState, Processes};

// P9: input to a process that already exited gets a typed answer naming its exit code; an
// unknown id is PROCESS_NOT_FOUND; a running process outlives the exited-handle limit.
#[tokio::test]
async fn case_p9_stdin_to_exited_process_is_typed() {
    let dir = TempDir::new().unwrap();
    let p = Processes::new(ExecLimits { keep_exited_max: 2, ..limits() });
    let id = p.exec(spec(&dir, &["true"])).unwrap().process_id;
    p.wait_exit(&id).await.unwrap();
    let err = p.write_stdin(&id, b"\x03").await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::ProcessNotRunning);
    assert!(err.to_string().contains("exited with code 0"), "{}", err);
    let err = p.resize(&id, 10, 10).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::ProcessNotTty);

    let unknown = "proc-00000000-0000-0000-0000-000000000000";
    assert_eq!(p.read(unknown, None, None).await.unwrap_err().code(), ErrorCode::ProcessNotFound);
    assert_eq!(p.status(unknown).unwrap_err().code(), ErrorCode::ProcessNotFound);

    let long = p.exec(spec(&dir, &["sleep", "100"])).unwrap().process_id;
    let mut exited = vec![id];
    for _ in 0..4 {
        let id = p.exec(spec(&dir, &["true"])).unwrap().process_id;
        p.wait_exit(&id).await.unwrap();
        exited.push(id);
    }
    for old in &exited[..3] {
        assert_eq!(p.status(old).unwrap_err().code(), ErrorCode::ProcessNotFound, "{old} evicted");
    }
    for kept in &exited[3..] {
        assert_eq!(p.status(kept).unwrap().state, ProcessState::Exited);
    }
    assert_eq!(p.status(&long).unwrap().state, ProcessState::Running);
    p.terminate(&long).await.unwrap();
}

// The cap evicts by exit time, not by start order: a handle started first but exited last is
// the one kept.
#[tokio::test]
async fn the_exited_handle_cap_evicts_the_oldest_exit_first() {
    let dir = TempDir::new().unwrap();
    let p = Processes::new(ExecLimits { keep_exited_max: 1, ..limits() });
    let slow = p.exec(spec(&dir, &["sleep", "0.3"])).unwrap().process_id;
    let quick = p.exec(spec(&dir, &["true"])).unwrap().process_id;
    p.wait_exit(&quick).await.unwrap();
    assert_eq!(p.status(&quick).unwrap().state, ProcessState::Exited, "one exited handle: kept");
    p.wait_exit(&slow).await.unwrap();
    assert_eq!(p.status(&quick).unwrap_err().code(), ErrorCode::ProcessNotFound, "the older exit goes");
    assert_eq!(p.status(&slow).unwrap().state, ProcessState::Exited);
    let third = p.exec(spec(&dir, &["true"])).unwrap().process_id;
    p.wait_exit(&third).await.unwrap();
    assert_eq!(p.status(&slow).unwrap_err().code(), ErrorCode::ProcessNotFound);
    assert_eq!(p.status(&third).unwrap().state, ProcessState::Exited);
}

#[tokio::test]
async fn exited_handles_expire_after_the_keep_time() {
    let dir = TempDir::new().unwrap();
    let p = Processes::new(ExecLimits { keep_exited_for: Duration::ZERO, ..limits() });
    let id = p.exec(spec(&dir, &["true"])).unwrap().process_id;
    p.wait_exit(&id).await.unwrap();
    assert_eq!(p.status(&id).unwrap_err().code(), ErrorCode::ProcessNotFound);
}

#[tokio::test]
async fn a_second_command_in_a_busy_workspace_is_refused() {
    let dir = TempDir::new().unwrap();
    let p = Processes::new(limits());
    let first = spec(&dir, &["sleep", "100"]);
    let owner = first.owner.clone();
    let id = p.exec(first).unwrap().process_id;
    assert_eq!(p.live_for(&owner), Some(id.clone()));
    let second = crate::exec::ExecSpec { owner: owner.clone(), ..spec(&dir, &["true"]) };
    let err = p.exec(second.clone()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::WorkspaceBusy);
    assert!(err.to_string().contains(&id), "{}", err);
    p.exec(spec(&dir, &["true"])).unwrap();
    p.terminate(&id).await.unwrap();
    assert_eq!(p.live_for(&owner), None);
    p.exec(second).unwrap();
}

#[tokio::test]
async fn bad_commands_are_typed() {
    let dir = TempDir::new().unwrap();
    let p = Processes::new(limits());
    assert_eq!(p.exec(spec(&dir, &[])).unwrap_err().code(), ErrorCode::InvalidCommand);
    assert_eq!(p.exec(spec(&dir, &[""])).unwrap_err().code(), ErrorCode::InvalidCommand);
    let err = p.exec(spec(&dir, &["no-such-program-here"])).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ProcessSpawnFailed);
    assert!(err.to_string().contains("No such file"), "{}", err);
    for tty in [false, true] {
        let mut s = crate::exec::ExecSpec { tty, ..spec(&dir, &["true"]) };
        s.cwd = dir.path().join("missing");
        assert_eq!(p.exec(s).unwrap_err().code(), ErrorCode::ProcessSpawnFailed, "tty {tty}");
    }
    // execve fails after the fork: still a spawn error, not a process that ran.
    let script = dir.path().join("bad-interpreter.sh");
    std::fs::write(&script, "#!/nonexistent/interpreter\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    for tty in [false, true] {
        let s = crate::exec::ExecSpec { tty, ..spec(&dir, &[script.to_str().unwrap()]) };
        let err = p.exec(s).unwrap_err();
        assert_eq!(err.code(), ErrorCode::ProcessSpawnFailed, "tty {tty}");
        assert!(err.to_string().contains("No such file"), "{}", err);
    }
}

// A command that closes its output and runs on: `eof` waits for its exit, so a caller that
// reads to `eof` and then starts the next command never meets `WORKSPACE_BUSY` (the output
// pipe closes before the exit is recorded; the suite's next `exec_command` raced it).
#[tokio::test]
async fn eof_is_read_only_once_the_process_exited_and_its_workspace_is_free() {
    let dir = TempDir::new().unwrap();
    let p = Processes::new(limits());
    let first = spec(&dir, &["sh", "-c", "echo closing; exec >&- 2>&-; sleep 0.3"]);
    let owner = first.owner.clone();
    let id = p.exec(first).unwrap().process_id;
    let (out, eof) = super::support::read_until(&p, &id, |_| false).await;
    assert!(eof);
    assert_eq!(out, "closing\n");
    let status = p.status(&id).unwrap();
    assert_eq!(status.state, ProcessState::Exited, "eof was read while the process ran: {status:?}");
    assert!(status.eof);
    assert_eq!(p.live_for(&owner), None);
    let next = crate::exec::ExecSpec { owner, ..spec(&dir, &["true"]) };
    p.exec(next).expect("the workspace is free once eof was read");
}
