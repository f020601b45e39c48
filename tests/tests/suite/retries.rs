//! Idempotency keys of the mutating agent calls (`message_id` of `agent_message`, `request_id`
//! of `agent_start`) and the typed client's retry of a call whose answer was lost: a retry
//! returns the first result and nothing runs twice (case R45 and its kind).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use spaces_sdk::client::{Client, ClientError, Endpoint};
use spaces_sdk::{AgentMessageRequest, AgentStartRequest, ApiError, ErrorCode, EventKind, Status};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::survive::{fake_codex, message, DONE};
use crate::support::{describe, settled, TestDaemon};

const WAIT: Duration = Duration::from_secs(60);

/// A fake Codex that appends each prompt it gets on stdin (one turn's process each) to
/// `prompts.log` in its working directory, then, once the file `gate` exists, answers.
fn logging_codex(dir: &Path) -> PathBuf {
    let body = format!("cat >> prompts.log\necho >> prompts.log\nuntil [ -e gate ]; do sleep 0.05; done\n{}\n{DONE}", message("done"));
    fake_codex(dir, &body)
}

async fn daemon(bin: &Path) -> (TestDaemon, PathBuf) {
    let agent = logging_codex(bin);
    let d = TestDaemon::start_with_env(vec![("SPACES_HARNESS_BIN_OPENAI_CODEX".into(), agent.display().to_string())]).await;
    let root = d.space("s").await;
    (d, root)
}

fn start_req(prompt: &str, request_id: Option<&str>) -> AgentStartRequest {
    AgentStartRequest {
        space: "s".into(),
        agent: "openai-codex-exec".into(),
        prompt: prompt.into(),
        show: None,
        options: None,
        request_id: request_id.map(String::from),
        traceparent: None,
    }
}

fn message_req(run: &str, text: &str, message_id: Option<&str>) -> AgentMessageRequest {
    AgentMessageRequest {
        space: "s".into(),
        run_id: run.into(),
        text: text.into(),
        force: None,
        message_id: message_id.map(String::from),
        traceparent: None,
    }
}

fn refusal<T: std::fmt::Debug>(r: Result<T, ClientError>) -> ApiError {
    match r {
        Err(ClientError::Api(e)) => e,
        other => panic!("expected a typed refusal, got {other:?}"),
    }
}

/// How many prompts the agent's processes got that contain `text`.
fn prompts_with(root: &Path, text: &str) -> usize {
    std::fs::read_to_string(root.join("prompts.log")).unwrap_or_default().lines().filter(|l| l.contains(text)).count()
}

/// Counts of `user_message` events with `text` and of `turn_started` events of the run.
async fn counts(d: &TestDaemon, run: &str, text: &str) -> (usize, usize) {
    let events = d.events("s", run).await;
    let users = events.iter().filter(|e| e.kind == EventKind::UserMessage && e.text.as_deref() == Some(text)).count();
    let turns = events.iter().filter(|e| e.kind == EventKind::TurnStarted).count();
    (users, turns)
}

/// Waits until the run settled, asserts it waits for a follow-up (its turns ended normally:
/// not `crashed`, as a turn whose text never reached its agent ends), and returns its turn count.
async fn idle(d: &TestDaemon, run: &str) -> u32 {
    idle_at(d, run, 1).await
}

/// [`idle`] once the run has at least `turns` turns (a queued follow-up's turn starts only
/// after the turn before it ended).
async fn idle_at(d: &TestDaemon, run: &str, turns: u32) -> u32 {
    let st = d.wait_status("s", run, WAIT, |s| settled(s) && s.turns >= turns).await;
    assert_eq!(st.status, Status::Idle, "{}: {}\n{}", st.status.as_str(), st.reason, describe(&d.events("s", run).await));
    st.turns
}

