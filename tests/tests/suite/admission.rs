//! Issue 33, admission: a host cap on turns running at once. Over it, a start is accepted and
//! waits `queued` with its place; queued runs start in order as slots free, also after a
//! `kill -9` of the daemon. The real Claude Code CLI against the scripted model.

use std::collections::HashMap;
use std::time::Duration;

use spaces_sdk::{AgentStartRequest, EventKind, SpaceAgentOptions, Status, StopReason};
use spaces_testkit::{Reply, Script, ScriptedServer};

use super::harness::CLAUDE as H;
use crate::support::{describe, require_cli, wait_until, TestDaemon};

const TURN: Duration = Duration::from_secs(120);

/// How many of `runs` have each status now.
async fn statuses(d: &TestDaemon, runs: &[String]) -> HashMap<String, Status> {
    let list = d.client.space("s").agent_list().await.unwrap();
    list.into_iter().filter(|r| runs.contains(&r.run_id)).map(|r| (r.run_id, r.status)).collect()
}

fn count(st: &HashMap<String, Status>, status: Status) -> usize {
    st.values().filter(|s| **s == status).count()
}

/// Five starts with a host cap of 2: two run, three wait `queued` at places 1, 2 and 3; a kill -9
/// of the daemon keeps them so; every turn then runs, never more than two at once, the queued
/// ones in the order they were started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_cap_of_two_queues_three_of_five_starts_in_order_across_a_kill() {
    require_cli(H.tools, H.binary);
    let slow = Reply::SlowText { text: "a slow answer from the scripted model".into(), chunks: 12, delay_ms: 400 };
    let server = ScriptedServer::start(H.wire, Script::new([]).with_fallback(slow)).await.unwrap();
    let mut d = TestDaemon::start_with_env(vec![("SPACES_MAX_RUNNING_TURNS".into(), "2".into())]).await;
    d.space("s").await;
    let mut runs = Vec::new();
    for i in 1..=5 {
        let req = AgentStartRequest {
            space: "s".into(),
            agent: H.id.into(),
            prompt: format!("run number {i}"),
            show: None,
            options: Some(SpaceAgentOptions { base_url: Some(server.base_url()), ..Default::default() }),
            request_id: None,
            traceparent: None,
        };
        runs.push(d.client.agent_start(&req).await.unwrap().run_id);
    }
    wait_until("two running and three queued", TURN, || {
        let st = futures_lite_block(statuses(&d, &runs));
        count(&st, Status::Running) == 2 && count(&st, Status::Queued) == 3
    })
    .await;
    for (i, run) in runs[2..].iter().enumerate() {
        let st = d.client.space("s").agent_status(run, None).await.unwrap();
        assert!(st.reason.contains(&format!("place {} waiting", i + 1)), "{st:#?}");
        assert!(!st.accepts_message, "{st:#?}");
    }

    d.restart().await;
    let st = statuses(&d, &runs).await;
    assert_eq!(count(&st, Status::Queued), 3, "queued survives a kill -9: {st:?}");
    assert!(count(&st, Status::Running) <= 2, "{st:?}");

    // Every turn runs to its end, never more than two at once.
    let mut most = 0;
    loop {
        let st = statuses(&d, &runs).await;
        most = most.max(count(&st, Status::Running));
        if st.values().all(|s| *s == Status::Idle) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(most <= 2, "at most two turns ran at once, saw {most}");
    // The queued runs started in the order they were started: their turn_started events.
    let mut started = Vec::new();
    for run in &runs {
        let events = d.events("s", run).await;
        let ended = events.iter().find(|e| e.kind == EventKind::TurnEnded).expect("turn 1 ended");
        assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{}", describe(&events));
        assert!(
            events.iter().any(|e| e.kind == EventKind::Notice && e.summary.as_deref().unwrap_or("").contains("queued"))
                == (started.len() >= 2)
        );
        started.push(events.iter().find(|e| e.kind == EventKind::TurnStarted).expect("turn 1 started").ts_ms);
    }
    assert!(started[2] <= started[3] && started[3] <= started[4], "in order: {started:?}");
}

/// Blocks on `fut` from a synchronous closure of `wait_until` (the tests run multi-threaded).
fn futures_lite_block<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(fut))
}
