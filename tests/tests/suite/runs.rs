//! The main job on the real CLIs: each scenario runs once per harness against a scripted model.

use std::time::{Duration, Instant};

use spaces_sdk::{AgentStartRequest, EventKind, SpaceAgentOptions, Status, StopReason, ToolStatus};
use spaces_testkit::{Reply, Script, ScriptedServer};

use super::harness::{CLAUDE, CODEX, H};
use crate::support::{describe, require_cli, run_processes, scaled, settled, RootSampler, TestDaemon};

const TURN: Duration = Duration::from_secs(90);

async fn setup(h: H, script: Script) -> (TestDaemon, ScriptedServer, std::path::PathBuf) {
    require_cli(h.tools, h.binary);
    let server = ScriptedServer::start(h.wire, script).await.unwrap();
    let d = TestDaemon::start().await;
    let root = d.space("s").await;
    (d, server, root)
}

async fn start(d: &TestDaemon, h: H, server: &ScriptedServer, prompt: &str) -> String {
    let req = AgentStartRequest {
        space: "s".into(),
        agent: h.id.into(),
        prompt: prompt.into(),
        show: None,
        options: Some(SpaceAgentOptions { base_url: Some(server.base_url()), ..Default::default() }),
        request_id: None,
        traceparent: None,
    };
    d.client.agent_start(&req).await.unwrap().run_id
}

fn body_mentions(req: &spaces_testkit::RecordedRequest, needle: &str) -> bool {
    req.json.as_ref().map(|j| j.to_string().contains(needle)).unwrap_or(false)
}

/// A tool call creates a file, the agent answers; a follow-up runs in the same session.
pub(super) async fn tool_call_answer_and_follow_up(h: H) {
    let script = Script::new([]);
    let (d, server, root) = setup(h, script).await;
    server.push(h.create_file(&root, "hello.txt", "hello from the agent\n"));
    server.push(Reply::Text("I created hello.txt.".into()));
    server.push(Reply::Text("The file is still there.".into()));
    let t0 = Instant::now();
    let run = start(&d, h, &server, "Create hello.txt please").await;
    assert!(t0.elapsed() < Duration::from_secs(5), "agent_start returns at once");

    d.wait_turn_end("s", &run, 1, TURN).await;
    let st = d.wait_status("s", &run, TURN, settled).await;
    let events = d.events("s", &run).await;
    assert_eq!(std::fs::read_to_string(root.join("hello.txt")).unwrap().trim_end(), "hello from the agent", "{}", describe(&events));
    let kinds: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
    for k in [EventKind::TurnStarted, EventKind::ToolCall, EventKind::Message, EventKind::TurnEnded] {
        assert!(kinds.contains(&k), "missing {k:?}:\n{}", describe(&events));
    }
    assert!(
        events.iter().any(|e| e.kind == EventKind::ToolUpdate && e.tool_status == Some(ToolStatus::Completed)),
        "a completed tool_update:\n{}",
        describe(&events)
    );
    let ended: Vec<_> = events.iter().filter(|e| e.kind == EventKind::TurnEnded).collect();
    assert_eq!(ended.len(), 1, "exactly one turn_ended:\n{}", describe(&events));
    assert_eq!(ended[0].stop_reason, Some(StopReason::EndTurn));
    assert_eq!(st.status, Status::Idle, "{st:#?}");
    assert!(st.accepts_message);
    assert_eq!(st.result_text.as_deref(), Some("I created hello.txt."));
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>(), "seq starts at 1 without gaps");

    let r = d.client.space("s").agent_message(&run, "Is the file still there?", None).await.unwrap();
    assert!(r.ok, "{r:?}");
    d.wait_turn_end("s", &run, 2, TURN).await;
    let st = d.wait_status("s", &run, TURN, settled).await;
    assert_eq!(st.result_text.as_deref(), Some("The file is still there."), "{st:#?}");
    let calls = server.model_calls();
    let last = calls.last().unwrap();
    assert!(body_mentions(last, "Create hello.txt please"), "the follow-up carries the first turn's history");
    assert!(body_mentions(last, "I created hello.txt."), "the follow-up carries the first answer");
    assert!(st.session_id.is_some(), "the session id is recorded");
}