/// R45: a follow-up sent while the daemon is being stopped with SIGTERM, whose answer never
/// reaches the client (it goes through a proxy that swallows the answer; the daemon is stopped 0
/// to 100 ms after the request was written, so some tries stop it before it read the request and
/// some after the turn started), retried with the same `message_id` after the restart: each
/// message runs in exactly one turn (one `user_message`, one prompt on the agent's stdin), and a
/// second retry answers the same report.
#[tokio::test]
async fn case_r45_a_follow_up_cut_off_by_sigterm_and_retried_with_its_message_id_runs_once() {
    let bin = tempfile::tempdir().unwrap();
    let (mut d, root) = daemon(bin.path()).await;
    std::fs::write(root.join("gate"), "").unwrap();
    let run = d.client.agent_start(&start_req("first", None)).await.unwrap().run_id;
    idle(&d, &run).await;
    let socket = d.state_dir().join("spacesd.sock");
    let mut delivered_unanswered = 0;
    for (i, delay_ms) in [0u64, 2, 5, 10, 20, 40, 100].into_iter().enumerate() {
        let text = format!("follow-up number {i}");
        let key = format!("r45-{i}");
        let body = json!({"text": text, "message_id": key}).to_string();
        let proxy = d.dir.path().join(format!("proxy-{i}.sock"));
        let _p = answer_losing_proxy(socket.clone(), proxy.clone()).await;
        // The first try: written whole, its answer lost, the daemon stopped meanwhile.
        let mut first = tokio::net::UnixStream::connect(&proxy).await.unwrap();
        let request = format!(
            "POST /v1/spaces/s/agents/{run}/message HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        first.write_all(request.as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        d.terminate();
        let mut answer = String::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), first.read_to_string(&mut answer)).await;
        assert_eq!(answer, "", "the proxy lets no answer through");
        d.start_again().await;
        if counts(&d, &run, &text).await.0 == 1 {
            delivered_unanswered += 1;
        }
        let retried = d.client.agent_message(&message_req(&run, &text, Some(&key))).await.unwrap();
        assert!(retried.ok, "{retried:?}");
        let again = d.client.agent_message(&message_req(&run, &text, Some(&key))).await.unwrap();
        assert_eq!(again, retried, "a second retry answers the same");
        let turns = idle_at(&d, &run, i as u32 + 2).await;
        let (users, started) = counts(&d, &run, &text).await;
        let events = d.events("s", &run).await;
        assert_eq!(users, 1, "try {i} (SIGTERM {delay_ms} ms after the request): one user_message:\n{}", describe(&events));
        assert_eq!(started, turns as usize, "one turn_started per turn:\n{}", describe(&events));
        assert_eq!(turns as usize, i + 2, "the first prompt and one turn per follow-up:\n{}", describe(&events));
        assert_eq!(prompts_with(&root, &text), 1, "try {i}: the agent got the message once");
    }
    assert!(delivered_unanswered >= 1, "no try was delivered before its retry: the case was not exercised");
    let texts: Vec<String> = (0..7).map(|i| format!("follow-up number {i}")).collect();
    nothing_more_ran(&d, &root, &run, 8, &texts).await;
}

/// After the checks of a test: one more follow-up, which runs after anything still queued (a
/// duplicate would be), then the run must have exactly `turns` turns before it, and every text
/// of `texts` one `user_message` and one prompt on the agent's stdin.
async fn nothing_more_ran(d: &TestDaemon, root: &Path, run: &str, turns: u32, texts: &[String]) {
    let last = d.client.agent_message(&message_req(run, "the last word", None)).await.unwrap();
    assert!(last.ok, "{last:?}");
    assert_eq!(idle_at(d, run, turns + 1).await, turns + 1, "{}", describe(&d.events("s", run).await));
    let events = d.events("s", run).await;
    for text in texts {
        assert_eq!(counts(d, run, text).await.0, 1, "{text}:\n{}", describe(&events));
        assert_eq!(prompts_with(root, text), 1, "{text}");
    }
}

/// A proxy to the daemon's socket that swallows the answer of the first request it carries
/// (the daemon acts, the caller sees the connection close: an answer lost mid-call) and passes
/// every later connection through.
async fn answer_losing_proxy(daemon: PathBuf, at: PathBuf) -> tokio::task::JoinHandle<()> {
    let listener = tokio::net::UnixListener::bind(&at).unwrap();
    tokio::spawn(async move {
        let mut first = true;
        while let Ok((mut caller, _)) = listener.accept().await {
            let Ok(mut upstream) = tokio::net::UnixStream::connect(&daemon).await else { continue };
            if std::mem::take(&mut first) {
                tokio::spawn(async move {
                    let (mut from_caller, _to_caller) = caller.split();
                    let (mut from_daemon, mut to_daemon) = upstream.split();
                    let mut buf = vec![0u8; 64 * 1024];
                    // Pass the request on, until the daemon has answered; then drop both.
                    let forward = async {
                        loop {
                            match from_caller.read(&mut buf).await {
                                Ok(0) | Err(_) => break,
                                Ok(n) => {
                                    if to_daemon.write_all(&buf[..n]).await.is_err() {
                                        break;
                                    }
                                }
                            }
                        }
                        std::future::pending::<()>().await
                    };
                    let mut answer = [0u8; 1];
                    tokio::select! {
                        _ = forward => {}
                        _ = from_daemon.read(&mut answer) => {}
                    }
                });
            } else {
                tokio::spawn(async move {
                    let _ = tokio::io::copy_bidirectional(&mut caller, &mut upstream).await;
                });
            }
        }
    })
}

