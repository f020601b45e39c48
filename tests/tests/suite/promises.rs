//! Promises of the README and docs/api.md that no other scenario pins: the long-poll
//! (`wait_ms`), page sizes (`max`), `raw`, `tail`, HTTP status codes, `env_from_host` and its
//! allow-list, `exit_when_idle`, `seq` across a restart, `agent list` order and the CLI's
//! `--follow`. Fake agents (`SPACES_HARNESS_BIN_*`) stand in for the CLIs: the promises are the
//! daemon's, and fakes make each situation exact and fast.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use spaces_sdk::{AgentEventsRequest, AgentStartRequest, EventKind, SpaceAgentOptions, Status, StopReason};

use super::survive::{fake_codex, fake_daemon, message, DONE};
use crate::support::{describe, settled, wait_until, TestDaemon};

const WAIT: Duration = Duration::from_secs(60);

/// The fake Codex's body for "wait until the file `gate` exists in the Space, then go on".
const UNTIL_GATE: &str = "until [ -e gate ]; do sleep 0.05; done";

fn start_request(prompt: &str, options: SpaceAgentOptions) -> AgentStartRequest {
    AgentStartRequest {
        space: "s".into(),
        agent: "openai-codex-exec".into(),
        prompt: prompt.into(),
        show: None,
        options: Some(options),
        request_id: None,
        traceparent: None,
    }
}

async fn start(d: &TestDaemon, prompt: &str) -> String {
    d.client.agent_start(&start_request(prompt, SpaceAgentOptions::default())).await.unwrap().run_id
}

async fn page(d: &TestDaemon, run: &str, cursor: u64, max: Option<u32>, raw: Option<bool>) -> spaces_sdk::EventsPage {
    let q = AgentEventsRequest { space: "s".into(), run_id: run.into(), cursor: Some(cursor), max, wait_ms: None, raw };
    d.client.agent_events(&q).await.unwrap()
}

/// `wait_ms`: a caught-up long-poll waits, and answers as soon as an event is stored (long
/// before its `wait_ms`, which may be far above the 60 s clamp without being refused); with
/// nothing new it answers `caught_up` with no events once `wait_ms` has passed.
#[tokio::test]
async fn wait_ms_wakes_the_long_poll_when_an_event_lands() {
    let body = format!("{}\n{UNTIL_GATE}\n{}\n{DONE}", message("before"), message("after the gate"));
    let (d, root, _bin) = fake_daemon(&body).await;
    let run = start(&d, "wait for the gate").await;
    d.wait_for_event("s", &run, WAIT, |e| e.text.as_deref() == Some("before")).await;
    let cursor = d.events("s", &run).await.last().unwrap().seq;

    // Nothing new: the poll waits out its wait_ms and says it is caught up.
    let t0 = Instant::now();
    let q = AgentEventsRequest { space: "s".into(), run_id: run.clone(), cursor: Some(cursor), max: None, wait_ms: Some(400), raw: None };
    let idle = d.client.agent_events(&q).await.unwrap();
    assert!(idle.caught_up && idle.events.is_empty() && idle.cursor == cursor, "{idle:?}");
    assert!(t0.elapsed() >= Duration::from_millis(400), "it waited its wait_ms: {:?}", t0.elapsed());

    // A poll of an hour (clamped to 60 s) is woken by the next event.
    let client = d.client.clone();
    let q = AgentEventsRequest { wait_ms: Some(3_600_000), ..q };
    let t0 = Instant::now();
    let poll = tokio::spawn(async move { (client.agent_events(&q).await, t0.elapsed()) });
    // A quiet spell while the poll waits; then the event it waits for.
    let quiet = Duration::from_millis(500);
    tokio::time::sleep(quiet).await;
    std::fs::write(root.join("gate"), "").unwrap();
    let (woken, took) = poll.await.unwrap();
    let woken = woken.unwrap();
    let first = woken.events.first().map(|e| (e.seq, e.text.as_deref()));
    assert_eq!(first, Some((cursor + 1, Some("after the gate"))), "{woken:?}");
    assert!(took >= quiet, "the poll waited for the event: {took:?}");
    assert!(took < Duration::from_secs(30), "woken by the event, not by its wait_ms running out: {took:?}");
    d.wait_turn_end("s", &run, 1, WAIT).await;
}