/// Case P4: a follow-up sent 100 ms after the first message, before the first turn ends (the
/// first answer streams slowly), is queued, and a `notice` says so; it runs after the first turn;
/// both turns end; and at no time do two agent processes of the run exist (sampled from /proc).
pub(super) async fn case_p4_mid_turn_message_is_queued(h: H) {
    let script = Script::new([
        Reply::SlowText { text: "first answer, slowly streamed".into(), chunks: 20, delay_ms: 300 },
        Reply::Text("second answer".into()),
    ]);
    let (d, server, _root) = setup(h, script).await;
    let run = start(&d, h, &server, "first").await;
    let sampler = RootSampler::start(&run);
    // The case's own timing (a follow-up 100 ms after the first message), not a wait for
    // something to happen: the first turn is still starting or streaming either way.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let r = d.client.space("s").agent_message(&run, "second", None).await.unwrap();
    assert!(r.ok && r.reason.contains("queued"), "{r:?}");
    d.wait_turn_end("s", &run, 2, TURN).await;
    let st = d.wait_status("s", &run, TURN, settled).await;
    let (samples, most) = sampler.finish();
    let events = d.events("s", &run).await;
    assert_eq!(most.len(), 1, "agent processes seen at once over {samples} samples: {most:?}");
    let queued = events
        .iter()
        .position(|e| e.kind == EventKind::Notice && e.summary.as_deref().unwrap_or("").contains("message queued"))
        .unwrap_or_else(|| panic!("no notice says the message was queued:\n{}", describe(&events)));
    let t1_end = events.iter().position(|e| e.kind == EventKind::TurnEnded && e.turn == 1).unwrap();
    let t2_start = events.iter().position(|e| e.kind == EventKind::TurnStarted && e.turn == 2).unwrap();
    assert!(queued < t1_end && t1_end < t2_start, "queued during turn 1, turn 2 after it:\n{}", describe(&events));
    let ends: Vec<_> = events.iter().filter(|e| e.kind == EventKind::TurnEnded).map(|e| (e.turn, e.stop_reason)).collect();
    assert_eq!(ends, vec![(1, Some(StopReason::EndTurn)), (2, Some(StopReason::EndTurn))], "{}", describe(&events));
    assert_eq!((st.status, st.result_text.as_deref()), (Status::Idle, Some("second answer")), "{st:#?}");
}

/// The pinned CLI is the one that ran: capabilities report the pinned version as installed, and
/// the model calls the scripted endpoint received carry it in their User-Agent.
async fn the_pinned_cli_is_the_one_that_ran(h: H) {
    let (d, server, _root) = setup(h, Script::new([Reply::Text("hi".into())])).await;
    let caps = d.client.agent_capabilities(&spaces_sdk::Empty {}).await.unwrap();
    let mine = caps.harnesses.iter().find(|c| c.id == h.id).unwrap();
    assert_eq!(mine.installed_version.as_deref(), Some(h.pinned), "{mine:?}");
    let run = start(&d, h, &server, "hello").await;
    d.wait_turn_end("s", &run, 1, TURN).await;
    let calls = server.model_calls();
    assert!(!calls.is_empty());
    for call in calls {
        let agent = call.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("user-agent")).map(|(_, v)| v.clone()).unwrap_or_default();
        assert!(agent.contains(h.pinned), "User-Agent {agent:?} names the pinned {}", h.pinned);
    }
}

