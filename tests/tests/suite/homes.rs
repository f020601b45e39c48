//! Persistent agents (issue 10): one agent, two hosts. Host B is a second `spacesd` with its
//! own state dir, sharing only the volume with host A; its Space has the same name but its own
//! folder, as on a real second machine. The real CLI does turn 1 on A; its home is saved; the
//! agent's next message goes to B, which is refused with `LEASE_HELD` while A's run lives, and
//! after A stops the run resumes the same session there: the model endpoint's recorded request
//! holds turn 1's history.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use spaces_sdk::client::ClientError;
use spaces_sdk::{
    AgentRunRequest, AgentStartRequest, ErrorCode, EventKind, HomeRequest, PersistentAgentSendRequest, SpaceAgentOptions, StopReason,
};
use spaces_testkit::{Reply, Script, ScriptedServer};

use super::harness::{CLAUDE, CODEX, H};
use crate::support::{describe, require_cli, s3, TestDaemon};

const TURN: Duration = Duration::from_secs(90);

/// Where the two hosts keep homes.
enum Store {
    /// One local directory both daemons name with `--volume` (a shared mount).
    Local(tempfile::TempDir),
    /// A real S3-compatible server on loopback (conditional writes honoured).
    S3(s3::S3Server),
}

impl Store {
    fn serve_args(&self) -> (Vec<(String, String)>, Vec<String>) {
        match self {
            Store::Local(dir) => (Vec::new(), vec!["--volume".into(), dir.path().join("volume").display().to_string()]),
            Store::S3(server) => (server.env(), vec!["--volume".into(), server.url("homes")]),
        }
    }
}

async fn host(store: &Store) -> TestDaemon {
    let (env, args) = store.serve_args();
    let d = TestDaemon::start_with(env, args).await;
    d.space("s").await;
    d
}

fn code_of(e: ClientError) -> (ErrorCode, String) {
    match e {
        ClientError::Api(e) => (e.code, e.message),
        other => panic!("expected a refusal, got {other}"),
    }
}

/// The text of every message of a recorded model request, whatever the wire.
fn request_text(json: &serde_json::Value) -> String {
    json.to_string()
}

