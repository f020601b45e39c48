//! Issue 31: the Agent Client Protocol harnesses, `opencode` (`opencode acp`, its model on the
//! Chat Completions wire) and `gemini-cli` (`gemini --acp`, Gemini's `streamGenerateContent`), on
//! their real CLIs against the scripted endpoints. One long-lived process serves every turn of a
//! run; the daemon drives the JSON-RPC dialogue (`initialize`, `session/new`, `session/prompt`,
//! `session/cancel`, permission answers) through the normalizer's conversation hooks. The
//! scenarios the other harnesses run (interrupt, kill -9, MCP servers) run here unchanged.

use std::time::Duration;

use spaces_sdk::{AgentStartRequest, EventKind, SpaceAgentOptions, Status, StopReason, ToolStatus};
use spaces_testkit::{Reply, Script, ScriptedServer};

use super::harness::{GEMINI, H, OPENCODE};
use crate::support::{describe, require_cli, run_process_roots, run_processes, settled, wait_until, TestDaemon};

const TURN: Duration = Duration::from_secs(120);

async fn setup(h: H, script: Script) -> (TestDaemon, ScriptedServer, std::path::PathBuf) {
    setup_on(h, script, TestDaemon::start().await).await
}

async fn setup_on(h: H, script: Script, d: TestDaemon) -> (TestDaemon, ScriptedServer, std::path::PathBuf) {
    require_cli(h.tools, h.binary);
    let server = ScriptedServer::start(h.wire, script).await.unwrap();
    let root = d.space("s").await;
    (d, server, root)
}

fn start_request(h: H, server: &ScriptedServer, prompt: &str, exit_when_idle: bool) -> AgentStartRequest {
    AgentStartRequest {
        space: "s".into(),
        agent: h.id.into(),
        prompt: prompt.into(),
        show: None,
        options: Some(SpaceAgentOptions {
            base_url: Some(server.base_url()),
            exit_when_idle: exit_when_idle.then_some(true),
            ..Default::default()
        }),
        request_id: None,
        traceparent: None,
    }
}

/// A tool call writes a file and the agent answers; the follow-up runs in the same session of
/// the same process (none ended, none started) and the model gets the first turn's history;
/// each turn reports its usage; a permission the CLI asks for is answered by the run's policy
/// and shown as a `permission` event; a stop leaves no process. Every long-lived conversation
/// harness runs it (Codex on `codex app-server` too: `codex_app_server.rs`).
pub(super) async fn tool_call_then_follow_up_in_one_process(h: H) {
    tool_call_then_follow_up_on(h, TestDaemon::start().await).await
}

/// The same as the default install runs it: a daemon that is not root (`nobody` when the tests
/// run as root), so the CLI, its home and its sandbox belong to an unprivileged user.
async fn tool_call_then_follow_up_as_an_unprivileged_daemon(h: H) {
    tool_call_then_follow_up_on(h, TestDaemon::start_unprivileged(Vec::new(), Vec::new()).await).await
}