/// Interrupt mid-turn ends that turn `interrupted`; the next follow-up works; an idle interrupt
/// is a no-op that says so.
pub(super) async fn interrupt_then_follow_up(h: H) {
    let script = Script::new([
        Reply::SlowText { text: "a very long answer that will be cut".into(), chunks: 60, delay_ms: 500 },
        Reply::Text("after the interrupt".into()),
    ]);
    let (d, server, _root) = setup(h, script).await;
    let run = start(&d, h, &server, "talk slowly").await;
    // Interrupt once the answer is streaming: the scripted server has sent the reply's opening
    // frames and a few of its slow text chunks (30 s of them in all).
    crate::support::wait_until("the slow answer to start streaming", TURN, || server.frames_sent() >= 6).await;
    let t0 = Instant::now();
    let r = d.client.space("s").agent_interrupt(&run).await.unwrap();
    assert!(r.ok, "{r:?}");
    let ended = d.wait_turn_end("s", &run, 1, TURN).await;
    assert_eq!(ended.stop_reason, Some(StopReason::Interrupted), "{ended:?}");
    assert!(t0.elapsed() < Duration::from_secs(15), "interrupt took {:?}", t0.elapsed());
    let st = d.wait_status("s", &run, TURN, |s| settled(s) && s.phase != spaces_sdk::Phase::Working).await;
    assert!(st.accepts_message, "{st:#?}");
    assert_eq!(st.status, Status::Idle, "an interrupted turn is not a failure: {st:#?}");

    let idle = d.client.space("s").agent_interrupt(&run).await.unwrap();
    assert!(!idle.ok && idle.reason.contains("no turn"), "{idle:?}");

    d.client.space("s").agent_message(&run, "go on", None).await.unwrap();
    let ended = d.wait_turn_end("s", &run, 2, TURN).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{}", describe(&d.events("s", &run).await));
    let st = d.wait_status("s", &run, TURN, settled).await;
    assert_eq!(st.result_text.as_deref(), Some("after the interrupt"));
}

/// `force: true` mid-turn interrupts the running turn and runs the message next, in the same
/// session: turn 1 ends `interrupted`, turn 2 answers the forced text, nothing is queued.
pub(super) async fn force_true_interrupts_the_turn_and_runs_the_message_next(h: H) {
    let script = Script::new([
        Reply::SlowText { text: "a very long answer that will be cut".into(), chunks: 60, delay_ms: 500 },
        Reply::Text("the urgent answer".into()),
    ]);
    let (d, server, _root) = setup(h, script).await;
    let run = start(&d, h, &server, "talk slowly").await;
    crate::support::wait_until("the slow answer to start streaming", TURN, || server.frames_sent() >= 6).await;
    let r = d.client.space("s").agent_message(&run, "urgent: answer this instead", Some(true)).await.unwrap();
    assert!(r.ok && r.reason.contains("interrupted"), "{r:?}");
    let ended = d.wait_turn_end("s", &run, 2, TURN).await;
    let events = d.events("s", &run).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{}", describe(&events));
    let ends: Vec<_> = events.iter().filter(|e| e.kind == EventKind::TurnEnded).map(|e| (e.turn, e.stop_reason)).collect();
    assert_eq!(ends, vec![(1, Some(StopReason::Interrupted)), (2, Some(StopReason::EndTurn))], "{}", describe(&events));
    assert!(
        !events.iter().any(|e| e.kind == EventKind::Notice && e.summary.as_deref().unwrap_or("").contains("queued")),
        "a forced message is neither queued nor dropped:\n{}",
        describe(&events)
    );
    let st = d.wait_status("s", &run, TURN, settled).await;
    assert_eq!((st.status, st.result_text.as_deref()), (Status::Idle, Some("the urgent answer")), "{st:#?}");
    assert!(body_mentions(server.model_calls().last().unwrap(), "urgent: answer this instead"));
}

/// `force: true` on Claude Code (the interrupt is a control request on stdin; the process stays).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_true_interrupts_claude_codes_turn_and_runs_the_message_next() {
    force_true_interrupts_the_turn_and_runs_the_message_next(CLAUDE).await
}

/// `force: true` on Codex: SIGINT ends its process with exit 1, which is the interrupt's effect,
/// not a failure: the forced message runs next instead of being dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_true_interrupts_codexs_turn_and_runs_the_message_next() {
    force_true_interrupts_the_turn_and_runs_the_message_next(CODEX).await
}