async fn one_agent_two_hosts(h: H, store: Store) {
    require_cli(h.tools, h.binary);
    let model = ScriptedServer::start(
        h.wire,
        Script::new([Reply::Text("noted: the word is PELICAN".into()), Reply::Text("the word was PELICAN".into())]),
    )
    .await
    .unwrap();
    let a = host(&store).await;
    let b = host(&store).await;
    let name = format!("helper-{}", h.id);

    // Turn 1 on host A, as persistent agent `name`.
    let req = AgentStartRequest {
        space: "s".into(),
        agent: h.id.into(),
        prompt: "remember the word PELICAN".into(),
        show: None,
        options: Some(SpaceAgentOptions { base_url: Some(model.base_url()), home: Some(name.clone()), ..Default::default() }),
        request_id: None,
        traceparent: None,
    };
    let run_a = a.client.agent_start(&req).await.unwrap().run_id;
    let ended = a.wait_turn_end("s", &run_a, 1, TURN).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{ended:?}");
    a.wait_for_event("s", &run_a, TURN, |e| {
        e.kind == EventKind::Notice && e.summary.as_deref().is_some_and(|s| s.starts_with("home saved"))
    })
    .await;
    let session_a = a.client.space("s").agent_status(&run_a, None).await.unwrap().session_id.expect("session id on A");

    // While A's run lives, B is refused, naming the holder.
    let send = PersistentAgentSendRequest { name: name.clone(), text: "which word?".into() };
    let (code, message) = code_of(b.client.persistent_agent_send(&send).await.unwrap_err());
    assert_eq!(code, ErrorCode::LeaseHeld, "{message}");
    assert!(message.contains(&run_a), "the refusal names the holder: {message}");

    // A stops the run: its home is saved a last time and the lease released; B gets it.
    let stop = a.client.agent_stop(&AgentRunRequest { space: "s".into(), run_id: run_a.clone() }).await.unwrap();
    assert!(stop.ok, "{stop:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let report = loop {
        match b.client.persistent_agent_send(&send).await {
            Ok(r) => break r,
            Err(e) => {
                let (code, message) = code_of(e);
                assert_eq!(code, ErrorCode::LeaseHeld, "{message}");
                assert!(Instant::now() < deadline, "the lease was not released after the stop: {message}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    assert!(report.started && report.restored, "{report:?}");
    let run_b = report.run_id;
    let ended = b.wait_turn_end("s", &run_b, 1, TURN).await;
    let events = b.events("s", &run_b).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{}", describe(&events));
    assert!(
        events.iter().any(|e| e.kind == EventKind::Notice && e.summary.as_deref().is_some_and(|s| s.contains("restored from snapshot"))),
        "{}",
        describe(&events)
    );
    assert!(!events.iter().any(|e| e.summary.as_deref().is_some_and(|s| s.contains("session was reset"))), "{}", describe(&events));

    // The same session, with turn 1's history in the model request B's CLI made.
    let status_b = b.client.space("s").agent_status(&run_b, None).await.unwrap();
    assert_eq!(status_b.session_id.as_deref(), Some(session_a.as_str()), "B resumed A's session");
    let calls = model.model_calls();
    let last = calls.last().and_then(|c| c.json.clone()).expect("B's model call");
    let text = request_text(&last);
    assert!(text.contains("remember the word PELICAN"), "turn 1's prompt is in B's request: {text}");
    assert!(text.contains("noted: the word is PELICAN"), "turn 1's answer is in B's request: {text}");
    assert!(text.contains("which word?"), "{text}");

    // Both hosts see the home's snapshots, saved by both.
    b.wait_for_event("s", &run_b, TURN, |e| {
        e.kind == EventKind::Notice && e.summary.as_deref().is_some_and(|s| s.starts_with("home saved"))
    })
    .await;
    let snaps = b.client.home_snapshots(&HomeRequest { name: name.clone() }).await.unwrap();
    let hosts: std::collections::BTreeSet<&str> = snaps.iter().map(|s| s.host.as_str()).collect();
    assert_eq!(hosts.len(), 2, "both hosts saved a snapshot: {snaps:#?}");
    b.client.agent_stop(&AgentRunRequest { space: "s".into(), run_id: run_b }).await.unwrap();
    drop(store);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_agent_moves_between_hosts_over_s3() {
    one_agent_two_hosts(CLAUDE, Store::S3(s3::S3Server::start().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_codex_agent_moves_between_hosts_over_s3() {
    one_agent_two_hosts(CODEX, Store::S3(s3::S3Server::start().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_agent_moves_between_hosts_on_a_shared_directory() {
    one_agent_two_hosts(CLAUDE, Store::Local(tempfile::tempdir().unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_codex_agent_moves_between_hosts_on_a_shared_directory() {
    one_agent_two_hosts(CODEX, Store::Local(tempfile::tempdir().unwrap())).await;
}

/// Sends `text` to persistent agent `name`, waiting out the lease a stopped run is releasing.
async fn send_when_free(d: &TestDaemon, name: &str, text: &str) -> String {
    let send = PersistentAgentSendRequest { name: name.into(), text: text.into() };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match d.client.persistent_agent_send(&send).await {
            Ok(r) => return r.run_id,
            Err(e) => {
                let (code, message) = code_of(e);
                assert_eq!(code, ErrorCode::LeaseHeld, "{message}");
                assert!(Instant::now() < deadline, "{message}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// A first run of persistent agent `name` (turn "one"), stopped; returns its daemon's run id.
async fn first_run(d: &TestDaemon, model: &ScriptedServer, name: &str) -> String {
    let req = AgentStartRequest {
        space: "s".into(),
        agent: CLAUDE.id.into(),
        prompt: "one".into(),
        show: None,
        options: Some(SpaceAgentOptions { base_url: Some(model.base_url()), home: Some(name.into()), ..Default::default() }),
        request_id: None,
        traceparent: None,
    };
    let run = d.client.agent_start(&req).await.unwrap().run_id;
    d.wait_turn_end("s", &run, 1, TURN).await;
    run
}

/// The reset: a `notice` saying the session was reset, then a turn of a fresh session that
/// ends `end_turn` and carries none of the old session's history.
async fn assert_reset(d: &TestDaemon, model: &ScriptedServer, run: &str) {
    let ended = d.wait_for_event("s", run, TURN, |e| e.kind == EventKind::TurnEnded && e.stop_reason == Some(StopReason::EndTurn)).await;
    let events = d.events("s", run).await;
    assert!(
        events.iter().any(|e| e.kind == EventKind::Notice && e.summary.as_deref().is_some_and(|s| s.contains("session was reset"))),
        "{}",
        describe(&events)
    );
    let status = d.client.space("s").agent_status(run, None).await.unwrap();
    assert!(status.session_id.is_some(), "a fresh session: {status:?} after {ended:?}");
    let last = model.model_calls().last().and_then(|c| c.json.clone()).unwrap();
    assert!(!request_text(&last).contains("\"one\""), "a fresh session carries no old history: {last}");
}

/// Case V25 as written: the home restored for the agent's next run holds no transcript of its
/// saved session (taken out of the snapshot, re-imported). The run does not resume it: it
/// starts a fresh session with clean arguments, and a `notice` says the session was reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_v25_a_saved_session_without_transcript_is_reset_with_a_notice() {
    require_cli(CLAUDE.id, CLAUDE.binary);
    let model = ScriptedServer::start(CLAUDE.wire, Script::new([]).with_fallback(Reply::Text("ok".into()))).await.unwrap();
    let store = Store::Local(tempfile::tempdir().unwrap());
    let d = host(&store).await;
    let run = first_run(&d, &model, "v25").await;
    d.client.agent_stop(&AgentRunRequest { space: "s".into(), run_id: run }).await.unwrap();
    reimport(&d, "v25", |home| assert!(remove_transcripts(&home.join("projects")) > 0, "the CLI filed a transcript in the home")).await;
    let run = send_when_free(&d, "v25", "two").await;
    assert_reset(&d, &model, &run).await;
}

/// Waits until nothing holds persistent agent `name` (a stopped run releases it after its last
/// save).
async fn send_when_free_probe(d: &TestDaemon, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while d.client.home_list(&spaces_sdk::Empty {}).await.unwrap().iter().any(|r| r.name == name && r.lease.is_some()) {
        assert!(Instant::now() < deadline, "the lease of {name} was not released");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The other face of V25: the home holds a transcript of the saved session, but the CLI cannot
/// resume from it (its content is not a conversation). The resume fails at once; the run retries
/// once as a fresh session with clean arguments, saying the session was reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_v25_a_session_the_cli_cannot_resume_is_retried_fresh_once() {
    require_cli(CLAUDE.id, CLAUDE.binary);
    let model = ScriptedServer::start(CLAUDE.wire, Script::new([]).with_fallback(Reply::Text("ok".into()))).await.unwrap();
    let store = Store::Local(tempfile::tempdir().unwrap());
    let d = host(&store).await;
    let run = first_run(&d, &model, "v25b").await;
    d.client.agent_stop(&AgentRunRequest { space: "s".into(), run_id: run }).await.unwrap();
    reimport(&d, "v25b", |home| assert!(garble_transcripts(&home.join("projects")) > 0, "the CLI filed a transcript in the home")).await;
    let run = send_when_free(&d, "v25b", "two").await;
    assert_reset(&d, &model, &run).await;
}

/// Replace persistent agent `name`'s newest snapshot by a copy of it changed by `change` (via
/// `home restore --to`, `tar --zstd` and `home import`), once nothing holds it.
async fn reimport(d: &TestDaemon, name: &str, change: impl FnOnce(&std::path::Path)) {
    send_when_free_probe(d, name).await;
    let work = tempfile::tempdir().unwrap();
    let copy = work.path().join("home");
    let (ok, out) = d.cli(&["home", "restore", name, "--to", copy.to_str().unwrap()]);
    assert!(ok, "{out}");
    change(&copy);
    let archive = work.path().join("home.tar.zst");
    let tar = std::process::Command::new("tar")
        .args(["--zstd", "-cf", archive.to_str().unwrap(), "-C", copy.to_str().unwrap(), "."])
        .status()
        .unwrap();
    assert!(tar.success());
    let (ok, out) = d.cli(&["home", "import", name, archive.to_str().unwrap()]);
    assert!(ok, "{out}");
}

fn garble_transcripts(dir: &std::path::Path) -> usize {
    for_each_transcript(dir, &|p| std::fs::write(p, "not a conversation\n").unwrap())
}

/// Calls `f` on every `.jsonl` file under `dir`; returns how many there were.
fn for_each_transcript(dir: &std::path::Path, f: &dyn Fn(&std::path::Path)) -> usize {
    let mut n = 0;
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    for e in entries.flatten() {
        let p: PathBuf = e.path();
        if p.is_dir() {
            n += for_each_transcript(&p, f);
        } else if p.extension().is_some_and(|x| x == "jsonl") {
            f(&p);
            n += 1;
        }
    }
    n
}

fn remove_transcripts(dir: &std::path::Path) -> usize {
    for_each_transcript(dir, &|p| std::fs::remove_file(p).unwrap())
}

/// The operator's side on one host, through the typed client, HTTP and the CLI: a second run of
/// the same agent is refused with `LEASE_HELD` naming the first; a home of one harness is refused
/// to another; list, snapshots, export, import, point-in-time restore (into a directory and back
/// into the volume) and delete, with delete refused while a run holds the home.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_lists_exports_imports_restores_and_deletes_homes() {
    let h = CLAUDE;
    require_cli(h.tools, h.binary);
    let model = ScriptedServer::start(h.wire, Script::new([]).with_fallback(Reply::Text("ok".into()))).await.unwrap();
    let store = Store::Local(tempfile::tempdir().unwrap());
    let d = host(&store).await;
    let start = |agent: &str, home: &str| AgentStartRequest {
        space: "s".into(),
        agent: agent.into(),
        prompt: "hello".into(),
        show: None,
        options: Some(SpaceAgentOptions { base_url: Some(model.base_url()), home: Some(home.into()), ..Default::default() }),
        request_id: None,
        traceparent: None,
    };
    let run = d.client.agent_start(&start(h.id, "ops")).await.unwrap().run_id;
    d.wait_turn_end("s", &run, 1, TURN).await;
    d.wait_for_event("s", &run, TURN, |e| e.summary.as_deref().is_some_and(|s| s.starts_with("home saved"))).await;

    // One writer: a second run of "ops" is refused, naming the first; so is a delete.
    let (code, message) = code_of(d.client.agent_start(&start(h.id, "ops")).await.unwrap_err());
    assert_eq!(code, ErrorCode::LeaseHeld, "{message}");
    assert!(message.contains(&run), "{message}");
    let (code, message) = code_of(d.client.home_delete(&HomeRequest { name: "ops".into() }).await.unwrap_err());
    assert_eq!(code, ErrorCode::LeaseHeld, "{message}");
    let (status, body) = d.raw("POST", "/v1/homes/ops/delete", Some("{}"));
    assert_eq!(status, 409, "{body}");
    // Bad names are refused, naming the rule.
    let (code, message) = code_of(d.client.agent_start(&start(h.id, "../escape")).await.unwrap_err());
    assert_eq!(code, ErrorCode::InvalidArgument, "{message}");

    let list = d.client.home_list(&spaces_sdk::Empty {}).await.unwrap();
    let ops = list.iter().find(|r| r.name == "ops").expect("ops listed");
    assert_eq!(ops.run_id.as_deref(), Some(run.as_str()));
    assert!(ops.lease.as_ref().is_some_and(|l| l.holder.ends_with(&run)), "{ops:?}");
    let (ok, out) = d.cli(&["home", "list"]);
    assert!(ok && out.contains("ops") && out.contains("claude-code"), "{out}");

    d.client.agent_stop(&AgentRunRequest { space: "s".into(), run_id: run.clone() }).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while d.client.home_list(&spaces_sdk::Empty {}).await.unwrap().iter().any(|r| r.name == "ops" && r.lease.is_some()) {
        assert!(Instant::now() < deadline, "the lease was not released after the stop");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A home of one harness is not another's (the lease is free now: the refusal is the harness).
    let (code, message) = code_of(d.client.agent_start(&start(CODEX.id, "ops")).await.unwrap_err());
    assert_eq!(code, ErrorCode::InvalidArgument, "{message}");
    assert!(message.contains("claude-code"), "{message}");

    // Export, then import as another agent; its files come back in a point-in-time restore.
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("ops.tar.zst");
    let (ok, out) = d.cli(&["home", "export", "ops", file.to_str().unwrap()]);
    assert!(ok && file.is_file(), "{out}");
    let (ok, out) = d.cli(&["home", "import", "ops-copy", file.to_str().unwrap()]);
    assert!(ok, "{out}");
    let to = work.path().join("restored");
    let (ok, out) = d.cli(&["home", "restore", "ops-copy", "--to", to.to_str().unwrap()]);
    assert!(ok, "{out}");
    assert!(std::fs::read_dir(to.join("projects")).is_ok(), "the restored home holds the CLI's projects: {out}");
    let snaps = d.client.home_snapshots(&HomeRequest { name: "ops".into() }).await.unwrap();
    let first = snaps.first().expect("a snapshot").id.clone();
    let (ok, out) = d.cli(&["home", "restore", "ops", "--at", &first]);
    assert!(ok, "{out}");
    let after = d.client.home_snapshots(&HomeRequest { name: "ops".into() }).await.unwrap();
    assert_eq!(after.len(), snaps.len() + 1, "the restored snapshot is the newest again: {after:#?}");
    // Relative paths are refused over HTTP (never resolved against the daemon's cwd).
    let (status, body) = d.raw("POST", "/v1/homes/ops/export", Some(r#"{"path": "rel.tar.zst"}"#));
    assert_eq!(status, 400, "{body}");

    let (ok, out) = d.cli(&["home", "delete", "ops"]);
    assert!(ok, "{out}");
    assert!(!d.client.home_list(&spaces_sdk::Empty {}).await.unwrap().iter().any(|r| r.name == "ops"));
    let (code, _) =
        code_of(d.client.persistent_agent_send(&PersistentAgentSendRequest { name: "ops".into(), text: "hi".into() }).await.unwrap_err());
    assert_eq!(code, ErrorCode::InvalidArgument);
}

// ----- Issue 28: homes stay with their Space (fake `claude-code`, no model needed) -----

/// A daemon with TCP on whose `claude-code` is a fake: it writes `settings.json` into its config
/// dir (and, when `LEAK` is set, that value into `leak.txt`), then sleeps. Returns the daemon, its
/// TCP address and the fake's directory (kept alive with it).
async fn fake_claude_daemon() -> (TestDaemon, String, tempfile::TempDir) {
    let bin_dir = tempfile::tempdir().unwrap();
    let fake = bin_dir.path().join("fake-claude");
    std::fs::write(
        &fake,
        "#!/bin/sh\nmkdir -p \"$CLAUDE_CONFIG_DIR\" && echo x > \"$CLAUDE_CONFIG_DIR/settings.json\"\n\
         if [ -n \"$LEAK\" ]; then printf 'key=%s\\n' \"$LEAK\" > \"$CLAUDE_CONFIG_DIR/leak.txt\"; fi\nexec sleep 60\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let env = vec![("SPACES_HARNESS_BIN_CLAUDE_CODE".to_owned(), fake.display().to_string())];
    let d = TestDaemon::start_with(env, vec!["--tcp".into(), "127.0.0.1:0".into()]).await;
    let addr = std::fs::read_to_string(d.state_dir().join("tcp.addr")).unwrap().trim().to_owned();
    (d, addr, bin_dir)
}

/// A caller token of `space` (control scope) made with the CLI, as a client over TCP.
fn caller(d: &TestDaemon, addr: &str, space: &str) -> spaces_sdk::client::Client {
    let (ok, out) = d.cli(&["token", "create", "--space", space, "--scope", "control"]);
    assert!(ok, "token create: {out}");
    let token = out.lines().next().unwrap().trim().to_owned();
    spaces_sdk::client::Client::new(spaces_sdk::client::Endpoint::Tcp { addr: addr.to_owned(), token })
}

fn start_json(space: &str, home: &str) -> serde_json::Value {
    serde_json::json!({"space": space, "agent": "claude-code", "prompt": "hi", "options": {"home": home}})
}

fn refused(r: Result<serde_json::Value, ClientError>) -> (ErrorCode, String) {
    match r {
        Err(e) => code_of(e),
        Ok(v) => panic!("expected a refusal, got {v}"),
    }
}

/// Waits for the fake to write its config dir, stops the run, and waits until its home is saved
/// and its lease released.
async fn stop_and_wait_saved(d: &TestDaemon, space: &str, run: &str, home: &str) {
    let written = d.state_dir().join("runs").join(run).join("home/.claude/settings.json");
    crate::support::wait_until("the fake to write its config dir", Duration::from_secs(30), || written.is_file()).await;
    d.client.agent_stop(&AgentRunRequest { space: space.into(), run_id: run.into() }).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let homes = d.client.home_list(&spaces_sdk::Empty {}).await.unwrap();
        if homes.iter().any(|h| h.name == home && h.lease.is_none() && h.snapshots > 0) {
            return;
        }
        assert!(Instant::now() < deadline, "home {home} not saved and freed: {homes:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue 28, "Homes stay with their Space": a persistent agent's home made by a run of Space `s`
/// is refused (`FORBIDDEN`) to a caller of Space `t` (and to the operator starting it in `t`),
/// with every home operation; `s`'s own caller uses it. The operator moves it with `home move`,
/// after which it is `t`'s and no longer `s`'s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_home_stays_with_its_space_until_the_operator_moves_it() {
    let (d, addr, _bin) = fake_claude_daemon().await;
    d.space("s").await;
    d.space("t").await;
    let run = d.client.call_named("agent_start", start_json("s", "owned")).await.unwrap()["run_id"].as_str().unwrap().to_owned();
    stop_and_wait_saved(&d, "s", &run, "owned").await;
    let (s_caller, t_caller) = (caller(&d, &addr, "s"), caller(&d, &addr, "t"));

    let (code, message) = refused(t_caller.call_named("agent_start", start_json("t", "owned")).await);
    assert_eq!(code, ErrorCode::Forbidden, "{message}");
    assert!(message.contains("another Space") && message.contains("home move"), "{message}");
    for (op, args) in [
        ("persistent_agent_send", serde_json::json!({"name": "owned", "text": "hi"})),
        ("home_move", serde_json::json!({"name": "owned", "space": "t"})),
        ("home_export", serde_json::json!({"name": "owned", "path": "/tmp/x.tar.zst"})),
        ("home_list", serde_json::json!({})),
    ] {
        let (code, message) = refused(t_caller.call_named(op, args).await);
        assert_eq!(code, ErrorCode::Forbidden, "{op}: {message}");
    }
    // Not the operator either, in another Space: a home moves only explicitly.
    let (code, message) = refused(d.client.call_named("agent_start", start_json("t", "owned")).await);
    assert_eq!(code, ErrorCode::Forbidden, "{message}");
    let homes = d.client.home_list(&spaces_sdk::Empty {}).await.unwrap();
    assert!(homes.iter().any(|h| h.name == "owned" && h.lease.is_none()), "a refused start took no lease: {homes:?}");

    // Its own Space's caller uses it.
    let run = s_caller.call_named("agent_start", start_json("s", "owned")).await.unwrap()["run_id"].as_str().unwrap().to_owned();
    stop_and_wait_saved(&d, "s", &run, "owned").await;

    // The operator moves it: now it is t's, and s's caller is refused.
    let (ok, out) = d.cli(&["home", "move", "owned", "--space", "t"]);
    assert!(ok && out.contains("now belongs to Space \"t\""), "{out}");
    let (ok, out) = d.cli(&["home", "list"]);
    assert!(ok && out.lines().any(|l| l.starts_with("owned") && l.split_whitespace().nth(1) == Some("t")), "{out}");
    let (code, message) = refused(s_caller.call_named("agent_start", start_json("s", "owned")).await);
    assert_eq!(code, ErrorCode::Forbidden, "{message}");
    let run = t_caller.call_named("agent_start", start_json("t", "owned")).await.unwrap()["run_id"].as_str().unwrap().to_owned();
    stop_and_wait_saved(&d, "t", &run, "owned").await;
    let latest = d.client.home_snapshots(&HomeRequest { name: "owned".into() }).await.unwrap().pop().unwrap();
    assert_eq!(latest.meta["space"], "t", "{:?}", latest.meta);
    // A move to a Space this host does not have is refused.
    let (ok, out) = d.cli(&["home", "move", "owned", "--space", "nowhere"]);
    assert!(!ok && out.contains("nowhere"), "{out}");
}

/// Issue 28: a save never uploads a file of the home holding one of the run's secret values (here
/// an `env` value the agent wrote into its config dir): the save fails with a `notice` naming the
/// file and the variable (never the value), and the volume holds no snapshot of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_save_holding_the_runs_secret_value_fails_naming_the_file() {
    let (d, _addr, _bin) = fake_claude_daemon().await;
    d.space("s").await;
    let mut req = start_json("s", "leaky");
    req["options"]["env"] = serde_json::json!({"LEAK": "leaked-secret-value-42"});
    let run = d.client.call_named("agent_start", req).await.unwrap()["run_id"].as_str().unwrap().to_owned();
    let leak = d.state_dir().join("runs").join(&run).join("home/.claude/leak.txt");
    crate::support::wait_until("the fake to write leak.txt", Duration::from_secs(30), || leak.is_file()).await;
    d.client.agent_stop(&AgentRunRequest { space: "s".into(), run_id: run.clone() }).await.unwrap();
    let notice = d
        .wait_for_event("s", &run, Duration::from_secs(30), |e| {
            e.kind == EventKind::Notice && e.summary.as_deref().is_some_and(|s| s.starts_with("home not saved"))
        })
        .await;
    let text = notice.summary.unwrap_or_default();
    assert!(text.contains("leak.txt") && text.contains("LEAK"), "{text}");
    let all = describe(&d.events("s", &run).await);
    assert!(!all.contains("leaked-secret-value-42"), "{all}");
    let volume = d.state_dir().join("volume/homes/leaky/snapshots");
    assert!(std::fs::read_dir(&volume).map(|r| r.count()).unwrap_or(0) == 0, "a snapshot was stored");
}

/// One tar entry (old header, any name, nothing normalised): the kind of archive `tar` itself
/// would never write.
fn raw_tar_entry(out: &mut Vec<u8>, name: &str, kind: u8, link: &str, data: &[u8]) {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    let octal = |h: &mut [u8; 512], at: usize, len: usize, v: u64| {
        let s = format!("{v:0w$o}\0", w = len - 1);
        h[at..at + len].copy_from_slice(s.as_bytes());
    };
    octal(&mut h, 100, 8, 0o644);
    octal(&mut h, 108, 8, 0);
    octal(&mut h, 116, 8, 0);
    octal(&mut h, 124, 12, data.len() as u64);
    octal(&mut h, 136, 12, 1_700_000_000);
    h[156] = kind;
    h[157..157 + link.len()].copy_from_slice(link.as_bytes());
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
    out.extend(std::iter::repeat_n(0u8, (512 - data.len() % 512) % 512));
}

/// `bytes` through a command's stdin, its stdout back.
fn pipe(cmd: &str, args: &[&str], bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut child = std::process::Command::new(cmd)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{cmd}");
    out.stdout
}

fn zstd(tar: &mut Vec<u8>) -> Vec<u8> {
    tar.extend(std::iter::repeat_n(0u8, 1024));
    pipe("zstd", &["-q", "-c"], tar)
}

fn sha256(bytes: &[u8]) -> String {
    String::from_utf8(pipe("sha256sum", &[], bytes)).unwrap().split_whitespace().next().unwrap().to_owned()
}

const V41_TARGET: &str = "loop/loop/loop/loop/../../../../tmp/v41-out";

/// Case V41 as a snapshot planted straight into the daemon's local volume (as a hostile store
/// would hold it), owned by Space `s`: `notes/todo.txt`, `loop -> .`, `notes -> V41_TARGET`.
fn plant_v41(volume: &std::path::Path, home: &str) {
    let data = b"todo";
    let mut layer = Vec::new();
    raw_tar_entry(&mut layer, "notes/todo.txt", b'0', "", data);
    let layer = zstd(&mut layer);
    let sha = sha256(&layer);
    let dir = volume.join("homes").join(home);
    std::fs::create_dir_all(dir.join("layers")).unwrap();
    std::fs::create_dir_all(dir.join("snapshots")).unwrap();
    std::fs::write(dir.join(format!("layers/{sha}.tar.zst")), &layer).unwrap();
    let m = serde_json::json!({
        "format": 1, "id": format!("{:020}", 1), "home": home, "created_ms": 1, "host": "evil", "nonce": "n",
        "meta": {"agent": "claude-code", "space": "s"}, "skipped": [], "root": {"mode": 0o700, "mtime_ns": 0},
        "layers": [sha],
        "entries": [
            {"path": "notes/todo.txt", "kind": "file", "mode": 0o644, "size": data.len(), "mtime_ns": 0, "sha256": sha256(data), "layer": sha},
            {"path": "loop", "kind": "symlink", "mode": 0o777, "mtime_ns": 0, "target": "."},
            {"path": "notes", "kind": "symlink", "mode": 0o777, "mtime_ns": 0, "target": V41_TARGET},
        ],
    });
    std::fs::write(dir.join(format!("snapshots/{:020}.json", 1)), serde_json::to_vec(&m).unwrap()).unwrap();
}

/// What `/tmp/v41-out` holds (made if missing, so a broken restore would write into it).
fn v41_out() -> Vec<(String, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let out = std::path::Path::new("/tmp/v41-out");
    let _ = std::fs::create_dir(out);
    let mut v: Vec<(String, u32)> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), e.metadata().unwrap().permissions().mode())
        })
        .collect();
    v.push((".".into(), std::fs::metadata(out).unwrap().permissions().mode()));
    v.sort();
    v
}

/// Case V41 end to end: `agent_start --home` of a planted V41 snapshot is refused naming the
/// entry, with no run and no home made; `home export` of it and `home import` of V41
/// archives (the symlink kind and the hard-link kind, entries in the case's order) are refused
/// naming the entry; nothing appears or changes in `/tmp/v41-out`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_v41_agent_start_home_export_and_import_refuse_and_create_nothing_outside() {
    let (d, _addr, _bin) = fake_claude_daemon().await;
    d.space("s").await;
    let before = v41_out();
    plant_v41(&d.state_dir().join("volume"), "v41");

    // Refused at once (the snapshot is checked whole before anything is made): no run.
    let (code, message) = refused(d.client.call_named("agent_start", start_json("s", "v41")).await);
    assert_eq!(code, ErrorCode::InvalidArgument, "{message}");
    assert!(message.contains("\"notes\"") && message.contains("outside the home"), "{message}");
    assert!(d.client.space("s").agent_list().await.unwrap().is_empty(), "a run was made");
    assert_eq!(v41_out(), before);

    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("v41.tar.zst");
    let (ok, out) = d.cli(&["home", "export", "v41", file.to_str().unwrap()]);
    assert!(!ok && out.contains("\"notes\""), "{out}");
    assert!(std::fs::read_dir(work.path()).unwrap().next().is_none(), "export left a file");

    let mut symlinks = Vec::new();
    raw_tar_entry(&mut symlinks, "notes/todo.txt", b'0', "", b"todo");
    raw_tar_entry(&mut symlinks, "loop", b'2', ".", b"");
    raw_tar_entry(&mut symlinks, "notes", b'2', V41_TARGET, b"");
    let mut links_first = Vec::new();
    raw_tar_entry(&mut links_first, "loop", b'2', ".", b"");
    raw_tar_entry(&mut links_first, "notes", b'2', V41_TARGET, b"");
    raw_tar_entry(&mut links_first, "notes/todo.txt", b'0', "", b"todo");
    let mut hard = Vec::new();
    raw_tar_entry(&mut hard, "todo.txt", b'0', "", b"todo");
    raw_tar_entry(&mut hard, "loop", b'2', ".", b"");
    raw_tar_entry(&mut hard, "notes", b'1', "loop/loop/todo.txt", b"");
    for (what, mut tar, entry) in
        [("V41", symlinks, "\"notes\""), ("links first", links_first, "\"notes"), ("hard link", hard, "\"notes\"")]
    {
        let archive = work.path().join("in.tar.zst");
        std::fs::write(&archive, zstd(&mut tar)).unwrap();
        let (ok, out) = d.cli(&["home", "import", "v41-import", archive.to_str().unwrap()]);
        assert!(!ok && out.contains(entry), "{what}: {out}");
        assert_eq!(v41_out(), before, "{what}");
    }
    // The hostile home stays listable (without a snapshot to show) and can be deleted.
    let homes = d.client.home_list(&spaces_sdk::Empty {}).await.unwrap();
    assert!(!homes.iter().any(|h| h.name == "v41-import"), "{homes:?}");
    assert!(homes.iter().any(|h| h.name == "v41" && h.latest.is_none()), "{homes:?}");
    let (ok, out) = d.cli(&["home", "delete", "v41"]);
    assert!(ok, "{out}");
    assert!(!d.client.home_list(&spaces_sdk::Empty {}).await.unwrap().iter().any(|h| h.name == "v41"));
    assert_eq!(v41_out(), before);
}

// ----- Case V46: one broken home never hides the others -----

impl Store {
    /// The object `key` of the daemon's volume (`homes/<name>/...`), read behind its back.
    fn get(&self, key: &str) -> Vec<u8> {
        match self {
            Store::Local(dir) => std::fs::read(dir.path().join("volume").join(key)).unwrap(),
            Store::S3(server) => server.get_object(&format!("homes/{key}")),
        }
    }

    /// Replaces the object `key` of the daemon's volume behind its back.
    fn put(&self, key: &str, bytes: &[u8]) {
        match self {
            Store::Local(dir) => std::fs::write(dir.path().join("volume").join(key), bytes).unwrap(),
            Store::S3(server) => server.put_object(&format!("homes/{key}"), bytes),
        }
    }
}

/// A daemon on `store` whose `claude-code` is a fake that writes a fresh `stamp` into its config
/// dir (so each run's save is a new snapshot), then sleeps. The fake's directory lives as long
/// as the daemon is used.
async fn stamping_daemon(store: &Store) -> (TestDaemon, tempfile::TempDir) {
    let bin_dir = tempfile::tempdir().unwrap();
    let fake = bin_dir.path().join("fake-claude");
    std::fs::write(&fake, "#!/bin/sh\nmkdir -p \"$CLAUDE_CONFIG_DIR\" && date +%s%N > \"$CLAUDE_CONFIG_DIR/stamp\"\nexec sleep 60\n")
        .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (mut env, args) = store.serve_args();
    env.push(("SPACES_HARNESS_BIN_CLAUDE_CODE".to_owned(), fake.display().to_string()));
    let d = TestDaemon::start_with(env, args).await;
    d.space("s").await;
    (d, bin_dir)
}

/// One run of persistent agent `home` in Space `s`, stopped once its fake wrote the stamp; waits
/// until the home is saved with `snapshots` snapshots and its lease is free.
async fn one_saved_run(d: &TestDaemon, home: &str, snapshots: u64) {
    let run = d.client.call_named("agent_start", start_json("s", home)).await.unwrap()["run_id"].as_str().unwrap().to_owned();
    let stamp = d.state_dir().join("runs").join(&run).join("home/.claude/stamp");
    crate::support::wait_until("the fake to write its stamp", Duration::from_secs(30), || stamp.is_file()).await;
    d.client.agent_stop(&AgentRunRequest { space: "s".into(), run_id: run }).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let homes = d.client.home_list(&spaces_sdk::Empty {}).await.unwrap();
        if homes.iter().any(|h| h.name == home && h.lease.is_none() && h.snapshots == snapshots) {
            return;
        }
        assert!(Instant::now() < deadline, "home {home} not saved ({snapshots} snapshots) and freed: {homes:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Case V46: three homes, the newest manifest of `b` truncated. `home list` (client, HTTP and
/// CLI) lists all three and marks `b` broken, naming the manifest; `a` and `c` restore (into a
/// directory, and for a new run) and save as before; `home snapshots b` names the broken one;
/// `b` can still be deleted.
async fn v46(store: Store) {
    let (d, _bin) = stamping_daemon(&store).await;
    for name in ["a", "b", "c"] {
        one_saved_run(&d, name, 1).await;
    }
    let id = d.client.home_snapshots(&HomeRequest { name: "b".into() }).await.unwrap().pop().unwrap().id;
    let key = format!("homes/b/snapshots/{id}.json");
    let whole = store.get(&key);
    store.put(&key, &whole[..whole.len() / 2]);

    let homes = d.client.home_list(&spaces_sdk::Empty {}).await.unwrap();
    assert_eq!(homes.iter().map(|h| h.name.as_str()).collect::<Vec<_>>(), ["a", "b", "c"], "{homes:#?}");
    let why = homes[1].broken.clone().expect("b is marked broken");
    assert!(why.contains(&key) && why.contains("corrupt"), "{why}");
    assert!(homes[1].latest.is_none(), "{homes:#?}");
    for h in [&homes[0], &homes[2]] {
        assert!(h.broken.is_none() && h.latest.as_ref().is_some_and(|l| l.meta["space"] == "s"), "{h:#?}");
    }
    let (status, body) = d.raw("GET", "/v1/homes", None);
    assert_eq!(status, 200, "{body}");
    let listed: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(listed.as_array().map(Vec::len), Some(3), "{body}");
    assert_eq!(listed[1]["broken"], serde_json::json!(why), "{body}");
    let (ok, out) = d.cli(&["home", "list"]);
    assert!(ok, "{out}");
    for name in ["a", "b", "c"] {
        assert!(out.lines().any(|l| l.starts_with(&format!("{name} "))), "{name} missing: {out}");
    }
    assert!(out.contains(&format!("BROKEN b: {why}")), "{out}");

    // The other two restore and save as before.
    let work = tempfile::tempdir().unwrap();
    for name in ["a", "c"] {
        let to = work.path().join(name);
        let (ok, out) = d.cli(&["home", "restore", name, "--to", to.to_str().unwrap()]);
        assert!(ok && to.join("stamp").is_file(), "{out}");
        one_saved_run(&d, name, 2).await;
        let snaps = d.client.home_snapshots(&HomeRequest { name: name.into() }).await.unwrap();
        assert!(snaps.iter().all(|s| s.broken.is_none() && s.files > 0), "{snaps:#?}");
    }

    // b: its snapshot listing names the broken manifest; a run of it is refused naming it; it
    // can be deleted.
    let snaps = d.client.home_snapshots(&HomeRequest { name: "b".into() }).await.unwrap();
    assert_eq!(snaps.len(), 1, "{snaps:#?}");
    assert!(snaps[0].id == id && snaps[0].broken.as_deref().is_some_and(|w| w.contains(&key)), "{snaps:#?}");
    let (ok, out) = d.cli(&["home", "snapshots", "b"]);
    assert!(ok && out.lines().any(|l| l.starts_with(&id) && l.contains("BROKEN: ") && l.contains(&key)), "{out}");
    let (_, message) = refused(d.client.call_named("agent_start", start_json("s", "b")).await);
    assert!(message.contains(&key), "{message}");
    let (ok, out) = d.cli(&["home", "delete", "b"]);
    assert!(ok, "{out}");
    let names: Vec<String> = d.client.home_list(&spaces_sdk::Empty {}).await.unwrap().into_iter().map(|h| h.name).collect();
    assert_eq!(names, ["a", "c"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_v46_one_broken_home_is_listed_and_named_and_the_others_work_on_a_local_volume() {
    v46(Store::Local(tempfile::tempdir().unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_v46_one_broken_home_is_listed_and_named_and_the_others_work_over_s3() {
    v46(Store::S3(s3::S3Server::start().await)).await;
}

/// V46's kind with another broken object: the lease record of a home held by a live run is
/// garbled. `home list` still answers with every home, that one's lease `null` and `broken`
/// naming the record; the other home is listed whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbled_lease_record_is_named_and_hides_no_other_home() {
    let store = Store::Local(tempfile::tempdir().unwrap());
    let (d, _bin) = stamping_daemon(&store).await;
    one_saved_run(&d, "fine", 1).await;
    let run = d.client.call_named("agent_start", start_json("s", "held")).await.unwrap()["run_id"].as_str().unwrap().to_owned();
    let held = d.client.home_list(&spaces_sdk::Empty {}).await.unwrap();
    assert!(held.iter().any(|h| h.name == "held" && h.lease.is_some()), "{held:#?}");
    let Store::Local(dir) = &store else { unreachable!() };
    let records = dir.path().join("volume/homes/held/lease");
    let newest = std::fs::read_dir(&records).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).max().unwrap();
    let key = format!("homes/held/lease/{newest}");
    store.put(&key, b"{\"home\": \"held\", truncated");

    let homes = d.client.home_list(&spaces_sdk::Empty {}).await.unwrap();
    assert_eq!(homes.len(), 2, "{homes:#?}");
    let held = homes.iter().find(|h| h.name == "held").unwrap();
    assert!(held.lease.is_none() && held.run_id.as_deref() == Some(run.as_str()), "{held:#?}");
    assert!(held.broken.as_deref().is_some_and(|w| w.contains(&key) && w.contains("corrupt")), "{held:#?}");
    let fine = homes.iter().find(|h| h.name == "fine").unwrap();
    assert!(fine.broken.is_none() && fine.latest.is_some(), "{fine:#?}");
    let (ok, out) = d.cli(&["home", "list"]);
    assert!(ok && out.contains("BROKEN held:") && out.lines().any(|l| l.starts_with("fine ")), "{out}");
}

/// The summary of every `notice` of `run` that contains `part`.
async fn notices(d: &TestDaemon, run: &str, part: &str) -> Vec<String> {
    d.events("s", run)
        .await
        .into_iter()
        .filter(|e| e.kind == EventKind::Notice)
        .filter_map(|e| e.summary)
        .filter(|s| s.contains(part))
        .collect()
}

/// A persistent Claude Code run of agent `name` on `d` whose first turn ended and was saved.
async fn saved_run(d: &TestDaemon, model: &ScriptedServer, name: &str) -> String {
    let req = AgentStartRequest {
        space: "s".into(),
        agent: CLAUDE.id.into(),
        prompt: "remember the word PELICAN".into(),
        show: None,
        options: Some(SpaceAgentOptions { base_url: Some(model.base_url()), home: Some(name.into()), ..Default::default() }),
        request_id: None,
        traceparent: None,
    };
    let run = d.client.agent_start(&req).await.unwrap().run_id;
    let ended = d.wait_turn_end("s", &run, 1, TURN).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{ended:?}");
    d.wait_for_event("s", &run, TURN, |e| e.kind == EventKind::Notice && e.summary.as_deref().is_some_and(|s| s.starts_with("home saved")))
        .await;
    run
}

/// Issue 30: two lease renewals failing in a row (the S3 server stopped, every request left
/// unanswered, for less than the TTL) are retried until one works: the run is told renewals are
/// failing and then that its lease was renewed again, never that it lapsed or was lost, and its
/// next save is stored. The TTL is 12 s here (`SPACES_LEASE_TTL_MS`): renewals every 4 s, a try
/// given 1 s, retries 0.2, 0.4, 0.8, 1 s apart. The outage ends as soon as the daemon reports the
/// failures, so the renewals, not the test, decide whether the lease lapses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_outlives_two_failed_renewals_in_a_row_and_the_next_save_is_stored() {
    require_cli(CLAUDE.id, CLAUDE.binary);
    let model =
        ScriptedServer::start(CLAUDE.wire, Script::new([Reply::Text("noted".into()), Reply::Text("PELICAN".into())])).await.unwrap();
    let s3 = s3::S3Server::start().await;
    let mut env = s3.env();
    env.push(("SPACES_LEASE_TTL_MS".into(), "12000".into()));
    let d = TestDaemon::start_with(env, vec!["--volume".into(), s3.url("homes")]).await;
    d.space("s").await;
    let run = saved_run(&d, &model, "keeper").await;

    s3.pause();
    let failing = d
        .wait_for_event("s", &run, Duration::from_secs(12), |e| {
            e.kind == EventKind::Notice && e.summary.as_deref().is_some_and(|s| s.starts_with("lease of \"keeper\" not renewed"))
        })
        .await;
    s3.resume();
    let summary = failing.summary.clone().unwrap_or_default();
    assert!(summary.contains("2 tries in a row failed"), "{summary}");
    assert!(failing.text.as_deref().is_some_and(|t| t.contains("no answer from the volume")), "{failing:?}");
    d.wait_for_event("s", &run, Duration::from_secs(12), |e| {
        e.kind == EventKind::Notice && e.summary.as_deref().is_some_and(|s| s.starts_with("lease of \"keeper\" renewed again"))
    })
    .await;
    let again = notices(&d, &run, "renewed again").await;
    assert!(again.iter().all(|s| s.ends_with("it never lapsed")), "{again:?}");
    assert_eq!(notices(&d, &run, "lapsed:").await, Vec::<String>::new());
    assert_eq!(notices(&d, &run, "lost:").await, Vec::<String>::new());
    let holder = d.client.home_list(&spaces_sdk::Empty {}).await.unwrap().into_iter().find(|h| h.name == "keeper").and_then(|h| h.lease);
    assert!(holder.as_ref().is_some_and(|l| l.holder.ends_with(&format!("/{run}"))), "{holder:?}");

    // The next turn's save is stored, under the same lease.
    d.client.space("s").agent_message(&run, "which word?", None).await.unwrap();
    let ended = d.wait_turn_end("s", &run, 2, TURN).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{ended:?}");
    d.wait_for_event("s", &run, TURN, |e| {
        e.kind == EventKind::Notice && e.turn == 2 && e.summary.as_deref().is_some_and(|s| s.starts_with("home saved"))
    })
    .await;
    assert_eq!(notices(&d, &run, "home not saved").await, Vec::<String>::new());
    assert_eq!(d.client.home_snapshots(&HomeRequest { name: "keeper".into() }).await.unwrap().len(), 2);
    d.client.agent_stop(&AgentRunRequest { space: "s".into(), run_id: run }).await.unwrap();
}

/// `len` bytes that do not compress (xorshift), so a save of them takes a while.
fn incompressible(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Issue 30: a `kill -9` of the daemon in the middle of a stopped run's last home save (the
/// save written down in `pending-saves/`, the S3 server holding its requests). The next daemon
/// retries the save at start: the home, the big file included, is stored, a `notice` says the
/// save was cut off and retried, the lease the dead daemon held (this host's own) is released
/// then, not left to its 60 s TTL (another run of the agent starts at once), and the save is
/// crossed off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_save_cut_off_by_kill_9_is_retried_at_restart_and_its_lease_is_not_left_to_expire() {
    require_cli(CLAUDE.id, CLAUDE.binary);
    let model = ScriptedServer::start(CLAUDE.wire, Script::new([Reply::Text("noted".into()), Reply::Text("again".into())])).await.unwrap();
    let s3 = s3::S3Server::start().await;
    let mut d = TestDaemon::start_with(s3.env(), vec!["--volume".into(), s3.url("homes")]).await;
    d.space("s").await;
    let run = saved_run(&d, &model, "saver").await;
    let big = incompressible(96 << 20);
    std::fs::write(d.state_dir().join("runs").join(&run).join("home/.claude/big.bin"), &big).unwrap();

    // The stop's last save starts; the store stops answering; the daemon dies in the save.
    let stop = d.client.agent_stop(&AgentRunRequest { space: "s".into(), run_id: run.clone() }).await.unwrap();
    assert!(stop.ok, "{stop:?}");
    let pending = d.state_dir().join("pending-saves");
    let markers = || std::fs::read_dir(&pending).map(|r| r.count()).unwrap_or(0);
    crate::support::wait_until("the last save written down", Duration::from_secs(10), || markers() > 0).await;
    s3.pause();
    d.kill();
    let killed = Instant::now();
    assert_eq!(markers(), 1, "the save was cut off, its marker left");
    s3.resume();

    d.start_again().await;
    let retried = d
        .wait_for_event("s", &run, TURN, |e| {
            e.kind == EventKind::Notice
                && e.summary.as_deref().is_some_and(|s| s.starts_with("home save of turn 1 retried after spacesd restarted"))
        })
        .await;
    let text = retried.text.clone().unwrap_or_default();
    assert!(
        text.contains("was cut off when spacesd stopped; it was retried when spacesd started again: home saved: snapshot"),
        "{retried:?}"
    );
    let latest = d.client.home_snapshots(&HomeRequest { name: "saver".into() }).await.unwrap().pop().unwrap();
    assert!(latest.bytes >= big.len() as u64, "the big file is in the newest snapshot: {latest:?}");

    // The lease is released after the retried save, long before its TTL would end it.
    let deadline = Instant::now() + crate::support::scaled(Duration::from_secs(30));
    while d.client.home_list(&spaces_sdk::Empty {}).await.unwrap().iter().any(|h| h.name == "saver" && h.lease.is_some()) {
        assert!(Instant::now() < deadline, "the lease of the retried save was not released");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Crossed off once the lease is released.
    crate::support::wait_until("the retried save crossed off", Duration::from_secs(10), || markers() == 0).await;
    let req = AgentStartRequest {
        space: "s".into(),
        agent: CLAUDE.id.into(),
        prompt: "which word?".into(),
        show: None,
        options: Some(SpaceAgentOptions { base_url: Some(model.base_url()), home: Some("saver".into()), ..Default::default() }),
        request_id: None,
        traceparent: None,
    };
    let next = d.client.agent_start(&req).await.unwrap().run_id;
    assert!(killed.elapsed() < Duration::from_secs(60), "the lease TTL passed: this start proves nothing");
    d.wait_turn_end("s", &next, 1, TURN).await;
    d.client.agent_stop(&AgentRunRequest { space: "s".into(), run_id: next }).await.unwrap();
}

/// Human output of the `home` commands (issue 32): `home list` and `home snapshots` say ages
/// and times left, never raw epoch milliseconds; `home send` says in words where the message
/// went, `--json` prints the report, and `--follow` follows the turn it started to its end.
/// (Two workers: the CLI runs blocking on one while the scripted model answers on the other.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn home_commands_speak_in_ages_and_words_and_send_follows_its_turn() {
    let h = CLAUDE;
    require_cli(h.tools, h.binary);
    let model = ScriptedServer::start(h.wire, Script::new([]).with_fallback(Reply::Text("noted".into()))).await.unwrap();
    let store = Store::Local(tempfile::tempdir().unwrap());
    let d = host(&store).await;
    let req = AgentStartRequest {
        space: "s".into(),
        agent: h.id.into(),
        prompt: "remember this".into(),
        show: None,
        options: Some(SpaceAgentOptions { base_url: Some(model.base_url()), home: Some("words".into()), ..Default::default() }),
        request_id: None,
        traceparent: None,
    };
    let run = d.client.agent_start(&req).await.unwrap().run_id;
    d.wait_turn_end("s", &run, 1, TURN).await;
    d.wait_for_event("s", &run, TURN, |e| e.summary.as_deref().is_some_and(|s| s.starts_with("home saved"))).await;
    for args in [&["home", "list"][..], &["home", "snapshots", "words"]] {
        let (ok, out) = d.cli(args);
        assert!(ok, "{args:?}: {out}");
        assert!(!has_epoch_ms(&out), "{args:?} prints raw epoch milliseconds:\n{out}");
    }
    let (ok, out) = d.cli(&["home", "list"]);
    assert!(ok && out.contains("more)"), "the lease says how long it has left:\n{out}");

    let (ok, out) = d.cli(&["home", "send", "words", "and this", "--follow"]);
    assert!(ok, "{out}");
    assert!(out.contains(&format!("sent to \"words\"'s live run {run}")), "{out}");
    assert!(out.contains("noted") && out.contains("-- status:"), "the follow printed the turn to its end:\n{out}");
    assert!(!out.trim_start().starts_with('{'), "human output, not JSON:\n{out}");
    let st = d.client.space("s").agent_status(&run, Some(0)).await.unwrap();
    assert_eq!(st.turns, 2, "{st:#?}");
    d.wait_status("s", &run, TURN, |s| s.accepts_message).await;
    let (ok, out) = d.cli(&["agent", "status", &run]);
    assert!(ok && out.contains("a message sent now: starts the next turn"), "{out}");
    let (ok, out) = d.cli(&["home", "send", "words", "once more", "--json"]);
    assert!(ok, "{out}");
    let report: serde_json::Value = serde_json::from_str(&out).expect(&out);
    assert_eq!(report["run_id"], run.as_str(), "{out}");
}

/// True when `text` holds a 13-digit number (an epoch time in ms, 2001-2286).
fn has_epoch_ms(text: &str) -> bool {
    text.split(|c: char| !c.is_ascii_digit()).any(|n| n.len() == 13)
}