/// `max`: a page holds 100 events by default; 0 is clamped up to 1 and 5000 down to 1000,
/// never refused; `caught_up` and `cursor` say where the page stopped.
#[tokio::test]
async fn max_defaults_to_100_and_is_clamped_to_1_through_1000() {
    // 1100 lines no parser knows: one `other` event each.
    let (d, _root, _bin) = fake_daemon(&format!("seq 1 1100 | sed 's/^/line /'\n{DONE}")).await;
    let run = start(&d, "print").await;
    d.wait_turn_end("s", &run, 1, WAIT).await;
    let total = d.events("s", &run).await.len() as u64;
    assert!(total > 1100, "{total} events");
    for (max, want) in [(None, 100u64), (Some(0), 1), (Some(1), 1), (Some(250), 250), (Some(1000), 1000), (Some(5000), 1000)] {
        let p = page(&d, &run, 0, max, None).await;
        let seqs: Vec<u64> = p.events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=want).collect::<Vec<_>>(), "max {max:?}");
        assert_eq!((p.cursor, p.caught_up), (want, false), "max {max:?}");
    }
    let (status, body) = d.raw("GET", &format!("/v1/spaces/s/agents/{run}/events?max=0"), None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["events"].as_array().map(Vec::len), Some(1), "{body}");
    let last = page(&d, &run, total - 5, Some(1000), None).await;
    assert_eq!((last.events.len(), last.cursor, last.caught_up), (5, total, true));
}

/// `raw`: each event carries the harness's original line only when asked.
#[tokio::test]
async fn raw_carries_the_original_line_only_when_asked() {
    let line = r#"{"type":"item.completed","item":{"id":"m","type":"agent_message","text":"raw me"}}"#;
    let (d, _root, _bin) = fake_daemon(&format!("echo '{line}'\n{DONE}")).await;
    let run = start(&d, "hi").await;
    d.wait_turn_end("s", &run, 1, WAIT).await;
    let message = |p: &spaces_sdk::EventsPage| p.events.iter().find(|e| e.kind == EventKind::Message).cloned().unwrap();
    for raw in [None, Some(false)] {
        let p = page(&d, &run, 0, None, raw).await;
        assert!(p.events.iter().all(|e| e.raw.is_none()), "raw {raw:?}: {:?}", p.events);
        assert_eq!(message(&p).text.as_deref(), Some("raw me"));
    }
    let p = page(&d, &run, 0, None, Some(true)).await;
    assert_eq!(message(&p).raw.as_deref(), Some(line));
    let (status, body) = d.raw("GET", &format!("/v1/spaces/s/agents/{run}/events?raw=true"), None);
    assert_eq!(status, 200, "{body}");
    assert!(serde_json::from_str::<Value>(&body).unwrap()["events"].as_array().unwrap().iter().any(|e| e["raw"] == line), "{body}");
}

/// `tail`: `output_tail` holds the last 40 lines by default, exactly `tail` when given, none
/// for 0, and at most 10,000 (a larger `tail` is clamped, not refused).
#[tokio::test]
async fn tail_bounds_the_output_tail() {
    let (d, _root, _bin) = fake_daemon(&format!("seq 1 10050 | sed 's/^/n/' >&2\n{}\n{DONE}", message("done"))).await;
    let run = start(&d, "hi").await;
    d.wait_for_event("s", &run, WAIT, |e| e.kind == EventKind::Exited).await;
    let tail = |n: Option<u32>| {
        let space = d.client.space("s");
        let run = run.clone();
        async move { space.agent_status(&run, n).await.unwrap().output_tail.unwrap_or_default() }
    };
    let all = tail(Some(20_000)).await;
    let lines: Vec<&str> = all.lines().collect();
    assert_eq!(lines.len(), 10_000, "clamped to 10,000 lines");
    assert!(lines.iter().filter(|l| l.starts_with("[stderr] n")).count() >= 9_990, "the stderr lines, prefixed");
    let last = |n: usize| lines[lines.len() - n..].join("\n");
    assert_eq!(tail(None).await, last(40), "40 by default");
    assert_eq!(tail(Some(3)).await, last(3));
    assert_eq!(tail(Some(0)).await, "", "0 for none");
}

