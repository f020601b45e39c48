//! Issue 31: Codex on `codex app-server` (`agent: "openai-codex"`), the real CLI
//! against the scripted Responses endpoint. One long-lived process serves every turn of a run:
//! the daemon drives the JSON-RPC dialogue through the normalizer's conversation hooks (the
//! handshake after `initialize`, `turn/start` of a follow-up, `turn/interrupt`), and a daemon
//! killed mid-turn re-adopts the process without writing anything twice.

use std::time::Duration;

use spaces_sdk::{AgentStartRequest, EventKind, SpaceAgentOptions, Status, StopReason};
use spaces_testkit::{Reply, Script, ScriptedServer};

use super::harness::CODEX_APP_SERVER as H;
use crate::support::{describe, require_cli, run_process_roots, run_processes, settled, wait_until, TestDaemon};

const TURN: Duration = Duration::from_secs(90);

async fn setup(script: Script) -> (TestDaemon, ScriptedServer, std::path::PathBuf) {
    require_cli(H.tools, H.binary);
    let server = ScriptedServer::start(H.wire, script).await.unwrap();
    let d = TestDaemon::start().await;
    let root = d.space("s").await;
    (d, server, root)
}

async fn start(d: &TestDaemon, server: &ScriptedServer, prompt: &str) -> String {
    let req = AgentStartRequest {
        space: "s".into(),
        agent: H.id.into(),
        prompt: prompt.into(),
        show: None,
        options: Some(SpaceAgentOptions { base_url: Some(server.base_url()), ..Default::default() }),
        request_id: None,
        traceparent: None,
    };
    d.client.agent_start(&req).await.unwrap().run_id
}

/// The run's one agent process (the root of its process tree), once it is the only one.
async fn the_one_process(run: &str) -> i32 {
    wait_until("one agent process of the run", TURN, || run_process_roots(run).len() == 1).await;
    run_process_roots(run)[0]
}

/// A tool call writes a file and the agent answers; a follow-up runs in the same thread of the
/// same `codex app-server` process (no process ended, none started), usage in each turn; a stop
/// ends it (the scenario every long-lived conversation harness runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_app_server_tool_call_then_follow_up_in_the_same_process() {
    super::acp_agents::tool_call_then_follow_up_in_one_process(H).await
}

/// An interrupt mid-answer (`turn/interrupt`) ends that turn `interrupted` and nothing else:
/// the process stays, an idle interrupt is refused, and the next message answers in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_app_server_interrupt_ends_only_the_turn() {
    let script = Script::new([
        Reply::SlowText { text: "a very long answer that will be cut".into(), chunks: 60, delay_ms: 500 },
        Reply::Text("after the interrupt".into()),
    ]);
    let (d, server, _root) = setup(script).await;
    let run = start(&d, &server, "talk slowly").await;
    wait_until("the slow answer to start streaming", TURN, || server.frames_sent() >= 6).await;
    let pid = the_one_process(&run).await;
    let t0 = std::time::Instant::now();
    let r = d.client.space("s").agent_interrupt(&run).await.unwrap();
    assert!(r.ok, "{r:?}");
    let ended = d.wait_turn_end("s", &run, 1, TURN).await;
    assert_eq!(ended.stop_reason, Some(StopReason::Interrupted), "{ended:?}");
    assert!(t0.elapsed() < Duration::from_secs(15), "interrupt took {:?}", t0.elapsed());
    let st = d.wait_status("s", &run, TURN, |s| settled(s) && s.phase != spaces_sdk::Phase::Working).await;
    assert_eq!(st.status, Status::Idle, "an interrupted turn is not a failure: {st:#?}");
    assert!(st.accepts_message, "{st:#?}");
    let idle = d.client.space("s").agent_interrupt(&run).await.unwrap();
    assert!(!idle.ok && idle.reason.contains("no turn"), "{idle:?}");

    d.client.space("s").agent_message(&run, "go on", None).await.unwrap();
    let ended = d.wait_turn_end("s", &run, 2, TURN).await;
    let events = d.events("s", &run).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{}", describe(&events));
    let st = d.wait_status("s", &run, TURN, settled).await;
    assert_eq!(st.result_text.as_deref(), Some("after the interrupt"), "{st:#?}");
    assert_eq!(run_process_roots(&run), vec![pid], "the interrupt ended the turn, not the process");
    assert!(!events.iter().any(|e| e.kind == EventKind::Exited), "no process ended:\n{}", describe(&events));
}

