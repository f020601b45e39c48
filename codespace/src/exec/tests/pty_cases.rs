//! PTY processes: exit by signal, resize, echo, canonical-mode line limit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use spaces_sdk::ErrorCode;
use tempfile::TempDir;

use super::support::{limits, read_all, read_until, tagged_n, tty_spec, PATIENCE};
use crate::exec::{ProcessState, Processes, Termination};

// P2: a PTY child killed with SIGKILL from outside reads `signaled 9`, and the EIO the master
// then returns ends collection as EOF instead of an error.
#[tokio::test]
async fn case_p2_pty_kill_9_reads_signaled() {
    let dir = TempDir::new().unwrap();
    let p = Processes::new(limits());
    // The shell becomes `sleep 100` (same pid); "ready" proves the tagged program is running.
    let spec = tty_spec(&dir, &["sh", "-c", "echo ready; exec sleep 100"]);
    let tag = spec.tag.clone();
    let id = p.exec(spec).unwrap().process_id;
    read_until(&p, &id, |out| out.contains("ready")).await;
    let pids = tagged_n(&tag, 1).await;
    assert_eq!(pids.len(), 1, "exactly the sleep carries the tag: {pids:?}");
    kill(Pid::from_raw(pids[0]), Signal::SIGKILL).unwrap();
    let status = tokio::time::timeout(PATIENCE, p.wait_exit(&id)).await.unwrap().unwrap();
    assert_eq!(status.state, ProcessState::Exited);
    assert_eq!((status.termination, status.signal, status.exit_code), (Some(Termination::Signaled), Some(9), None));
    let (_, eof) = read_until(&p, &id, |_| false).await;
    assert!(eof);
    assert!(p.status(&id).unwrap().eof);
}

// P8: the slave is the controlling terminal, so a resize reaches the program as SIGWINCH and
// the new size is what it reads.
#[tokio::test]
async fn case_p8_pty_resize_reaches_the_program() {
    let dir = TempDir::new().unwrap();
    let p = Processes::new(limits());
    let mut spec = tty_spec(&dir, &["sh", "-c", "trap 'stty size' WINCH; stty size; sleep 3"]);
    spec.tty_size = Some((30, 100));
    let id = p.exec(spec).unwrap().process_id;
    // The first size line is printed after the trap is set, so the resize cannot come too early.
    let (first, _) = read_until(&p, &id, |out| out.contains("30 100")).await;
    assert!(first.contains("30 100"), "{first:?}");
    p.resize(&id, 50, 200).await.unwrap();
    let all = read_all(&p, &id).await;
    let (before, after) = (all.find("30 100").unwrap(), all.find("50 200"));
    assert!(after.is_some_and(|a| a > before), "{all:?}");
    let status = p.wait_exit(&id).await.unwrap();
    assert_eq!((status.termination, status.exit_code), (Some(Termination::Exited), Some(0)));
    let err = p.resize(&id, 10, 10).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::ProcessNotRunning);
}

// E13: with echo off, what we type is not reported as the program's output.
#[tokio::test]
async fn case_e13_pty_input_does_not_come_back_as_output() {
    let dir = TempDir::new().unwrap();
    let p = Processes::new(limits());
    let id = p.exec(tty_spec(&dir, &["sh", "-c", "read -r line; echo marker-ok"])).unwrap().process_id;
    p.write_stdin(&id, b"secret-words\n").await.unwrap();
    let out = read_all(&p, &id).await;
    assert!(out.contains("marker-ok"), "{out:?}");
    assert!(!out.contains("secret-words"), "input echoed: {out:?}");
}

// E13: a canonical-mode terminal keeps at most 4095 bytes of a line and drops the rest without
// an error, so such a line is refused whole (also when split over two writes), never cut.
#[tokio::test]
async fn case_e13_pty_long_canonical_line_is_refused_not_cut() {
    let dir = TempDir::new().unwrap();
    let p = Processes::new(limits());
    let id = p.exec(tty_spec(&dir, &["cat"])).unwrap().process_id;
    let long = format!("{}\n", "x".repeat(5000));
    let err = p.write_stdin(&id, long.as_bytes()).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
    assert!(err.to_string().contains("4095"), "{}", err);

    p.write_stdin(&id, "z".repeat(3000).as_bytes()).await.unwrap();
    let err = p.write_stdin(&id, format!("{}\n", "z".repeat(2000)).as_bytes()).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
    p.write_stdin(&id, format!("{}\n", "z".repeat(1000)).as_bytes()).await.unwrap();

    let (out, _) = read_until(&p, &id, |out| out.contains('\n')).await;
    assert_eq!(out, format!("{}\r\n", "z".repeat(4000)));
    p.terminate(&id).await.unwrap();
    assert_eq!(p.status(&id).unwrap().termination, Some(Termination::Terminated));
}
