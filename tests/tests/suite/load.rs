//! The event path under load (issue 12): many runs streaming at once, readers tailing every
//! run by cursor, control writes in between. At a size fit for CI; the figures of the full-size
//! load are `scripts/bench load`'s, never asserted here.

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use spaces_sdk::client::{Client, Endpoint};
use spaces_sdk::{AgentEventsRequest, AgentMessageRequest, AgentStartRequest, AgentStatusRequest, EventKind, SpaceAddRequest};

use crate::support::{scaled, TestDaemon};

/// Runs streaming at once.
const RUNS: usize = 8;
/// Lines each turn of each run prints, as fast as `sh` can.
const LINES: usize = 2000;
/// Readers tailing by cursor, spread over the runs.
const READERS: usize = 20;
/// Turns per run: the first, and one follow-up sent while the first streams.
const TURNS: usize = 2;

/// A Codex fake that reads its prompt to EOF, then prints `LINES` agent messages `line <i>`.
fn streaming_codex(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("fake-codex");
    let script = format!(
        r#"#!/bin/sh
cat >/dev/null
echo '{{"type":"thread.started","thread_id":"fake-load-thread"}}'
echo '{{"type":"turn.started"}}'
i=0
while [ $i -lt {LINES} ]; do
  echo "{{\"type\":\"item.completed\",\"item\":{{\"id\":\"item_$i\",\"type\":\"agent_message\",\"text\":\"line $i\"}}}}"
  i=$((i+1))
done
echo '{{"type":"turn.completed","usage":{{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1}}}}'
"#
    );
    std::fs::write(&p, script).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// Any error a caller got: `database is locked` must never be one of them.
fn no_lock_error<T>(what: &str, r: Result<T, spaces_sdk::client::ClientError>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.contains("locked") && !msg.contains("busy"), "{what}: the store's lock reached a caller: {msg}");
            panic!("{what} failed: {msg}");
        }
    }
}

/// One reader tailing `run` from cursor 0 until `TURNS` turns ended: every seq exactly once, in
/// order, no gap; each turn's messages `line 0..LINES` in order. Returns the seqs it saw.
async fn tail(client: Client, run: String, deadline: Instant) -> Vec<u64> {
    let mut cursor = 0;
    let mut seqs = Vec::new();
    let mut lines_of_turn: Vec<usize> = Vec::new();
    let mut ended = 0;
    while ended < TURNS {
        assert!(Instant::now() < deadline, "reader of {run}: only {ended} turns ended, {} events read", seqs.len());
        let q = AgentEventsRequest {
            space: "s".into(),
            run_id: run.clone(),
            cursor: Some(cursor),
            max: Some(300),
            wait_ms: Some(2000),
            raw: None,
        };
        let page = no_lock_error("agent_events", client.agent_events(&q).await);
        for e in &page.events {
            assert_eq!(e.seq, cursor + 1, "reader of {run}: after seq {cursor} came seq {} (a gap or a repeat)", e.seq);
            cursor = e.seq;
            seqs.push(e.seq);
            match e.kind {
                EventKind::Message if e.text.as_deref().is_some_and(|t| t.starts_with("line ")) => {
                    let n: usize = e.text.as_deref().unwrap_or_default()[5..].parse().unwrap();
                    if n == 0 {
                        lines_of_turn.push(0);
                    }
                    let turn = lines_of_turn.len();
                    let seen = lines_of_turn.last_mut().unwrap();
                    assert_eq!(n, *seen, "reader of {run}: turn {turn} printed line {n} where line {seen} was due");
                    *seen += 1;
                }
                EventKind::TurnEnded => ended += 1,
                _ => {}
            }
            // What follows the last turn's end (the process's exit) depends on when the page
            // was read: readers compare what they saw up to it.
            if ended == TURNS {
                break;
            }
        }
        if ended < TURNS {
            assert_eq!(page.cursor, cursor, "reader of {run}: the page's cursor is not its last event's seq");
        }
    }
    assert_eq!(lines_of_turn, vec![LINES; TURNS], "reader of {run}: lines per turn");
    seqs
}

