//! Watching a run live: `agent_events` as server-sent events (resumed with `Last-Event-ID`,
//! heartbeats, a final `end` event), the SDK's and the CLI's follow on it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use spaces_sdk::follow::{Transport, Until};
use spaces_sdk::{AgentStartRequest, Event, EventKind, SpaceAgentOptions};

use super::survive::{fake_daemon, message, DONE};
use crate::support::tmux::Tmux;
use crate::support::{describe, TestDaemon};

const WAIT: Duration = Duration::from_secs(60);

/// One SSE frame as read off the wire.
#[derive(Debug, Default, Clone)]
struct Frame {
    id: Option<u64>,
    event: Option<String>,
    data: String,
    comment: Option<String>,
}

/// An SSE connection over the daemon's Unix socket (HTTP/1.0: the body is the bytes up to
/// the close, no chunking to undo).
struct Sse {
    reader: BufReader<UnixStream>,
    pub status_line: String,
    pub headers: Vec<String>,
}

impl Sse {
    fn open(state: &Path, query: &str, last_event_id: Option<u64>) -> Sse {
        let mut s = UnixStream::connect(state.join("spacesd.sock")).unwrap();
        s.set_read_timeout(Some(WAIT)).unwrap();
        let mut req = format!("GET /v1/spaces/s/agents/{query} HTTP/1.0\r\nHost: localhost\r\nAccept: text/event-stream\r\n");
        if let Some(id) = last_event_id {
            req.push_str(&format!("Last-Event-ID: {id}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let mut reader = BufReader::new(s);
        let mut status_line = String::new();
        reader.read_line(&mut status_line).unwrap();
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line.trim().is_empty() {
                break;
            }
            headers.push(line.trim().to_lowercase());
        }
        Sse { reader, status_line, headers }
    }

    /// The next frame, or `None` at the end of the body.
    fn next(&mut self) -> Option<Frame> {
        let mut frame = Frame::default();
        let mut any = false;
        loop {
            let mut line = String::new();
            if self.reader.read_line(&mut line).unwrap() == 0 {
                return any.then_some(frame);
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if any {
                    return Some(frame);
                }
                continue;
            }
            any = true;
            if let Some(c) = line.strip_prefix(':') {
                frame.comment = Some(c.trim().to_owned());
            } else if let Some(v) = line.strip_prefix("id: ") {
                frame.id = v.parse().ok();
            } else if let Some(v) = line.strip_prefix("event: ") {
                frame.event = Some(v.to_owned());
            } else if let Some(v) = line.strip_prefix("data: ") {
                frame.data.push_str(v);
            }
        }
    }
}

/// A fake Codex turn of `n` messages, `pause` seconds apart.
fn slow_turn(n: usize, pause: &str) -> String {
    let mut body = String::from("cat > /dev/null\n");
    for i in 1..=n {
        body.push_str(&format!("{}\nsleep {pause}\n", message(&format!("line {i}"))));
    }
    body.push_str(DONE);
    body
}

async fn start(d: &TestDaemon) -> String {
    let req = AgentStartRequest {
        space: "s".into(),
        agent: "openai-codex-exec".into(),
        prompt: "hello".into(),
        show: None,
        options: Some(SpaceAgentOptions::default()),
        request_id: None,
        traceparent: None,
    };
    d.client.agent_start(&req).await.unwrap().run_id
}

/// A follower reads the stream mid-turn, drops the connection, and reconnects with
/// `Last-Event-ID`: together the two connections carry every event of the log exactly once,
/// in order, and the second ends with `event: end` once the turn is over (`until=turn`).
#[tokio::test]
async fn sse_reconnect_with_last_event_id_gets_every_event_once_in_order() {
    let (d, _root, _bin) = fake_daemon(&slow_turn(10, "0.2")).await;
    let run = start(&d).await;
    let state = d.state_dir();
    let q = format!("{run}/events?until=turn");
    let (first, second, end) = tokio::task::spawn_blocking(move || {
        let mut sse = Sse::open(&state, &q, None);
        assert!(sse.status_line.starts_with("HTTP/1.0 200") || sse.status_line.starts_with("HTTP/1.1 200"), "{}", sse.status_line);
        assert!(sse.headers.iter().any(|h| h == "content-type: text/event-stream"), "{:?}", sse.headers);
        let mut first: Vec<(u64, Value)> = Vec::new();
        // Mid-turn: the first three agent messages, then the follower goes away.
        while first.iter().filter(|(_, e)| e["kind"] == "message").count() < 3 {
            let f = sse.next().expect("the stream goes on mid-turn");
            if let Some(id) = f.id {
                first.push((id, serde_json::from_str(&f.data).unwrap()));
            }
        }
        drop(sse);
        let last = first.last().map(|(id, _)| *id);
        let mut sse = Sse::open(&state, &q, last);
        let mut second = Vec::new();
        let mut end = None;
        while let Some(f) = sse.next() {
            match (f.id, f.event.as_deref()) {
                (Some(id), None) => second.push((id, serde_json::from_str::<Value>(&f.data).unwrap())),
                (None, Some("end")) => end = Some(serde_json::from_str::<Value>(&f.data).unwrap()),
                (None, None) => {}
                other => panic!("unexpected frame {other:?}: {f:?}"),
            }
        }
        (first, second, end)
    })
    .await
    .unwrap();
    let log = d.events("s", &run).await;
    let got: Vec<(u64, Value)> = first.iter().chain(&second).cloned().collect();
    // `until=turn` ends once the turn is over; a per-turn CLI's `exited` may land just after.
    let end = end.expect("an end frame");
    let end_cursor = end["cursor"].as_u64().unwrap();
    let turn_ended = log.iter().find(|e| e.kind == spaces_sdk::EventKind::TurnEnded).map(|e| e.seq).unwrap();
    assert!(end_cursor >= turn_ended, "the stream ends after the turn: {end}");
    let expected: Vec<(u64, Value)> =
        log.iter().filter(|e| e.seq <= end_cursor).map(|e| (e.seq, serde_json::to_value(e).unwrap())).collect();
    assert!(!first.iter().any(|(_, e)| e["kind"] == "turn_ended"), "the first connection ended mid-turn:\n{}", describe(&log));
    assert_eq!(got, expected, "every event once, in order, as the log has it");
    assert_eq!(end["status"], "idle", "{end}");
}

/// A quiet run gets `: heartbeat` comments every `heartbeat_ms`; the stream's first page
/// errors are ordinary JSON answers (an unknown run is 404 `RUN_NOT_FOUND`).
#[tokio::test]
async fn sse_heartbeats_while_the_agent_is_quiet() {
    let (d, _root, _bin) = fake_daemon(&format!("cat > /dev/null\n{}\nsleep 2\n{DONE}", message("before the pause"))).await;
    let run = start(&d).await;
    d.wait_for_event("s", &run, WAIT, |e| e.kind == EventKind::Message).await;
    let state = d.state_dir();
    let q = format!("{run}/events?until=turn&heartbeat_ms=200");
    let (heartbeats, kinds, took) = tokio::task::spawn_blocking(move || {
        let t0 = Instant::now();
        let mut sse = Sse::open(&state, &q, None);
        let (mut heartbeats, mut kinds) = (0, Vec::new());
        while let Some(f) = sse.next() {
            if f.comment.as_deref() == Some("heartbeat") {
                heartbeats += 1;
            }
            if f.id.is_some() {
                kinds.push(serde_json::from_str::<Value>(&f.data).unwrap()["kind"].as_str().unwrap_or("").to_owned());
            }
            if let Some(event) = f.event {
                kinds.push(event);
            }
        }
        (heartbeats, kinds, t0.elapsed())
    })
    .await
    .unwrap();
    assert!(heartbeats >= 3, "{heartbeats} heartbeats in {took:?}");
    assert_eq!(kinds.last().map(String::as_str), Some("end"), "{kinds:?}");
    assert!(kinds.iter().any(|k| k == "turn_ended"), "{kinds:?}");
    let state = d.state_dir();
    let (status, body) = tokio::task::spawn_blocking(move || {
        let mut sse = Sse::open(&state, "run-000000000000/events", None);
        let mut body = String::new();
        while let Some(f) = sse.next() {
            body.push_str(&format!("{f:?}"));
        }
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut sse.reader, &mut rest);
        (sse.status_line, body + &rest)
    })
    .await
    .unwrap();
    assert!(status.contains(" 404 "), "{status} {body}");
}

/// The SDK's follow reads the stream (not long-polls) and yields what the log holds; the CLI's
/// `agent events --follow` prints the same lines over SSE as over long-polls.
#[tokio::test]
async fn sdk_and_cli_follow_use_the_stream_and_print_the_same_lines() {
    let (d, _root, _bin) = fake_daemon(&slow_turn(4, "0.1")).await;
    let run = start(&d).await;
    // Whole log first: a per-turn CLI's `exited` may land after `until=turn` ends a follow, so the
    // transports are compared on a settled log (following mid-turn: the reconnect test above).
    d.wait_for_event("s", &run, Duration::from_secs(60), |e| e.kind == spaces_sdk::EventKind::Exited).await;
    let mut follow = d.client.follow("s", &run, 0, Until::Turn);
    let mut got: Vec<Event> = Vec::new();
    while let Some(e) = follow.next().await.unwrap() {
        got.push(e);
    }
    assert_eq!(follow.transport(), Transport::Sse);
    assert_eq!(follow.status(), Some(spaces_sdk::Status::Idle));
    assert_eq!(got, d.events("s", &run).await);
    let mut poll = d.client.follow("s", &run, 0, Until::Turn).long_poll_only();
    let mut polled = Vec::new();
    while let Some(e) = poll.next().await.unwrap() {
        polled.push(e);
    }
    assert_eq!(polled, got);
    let (ok, sse_lines) = d.cli(&["agent", "events", &run, "--follow"]);
    assert!(ok, "{sse_lines}");
    let out = std::process::Command::new(crate::support::spacesd_bin())
        .env("SPACES_FOLLOW_LONG_POLL", "1")
        .arg("--state-dir")
        .arg(d.state_dir())
        .args(["agent", "events", &run, "--follow"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), sse_lines);
    assert!(sse_lines.contains("line 4") && sse_lines.contains("-- status: idle"), "{sse_lines}");
}

/// Over TCP the stream needs the bearer token and a loopback Origin, like the route.
#[tokio::test]
async fn sse_over_tcp_needs_the_token_and_a_loopback_origin() {
    let bin = tempfile::tempdir().unwrap();
    let agent = super::survive::fake_codex(bin.path(), &slow_turn(1, "0"));
    let env = vec![("SPACES_HARNESS_BIN_OPENAI_CODEX".to_owned(), agent.display().to_string())];
    let d = TestDaemon::start_with(env, vec!["--tcp".into(), "127.0.0.1:0".into()]).await;
    d.space("s").await;
    let run = start(&d).await;
    d.wait_turn_end("s", &run, 1, WAIT).await;
    let state = d.state_dir();
    let token = std::fs::read_to_string(state.join("token")).unwrap().trim().to_owned();
    let addr = std::fs::read_to_string(state.join("tcp.addr")).unwrap().trim().to_owned();
    let get = move |token: Option<&str>, origin: Option<&str>| {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        let mut req = format!("GET /v1/spaces/s/agents/{run}/events?until=turn HTTP/1.0\r\nHost: {addr}\r\nAccept: text/event-stream\r\n");
        if let Some(t) = token {
            req.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        if let Some(o) = origin {
            req.push_str(&format!("Origin: {o}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        std::io::Read::read_to_string(&mut s, &mut out).unwrap();
        out
    };
    let ok = get(Some(&token), Some("http://localhost"));
    assert!(ok.contains(" 200 ") && ok.contains("text/event-stream") && ok.contains("event: end"), "{ok}");
    for (token, origin) in [(None, None), (Some("wrong"), None), (Some(token.as_str()), Some("http://attacker.example"))] {
        let refused = get(token, origin);
        assert!(refused.contains(" 403 ") && refused.contains("UNAUTHORIZED") && !refused.contains("event: end"), "{refused}");
    }
}

/// `spacesd agent attach` in a real terminal (tmux): it shows the answer so far, a typed line
/// is a follow-up whose answer streams in, Ctrl-C interrupts the turn in flight, a resize
/// redraws at the new width, `/detach` leaves, and the run is still alive (idle, accepting a
/// message).
#[tokio::test]
async fn attach_in_a_terminal_sends_interrupts_and_detaches_leaving_the_run_alive() {
    let body = r#"p=$(cat)
case "$p" in *slow*) sleep 30;; esac
echo '{"type":"item.completed","item":{"id":"m","type":"agent_message","text":"answer to: '"$p"'"}}'
"#
    .to_owned()
        + DONE;
    let (d, _root, _bin) = fake_daemon(&body).await;
    let req = AgentStartRequest {
        space: "s".into(),
        agent: "openai-codex-exec".into(),
        prompt: "first".into(),
        show: Some(true),
        options: Some(SpaceAgentOptions::default()),
        request_id: None,
        traceparent: None,
    };
    let report = d.client.agent_start(&req).await.unwrap();
    let run = report.run_id.clone();
    assert_eq!(
        report.notes.first().map(String::as_str),
        Some(format!("watch it live: spacesd agent attach {run}").as_str()),
        "{:?}",
        report.notes
    );
    d.wait_turn_end("s", &run, 1, WAIT).await;
    let command = format!("exec {} --state-dir {} attach {run}", crate::support::spacesd_bin().display(), d.state_dir().display());
    let tmux = Tmux::start(&run, 100, 30, &command);
    tmux.wait_screen(WAIT, "the first answer", |s| s.contains("answer to: first")).await;

    tmux.keys(&["second", "Enter"]);
    tmux.wait_screen(WAIT, "the follow-up's answer", |s| s.contains("answer to: second") && s.contains("idle (end_turn)")).await;

    tmux.keys(&["slow", "Enter"]);
    d.wait_for_event("s", &run, WAIT, |e| e.turn == 3 && e.kind == EventKind::UserMessage).await;
    tmux.wait_screen(WAIT, "the third turn running", |s| s.contains("slow") && s.contains("· running ·")).await;
    tmux.keys(&["C-c"]);
    let ended = d.wait_turn_end("s", &run, 3, WAIT).await;
    assert_eq!(ended.stop_reason, Some(spaces_sdk::StopReason::Interrupted), "{ended:?}");
    tmux.wait_screen(WAIT, "the interrupted turn", |s| s.contains("idle (interrupted)") && s.contains("Ctrl-C again or /detach")).await;

    tmux.resize(60, 20);
    let narrow = tmux.wait_screen(WAIT, "a redraw at 60 columns", |s| s.lines().count() <= 20 && s.contains("answer to: second")).await;
    assert!(narrow.lines().all(|l| l.chars().count() <= 60), "{narrow}");
    assert!(narrow.lines().last().is_some_and(|l| l.starts_with('>')), "the prompt is the last line:\n{narrow}");

    tmux.keys(&["/detach", "Enter"]);
    tmux.wait_exit(WAIT, "attach did not leave").await;
    let st = d.client.space("s").agent_status(&run, Some(0)).await.unwrap();
    assert_eq!((st.status, st.accepts_message), (spaces_sdk::Status::Idle, true), "the run is still alive: {st:#?}");
}

/// `spacesd attach` on a real Claude Code run against the scripted endpoint, in a real terminal
/// (tmux): the first turn's Bash call shows folded (three lines and where the rest is) and
/// `/expand` unfolds its whole output; the answer comes in; a typed follow-up's answer streams
/// in (a prefix of it on screen, in one live line, while the event log shows the turn still
/// running; then the whole message in its place, once); Ctrl-C interrupts a slowly streamed
/// answer (the turn ends `interrupted`); `/detach` leaves and the run is alive (idle, accepting
/// a message). Then the event wording on the real CLI: `agent events` shows each turn's usage
/// with its token counts, and the interrupt's `control_response` and the answer's streamed
/// pieces only with `--verbose`.
#[tokio::test]
async fn attach_to_a_real_claude_code_run_expands_answers_interrupts_and_detaches() {
    use super::harness::CLAUDE;
    use spaces_testkit::{Reply, Script, ScriptedServer};
    const SECOND: &str = "The second answer, streamed in pieces.";
    crate::support::require_cli(CLAUDE.id, CLAUDE.binary);
    let server = ScriptedServer::start(
        CLAUDE.wire,
        Script::new([
            Reply::ToolCall { name: "Bash".into(), input: serde_json::json!({"command": "seq 1 12", "description": "count"}) },
            Reply::Text("I counted to twelve.".into()),
            Reply::SlowText { text: SECOND.into(), chunks: 12, delay_ms: 400 },
            Reply::SlowText { text: "a long answer that is cut off by the interrupt".into(), chunks: 60, delay_ms: 500 },
        ]),
    )
    .await
    .unwrap();
    let d = TestDaemon::start().await;
    d.space("s").await;
    let req = AgentStartRequest {
        space: "s".into(),
        agent: CLAUDE.id.into(),
        prompt: "Count to twelve".into(),
        show: None,
        options: Some(SpaceAgentOptions { base_url: Some(server.base_url()), ..Default::default() }),
        request_id: None,
        traceparent: None,
    };
    let run = d.client.agent_start(&req).await.unwrap().run_id;
    let command = format!("exec {} --state-dir {} attach {run}", crate::support::spacesd_bin().display(), d.state_dir().display());
    let tmux = Tmux::start(&run, 100, 40, &command);
    let folded = tmux.wait_screen(WAIT, "the first answer", |s| s.contains("I counted to twelve.") && s.contains("idle (end_turn)")).await;
    assert!(
        folded.contains("Run: seq 1 12") && folded.contains("| 3") && folded.contains("9 more lines") && !folded.contains("| 12"),
        "{folded}"
    );
    tmux.keys(&["/expand", "Enter"]);
    tmux.wait_screen(WAIT, "the whole output", |s| s.contains("| 12") && !s.contains("9 more lines")).await;
    tmux.keys(&["/expand", "Enter"]);
    tmux.wait_screen(WAIT, "the output folded again", |s| s.contains("9 more lines") && !s.contains("| 12")).await;

    tmux.keys(&["Say more", "Enter"]);
    // The live line: `#…    turn 2  message          <the answer so far>`.
    let streamed = |screen: &str| -> Option<String> {
        let line = screen.lines().find(|l| l.starts_with("#…") && l.contains(" turn 2 "))?;
        let text = line.split_once(" message ")?.1.trim().to_owned();
        Some(text).filter(|t| !t.is_empty() && t.len() < SECOND.len() && SECOND.starts_with(t.as_str()))
    };
    let partial = tmux.wait_screen(WAIT, "a prefix of the follow-up's answer", |s| streamed(s).is_some()).await;
    let events = d.events("s", &run).await;
    assert!(
        !events.iter().any(|e| e.turn == 2 && e.kind == EventKind::TurnEnded),
        "the turn had not ended when its partial answer was on screen:\n{partial}\n{}",
        describe(&events)
    );
    let prefix = streamed(&partial).unwrap_or_default();
    tmux.wait_screen(WAIT, "the answer growing", |s| streamed(s).is_some_and(|t| t.len() > prefix.len() && t.starts_with(&prefix))).await;
    let answered = tmux.wait_screen(WAIT, "the follow-up's answer", |s| s.contains(SECOND) && s.contains("idle (end_turn)")).await;
    assert!(!answered.contains("#…") && answered.matches(SECOND).count() == 1, "the whole message replaced the live line:\n{answered}");
    d.wait_turn_end("s", &run, 2, WAIT).await;

    tmux.keys(&["slow", "Enter"]);
    d.wait_for_event("s", &run, WAIT, |e| e.turn == 3 && e.kind == EventKind::UserMessage).await;
    let deadline = Instant::now() + WAIT;
    while server.frames_sent() < 8 {
        assert!(Instant::now() < deadline, "the slow answer never streamed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tmux.wait_screen(WAIT, "the third turn running", |s| s.contains("· running ·")).await;
    tmux.keys(&["C-c"]);
    let ended = d.wait_turn_end("s", &run, 3, WAIT).await;
    assert_eq!(ended.stop_reason, Some(spaces_sdk::StopReason::Interrupted), "{ended:?}");
    tmux.wait_screen(WAIT, "the interrupted turn", |s| s.contains("idle (interrupted)")).await;

    tmux.keys(&["/detach", "Enter"]);
    tmux.wait_exit(WAIT, "attach did not leave").await;
    let st = d.wait_status("s", &run, WAIT, crate::support::settled).await;
    assert_eq!((st.status, st.accepts_message), (spaces_sdk::Status::Idle, true), "the run is still alive: {st:#?}");

    // Event wording on the real CLI: the CLI's lines show each turn's usage (token counts);
    // the interrupt's control_response is a hidden notice, shown only with --verbose.
    let events = d.events("s", &run).await;
    let usage: Vec<&Event> = events.iter().filter(|e| e.kind == EventKind::Usage).collect();
    assert!(!usage.is_empty() && usage.iter().all(|e| e.category == spaces_sdk::Category::Activity), "{}", describe(&events));
    assert!(
        usage.iter().any(|e| e.usage.as_ref().is_some_and(|u| u.input_tokens.is_some() && u.output_tokens.is_some())),
        "{}",
        describe(&events)
    );
    let ack = events
        .iter()
        .find(|e| e.kind == EventKind::Notice && e.summary.as_deref().is_some_and(|s| s.starts_with("control_response")))
        .map(|e| e.seq);
    let (ok, plain) = d.cli(&["agent", "events", &run]);
    assert!(ok && plain.lines().any(|l| l.contains(" usage ") && l.contains("tokens in ")), "{plain}");
    assert!(plain.contains("turn 1 finished") && plain.contains("turn 3 ended: interrupted"), "{plain}");
    let (ok, verbose) = d.cli(&["agent", "events", &run, "--verbose"]);
    let seq = ack.unwrap_or_else(|| panic!("Claude Code acknowledges the interrupt:\n{}", describe(&events)));
    assert!(!plain.contains(&format!("#{seq} ")) && ok && verbose.contains("control_response success"), "{plain}\n{verbose}");
    assert!(!plain.contains("control_response"), "{plain}");
    // The streamed pieces of the second answer: message_delta events, printed only with --verbose.
    let pieces: Vec<&Event> = events.iter().filter(|e| e.turn == 2 && e.kind == EventKind::MessageDelta).collect();
    assert_eq!(pieces.iter().filter_map(|e| e.text.as_deref()).collect::<String>(), SECOND, "{}", describe(&events));
    assert!(
        pieces.iter().all(|e| !plain.contains(&format!("#{} ", e.seq)) && verbose.contains(&format!("#{} ", e.seq))),
        "{plain}\n{verbose}"
    );
    assert_eq!(plain.matches(SECOND).count(), 1, "{plain}");
}

/// Issue 14, item 6, in a real terminal of 80 columns (tmux): `agent list` is a table whose
/// rows fit (none wraps: every line after the header is a run's row, its prompt cut with `…`),
/// and `agent status` is one `key value` line per field.
#[tokio::test]
async fn agent_list_and_status_render_as_tables_at_80_columns() {
    let (d, _root, _bin) = fake_daemon(&format!("cat > /dev/null\n{}\n{DONE}", message("answered"))).await;
    let mut runs = Vec::new();
    for (i, label) in [Some("nightly"), None, Some("a label long enough to be cut in the table")].into_iter().enumerate() {
        let req = AgentStartRequest {
            space: "s".into(),
            agent: "openai-codex-exec".into(),
            prompt: format!("Run {i}: fix the flaky login test, then look at the build script and {}", "tidy up ".repeat(10)),
            show: None,
            options: Some(SpaceAgentOptions { label: label.map(Into::into), ..Default::default() }),
            request_id: None,
            traceparent: None,
        };
        let run = d.client.agent_start(&req).await.unwrap().run_id;
        d.wait_turn_end("s", &run, 1, WAIT).await;
        runs.push(run);
    }
    let bin = crate::support::spacesd_bin().display().to_string();
    let state = d.state_dir().display().to_string();
    let command = format!("{bin} --state-dir {state} agent list; echo LIST-END; {bin} --state-dir {state} agent status {} --tail 0; echo STATUS-END; sleep 60", runs[2]);
    let tmux = Tmux::start(&runs[0], 80, 40, &command);
    let screen = tmux.wait_screen(WAIT, "both outputs", |s| s.contains("STATUS-END")).await;
    let lines: Vec<&str> = screen.lines().collect();
    let end = lines.iter().position(|l| *l == "LIST-END").unwrap();
    let table = &lines[..end];
    assert!(table[0].starts_with("RUN ") && table[0].contains("LABEL") && table[0].ends_with("PROMPT"), "{screen}");
    assert_eq!(table.len(), 1 + runs.len(), "one line per run, none wrapped:\n{screen}");
    for (row, run) in table[1..].iter().zip(runs.iter().rev()) {
        assert!(row.starts_with(run.as_str()) && row.ends_with('…') && row.chars().count() <= 80, "{row:?}\n{screen}");
    }
    assert!(table[1].contains("a label lon…") && table[3].contains("nightly"), "{screen}");
    let status = &lines[end + 1..lines.iter().position(|l| *l == "STATUS-END").unwrap()];
    for key in ["run", "label", "agent", "status", "turns", "prompt"] {
        assert!(status.iter().any(|l| l.starts_with(&format!("{key:<10}"))), "{key}: {screen}");
    }
}