/// With `exit_when_idle` the daemon closes the server's stdin after the turn and it exits (the
/// run is `done`); a follow-up starts a new `codex app-server` process, which continues the
/// thread (`thread/resume` with the stored session id): the model gets the first turn's history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_app_server_a_new_process_resumes_the_thread() {
    let script = Script::new([Reply::Text("kiwi noted".into()), Reply::Text("the word was kiwi".into())]);
    let (d, server, _root) = setup(script).await;
    let opts = SpaceAgentOptions { base_url: Some(server.base_url()), exit_when_idle: Some(true), ..Default::default() };
    let req = AgentStartRequest {
        space: "s".into(),
        agent: H.id.into(),
        prompt: "remember the word kiwi".into(),
        show: None,
        options: Some(opts),
        request_id: None,
        traceparent: None,
    };
    let run = d.client.agent_start(&req).await.unwrap().run_id;
    d.wait_turn_end("s", &run, 1, TURN).await;
    let st = d.wait_status("s", &run, TURN, |s| s.status == Status::Done).await;
    let session = st.session_id.clone().expect("the thread id is recorded");
    wait_until("the server to exit", TURN, || run_processes(&run).is_empty()).await;

    let r = d.client.space("s").agent_message(&run, "what was the word?", None).await.unwrap();
    assert!(r.ok, "{r:?}");
    let ended = d.wait_turn_end("s", &run, 2, TURN).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{}", describe(&d.events("s", &run).await));
    d.wait_for_event("s", &run, TURN, |e| e.kind == EventKind::Exited && e.turn == 2).await;
    let events = d.events("s", &run).await;
    let st = d.wait_status("s", &run, TURN, |s| s.status == Status::Done).await;
    assert_eq!((st.result_text.as_deref(), st.session_id.as_deref()), (Some("the word was kiwi"), Some(session.as_str())), "{st:#?}");
    assert_eq!(events.iter().filter(|e| e.kind == EventKind::Exited).count(), 2, "two processes:\n{}", describe(&events));
    let last = server.model_calls().last().unwrap().json.as_ref().map(|j| j.to_string()).unwrap_or_default();
    assert!(last.contains("remember the word kiwi") && last.contains("kiwi noted"), "the resumed thread carries turn 1: {last}");
}

/// Kill -9 of spacesd while the app-server runs a tool call: the turn finishes without the
/// daemon; the next daemon re-adopts the process (re-feeding what was stored, writing nothing
/// of it again), stores every event once with the story of an uninterrupted run, and a
/// follow-up goes to the same process as `turn/start`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_app_server_kill_9_mid_turn_loses_no_event() {
    super::survive::kill_9_mid_turn_the_turn_finishes_and_every_event_is_stored_once(H).await
}

/// A stdio MCP server given in `mcp_servers` reaches the app-server's thread: the model calls
/// its tool and gets the answer (the same scenario as every harness).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_app_server_a_stdio_mcp_server_reaches_the_agent() {
    super::agent_mcp::a_stdio_mcp_server_given_to_the_agent_is_called(H).await
}