/// One refusal of each kind over HTTP: 404 for `*_NOT_FOUND`, 409 for conflicts, 403 for
/// `UNAUTHORIZED` and `FORBIDDEN`, 400 otherwise; each in the envelope with its code.
#[tokio::test]
async fn http_status_codes_follow_the_error_code() {
    let d = TestDaemon::start().await;
    let root = d.space("s").await;
    std::fs::write(root.join("a.txt"), "alpha\n").unwrap();
    let ro = d.dir.path().join("ro");
    std::fs::create_dir_all(&ro).unwrap();
    let (ok, out) = d.cli(&["space", "add", "ro", &ro.display().to_string(), "--read-only"]);
    assert!(ok, "{out}");
    let read: Value = d.client.call_named("read", json!({"workspace_id": "s", "path": "a.txt"})).await.unwrap();
    let version = read["version"].as_str().unwrap().to_owned();
    std::fs::write(root.join("a.txt"), "alpha changed\n").unwrap();
    let add = |name: &str| json!({"workspace_id": "s", "patch": format!("*** Begin Patch\n*** Add File: {name}\n+x\n*** End Patch\n")});
    let keyed = |name: &str| {
        let mut p = add(name);
        p["operation_key"] = json!("key-1");
        p
    };
    d.client.call_named("apply_patch", keyed("k1.txt")).await.unwrap();
    let update = "*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha changed\n+beta\n*** End Patch\n";

    let tool = |name: &str, args: Value| ("POST", format!("/v1/tools/{name}"), Some(args.to_string()));
    let cases: Vec<(&str, String, Option<String>, u16, &str)> = vec![
        ("GET", "/v1/spaces/s/agents/run-0000".into(), None, 404, "RUN_NOT_FOUND"),
        ("GET", "/v1/spaces/nope/agents".into(), None, 404, "WORKSPACE_NOT_FOUND"),
        {
            let (m, p, b) = tool("read", json!({"workspace_id": "s", "path": "missing.txt"}));
            (m, p, b, 404, "FILE_NOT_FOUND")
        },
        {
            let (m, p, b) = tool("process_status", json!({"process_id": "proc-0000"}));
            (m, p, b, 404, "PROCESS_NOT_FOUND")
        },
        {
            let (m, p, b) = tool("apply_patch", add("a.txt"));
            (m, p, b, 409, "ADD_FILE_EXISTS")
        },
        {
            let (m, p, b) = tool("apply_patch", json!({"workspace_id": "s", "patch": update, "expected_versions": {"a.txt": version}}));
            (m, p, b, 409, "VERSION_CONFLICT")
        },
        {
            let (m, p, b) = tool("apply_patch", keyed("k2.txt"));
            (m, p, b, 409, "OPERATION_KEY_CONFLICT")
        },
        {
            let (m, p, b) =
                tool("apply_patch", json!({"workspace_id": "ro", "patch": "*** Begin Patch\n*** Add File: x\n+x\n*** End Patch\n"}));
            (m, p, b, 403, "UNAUTHORIZED")
        },
        {
            let (m, p, b) = tool("read", json!({"workspace_id": "s", "path": "../outside"}));
            (m, p, b, 400, "PATH_ESCAPE")
        },
        {
            let (m, p, b) = tool("apply_patch", json!({"workspace_id": "s", "patch": "not a patch"}));
            (m, p, b, 400, "INVALID_PATCH")
        },
        ("POST", "/v1/spaces/s/agents".into(), Some(r#"{"agent": "no-such-agent", "prompt": "hi"}"#.into()), 400, "HARNESS_UNAVAILABLE"),
        ("POST", "/v1/spaces/s/agents".into(), Some(r#"{"agent": "claude-code", "prompt": "  "}"#.into()), 400, "INVALID_ARGUMENT"),
    ];
    for (method, path, body, want_status, want_code) in cases {
        let (status, text) = d.raw(method, &path, body.as_deref());
        let code = serde_json::from_str::<Value>(&text).ok().and_then(|e| e["error"]["code"].as_str().map(str::to_owned));
        assert_eq!((status, code.as_deref()), (want_status, Some(want_code)), "{method} {path} {body:?}: {text}");
    }

    // FORBIDDEN: a tool caller's token (watch scope) asking for something that changes things.
    let (ok, out) = d.cli(&["token", "create", "--space", "s", "--scope", "watch"]);
    assert!(ok, "{out}");
    let token = out.lines().next().unwrap().trim().to_owned();
    let (status, text) =
        bearer_request(&d.state_dir().join("spacesd.sock"), "POST /v1/tools/apply_patch", &token, &add("w.txt").to_string());
    let code = serde_json::from_str::<Value>(&text).ok().and_then(|e| e["error"]["code"].as_str().map(str::to_owned));
    assert_eq!((status, code.as_deref()), (403, Some("FORBIDDEN")), "{text}");
}

/// One HTTP/1.1 request on the Unix socket with a bearer token: (status, body).
fn bearer_request(socket: &Path, line: &str, token: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    write!(
        s,
        "{line} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, out.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
}

/// A daemon with `env` in its own environment whose `openai-codex` writes what it was given of
/// `names` to `seen.env` in the Space, then answers.
async fn env_daemon(env: Vec<(String, String)>, names: &[&str]) -> (TestDaemon, std::path::PathBuf, tempfile::TempDir) {
    let bin = tempfile::tempdir().unwrap();
    let pattern = names.join("|");
    let agent = fake_codex(bin.path(), &format!("env | grep -E '^({pattern})=' | sort > seen.env\n{}\n{DONE}", message("ok")));
    let mut all = vec![("SPACES_HARNESS_BIN_OPENAI_CODEX".to_owned(), agent.display().to_string())];
    all.extend(env);
    let d = TestDaemon::start_with_env(all).await;
    let root = d.space("s").await;
    (d, root, bin)
}

/// `--env-from-host` copies a variable from the daemon's environment when it is on the
/// forwardable list; a name off the list, or unset, is not forwarded and the start report's
/// `notes` say why. `SPACES_FORWARDABLE_ENV` replaces the list.
#[tokio::test]
async fn env_from_host_forwards_only_names_on_the_forwardable_list() {
    let host = vec![
        ("ANTHROPIC_API_KEY".to_owned(), "sk-ant-from-the-host".to_owned()),
        ("MY_HOST_SECRET".to_owned(), "not-for-agents".to_owned()),
    ];
    let names = ["ANTHROPIC_API_KEY", "MY_HOST_SECRET", "OPENAI_BASE_URL"];
    let (d, root, _bin) = env_daemon(host.clone(), &names).await;
    let mut args = vec!["agent", "start", "openai-codex-exec", "hi", "--space", "s", "--json"];
    for n in names {
        args.extend(["--env-from-host", n]);
    }
    let (ok, out) = d.cli(&args);
    assert!(ok, "{out}");
    let report: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    let notes: Vec<&str> = report["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(
        notes[0].starts_with("MY_HOST_SECRET was not forwarded: it is not on this host's forwardable list (ANTHROPIC_API_KEY,"),
        "{notes:?}"
    );
    assert_eq!(notes[1], "OPENAI_BASE_URL was not forwarded: it is not set on this host");
    let run = report["run_id"].as_str().unwrap().to_owned();
    d.wait_turn_end("s", &run, 1, WAIT).await;
    assert_eq!(std::fs::read_to_string(root.join("seen.env")).unwrap(), "ANTHROPIC_API_KEY=sk-ant-from-the-host\n");

    // The operator's own list.
    let mut env = host;
    env.push(("SPACES_FORWARDABLE_ENV".into(), "MY_HOST_SECRET".into()));
    let (d, root, _bin) = env_daemon(env, &names).await;
    let opts = SpaceAgentOptions { env_from_host: names.iter().map(|n| n.to_string()).collect(), ..Default::default() };
    let report = d.client.agent_start(&start_request("hi", opts)).await.unwrap();
    assert_eq!(
        report.notes,
        vec![
            "ANTHROPIC_API_KEY was not forwarded: it is not on this host's forwardable list (MY_HOST_SECRET)".to_owned(),
            "OPENAI_BASE_URL was not forwarded: it is not on this host's forwardable list (MY_HOST_SECRET)".to_owned(),
        ]
    );
    d.wait_turn_end("s", &report.run_id, 1, WAIT).await;
    assert_eq!(std::fs::read_to_string(root.join("seen.env")).unwrap(), "MY_HOST_SECRET=not-for-agents\n");
}

/// `exit_when_idle` with a per-turn CLI (Codex): once the prompt is answered and the agent has
/// exited, the run is `done` and still takes a follow-up, which resumes it.
#[tokio::test]
async fn exit_when_idle_ends_done_for_a_per_turn_cli() {
    let (d, _root, _bin) = fake_daemon(&format!("cat > /dev/null\n{}\n{DONE}", message("answered"))).await;
    let opts = SpaceAgentOptions { exit_when_idle: Some(true), ..Default::default() };
    let run = d.client.agent_start(&start_request("hi", opts)).await.unwrap().run_id;
    assert_done(&d, &run, 1).await;
    let r = d.client.space("s").agent_message(&run, "again", None).await.unwrap();
    assert!(r.ok, "{r:?}");
    assert_done(&d, &run, 2).await;
}

/// `exit_when_idle` with a long-lived CLI (Claude Code's stream-json): after the turn the
/// daemon closes the agent's stdin, the agent exits, and the run is `done`; a follow-up
/// resumes it in a new process.
#[tokio::test]
async fn exit_when_idle_ends_done_for_a_long_lived_cli() {
    let bin = tempfile::tempdir().unwrap();
    let fake = bin.path().join("fake-claude");
    let init = r#"{"type":"system","subtype":"init","cwd":"/","session_id":"fake-session","tools":[],"model":"fake"}"#;
    let assistant = r#"{"type":"assistant","message":{"content":[{"text":"answered","type":"text"}],"id":"m1","model":"fake","role":"assistant","stop_reason":null,"type":"message","usage":{"input_tokens":1,"output_tokens":1}},"session_id":"fake-session"}"#;
    let result = r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":1,"num_turns":1,"result":"answered","stop_reason":"end_turn","session_id":"fake-session","usage":{"input_tokens":1,"output_tokens":1}}"#;
    // One answer per message on stdin; exit 0 at EOF.
    let script = format!("#!/bin/sh\nwhile read -r line; do\necho '{init}'\necho '{assistant}'\necho '{result}'\ndone\n");
    std::fs::write(&fake, script).unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let d = TestDaemon::start_with_env(vec![("SPACES_HARNESS_BIN_CLAUDE_CODE".into(), fake.display().to_string())]).await;
    d.space("s").await;
    let opts = SpaceAgentOptions { exit_when_idle: Some(true), ..Default::default() };
    let req = AgentStartRequest { agent: "claude-code".into(), ..start_request("hi", opts) };
    let run = d.client.agent_start(&req).await.unwrap().run_id;
    assert_done(&d, &run, 1).await;
    let r = d.client.space("s").agent_message(&run, "again", None).await.unwrap();
    assert!(r.ok, "{r:?}");
    assert_done(&d, &run, 2).await;
}

/// The run is `done` after turn `turn` ended `end_turn`: exited, resumable, nothing running.
async fn assert_done(d: &TestDaemon, run: &str, turn: u32) {
    let ended = d.wait_turn_end("s", run, turn, WAIT).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{}", describe(&d.events("s", run).await));
    // The turn's end makes the run idle for a moment; the agent's exit then makes it done.
    let st = d.wait_status("s", run, WAIT, |s| !matches!(s.status, Status::Running | Status::Idle)).await;
    assert_eq!(
        (st.status, st.phase, st.accepts_message, st.result_text.as_deref(), st.turns),
        (Status::Done, spaces_sdk::Phase::Exited, true, Some("answered"), turn),
        "{st:#?}\n{}",
        describe(&d.events("s", run).await)
    );
    assert!(st.reason.contains("exit_when_idle"), "{}", st.reason);
    wait_until("the run's processes to end", WAIT, || crate::support::run_processes(run).is_empty()).await;
}

/// `seq` goes on after a daemon restart: the next turn's events continue from the last stored
/// seq, with no gap and no repeat.
#[tokio::test]
async fn seq_continues_after_a_restart() {
    let (mut d, _root, _bin) = fake_daemon(&format!("cat > /dev/null\n{}\n{DONE}", message("answered"))).await;
    let run = start(&d, "one").await;
    d.wait_turn_end("s", &run, 1, WAIT).await;
    d.wait_status("s", &run, WAIT, settled).await;
    // A per-turn CLI's `exited` lands just after the turn's end: read the log once it is there.
    d.wait_for_event("s", &run, WAIT, |e| e.kind == EventKind::Exited).await;
    let before = d.events("s", &run).await;
    let last = before.last().unwrap().seq;
    d.restart().await;
    assert_eq!(d.events("s", &run).await, before, "the stored events, unchanged");
    let r = d.client.space("s").agent_message(&run, "two", None).await.unwrap();
    assert!(r.ok, "{r:?}");
    d.wait_turn_end("s", &run, 2, WAIT).await;
    let events = d.events("s", &run).await;
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>(), "{}", describe(&events));
    assert!(events.len() as u64 > last);
    assert!(events[last as usize..].iter().all(|e| e.turn == 2), "after the restart, turn 2 only:\n{}", describe(&events));
    assert_eq!(&events[..last as usize], &before[..]);
}

/// `agent list` (API and CLI) shows every run of the Space, newest first.
#[tokio::test]
async fn agent_list_is_newest_first() {
    let (d, _root, _bin) = fake_daemon(&format!("cat > /dev/null\n{}\n{DONE}", message("answered"))).await;
    let mut started = Vec::new();
    for prompt in ["first", "second", "third"] {
        let run = start(&d, prompt).await;
        d.wait_turn_end("s", &run, 1, WAIT).await;
        started.push(run);
    }
    started.reverse();
    let list = d.client.space("s").agent_list().await.unwrap();
    assert_eq!(list.iter().map(|r| r.run_id.clone()).collect::<Vec<_>>(), started);
    assert!(list.windows(2).all(|w| w[0].created_ms >= w[1].created_ms), "{list:#?}");
    let (ok, out) = d.cli(&["agent", "list", "--space", "s", "--json"]);
    assert!(ok, "{out}");
    let listed: Vec<Value> = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let ids: Vec<&str> = listed.iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(ids, started, "{out}");
    // The table: a header, then one row per run, newest first.
    let (ok, out) = d.cli(&["agent", "list", "--space", "s"]);
    assert!(ok, "{out}");
    assert!(out.lines().next().is_some_and(|h| h.starts_with("RUN") && h.contains("STATUS")), "{out}");
    let rows: Vec<&str> = out.lines().skip(1).map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(rows, started, "{out}");
}

/// `agent events --follow --verbose` prints every event as it is stored, including ones that land while it
/// runs, and exits 0 once the run is no longer running.
#[tokio::test]
async fn cli_follow_prints_live_events_until_the_turn_ends() {
    let body = format!("{}\n{UNTIL_GATE}\n{}\n{DONE}", message("before the gate"), message("after the gate"));
    let (d, root, _bin) = fake_daemon(&body).await;
    let run = start(&d, "follow me").await;
    let mut cmd = std::process::Command::new(crate::support::spacesd_bin());
    crate::support::hermetic(&mut cmd)
        .arg("--state-dir")
        .arg(d.state_dir())
        .args(["agent", "events", &run, "--space", "s", "--follow", "--verbose"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut lines = Vec::new();
    let deadline = Instant::now() + crate::support::scaled(WAIT);
    // The events up to the gate are printed while the turn is still running...
    while !lines.iter().any(|l: &String| l.ends_with("before the gate")) {
        let left = deadline.saturating_duration_since(Instant::now());
        lines.push(rx.recv_timeout(left).unwrap_or_else(|_| panic!("no `before the gate` line; so far: {lines:#?}")));
    }
    assert!(child.try_wait().unwrap().is_none(), "still following while the turn runs");
    assert!(!lines.iter().any(|l| l.contains("after the gate")));
    // ...and what lands later is printed too, until the run stops running.
    std::fs::write(root.join("gate"), "").unwrap();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "--follow did not end after the turn; so far: {lines:#?}");
        lines.extend(rx.try_iter());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    reader.join().unwrap();
    lines.extend(rx.try_iter());
    assert!(status.success(), "{status:?}: {lines:#?}");
    let after = lines.iter().position(|l| l.ends_with("after the gate")).unwrap_or_else(|| panic!("{lines:#?}"));
    let ended = lines.iter().position(|l| l.contains("turn_ended") && l.contains("(end_turn)")).unwrap_or_else(|| panic!("{lines:#?}"));
    assert!(after < ended, "{lines:#?}");
    assert!(lines.last().unwrap().starts_with("-- status: idle"), "{lines:#?}");
    let seqs: Vec<u64> = lines.iter().filter_map(|l| l.strip_prefix('#')?.split_whitespace().next()?.parse().ok()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "each event once, in order: {lines:#?}");
    // It stops once the run is no longer running: the agent's `exited` may land after that.
    let stored = d.events("s", &run).await;
    let turn_ended = stored.iter().find(|e| e.kind == EventKind::TurnEnded).unwrap().seq;
    assert!((turn_ended..=stored.len() as u64).contains(&(seqs.len() as u64)), "{lines:#?}\n{}", describe(&stored));
}

/// When no provider key reaches a run of the pinned CLI (none forwarded or given, no custom
/// endpoint), the start report says what to do with the daemon's environment and
/// `--env-from-host`, instead of leaving the CLI's `/login` advice as the only hint; with a
/// `base_url` there is no such note.
#[tokio::test]
async fn the_start_report_says_what_to_do_when_no_provider_key_reaches_the_agent() {
    let d = TestDaemon::start().await;
    d.space("s").await;
    let (ok, out) = d.cli(&["agent", "start", "claude-code", "hi", "--space", "s", "--json"]);
    assert!(ok, "{out}");
    let report: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    let notes: Vec<&str> = report["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert!(
        notes.iter().any(|n| n.starts_with("no provider key reaches this agent") && n.contains("--env-from-host ANTHROPIC_API_KEY")),
        "{notes:?}"
    );
    let run = report["run_id"].as_str().unwrap().to_owned();
    d.client.space("s").agent_stop(&run).await.unwrap();
    let (ok, out) = d.cli(&["agent", "start", "claude-code", "hi", "--space", "s", "--base-url", "http://127.0.0.1:9", "--json"]);
    assert!(ok, "{out}");
    assert!(!out.contains("no provider key"), "{out}");
    let run = serde_json::from_str::<Value>(out.trim()).unwrap()["run_id"].as_str().unwrap().to_owned();
    d.client.space("s").agent_stop(&run).await.unwrap();
    // A base_url that is not an http(s) URL is refused before anything is created, naming it.
    let (ok, out) = d.cli(&["agent", "start", "claude-code", "hi", "--space", "s", "--base-url", "localhost:8080"]);
    assert!(!ok && out.contains("options.base_url"), "{out}");
    assert_eq!(d.client.space("s").agent_list().await.unwrap().len(), 2);
}