/// V26: 8 runs each streaming 2,000 lines a turn as fast as they can (two turns each), 20
/// readers tailing them by cursor, Spaces registered and statuses read meanwhile. No caller
/// ever sees `database is locked`; every reader sees every event of its run exactly once, in
/// order, with no gap; readers of the same run see the same seqs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn case_v26_streaming_runs_with_tailing_readers_lose_and_repeat_nothing() {
    let bin_dir = tempfile::tempdir().unwrap();
    let bin = streaming_codex(bin_dir.path());
    let d = TestDaemon::start_with_env(vec![("SPACES_HARNESS_BIN_OPENAI_CODEX".into(), bin.display().to_string())]).await;
    d.space("s").await;
    let sock = d.state_dir().join("spacesd.sock");
    let deadline = Instant::now() + scaled(Duration::from_secs(240));

    let mut runs = Vec::new();
    for i in 0..RUNS {
        let req = AgentStartRequest {
            space: "s".into(),
            agent: "openai-codex-exec".into(),
            prompt: format!("stream {i}"),
            show: None,
            options: None,
            request_id: None,
            traceparent: None,
        };
        runs.push(no_lock_error("agent_start", d.client.agent_start(&req).await).run_id);
    }
    // The follow-ups, sent while the first turns stream: they queue behind them.
    for run in &runs {
        let m = AgentMessageRequest {
            space: "s".into(),
            run_id: run.clone(),
            text: "again".into(),
            force: None,
            message_id: None,
            traceparent: None,
        };
        no_lock_error("agent_message", d.client.agent_message(&m).await);
    }
    let readers: Vec<_> = (0..READERS)
        .map(|i| {
            let run = runs[i % RUNS].clone();
            tokio::spawn(tail(Client::new(Endpoint::Unix(sock.clone())), run.clone(), deadline))
        })
        .collect();

    // Control traffic until every reader is done: a Space registered and a status read, about
    // every 20 ms.
    let control = {
        let client = Client::new(Endpoint::Unix(sock.clone()));
        let (runs, root) = (runs.clone(), d.dir.path().to_path_buf());
        tokio::spawn(async move {
            let mut n = 0usize;
            loop {
                let dir = root.join(format!("space-c{n}"));
                std::fs::create_dir_all(&dir).unwrap();
                let add = SpaceAddRequest {
                    name: format!("c{n}"),
                    root: dir.display().to_string(),
                    read_only: false,
                    approvals: Default::default(),
                    network: Default::default(),
                    replace: false,
                };
                no_lock_error("space_add", client.space_add(&add).await);
                let st = AgentStatusRequest { space: "s".into(), run_id: runs[n % RUNS].clone(), tail: Some(0) };
                no_lock_error("agent_status", client.agent_status(&st).await);
                n += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };

    let mut seen: Vec<(String, Vec<u64>)> = Vec::new();
    for (i, r) in readers.into_iter().enumerate() {
        seen.push((runs[i % RUNS].clone(), r.await.unwrap()));
    }
    control.abort();

    for (run, seqs) in &seen {
        let unique: HashSet<_> = seqs.iter().collect();
        assert_eq!(unique.len(), seqs.len(), "{run}: a seq came twice");
        let first = seen.iter().find(|(r, _)| r == run).map(|(_, s)| s).unwrap();
        assert!(seqs == first, "{run}: two readers of one run saw different events ({} and {} of them)", seqs.len(), first.len());
        // No message stored past the last turn's end.
        let q = AgentEventsRequest {
            space: "s".into(),
            run_id: run.clone(),
            cursor: Some(*seqs.last().unwrap()),
            max: Some(10),
            wait_ms: Some(0),
            raw: None,
        };
        let rest = no_lock_error("agent_events", d.client.agent_events(&q).await);
        assert!(
            rest.events.iter().all(|e| e.kind != EventKind::Message),
            "{run}: messages after the readers' last turn_ended: {:?}",
            rest.events
        );
    }
}

/// Idle runs (issue 30).
const IDLE_RUNS: usize = 3;

/// Context switches of every thread of `pid` (each one a wake-up of a sleeper, or a preemption).
fn switches(pid: i32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return 0 };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .flat_map(|s| {
            s.lines()
                .filter(|l| l.starts_with("voluntary_ctxt_switches") || l.starts_with("nonvoluntary_ctxt_switches"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

/// Issue 30: an idle run costs no CPU. `IDLE_RUNS` runs of a Claude Code stand-in answer their
/// prompt and wait for a follow-up (their shims alive, followed by the daemon); then each shim
/// sleeps until something happens: within 10 s comes a 2 s window in which no shim woke more
/// than twice (no timer of its own: before, each woke about 14 times a second for its sync,
/// its CPU-demand look and its orphan check). Wake-ups are counted, never timed.
#[tokio::test]
async fn an_idle_runs_shim_sleeps_until_something_happens() {
    let bin = tempfile::tempdir().unwrap();
    let fake = bin.path().join("fake-claude");
    let init = r#"{"type":"system","subtype":"init","cwd":"/","session_id":"fake-session","tools":[],"model":"fake"}"#;
    let result = r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":1,"num_turns":1,"result":"answered","stop_reason":"end_turn","session_id":"fake-session","usage":{"input_tokens":1,"output_tokens":1}}"#;
    std::fs::write(&fake, format!("#!/bin/sh\nwhile read -r line; do\necho '{init}'\necho '{result}'\ndone\n")).unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let d = TestDaemon::start_with_env(vec![("SPACES_HARNESS_BIN_CLAUDE_CODE".into(), fake.display().to_string())]).await;
    d.space("s").await;
    let mut runs = Vec::new();
    for i in 0..IDLE_RUNS {
        let req = crate::support::start_request("s", "claude-code", &format!("idle {i}"));
        runs.push(d.client.agent_start(&req).await.unwrap().run_id);
    }
    for run in &runs {
        d.wait_status("s", run, Duration::from_secs(30), |s| s.status == spaces_sdk::Status::Idle).await;
    }
    let shims: Vec<(String, i32)> = runs
        .iter()
        .map(|run| {
            let dir = std::fs::canonicalize(d.state_dir().join("runs").join(run).join("shim-1")).unwrap();
            let pid = std::fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
                .find(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c == dir))
                .unwrap_or_else(|| panic!("no shim works in {}", dir.display()));
            (run.clone(), pid)
        })
        .collect();
    let deadline = Instant::now() + scaled(Duration::from_secs(10));
    let mut windows = Vec::new();
    loop {
        let before: Vec<u64> = shims.iter().map(|(_, pid)| switches(*pid)).collect();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let woke: Vec<u64> = shims.iter().zip(&before).map(|((_, pid), b)| switches(*pid).saturating_sub(*b)).collect();
        if woke.iter().all(|w| *w <= 2) {
            break;
        }
        windows.push(woke);
        assert!(Instant::now() < deadline, "idle shims kept waking up; wake-ups per 2 s window, per shim {shims:?}: {windows:?}");
    }
}
