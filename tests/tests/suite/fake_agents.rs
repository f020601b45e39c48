//! Misbehaving agents: the operator binary override (`SPACES_HARNESS_BIN_<ID>`) runs small fake
//! CLIs in place of the real ones, so faults the real CLIs rarely show can be forced.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use spaces_sdk::{AgentStartRequest, EventKind, SpaceAgentOptions, Status, StopReason};

use crate::support::{describe, settled, TestDaemon};

const WAIT: Duration = Duration::from_secs(60);

/// The shell script `script` as the executable `dir/name`.
pub(super) fn fake(dir: &Path, name: &str, script: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{script}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

async fn daemon_with(harness_env: &str, script: &str, extra: Vec<(String, String)>) -> (TestDaemon, tempfile::TempDir) {
    let bin_dir = tempfile::tempdir().unwrap();
    let bin = fake(bin_dir.path(), "fake-agent", script);
    let mut env = vec![(harness_env.to_owned(), bin.display().to_string())];
    env.extend(extra);
    let d = TestDaemon::start_with_env(env).await;
    d.space("s").await;
    (d, bin_dir)
}

fn start_request(agent: &str) -> AgentStartRequest {
    AgentStartRequest {
        space: "s".into(),
        agent: agent.into(),
        prompt: "hello".into(),
        show: None,
        options: Some(SpaceAgentOptions::default()),
        request_id: None,
        traceparent: None,
    }
}

async fn start(d: &TestDaemon, agent: &str) -> String {
    d.client.agent_start(&start_request(agent)).await.unwrap().run_id
}

/// E14b: only an auth error on stderr, exit 52: `turn_ended` `error` with the exit code and the
/// stderr tail in the event and in the status reason; a follow-up is accepted.
#[tokio::test]
async fn case_e14b_auth_error_on_stderr_exit_52() {
    let (d, _bin) = daemon_with("SPACES_HARNESS_BIN_CLAUDE_CODE", "echo 'Invalid API key · Please run /login' >&2\nexit 52", vec![]).await;
    let run = start(&d, "claude-code").await;
    let ended = d.wait_turn_end("s", &run, 1, WAIT).await;
    assert_eq!(ended.stop_reason, Some(StopReason::Error), "{ended:?}");
    let text = ended.text.clone().unwrap_or_default();
    assert!(text.contains("52") && text.contains("Invalid API key"), "{text}");
    let st = d.wait_status("s", &run, WAIT, settled).await;
    assert_eq!(st.status, Status::Failed, "{st:#?}");
    assert!(st.reason.contains("code 52") && st.reason.contains("Invalid API key"), "{}", st.reason);
    assert!(st.accepts_message);
    assert!(st.output_tail.unwrap_or_default().contains("Invalid API key"));
}

/// P5: a one-shot agent that reads all of stdin before it answers finishes: its stdin carries
/// the prompt (never the command line, where `ps` shows it) and is then closed, and its answer
/// is the run's result.
#[tokio::test]
async fn case_p5_one_shot_agent_reading_stdin_to_eof_finishes() {
    let script = r#"for a in "$@"; do [ "$a" = "the prompt" ] && echo "prompt is an argument" >&2; done
echo "stdin said: $(cat) (then EOF)" >&2
echo '{"type":"thread.started","thread_id":"fake-thread-1"}'
echo '{"type":"turn.started"}'
echo '{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"read stdin to EOF, done"}}'
echo '{"type":"turn.completed","usage":{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1}}'"#;
    let (d, _bin) = daemon_with("SPACES_HARNESS_BIN_OPENAI_CODEX", script, vec![]).await;
    let req = AgentStartRequest { prompt: "the prompt".into(), ..start_request("openai-codex-exec") };
    let run = d.client.agent_start(&req).await.unwrap().run_id;
    let ended = d.wait_turn_end("s", &run, 1, WAIT).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{}", describe(&d.events("s", &run).await));
    let st = d.wait_status("s", &run, WAIT, settled).await;
    assert_eq!(
        (st.status, st.result_text.as_deref(), st.session_id.as_deref()),
        (Status::Idle, Some("read stdin to EOF, done"), Some("fake-thread-1")),
        "{st:#?}"
    );
    let tail = st.output_tail.unwrap_or_default();
    assert!(!tail.contains("prompt is an argument"), "{tail}");
    assert!(tail.contains("stdin said: the prompt (then EOF)"), "{tail}");
}

/// P5 (second half): a run silent longer than its stall limit gets a `notice` saying so; still
/// silent at twice the limit, a second `notice` says the turn is being ended, the agent's
/// processes are ended, and the turn ends naming the stall limit: never a silent hang.
#[tokio::test]
async fn case_p5_silent_agent_gets_a_notice_then_its_turn_ends() {
    let (d, _bin) =
        daemon_with("SPACES_HARNESS_BIN_CLAUDE_CODE", "read line\nsleep 1000", vec![("SPACES_STALL_MS".into(), "700".into())]).await;
    let run = start(&d, "claude-code").await;
    let ended = d.wait_turn_end("s", &run, 1, WAIT).await;
    let st = d.wait_status("s", &run, WAIT, settled).await;
    let events = d.events("s", &run).await;
    let notices: Vec<(u32, String)> =
        events.iter().filter(|e| e.kind == EventKind::Notice).map(|e| (e.turn, e.summary.clone().unwrap_or_default())).collect();
    assert_eq!(
        notices
            .iter()
            .map(|(turn, s)| (*turn, s.starts_with("the agent has been silent for "), s.ends_with("; ending the turn")))
            .collect::<Vec<_>>(),
        vec![(1, true, false), (1, true, true)],
        "{}",
        describe(&events)
    );
    // The stall rule ended the process: the turn reads `error` (the daemon's decision, not a
    // crash), with the stall limit named as the cause.
    assert_eq!(ended.stop_reason, Some(StopReason::Error), "{ended:?}");
    assert!(ended.text.as_deref().unwrap_or("").ends_with("no output for 1 s (stall limit)"), "{ended:?}");
    assert_eq!(st.status, Status::Failed, "{st:#?}");
    assert!(st.accepts_message, "{st:#?}");
    assert_eq!(crate::support::run_processes(&run), Vec::<i32>::new());
}

/// M32 (agent side): the daemon's own secrets never reach an agent; only what the run names.
#[tokio::test]
async fn case_m32_daemon_secrets_do_not_reach_the_agent() {
    let script = r#"cat > /dev/null
env | grep -E '^(SPACES_TOKEN|AWS_SECRET_ACCESS_KEY|MY_SETTING)=' | sed 's/^/seen /' >&2
echo '{"type":"thread.started","thread_id":"t"}'
echo '{"type":"turn.started"}'
echo '{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"ok"}}'
echo '{"type":"turn.completed","usage":{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1}}'"#;
    let (d, _bin) = daemon_with(
        "SPACES_HARNESS_BIN_OPENAI_CODEX",
        script,
        vec![("SPACES_TOKEN".into(), "daemon-token-123456".into()), ("AWS_SECRET_ACCESS_KEY".into(), "aws-secret-abcdef".into())],
    )
    .await;
    let req = AgentStartRequest {
        space: "s".into(),
        agent: "openai-codex-exec".into(),
        prompt: "hello".into(),
        show: None,
        options: Some(SpaceAgentOptions { env: [("MY_SETTING".to_owned(), "value-long-enough".to_owned())].into(), ..Default::default() }),
        request_id: None,
        traceparent: None,
    };
    let run = d.client.agent_start(&req).await.unwrap().run_id;
    d.wait_turn_end("s", &run, 1, WAIT).await;
    let st = d.wait_status("s", &run, WAIT, settled).await;
    let tail = st.output_tail.unwrap_or_default();
    assert!(tail.contains("seen MY_SETTING=[redacted]"), "the run's own variable arrives, redacted in the tail: {tail}");
    assert!(!tail.contains("SPACES_TOKEN") && !tail.contains("AWS_SECRET"), "{tail}");
    assert!(!tail.contains("value-long-enough"));
}

/// A Codex fake's opening lines (thread and turn), for the E11 agents below.
const CODEX_OPENING: &str = r#"echo '{"type":"thread.started","thread_id":"fake-thread"}'
echo '{"type":"turn.started"}'"#;

/// E11 through the daemon's real line reader (the shim's 64 KiB reads, splitting, UTF-8): 200 KB
/// of JSONL, then a last line without its newline, then exit 0. Every line becomes an event
/// before the exit's, the unterminated last one included; with no `turn.completed` the turn
/// ends `error`, not success.
#[tokio::test]
async fn case_e11_200_kb_then_an_unterminated_line_through_the_real_reader() {
    let filler = format!(r#"{{"type":"item.completed","item":{{"id":"r","type":"reasoning","text":"{}"}}}}"#, "x".repeat(1000));
    let script = format!(
        "{CODEX_OPENING}\ni=0; while [ $i -lt 200 ]; do echo '{filler}'; i=$((i+1)); done\n\
         printf '%s' '{{\"type\":\"item.completed\",\"item\":{{\"id\":\"last\",\"type\":\"agent_message\",\"text\":\"the unterminated tail\"}}}}'\nexit 0"
    );
    let (d, _bin) = daemon_with("SPACES_HARNESS_BIN_OPENAI_CODEX", &script, vec![]).await;
    let run = start(&d, "openai-codex-exec").await;
    let ended = d.wait_turn_end("s", &run, 1, WAIT).await;
    d.wait_for_event("s", &run, WAIT, |e| e.kind == EventKind::Exited).await;
    let events = d.events("s", &run).await;
    assert_eq!(ended.stop_reason, Some(StopReason::Error), "{}", describe(&events));
    let thoughts: Vec<usize> = events.iter().enumerate().filter(|(_, e)| e.kind == EventKind::Thought).map(|(i, _)| i).collect();
    assert_eq!(thoughts.len(), 200, "{}", describe(&events));
    assert!(events.iter().filter(|e| e.kind == EventKind::Thought).all(|e| e.text.as_deref() == Some(&"x".repeat(1000))));
    let tail = events.iter().position(|e| e.kind == EventKind::Message && e.text.as_deref() == Some("the unterminated tail"));
    let exited = events.iter().position(|e| e.kind == EventKind::Exited).unwrap();
    let tail = tail.unwrap_or_else(|| panic!("the unterminated last line is emitted:\n{}", describe(&events)));
    assert!(*thoughts.last().unwrap() < tail && tail < exited, "every output event before the exit:\n{}", describe(&events));
}

/// E11, variant: a JSON object cut at byte 65,536 (the reader's buffer size), then exit 0. The
/// cut line is one `other` event carrying its 65,536 bytes; the turn ends `error`.
#[tokio::test]
async fn case_e11_a_json_object_cut_at_byte_65536_becomes_other_with_its_text() {
    let full = format!(r#"{{"type":"item.completed","item":{{"id":"m","type":"agent_message","text":"{}"}}}}"#, "y".repeat(70_000));
    let cut = &full[..65_536];
    let (d, _bin) = daemon_with("SPACES_HARNESS_BIN_OPENAI_CODEX", &format!("{CODEX_OPENING}\nprintf '%s' '{cut}'\nexit 0"), vec![]).await;
    let run = start(&d, "openai-codex-exec").await;
    let ended = d.wait_turn_end("s", &run, 1, WAIT).await;
    let events = d.events("s", &run).await;
    assert_eq!(ended.stop_reason, Some(StopReason::Error), "{}", describe(&events));
    let others: Vec<&str> = events
        .iter()
        .filter(|e| e.kind == EventKind::Other)
        .filter_map(|e| e.text.as_deref())
        .filter(|t| t.starts_with(r#"{"type":"item.completed""#))
        .collect();
    assert_eq!(others.len(), 1, "{}", describe(&events));
    assert_eq!(others[0].len(), 65_536);
    assert_eq!(others[0], cut);
}

/// A fake Claude Code that prints its init line, then runs `rest` (sh).
fn claude_init_then(rest: &str) -> String {
    format!("echo '{{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"fake-session\",\"tools\":[],\"model\":\"fake\"}}'\n{rest}")
}

/// Wait until `closed(run)`, the run's agent saying it closed its output; on a timeout the
/// panic shows the run's events.
async fn wait_closed(d: &TestDaemon, run: &str, closed: &impl Fn(&str) -> bool) {
    let deadline = std::time::Instant::now() + crate::support::scaled(WAIT);
    while !closed(run) {
        if std::time::Instant::now() > deadline {
            panic!("the agent of {run} did not close its output:\n{}", describe(&d.events("s", run).await));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What names an agent's closed output in turn texts, reasons and reports.
const CLOSED_OUTPUT: &str = "closed its output (stdout)";

/// R42: an agent prints its init line, closes stdout and stderr and runs on (`sleep 600`).
/// Left alone, its turn ends within seconds (the stall limit is ten minutes) with an `error`
/// naming the closed output, the run `failed` saying so, and nothing of the run left running.
/// An interrupt sent meanwhile ends the process and says so (the turn ends `interrupted`); so
/// does a stop.
#[tokio::test]
async fn case_r42_an_agent_that_closes_its_output_and_runs_on_is_ended_and_says_so() {
    // Once its output is closed, the agent says so in a file named after its run.
    let script = claude_init_then("exec 1>&- 2>&-\ntouch \"closed-$SPACES_RUN_ID\"\nexec sleep 600");
    let (d, _bin) = daemon_with("SPACES_HARNESS_BIN_CLAUDE_CODE", &script, vec![]).await;
    let root = std::fs::canonicalize(d.state_dir().parent().unwrap().join("space-s")).unwrap();
    let closed = |run: &str| root.join(format!("closed-{run}")).exists();
    let gone = |run: &str| crate::support::run_processes(run).is_empty();

    // Left alone.
    let run = start(&d, "claude-code").await;
    let ended = d.wait_turn_end("s", &run, 1, WAIT).await;
    let events = d.events("s", &run).await;
    assert_eq!(ended.stop_reason, Some(StopReason::Error), "{}", describe(&events));
    assert!(ended.text.as_deref().unwrap_or("").contains(CLOSED_OUTPUT), "{}", describe(&events));
    let st = d.wait_status("s", &run, WAIT, settled).await;
    assert_eq!(st.status, Status::Failed, "{st:#?}");
    assert!(st.reason.contains(CLOSED_OUTPUT), "{}", st.reason);
    assert!(st.accepts_message, "a follow-up starts a new process: {st:#?}");
    assert!(gone(&run), "{:?}", crate::support::run_processes(&run));

    // An interrupt once the output is closed: the process is ended, and the report says why.
    let run = start(&d, "claude-code").await;
    wait_closed(&d, &run, &closed).await;
    let r = d.client.space("s").agent_interrupt(&run).await.unwrap();
    assert!(r.ok && r.reason.contains(CLOSED_OUTPUT) && r.reason.contains("ended"), "{r:?}");
    let ended = d.wait_turn_end("s", &run, 1, WAIT).await;
    assert_eq!(ended.stop_reason, Some(StopReason::Interrupted), "{}", describe(&d.events("s", &run).await));
    assert!(gone(&run), "{:?}", crate::support::run_processes(&run));

    // A stop once the output is closed.
    let run = start(&d, "claude-code").await;
    wait_closed(&d, &run, &closed).await;
    let r = d.client.space("s").agent_stop(&run).await.unwrap();
    assert!(r.ok, "{r:?}");
    assert_eq!(d.wait_status("s", &run, WAIT, settled).await.status, Status::Stopped);
    assert!(gone(&run), "{:?}", crate::support::run_processes(&run));
}

/// R42's kind with other inputs: a Codex-like agent closes only its stdout mid-turn, after a
/// message and with a tool call open, then writes to its still open stderr and runs on. Its turn
/// ends in seconds with an `error` naming the closed stdout and carrying the stderr line, the
/// open tool call closed `failed` before it, and the agent's processes are gone.
#[tokio::test]
async fn an_agent_that_closes_only_stdout_mid_turn_ends_its_turn_with_its_tool_call_failed() {
    let script = r#"echo '{"type":"thread.started","thread_id":"fake-thread"}'
echo '{"type":"turn.started"}'
echo '{"type":"item.completed","item":{"id":"m","type":"agent_message","text":"working on it"}}'
echo '{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"make","aggregated_output":"","exit_code":null,"status":"in_progress"}}'
exec 1>&-
echo "stdout is closed; still running" >&2
exec sleep 600"#;
    let (d, _bin) = daemon_with("SPACES_HARNESS_BIN_OPENAI_CODEX", script, vec![]).await;
    let run = start(&d, "openai-codex-exec").await;
    let ended = d.wait_turn_end("s", &run, 1, WAIT).await;
    let events = d.events("s", &run).await;
    assert_eq!(ended.stop_reason, Some(StopReason::Error), "{}", describe(&events));
    let text = ended.text.clone().unwrap_or_default();
    assert!(text.contains(CLOSED_OUTPUT) && text.contains("stdout is closed; still running"), "{text}");
    let failed = events
        .iter()
        .position(|e| e.kind == EventKind::ToolUpdate && e.tool_status == Some(spaces_sdk::ToolStatus::Failed))
        .unwrap_or_else(|| panic!("the open tool call is closed failed:\n{}", describe(&events)));
    assert!(failed < events.iter().position(|e| e.seq == ended.seq).unwrap(), "{}", describe(&events));
    assert!(events.iter().any(|e| e.kind == EventKind::Message && e.text.as_deref() == Some("working on it")));
    let st = d.wait_status("s", &run, WAIT, settled).await;
    assert_eq!(st.status, Status::Failed, "{st:#?}");
    assert!(crate::support::run_processes(&run).is_empty(), "{:?}", crate::support::run_processes(&run));
}

/// The Codex follow-up race (issue 31): a per-turn CLI (`codex exec`) reports its turn's end and
/// takes a moment more to exit. A message sent in that moment is the next turn, said so (not
/// "queued: a turn is running"), the run is `running` at once, and both the SDK's follow and the
/// CLI's `agent send --follow` follow that turn to its end instead of ending at once.
#[tokio::test]
async fn a_message_sent_after_turn_ended_before_the_process_exits_starts_the_next_turn_and_is_followed() {
    // Each turn answers with what it read on stdin, then lingers 2 s before exiting.
    let script = r#"said=$(cat)
echo '{"type":"thread.started","thread_id":"fake-thread-1"}'
echo '{"type":"turn.started"}'
echo "{\"type\":\"item.completed\",\"item\":{\"id\":\"item_0\",\"type\":\"agent_message\",\"text\":\"answer to $said\"}}"
echo '{"type":"turn.completed","usage":{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1}}'
sleep 2"#;
    let (d, _bin) = daemon_with("SPACES_HARNESS_BIN_OPENAI_CODEX", script, vec![]).await;
    let run = start(&d, "openai-codex-exec").await;
    let ended = d.wait_turn_end("s", &run, 1, WAIT).await;
    let r = d.client.space("s").agent_message(&run, "second", None).await.unwrap();
    assert!(r.ok && r.reason.contains("turn 2 starts") && !r.reason.contains("queued"), "{r:?}");
    let st = d.client.space("s").agent_status(&run, None).await.unwrap();
    assert_eq!(st.status, Status::Running, "running from the message on: {st:#?}");
    let mut follow = d.client.follow("s", &run, ended.seq, spaces_sdk::follow::Until::Turn);
    let mut got = Vec::new();
    while let Some(e) = follow.next().await.unwrap() {
        got.push(e);
    }
    let end2 = got.iter().find(|e| e.kind == EventKind::TurnEnded && e.turn == 2);
    assert!(end2.is_some_and(|e| e.stop_reason == Some(StopReason::EndTurn)), "the follow reached turn 2's end:\n{}", describe(&got));
    assert!(got.iter().any(|e| e.kind == EventKind::Message && e.text.as_deref() == Some("answer to second")), "{}", describe(&got));
    let events = d.events("s", &run).await;
    assert!(!events.iter().any(|e| e.summary.as_deref().unwrap_or("").contains("message queued")), "{}", describe(&events));

    // The same through the CLI, in the next gap.
    let ended = d.wait_turn_end("s", &run, 2, WAIT).await;
    assert_eq!(ended.turn, 2);
    let (ok, out) = d.cli(&["agent", "send", &run, "third", "--space", "s", "--follow"]);
    assert!(ok && out.contains("answer to third"), "send --follow printed turn 3's answer: {out}");
}