/// `force: true` mid-turn is `turn/steer`: the running turn takes the message (its
/// `user_message` lands in turn 1, the answer says so), the model's next request in that turn
/// carries it, and the turn ends normally with the steered answer: one turn, nothing
/// interrupted, nothing queued; a retry with the same `message_id` steers nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_app_server_force_steers_the_message_into_the_running_turn() {
    let script = Script::new([
        Reply::SlowText { text: "a slow answer, still streaming".into(), chunks: 12, delay_ms: 400 },
        Reply::Text("the steered answer".into()),
    ]);
    let (d, server, _root) = setup(script).await;
    let run = start(&d, &server, "talk slowly").await;
    wait_until("the slow answer to start streaming", TURN, || server.frames_sent() >= 4).await;
    let req = spaces_sdk::AgentMessageRequest {
        space: "s".into(),
        run_id: run.clone(),
        text: "urgent: mention kiwis".into(),
        force: Some(true),
        message_id: Some("steer-1".into()),
        traceparent: None,
    };
    let r = d.client.agent_message(&req).await.unwrap();
    assert!(r.ok && r.reason.contains("steered into turn 1"), "{r:?}");
    // A retry with the same message_id answers the same report and steers nothing twice.
    let again = d.client.agent_message(&req).await.unwrap();
    assert_eq!(again.reason, r.reason, "{again:?}");
    let ended = d.wait_turn_end("s", &run, 1, TURN).await;
    let st = d.wait_status("s", &run, TURN, settled).await;
    let events = d.events("s", &run).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{}", describe(&events));
    let users: Vec<(u32, Option<&str>)> =
        events.iter().filter(|e| e.kind == EventKind::UserMessage).map(|e| (e.turn, e.text.as_deref())).collect();
    assert_eq!(users, [(1, Some("talk slowly")), (1, Some("urgent: mention kiwis"))], "{}", describe(&events));
    assert!(!events.iter().any(|e| e.kind == EventKind::TurnStarted && e.turn == 2), "no second turn:\n{}", describe(&events));
    assert!(!events.iter().any(|e| e.summary.as_deref().unwrap_or("").contains("queued")), "{}", describe(&events));
    assert_eq!((st.status, st.turns, st.result_text.as_deref()), (Status::Idle, 1, Some("the steered answer")), "{st:#?}");
    let last = server.model_calls().last().unwrap().json.as_ref().map(|j| j.to_string()).unwrap_or_default();
    assert!(last.contains("urgent: mention kiwis"), "the model got the steered text in the same turn: {last}");
}

/// Case P4 on the app-server: a follow-up sent mid-turn is queued (a `notice` says so) and runs
/// after the first turn, with never more than one agent process of the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_app_server_case_p4_mid_turn_message_is_queued() {
    super::runs::case_p4_mid_turn_message_is_queued(H).await
}

/// The agent gets the caller's text as is, what is stored is redacted: a first prompt naming a
/// value of the run's `env` reaches the model whole (it goes out as `turn/start` from the
/// normalizer, after the handshake), while its `user_message` event shows `[redacted]`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_app_server_the_first_prompt_reaches_the_model_unredacted() {
    let (d, server, _root) = setup(Script::new([Reply::Text("noted".into())])).await;
    let opts = SpaceAgentOptions {
        base_url: Some(server.base_url()),
        env: [("MY_SETTING".to_owned(), "value-long-enough".to_owned())].into(),
        ..Default::default()
    };
    let prompt = "the setting is value-long-enough";
    let req = AgentStartRequest {
        space: "s".into(),
        agent: H.id.into(),
        prompt: prompt.into(),
        show: None,
        options: Some(opts),
        request_id: None,
        traceparent: None,
    };
    let run = d.client.agent_start(&req).await.unwrap().run_id;
    d.wait_turn_end("s", &run, 1, TURN).await;
    let events = d.events("s", &run).await;
    let user = events.iter().find(|e| e.kind == EventKind::UserMessage).unwrap();
    assert_eq!(user.text.as_deref(), Some("the setting is [redacted]"), "{}", describe(&events));
    let first = server.model_calls().into_iter().next().unwrap().json.map(|j| j.to_string()).unwrap_or_default();
    assert!(first.contains(prompt), "the model got the caller's text: {first}");
}