async fn tool_call_then_follow_up_on(h: H, d: TestDaemon) {
    let (d, server, root) = setup_on(h, Script::new([]), d).await;
    server.push(h.create_file(&root, "hello.txt", "hello from the agent"));
    server.push(Reply::Text("I created hello.txt.".into()));
    server.push(Reply::Text("The file is still there.".into()));
    let run = d.client.agent_start(&start_request(h, &server, "Create hello.txt please", false)).await.unwrap().run_id;

    d.wait_turn_end("s", &run, 1, TURN).await;
    let st = d.wait_status("s", &run, TURN, settled).await;
    let events = d.events("s", &run).await;
    assert_eq!(
        std::fs::read_to_string(root.join("hello.txt")).unwrap_or_default().trim_end(),
        "hello from the agent",
        "{}",
        describe(&events)
    );
    for k in
        [EventKind::TurnStarted, EventKind::UserMessage, EventKind::Session, EventKind::ToolCall, EventKind::Message, EventKind::TurnEnded]
    {
        assert!(events.iter().any(|e| e.kind == k), "missing {k:?}:\n{}", describe(&events));
    }
    assert!(
        events.iter().any(|e| e.kind == EventKind::ToolUpdate && e.tool_status == Some(ToolStatus::Completed)),
        "a completed tool_update:\n{}",
        describe(&events)
    );
    assert_eq!((st.status, st.result_text.as_deref()), (Status::Idle, Some("I created hello.txt.")), "{st:#?}");
    assert!(st.accepts_message && st.session_id.is_some(), "{st:#?}");
    if h.id == "gemini-cli" {
        assert!(events.iter().any(|e| e.kind == EventKind::Permission), "Gemini CLI asks before a shell command:\n{}", describe(&events));
    }
    wait_until("one agent process of the run", TURN, || run_process_roots(&run).len() == 1).await;
    let pid = run_process_roots(&run)[0];

    let r = d.client.space("s").agent_message(&run, "Is the file still there?", None).await.unwrap();
    assert!(r.ok, "{r:?}");
    d.wait_turn_end("s", &run, 2, TURN).await;
    let st = d.wait_status("s", &run, TURN, settled).await;
    let events = d.events("s", &run).await;
    assert_eq!(st.result_text.as_deref(), Some("The file is still there."), "{st:#?}\n{}", describe(&events));
    assert_eq!(run_process_roots(&run), vec![pid], "the follow-up ran in the same process");
    assert!(!events.iter().any(|e| e.kind == EventKind::Exited), "no process ended:\n{}", describe(&events));
    let ends: Vec<_> = events.iter().filter(|e| e.kind == EventKind::TurnEnded).map(|e| (e.turn, e.stop_reason)).collect();
    assert_eq!(ends, vec![(1, Some(StopReason::EndTurn)), (2, Some(StopReason::EndTurn))], "{}", describe(&events));
    let usage_turns: Vec<u32> = events.iter().filter(|e| e.kind == EventKind::Usage).map(|e| e.turn).collect();
    assert!(usage_turns.contains(&1) && usage_turns.contains(&2), "a usage event in each turn:\n{}", describe(&events));
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>(), "seq starts at 1 without gaps");
    let last = server.model_calls().last().unwrap().json.as_ref().map(|j| j.to_string()).unwrap_or_default();
    assert!(last.contains("Create hello.txt please") && last.contains("I created hello.txt."), "the follow-up carries the session: {last}");

    let r = d.client.space("s").agent_stop(&run).await.unwrap();
    assert!(r.ok, "{r:?}");
    assert_eq!(run_processes(&run), Vec::<i32>::new(), "no process of the run survives the stop");
}

/// With `exit_when_idle` the CLI's stdin is closed after the turn and it exits; a follow-up
/// starts a new process given the stored session id. opencode loads the session
/// (`session/load`: the model gets turn 1's history); Gemini CLI cannot load a session an earlier
/// process made, so the run says so in a `notice` and the turn runs in a fresh session.
async fn a_new_process_resumes_or_says_it_starts_fresh(h: H) {
    let script = Script::new([Reply::Text("kiwi noted".into()), Reply::Text("the word was kiwi".into())]);
    let (d, server, _root) = setup(h, script).await;
    let run = d.client.agent_start(&start_request(h, &server, "remember the word kiwi", true)).await.unwrap().run_id;
    d.wait_turn_end("s", &run, 1, TURN).await;
    d.wait_status("s", &run, TURN, |s| s.status == Status::Done).await;
    wait_until("the CLI to exit", TURN, || run_processes(&run).is_empty()).await;

    let events = second_turn_done(&d, &run, "what was the word?", "the word was kiwi").await;
    let last = server.model_calls().last().unwrap().json.as_ref().map(|j| j.to_string()).unwrap_or_default();
    let fresh = events.iter().any(|e| e.kind == EventKind::Notice && e.turn == 2 && e.summary.as_deref().unwrap_or("").contains("fresh"));
    if h.id == "opencode" {
        assert!(last.contains("remember the word kiwi") && last.contains("kiwi noted"), "the loaded session carries turn 1: {last}");
        assert!(!fresh, "no fresh-session notice:\n{}", describe(&events));
    } else {
        assert!(fresh, "a notice says the session starts fresh:\n{}", describe(&events));
        assert!(!last.contains("kiwi noted"), "a fresh session has no turn 1: {last}");
    }
}