/// The kind, through the typed client the CLI and both SDKs use: the answers of an
/// `agent_start` and of an `agent_message` are lost on their way back (the daemon acted); the
/// client, which gave each call a key of its own, sends it once more with that key and gets the
/// first result: one run, one turn per message.
#[tokio::test]
async fn the_client_retries_a_call_whose_answer_was_lost_with_the_same_key_and_nothing_runs_twice() {
    let bin = tempfile::tempdir().unwrap();
    let (d, root) = daemon(bin.path()).await;
    std::fs::write(root.join("gate"), "").unwrap();
    let socket = d.state_dir().join("spacesd.sock");

    let proxy = d.dir.path().join("start-proxy.sock");
    let _p = answer_losing_proxy(socket.clone(), proxy.clone()).await;
    let lossy = Client::new(Endpoint::Unix(proxy));
    let report = lossy.agent_start(&start_req("start once", None)).await.unwrap();
    let runs = d.client.agent_list(&spaces_sdk::AgentListRequest { space: "s".into() }).await.unwrap();
    assert_eq!(runs.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(), vec![report.run_id.as_str()], "one run");
    let run = report.run_id;
    idle(&d, &run).await;
    assert_eq!(prompts_with(&root, "start once"), 1);

    let proxy = d.dir.path().join("message-proxy.sock");
    let _p = answer_losing_proxy(socket, proxy.clone()).await;
    let lossy = Client::new(Endpoint::Unix(proxy));
    let sent = lossy.call_named("agent_message", json!({"space": "s", "run_id": run, "text": "say it once"})).await.unwrap();
    assert_eq!(sent["ok"], true, "{sent}");
    assert_eq!(idle_at(&d, &run, 2).await, 2);
    let (users, turns) = counts(&d, &run, "say it once").await;
    assert_eq!((users, turns), (1, 2), "{}", describe(&d.events("s", &run).await));
    assert_eq!(prompts_with(&root, "say it once"), 1);
    nothing_more_ran(&d, &root, &run, 2, &["start once".into(), "say it once".into()]).await;
}