/// Case P6: stop while the agent's tool runs a busy loop and a sleeper in the background:
/// SIGTERM to the whole group, grace, SIGKILL; afterwards no process of the run remains.
async fn case_p6_stop_leaves_nothing_alive(h: H) {
    let script = Script::new([h.long_command("sh -c '(while :; do :; done) & (sleep 1000) & wait'")]).with_fallback(Reply::Hang);
    let (d, server, _root) = setup(h, script).await;
    let run = start(&d, h, &server, "run something long").await;
    d.wait_for_event("s", &run, TURN, |e| e.kind == EventKind::ToolCall).await;
    // The shell forks the busy loop first, then `sleep 1000`: once the sleep runs, both exist.
    let deadline = Instant::now() + scaled(Duration::from_secs(20));
    let sleeping = |pid: &i32| std::fs::read(format!("/proc/{pid}/cmdline")).map(|c| c == b"sleep\x001000\x00").unwrap_or(false);
    while !run_processes(&run).iter().any(sleeping) {
        assert!(Instant::now() < deadline, "the tool's `sleep 1000` never appeared: {:?}", run_processes(&run));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let queued = d.client.space("s").agent_message(&run, "queued behind the long tool", None).await.unwrap();
    assert!(queued.ok && queued.reason.contains("queued"), "{queued:?}");
    let r = d.client.space("s").agent_stop(&run).await.unwrap();
    assert!(r.ok, "{r:?}");
    assert_eq!(run_processes(&run), Vec::<i32>::new(), "no process of the run survives");
    let st = d.client.space("s").agent_status(&run, None).await.unwrap();
    assert_eq!(st.status, Status::Stopped);
    assert!(!st.accepts_message);
    let events = d.events("s", &run).await;
    let ends: Vec<_> = events.iter().filter(|e| e.kind == EventKind::TurnEnded).collect();
    assert_eq!(ends.len(), 1, "{}", describe(&events));
    assert_eq!(ends[0].stop_reason, Some(StopReason::Stopped));
    assert!(
        events.iter().any(|e| e.kind == EventKind::Notice && e.summary.as_deref().unwrap_or("").contains("1 queued message(s) dropped")),
        "a queued message is never dropped silently:\n{}",
        describe(&events)
    );
    let again = d.client.space("s").agent_message(&run, "more", None).await.unwrap();
    assert!(!again.ok, "a stopped run takes no message: {again:?}");
}

/// A model endpoint that fails ends the turn `error` within seconds, with a reason.
async fn failing_endpoint_is_an_error(h: H) {
    let script = Script::new([]).with_fallback(Reply::HttpError {
        status: 401,
        body: r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#.into(),
    });
    let (d, server, _root) = setup(h, script).await;
    let t0 = Instant::now();
    let run = start(&d, h, &server, "hello").await;
    let ended = d.wait_turn_end("s", &run, 1, TURN).await;
    let took = t0.elapsed();
    assert_eq!(ended.stop_reason, Some(StopReason::Error), "{ended:?}");
    assert!(took < Duration::from_secs(30), "error took {took:?}");
    let st = d.wait_status("s", &run, TURN, settled).await;
    assert!(st.accepts_message, "{st:#?}");
    assert_eq!(st.status, Status::Failed, "{st:#?}");
    assert!(!st.reason.is_empty(), "{st:#?}");
    assert!(ended.text.as_deref().map(|t| !t.is_empty()).unwrap_or(false), "turn_ended says why: {ended:?}");
}

/// The starting client exits at once; the run finishes; a new client reads everything from
/// cursor 0; after a daemon restart the run is listed and a follow-up resumes the session.
async fn survives_client_exit_and_daemon_restart(h: H) {
    let script = Script::new([Reply::Text("first".into()), Reply::Text("after restart".into())]);
    let (mut d, server, _root) = setup(h, script).await;
    let base = server.base_url();
    let (ok, out) = d.cli(&["agent", "start", h.id, "remember the word kiwi", "--space", "s", "--base-url", &base, "--json"]);
    assert!(ok, "{out}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    let run = v["run_id"].as_str().unwrap().to_owned();
    d.wait_turn_end("s", &run, 1, TURN).await;
    d.wait_status("s", &run, TURN, settled).await;
    let page = d.client.space("s").agent_events(&run, Some(0), None).await.unwrap();
    assert_eq!(page.events.first().map(|e| e.seq), Some(1));
    assert!(page.events.iter().any(|e| e.kind == EventKind::TurnEnded));

    d.restart().await;
    let list = d.client.space("s").agent_list().await.unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].run_id, run);
    assert!(list[0].accepts_message, "{:#?}", list[0]);
    let r = d.client.space("s").agent_message(&run, "what was the word?", None).await.unwrap();
    assert!(r.ok, "{r:?}");
    let ended = d.wait_turn_end("s", &run, 2, TURN).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{}", describe(&d.events("s", &run).await));
    let last = server.model_calls().last().cloned().unwrap();
    assert!(body_mentions(&last, "remember the word kiwi"), "the resumed session carries turn 1");
    let st = d.wait_status("s", &run, TURN, settled).await;
    assert_eq!(st.result_text.as_deref(), Some("after restart"));
}