/// A follow-up sent right after an `exit_when_idle` turn, while the CLI is still closing (Gemini
/// CLI does not exit on end of input: the daemon ends it after a grace), waits for that
/// process's exit and ends it at once: never two processes of the run, none left after a stop,
/// and the turn answers (a new-user trial found a second process started beside the first, which
/// outlived the stop).
async fn a_follow_up_while_the_cli_is_closing_waits_for_its_exit(h: H) {
    let script = Script::new([Reply::Text("first".into()), Reply::Text("second".into())]);
    let (d, server, _root) = setup(h, script).await;
    let run = d.client.agent_start(&start_request(h, &server, "one", true)).await.unwrap().run_id;
    let sampler = crate::support::RootSampler::start(&run);
    d.wait_turn_end("s", &run, 1, TURN).await;
    second_turn_done(&d, &run, "two", "second").await;
    let (samples, most) = sampler.finish();
    assert_eq!(most.len(), 1, "agent processes seen at once over {samples} samples: {most:?}");
    d.client.space("s").agent_stop(&run).await.unwrap();
    wait_until("no process of the run", TURN, || run_processes(&run).is_empty()).await;
}

/// Sends `text` to the `exit_when_idle` run `run`: turn 2 ends `end_turn`, the run is `done`
/// with `answer` as its result. Returns the run's events.
async fn second_turn_done(d: &TestDaemon, run: &str, text: &str, answer: &str) -> Vec<spaces_sdk::Event> {
    let r = d.client.space("s").agent_message(run, text, None).await.unwrap();
    assert!(r.ok, "{r:?}");
    let ended = d.wait_turn_end("s", run, 2, TURN).await;
    let events = d.events("s", run).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{}", describe(&events));
    let st = d.wait_status("s", run, TURN, |s| s.status == Status::Done).await;
    assert_eq!(st.result_text.as_deref(), Some(answer), "{st:#?}");
    events
}

macro_rules! acp_scenarios {
    ($($name:ident: $path:path),* $(,)?) => {
        mod opencode {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $name() { $path(super::OPENCODE).await } )*
        }
        mod gemini_cli {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $name() { $path(super::GEMINI).await } )*
        }
    };
}

acp_scenarios!(
    tool_call_then_follow_up_in_one_process: super::tool_call_then_follow_up_in_one_process,
    tool_call_then_follow_up_as_an_unprivileged_daemon: super::tool_call_then_follow_up_as_an_unprivileged_daemon,
    a_follow_up_while_the_cli_is_closing_waits_for_its_exit: super::a_follow_up_while_the_cli_is_closing_waits_for_its_exit,
    a_new_process_resumes_or_says_it_starts_fresh: super::a_new_process_resumes_or_says_it_starts_fresh,
    interrupt_ends_only_the_turn: super::super::runs::interrupt_then_follow_up,
    kill_9_mid_turn_loses_no_event: super::super::survive::kill_9_mid_turn_the_turn_finishes_and_every_event_is_stored_once,
    a_stdio_mcp_server_reaches_the_agent: super::super::agent_mcp::a_stdio_mcp_server_given_to_the_agent_is_called,
);

/// `agent_capabilities` names every harness's wire, pinned version and what its runs can do:
/// `openai-codex` is Codex on `codex app-server`, `openai-codex-exec` its per-turn fallback, and
/// the ACP CLIs differ where the recordings showed they do (Gemini CLI asks permissions and
/// cannot resume in a new process; opencode can).
#[tokio::test]
async fn capabilities_name_each_harness_wire_version_and_what_it_supports() {
    let d = TestDaemon::start().await;
    let caps = d.client.agent_capabilities(&spaces_sdk::Empty {}).await.unwrap();
    let row = |id: &str| {
        let h = caps.harnesses.iter().find(|h| h.id == id).unwrap_or_else(|| panic!("{id} in {:?}", caps.harnesses));
        let s = h.supports;
        (
            h.wire.as_str(),
            h.pinned_version.as_str(),
            s.steer,
            s.resume,
            s.usage,
            s.permission_requests,
            s.message_deltas,
            s.fork && s.rewind,
        )
    };
    assert_eq!(row("claude-code"), ("claude-stream-json", "2.1.197", false, true, true, false, true, true));
    assert_eq!(row("openai-codex"), ("codex-app-server", "0.171.0", true, true, true, false, true, true));
    assert_eq!(row("openai-codex-exec"), ("codex-exec-jsonl", "0.171.0", false, true, true, false, false, false));
    assert_eq!(row("opencode"), ("acp", OPENCODE.pinned, false, true, true, false, true, false));
    assert_eq!(row("gemini-cli"), ("acp", GEMINI.pinned, false, false, true, true, true, false));
    assert!(caps.event_kinds.iter().any(|k| k == "message_delta"), "{:?}", caps.event_kinds);
    let ids: Vec<&str> = caps.harnesses.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(ids, ["claude-code", "openai-codex", "openai-codex-exec", "opencode", "gemini-cli"]);
}
