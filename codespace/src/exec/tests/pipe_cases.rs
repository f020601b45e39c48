//! Pipe processes: combined stream, big stdin, ring overflow, descendants holding the output.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use spaces_sdk::{ApiError, ErrorCode};
use tempfile::TempDir;

use super::support::{limits, read_all, spec, tagged, tagged_n, PATIENCE};
use crate::error::Error;
use crate::exec::{ExecLimits, ProcessState, Processes, Termination};

// E13: 300 KB written to a pipe arrives byte-exact although the pipe holds far less (the write
// is continued after every partial write).
#[tokio::test]
async fn case_e13_300kb_over_a_pipe_arrives_byte_exact() {
    let dir = TempDir::new().unwrap();
    let p = Processes::new(limits());
    let id = p.exec(spec(&dir, &["sh", "-c", "head -c 300000 | sha256sum"])).unwrap().process_id;
    let data: Vec<u8> = (0u32..300_000).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    p.write_stdin(&id, &data).await.unwrap();
    let want = spaces_v4a::hex(&Sha256::digest(&data));
    let out = read_all(&p, &id).await;
    assert_eq!(out, format!("{want}  -\n"));
}

// E15: sending never blocks without bound. A process that never reads its stdin fills the pipe;
// the write stops at the bound with TIMEOUT saying how many bytes of how many went through, and
// the process keeps running.
#[tokio::test]
async fn case_e15_a_process_that_stops_reading_answers_timeout_with_the_bytes_written() {
    let dir = TempDir::new().unwrap();
    let bound = Duration::from_millis(300);
    let p = Processes::new(ExecLimits { stdin_timeout: bound, ..limits() });
    let id = p.exec(spec(&dir, &["sleep", "30"])).unwrap().process_id;
    let data = vec![b'x'; 1 << 20]; // 1 MiB, far more than a pipe holds
    let started = Instant::now();
    let err =
        tokio::time::timeout(PATIENCE, p.write_stdin(&id, &data)).await.expect("write_stdin must return within its bound").unwrap_err();
    assert!(started.elapsed() >= bound, "it waited for the process first");
    let Error::StdinTimeout { written, total, .. } = err else { panic!("{err:?}") };
    assert_eq!(total, 1 << 20);
    assert!(written > 0 && written < total, "the pipe took a part: {written}");
    let wire = ApiError::from(&err);
    assert_eq!(wire.code, ErrorCode::Timeout);
    for part in [format!("{written} of 1048576 bytes"), "treat the write as interrupted".into()] {
        assert!(wire.message.contains(&part), "{}", wire.message);
    }
    assert_eq!(p.status(&id).unwrap().state, ProcessState::Running, "the process keeps running");
    // The pipe is still full: the next write is bounded the same way.
    let err = tokio::time::timeout(PATIENCE, p.write_stdin(&id, b"more\n")).await.unwrap().unwrap_err();
    assert!(matches!(err, Error::StdinTimeout { written: 0, total: 5, .. }), "{err:?}");
    p.terminate(&id).await.unwrap();
}

#[tokio::test]
async fn stdout_and_stderr_are_one_stream_in_write_order() {
    let dir = TempDir::new().unwrap();
    let p = Processes::new(limits());
    let id = p.exec(spec(&dir, &["sh", "-c", "echo out; echo err >&2; echo out2"])).unwrap().process_id;
    assert_eq!(read_all(&p, &id).await, "out\nerr\nout2\n");
}

#[tokio::test]
async fn the_environment_is_exactly_the_spec_plus_the_tag() {
    let dir = TempDir::new().unwrap();
    let p = Processes::new(limits());
    let s = spec(&dir, &["env"]);
    let mut want: Vec<String> = s.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    want.push(format!("SPACES_PROCESS_TAG={}", s.tag));
    want.sort();
    let id = p.exec(s).unwrap().process_id;
    let mut got: Vec<String> = read_all(&p, &id).await.lines().map(str::to_owned).collect();
    got.sort();
    assert_eq!(got, want);
}

#[tokio::test]
async fn overflow_keeps_the_exact_tail_and_reports_the_loss() {
    let dir = TempDir::new().unwrap();
    let p = Processes::new(limits());
    let id = p.exec(spec(&dir, &["seq", "1", "100000"])).unwrap().process_id;
    let expected: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
    p.wait_exit(&id).await.unwrap();
    let tail = tokio::time::timeout(PATIENCE, p.read(&id, Some(0), Some(PATIENCE))).await.unwrap().unwrap();
    let total = expected.len() as u64;
    let dropped = total - ExecLimits::default().retained_bytes as u64;
    assert!(tail.eof && tail.output_lost);
    assert_eq!((tail.cursor, tail.retained_from), (total, dropped));
    assert_eq!(tail.chunk, expected[dropped as usize..]);
    let status = p.status(&id).unwrap();
    assert_eq!((status.output_total, status.output_retained_from), (total, dropped));
    let err = p.read(&id, Some(total + 1), None).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
}

// A background grandchild keeps the output pipe open: the exit is still recorded when the
// child exits, and collection ends after the drain time.
#[tokio::test]
async fn a_grandchild_holding_the_pipe_does_not_delay_the_exit() {
    let dir = TempDir::new().unwrap();
    let p = Processes::new(limits());
    let s = spec(&dir, &["sh", "-c", "sleep 30 & echo hi"]);
    let tag = s.tag.clone();
    let id = p.exec(s).unwrap().process_id;
    let status = tokio::time::timeout(PATIENCE, p.wait_exit(&id)).await.unwrap().unwrap();
    assert_eq!((status.state, status.exit_code), (ProcessState::Exited, Some(0)));
    assert_eq!(tagged_n(&tag, 1).await.len(), 1, "the sleep still holds the pipe when the exit is seen");
    assert_eq!(read_all(&p, &id).await, "hi\n");
    assert!(p.status(&id).unwrap().eof);
    p.terminate(&id).await.unwrap();
    assert!(tagged(&tag).is_empty());
    assert_eq!(p.status(&id).unwrap().termination, Some(Termination::Exited), "the record stays");
}

#[tokio::test]
async fn the_time_limit_stops_the_process_as_timeout() {
    let dir = TempDir::new().unwrap();
    let p = Processes::new(limits());
    let mut s = spec(&dir, &["sleep", "100"]);
    s.timeout = Some(Duration::from_millis(200));
    let id = p.exec(s).unwrap().process_id;
    let status = tokio::time::timeout(PATIENCE, p.wait_exit(&id)).await.unwrap().unwrap();
    assert_eq!((status.termination, status.exit_code, status.signal), (Some(Termination::Timeout), None, None));
}

#[tokio::test]
async fn terminate_ends_the_whole_group() {
    let dir = TempDir::new().unwrap();
    let p = Processes::new(limits());
    let s = spec(&dir, &["sh", "-c", "sleep 100 & echo started; wait"]);
    let tag = s.tag.clone();
    let id = p.exec(s).unwrap().process_id;
    super::support::read_until(&p, &id, |out| out.contains("started")).await;
    assert_eq!(tagged_n(&tag, 2).await.len(), 2, "sh and its forked sleep");
    tokio::time::timeout(PATIENCE, p.terminate(&id)).await.unwrap().unwrap();
    let status = p.status(&id).unwrap();
    assert_eq!((status.state, status.termination), (ProcessState::Exited, Some(Termination::Terminated)));
    assert!(tagged(&tag).is_empty(), "no process of the group is left");
}