crate::support::per_harness!(
    tool_call_answer_and_follow_up,
    the_pinned_cli_is_the_one_that_ran,
    case_p4_mid_turn_message_is_queued,
    interrupt_then_follow_up,
    case_p6_stop_leaves_nothing_alive,
    failing_endpoint_is_an_error,
    survives_client_exit_and_daemon_restart
);

/// First use installs the pinned CLI into an empty tools dir: `install` events (turn 0) with
/// progress while the phase is `installing`, then the turn runs on the fresh install, which
/// `installed_version` reports. `extra` is added to the daemon's environment.
async fn first_use_installs_the_pinned_cli(h: H, extra: Vec<(String, String)>) {
    let tools = tempfile::Builder::new().prefix("spaces-tools-").tempdir().unwrap();
    let server = ScriptedServer::start(h.wire, Script::new([Reply::Text("installed and answering".into())])).await.unwrap();
    let mut env = vec![("SPACES_TOOLS_DIR".to_owned(), tools.path().display().to_string())];
    env.extend(extra);
    let d = TestDaemon::start_with_env(env).await;
    d.space("s").await;
    let installed = |caps: spaces_sdk::Capabilities| caps.harnesses.into_iter().find(|c| c.id == h.id).unwrap().installed_version;
    assert_eq!(installed(d.client.agent_capabilities(&spaces_sdk::Empty {}).await.unwrap()), None);
    let run = start(&d, h, &server, "hello").await;
    let is_install =
        |e: &spaces_sdk::Event, what: &str| e.kind == EventKind::Install && e.summary.as_deref().unwrap_or("").starts_with(what);
    let first = d.wait_for_event("s", &run, TURN, |e| is_install(e, "installing ")).await;
    // Status first, events second: until the `installed` event is stored, the phase says so.
    let st = d.client.space("s").agent_status(&run, None).await.unwrap();
    let so_far = d.events("s", &run).await;
    assert!(
        st.phase == spaces_sdk::Phase::Installing || so_far.iter().any(|e| is_install(e, "installed")),
        "{st:#?}\n{}",
        describe(&so_far)
    );
    let done = d.wait_for_event("s", &run, Duration::from_secs(300), |e| is_install(e, "installed ")).await;
    assert_eq!((first.turn, done.turn), (0, 0));
    let ended = d.wait_turn_end("s", &run, 1, TURN).await;
    let events = d.events("s", &run).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{}", describe(&events));
    let session = events.iter().find(|e| e.kind == EventKind::Session).unwrap().seq;
    assert!(done.seq < session, "installed before the CLI said a word:\n{}", describe(&events));
    assert_eq!(installed(d.client.agent_capabilities(&spaces_sdk::Empty {}).await.unwrap()).as_deref(), Some(h.pinned));
    assert!(tools.path().join(h.tools).join(h.binary).is_file());
}