/// The kind with other inputs: a repeated `agent_start` with the same `request_id` answers the
/// same run and creates no other; the same key with another prompt is refused naming the key;
/// a `message_id` repeated while its message waits behind a running turn answers the same
/// `queued` report and queues nothing more; a reused `message_id` with another text is refused;
/// a malformed key is `INVALID_ARGUMENT` naming its field. Keys are scoped: the same
/// `message_id` on another run is another message.
#[tokio::test]
async fn a_repeated_key_answers_the_first_result_and_another_payload_under_it_is_refused() {
    let bin = tempfile::tempdir().unwrap();
    let (d, root) = daemon(bin.path()).await;

    let first = d.client.agent_start(&start_req("build it", Some("start-1"))).await.unwrap();
    let repeat = d.client.agent_start(&start_req("build it", Some("start-1"))).await.unwrap();
    assert_eq!(repeat, first);
    let e = refusal(d.client.agent_start(&start_req("build something else", Some("start-1"))).await);
    assert_eq!((e.code, e.field.as_deref()), (ErrorCode::OperationKeyConflict, Some("request_id")), "{e:?}");
    assert!(e.message.contains("\"start-1\""), "{}", e.message);
    let runs = d.client.agent_list(&spaces_sdk::AgentListRequest { space: "s".into() }).await.unwrap();
    assert_eq!(runs.len(), 1, "{runs:#?}");
    let run = first.run_id;

    // Turn 1 waits for the gate: follow-ups queue behind it.
    d.wait_status("s", &run, WAIT, |s| s.status == Status::Running).await;
    let queued = d.client.agent_message(&message_req(&run, "next", Some("m-1"))).await.unwrap();
    assert!(queued.ok && queued.reason.contains("queued at position 1"), "{queued:?}");
    let again = d.client.agent_message(&message_req(&run, "next", Some("m-1"))).await.unwrap();
    assert_eq!(again, queued, "a repeat while the message waits answers the first report");
    let e = refusal(d.client.agent_message(&message_req(&run, "other text", Some("m-1"))).await);
    assert_eq!((e.code, e.field.as_deref()), (ErrorCode::OperationKeyConflict, Some("message_id")), "{e:?}");
    for bad in ["", "has space", "ä", &"k".repeat(129)] {
        let e = refusal(d.client.agent_message(&message_req(&run, "x", Some(bad))).await);
        assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidArgument, Some("message_id")), "{bad:?}: {e:?}");
        let e = refusal(d.client.agent_start(&start_req("x", Some(bad))).await);
        assert_eq!((e.code, e.field.as_deref()), (ErrorCode::InvalidArgument, Some("request_id")), "{bad:?}: {e:?}");
    }

    std::fs::write(root.join("gate"), "").unwrap();
    assert_eq!(idle_at(&d, &run, 2).await, 2, "{}", describe(&d.events("s", &run).await));
    // Delivered now: a repeat still answers the first (queued) report and starts nothing.
    let after = d.client.agent_message(&message_req(&run, "next", Some("m-1"))).await.unwrap();
    assert_eq!(after, queued);
    let e = refusal(d.client.agent_message(&message_req(&run, "other text", Some("m-1"))).await);
    assert_eq!(e.code, ErrorCode::OperationKeyConflict, "{e:?}");
    assert_eq!(idle(&d, &run).await, 2);
    assert_eq!(counts(&d, &run, "next").await, (1, 2));
    nothing_more_ran(&d, &root, &run, 2, &["build it".into(), "next".into()]).await;

    // Scopes: the same message_id on another run, the same request_id in another Space.
    let other = d.client.agent_start(&start_req("second run", Some("start-2"))).await.unwrap().run_id;
    idle(&d, &other).await;
    let there = d.client.agent_message(&message_req(&other, "next", Some("m-1"))).await.unwrap();
    // Its own answer (delivered, or queued while the first turn's process exits), not run's.
    assert!(there.ok && there.run_id == other, "{there:?}");
    assert_eq!(idle_at(&d, &other, 2).await, 2);
    d.space("t").await;
    let in_t = d.client.agent_start(&AgentStartRequest { space: "t".into(), ..start_req("build it", Some("start-1")) }).await.unwrap();
    assert_ne!(in_t.run_id, run);

    // Keys live as long as their run: once it is removed, its key starts a new run.
    d.client.agent_stop(&spaces_sdk::AgentRunRequest { space: "s".into(), run_id: run.clone() }).await.unwrap();
    d.client.agent_remove(&spaces_sdk::AgentRunRequest { space: "s".into(), run_id: run.clone() }).await.unwrap();
    let anew = d.client.agent_start(&start_req("build it", Some("start-1"))).await.unwrap();
    assert_ne!(anew.run_id, run);
}

/// Issue 30 ("no window in which a crash loses a turn"): follow-ups queued behind a running turn
/// (one with a `message_id`, one without) are stored with their keys; a `kill -9` of the daemon
/// before that turn ends loses neither: the restarted daemon re-adopts the running turn and then
/// runs them, in order, one turn each, and a retry of the keyed one answers its first report
/// without queueing it again.
#[tokio::test]
async fn follow_ups_queued_behind_a_running_turn_survive_kill_9_and_run_once_in_order() {
    let bin = tempfile::tempdir().unwrap();
    let (mut d, root) = daemon(bin.path()).await;
    let run = d.client.agent_start(&start_req("first", None)).await.unwrap().run_id;
    let deadline = std::time::Instant::now() + WAIT;
    while prompts_with(&root, "first") == 0 {
        assert!(std::time::Instant::now() < deadline, "the first turn's agent never got its prompt");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let keyed = d.client.agent_message(&message_req(&run, "queued one", Some("q-1"))).await.unwrap();
    assert!(keyed.ok && keyed.reason.contains("queued at position 1"), "{keyed:?}");
    let plain = d.client.agent_message(&message_req(&run, "queued two", None)).await.unwrap();
    assert!(plain.ok && plain.reason.contains("queued at position 2"), "{plain:?}");

    d.restart().await;
    let again = d.client.agent_message(&message_req(&run, "queued one", Some("q-1"))).await.unwrap();
    assert_eq!(again, keyed, "a retry after the restart answers the first report");
    std::fs::write(root.join("gate"), "").unwrap();
    let turns = idle_at(&d, &run, 3).await;
    let events = d.events("s", &run).await;
    assert_eq!(turns, 3, "the first turn and one per queued message:\n{}", describe(&events));
    let users: Vec<&str> = events.iter().filter(|e| e.kind == EventKind::UserMessage).filter_map(|e| e.text.as_deref()).collect();
    assert_eq!(users, ["first", "queued one", "queued two"], "{}", describe(&events));
    let texts = ["queued one".to_owned(), "queued two".to_owned()];
    nothing_more_ran(&d, &root, &run, 3, &texts).await;
}
