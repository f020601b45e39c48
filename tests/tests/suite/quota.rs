//! Issue 33, quota waits: a provider's rate or usage limit (a scripted HTTP 429 that resets 3 s
//! ahead) ends the turn `quota_waiting` instead of failing it; the run waits with status
//! `quota_waiting` and its `resets_at_ms`, then continues the session by itself with one
//! "continue" turn, saying so in events. The real CLIs against the scripted model.

use std::time::Duration;

use spaces_sdk::{AgentStartRequest, EventKind, SpaceAgentOptions, Status, StopReason};
use spaces_testkit::{Reply, Script, ScriptedServer};

use super::harness::{CLAUDE, CODEX_APP_SERVER, H};
use crate::support::{describe, require_cli, TestDaemon};

const TURN: Duration = Duration::from_secs(120);

async fn a_limit_waits_then_the_run_continues_by_itself(h: H) {
    require_cli(h.tools, h.binary);
    let script = Script::new([Reply::RateLimited { reset_secs: 3 }, Reply::Text("continued after the reset".into())]);
    let server = ScriptedServer::start(h.wire, script).await.unwrap();
    // Claude Code does not print the reset time: the daemon's backoff stands in for it, as long.
    let d = TestDaemon::start_with_env(vec![("SPACES_QUOTA_BACKOFF_MS".into(), "3000".into())]).await;
    d.space("s").await;
    let req = AgentStartRequest {
        space: "s".into(),
        agent: h.id.into(),
        prompt: "work until the limit".into(),
        show: None,
        options: Some(SpaceAgentOptions { base_url: Some(server.base_url()), ..Default::default() }),
        request_id: None,
        traceparent: None,
    };
    let t0 = std::time::Instant::now();
    let run = d.client.agent_start(&req).await.unwrap().run_id;
    let ended = d.wait_turn_end("s", &run, 1, TURN).await;
    let events = d.events("s", &run).await;
    assert_eq!(ended.stop_reason, Some(StopReason::QuotaWaiting), "{}", describe(&events));
    let st = d.wait_status("s", &run, TURN, |s| s.status != Status::Running).await;
    assert_eq!(st.status, Status::QuotaWaiting, "{st:#?}\n{}", describe(&events));
    let at = st.resets_at_ms.expect("resets_at_ms");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    assert!(at > now && at <= now + 4000, "the reset 3 s ahead: {at} vs now {now}");

    let ended = d.wait_turn_end("s", &run, 2, TURN).await;
    let events = d.events("s", &run).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{}", describe(&events));
    let continued = events.iter().find(|e| e.kind == EventKind::TurnStarted && e.turn == 2).expect("turn 2 started");
    assert!(continued.ts_ms >= at, "not before the reset: turn 2 at {} < {at}", continued.ts_ms);
    assert!(t0.elapsed() >= Duration::from_secs(2), "{:?}", t0.elapsed());
    let said = events.iter().filter(|e| e.kind == EventKind::Notice).filter_map(|e| e.summary.clone()).collect::<Vec<_>>();
    assert!(said.iter().any(|s| s.contains("quota waiting")) && said.iter().any(|s| s.contains("limit has reset")), "{said:?}");
    let st = d.wait_status("s", &run, TURN, |s| s.status == Status::Idle).await;
    assert_eq!(st.result_text.as_deref(), Some("continued after the reset"), "{st:#?}");
    assert_eq!(server.model_calls().len(), 2, "one call refused, one continue: nothing retried behind the daemon's back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_a_rate_limit_waits_then_the_run_continues_by_itself() {
    a_limit_waits_then_the_run_continues_by_itself(CLAUDE).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_a_usage_limit_waits_then_the_run_continues_by_itself() {
    a_limit_waits_then_the_run_continues_by_itself(CODEX_APP_SERVER).await
}