/// Claude Code's first use runs the real `npm install` of the pinned package from the registry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_use_installs_the_pinned_claude_code() {
    first_use_installs_the_pinned_cli(CLAUDE, Vec::new()).await
}

/// Codex's first use, with `npm` stood in by a script that links the shared tools dir's pinned
/// install into the new prefix (Codex's packages weigh over 400 MB; the real `npm install` of
/// them is what `spacesd tools install` in scripts/test runs). Everything after npm is real:
/// the daemon's install flow and its events, the binary path it expects, the version it reads,
/// and the Codex CLI answering the turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_use_installs_the_pinned_openai_codex() {
    require_cli(CODEX.tools, CODEX.binary);
    let bin = tempfile::tempdir().unwrap();
    let shared = crate::support::tools_dir().join(CODEX.tools).join("node_modules");
    let npm = format!(
        "#!/bin/sh\n# Stand-in for `npm install --prefix DIR ...`.\nwhile [ \"$1\" != --prefix ]; do shift; done\n\
         echo 'npm http fetch GET 200 https://registry.npmjs.org/@openai%2fcodex (stand-in)'\n\
         ln -s '{}' \"$2/node_modules\"\necho 'added 2 packages in 1s'\n",
        shared.display()
    );
    std::fs::write(bin.path().join("npm"), npm).unwrap();
    std::fs::set_permissions(bin.path().join("npm"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.path().display(), std::env::var("PATH").unwrap_or_default());
    first_use_installs_the_pinned_cli(CODEX, vec![("PATH".into(), path)]).await
}

/// `installed_version` is what the tools dir holds, read from the package, not the pin: an
/// older install reports its own version (and a note), a binary without its package none.
#[tokio::test]
async fn capabilities_report_the_installed_version_not_the_pinned_one() {
    let tools = tempfile::Builder::new().prefix("spaces-tools-").tempdir().unwrap();
    let bin = tools.path().join("claude-code").join(CLAUDE.binary);
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::write(&bin, "#!/bin/sh\n").unwrap();
    let d = TestDaemon::start_with_env(vec![("SPACES_TOOLS_DIR".into(), tools.path().display().to_string())]).await;
    let claude = |caps: spaces_sdk::Capabilities| caps.harnesses.into_iter().find(|h| h.id == "claude-code").unwrap();
    let bare = claude(d.client.agent_capabilities(&spaces_sdk::Empty {}).await.unwrap());
    assert_eq!(bare.installed_version, None, "{bare:?}");

    let package = tools.path().join("claude-code/node_modules/@anthropic-ai/claude-code");
    std::fs::create_dir_all(&package).unwrap();
    std::fs::write(package.join("package.json"), r#"{"name":"@anthropic-ai/claude-code","version":"1.0.0"}"#).unwrap();
    let old = claude(d.client.agent_capabilities(&spaces_sdk::Empty {}).await.unwrap());
    assert_eq!(old.installed_version.as_deref(), Some("1.0.0"), "{old:?}");
    assert!(old.notes.iter().any(|n| n.starts_with("installed version 1.0.0 is not the pinned ")), "{:?}", old.notes);
}

/// `options.files` (issue 13): `agent start --file` sends each file with the request; the
/// daemon writes it into the run's `files` folder with the same bytes, and the real Claude Code
/// CLI's first model call (recorded by the scripted endpoint) carries the prompt naming their
/// paths. A file over 8 MiB, a name with a separator or `..`, and a name given twice are each
/// refused with `INVALID_ARGUMENT` naming the file's field, and no run is recorded.
#[tokio::test]
async fn attached_files_are_copied_into_the_run_and_named_in_the_first_prompt() {
    let (d, server, _root) = setup(CLAUDE, Script::new([Reply::Text("I read both.".into())])).await;
    let src = tempfile::tempdir().unwrap();
    let notes = src.path().join("notes.md");
    let blob = src.path().join("data.bin");
    std::fs::write(&notes, "# Notes\nthe build is flaky on Tuesdays\n").unwrap();
    let bytes: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    std::fs::write(&blob, &bytes).unwrap();
    let (ok, out) = d.cli(&[
        "agent",
        "start",
        "claude-code",
        "Summarise the attached notes",
        "--space",
        "s",
        "--base-url",
        &server.base_url(),
        "--file",
        notes.to_str().unwrap(),
        "--file",
        blob.to_str().unwrap(),
        "--json",
    ]);
    assert!(ok, "{out}");
    let run = serde_json::from_str::<serde_json::Value>(&out).unwrap()["run_id"].as_str().unwrap().to_owned();
    d.wait_turn_end("s", &run, 1, TURN).await;

    let dir = d.state_dir().join("runs").join(&run).join("files");
    assert_eq!(std::fs::read(dir.join("notes.md")).unwrap(), std::fs::read(&notes).unwrap());
    assert_eq!(std::fs::read(dir.join("data.bin")).unwrap(), bytes);
    let first = server.model_calls().into_iter().next().expect("a model call");
    for needle in ["Summarise the attached notes", &dir.join("notes.md").display().to_string(), &dir.join("data.bin").display().to_string()]
    {
        assert!(body_mentions(&first, needle), "the first prompt names {needle:?}: {:?}", first.json);
    }
    let st = d.client.space("s").agent_status(&run, None).await.unwrap();
    assert_eq!(st.prompt_excerpt.as_deref(), Some("Summarise the attached notes"), "the excerpt is the caller's prompt");

    use base64::Engine as _;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let file = |name: &str, content: &[u8]| spaces_sdk::Attachment { name: name.into(), content_base64: b64(content) };
    let big = vec![0u8; spaces_sdk::Attachment::MAX_BYTES + 1];
    let cases: Vec<(Vec<spaces_sdk::Attachment>, &str, &str)> = vec![
        (vec![file("ok.txt", b"x"), file("huge.iso", &big)], "options.files[1]", "\"huge.iso\" is larger than the limit of 8388608 bytes"),
        (vec![file("../escape", b"x")], "options.files[0]", "path separator"),
        (vec![file("..", b"x")], "options.files[0]", "directory"),
        (vec![file("same", b"1"), file("same", b"2")], "options.files[1]", "twice"),
    ];
    for (files, field, says) in cases {
        let req = AgentStartRequest {
            space: "s".into(),
            agent: CLAUDE.id.into(),
            prompt: "hi".into(),
            show: None,
            options: Some(SpaceAgentOptions { base_url: Some(server.base_url()), files, ..Default::default() }),
            request_id: None,
            traceparent: None,
        };
        let spaces_sdk::client::ClientError::Api(e) = d.client.agent_start(&req).await.unwrap_err() else { panic!("not a typed refusal") };
        assert_eq!((e.code, e.field.as_deref()), (spaces_sdk::ErrorCode::InvalidArgument, Some(field)), "{e:?}");
        assert!(e.message.contains(says), "{e:?}");
    }
    let huge = src.path().join("huge.iso");
    std::fs::File::create(&huge).unwrap().set_len(spaces_sdk::Attachment::MAX_BYTES as u64 + 1).unwrap();
    let (ok, out) = d.cli(&["agent", "start", "claude-code", "hi", "--space", "s", "--file", huge.to_str().unwrap()]);
    assert!(!ok && out.contains("huge.iso") && out.contains("8388608"), "{out}");
    assert_eq!(d.client.space("s").agent_list().await.unwrap().len(), 1, "refused starts record no run");
    // (The next run's directory made ready ahead, with its `.ahead` marker, is no run's.)
    let run_dirs = std::fs::read_dir(d.state_dir().join("runs")).unwrap().flatten().filter(|e| !e.path().join(".ahead").exists()).count();
    assert_eq!(run_dirs, 1, "nor a run directory");
}
