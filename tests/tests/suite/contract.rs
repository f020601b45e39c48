//! The contract at the door: every operation of the catalogue, called over HTTP through the
//! typed client, three ways (a valid minimal request succeeds; one unknown key and one wrongly
//! typed field are refused with `INVALID_ARGUMENT` naming the key, and create nothing), plus the
//! field cases C1, C2 and C3.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use spaces_sdk::client::ClientError;
use spaces_sdk::{ErrorCode, EventKind};

use crate::support::TestDaemon;

/// What earlier calls produced, for the requests of later ones.
#[derive(Default)]
struct Fixtures {
    ids: BTreeMap<&'static str, String>,
}

impl Fixtures {
    fn get(&self, key: &str) -> String {
        self.ids.get(key).cloned().unwrap_or_else(|| panic!("fixture {key} not made yet"))
    }
}

const PATCH_ADD: &str = "*** Begin Patch\n*** Add File: added.txt\n+hello\n*** End Patch\n";

/// The minimal valid request of `name`, and a field to mistype with a wrongly typed value (`None`
/// when every field is a path segment, which is always a string). A new operation fails here
/// until it has a row: that is deliberate.
fn minimal(name: &str, f: &Fixtures) -> (Value, Option<(&'static str, Value)>) {
    match name {
        "agent_capabilities" | "space_list" => (json!({}), None),
        "space_add" => (json!({"name": "extra", "root": f.get("extra_root")}), Some(("read_only", json!("yes")))),
        "agent_start" => (json!({"space": "s", "agent": "claude-code", "prompt": "hi"}), Some(("prompt", json!(7)))),
        "agent_list" => (json!({"space": "s"}), None),
        "agent_status" => (json!({"space": "s", "run_id": f.get("run")}), Some(("tail", json!("lots")))),
        "agent_events" => (json!({"space": "s", "run_id": f.get("run")}), Some(("cursor", json!("abc")))),
        "agent_message" => (json!({"space": "s", "run_id": f.get("run"), "text": "more"}), Some(("force", json!("yes")))),
        "agent_interrupt" | "agent_stop" => (json!({"space": "s", "run_id": f.get("run")}), None),
        "workspace_info" => (json!({"workspace_id": "s"}), Some(("work_id", json!(5)))),
        "read" => (json!({"workspace_id": "s", "path": "a.txt"}), Some(("offset", json!("start")))),
        "find" => (json!({"workspace_id": "s"}), Some(("limit", json!("all")))),
        "apply_patch" => (json!({"workspace_id": "s", "patch": PATCH_ADD}), Some(("check_only", json!("no")))),
        "operation_status" => (json!({"operation_id": f.get("operation")}), Some(("operation_id", json!(1)))),
        "exec_command" => (json!({"workspace_id": "x", "command": ["true"]}), Some(("command", json!("true")))),
        "read_process" => (json!({"process_id": f.get("process")}), Some(("cursor", json!("end")))),
        "process_status" => (json!({"process_id": f.get("process")}), Some(("process_id", json!(3)))),
        "write_stdin" => (json!({"process_id": f.get("process"), "data": "hi\n"}), Some(("data", json!(["hi"])))),
        "process_resize" => (json!({"process_id": f.get("process"), "rows": 30, "cols": 100}), Some(("rows", json!("tall")))),
        "terminate_process" => (json!({"process_id": f.get("process")}), Some(("process_id", json!(false)))),
        "approval_create" => (
            json!({"tool": "apply_patch", "arguments": {"workspace_id": "s", "patch": PATCH_ADD.replace("added", "held")}}),
            Some(("tool", json!(1))),
        ),
        "approval_resolve" => (json!({"approval_id": f.get("approval"), "decision": "grant"}), Some(("decision", json!(true)))),
        "operation_resume" => (json!({"approval_id": f.get("approval")}), Some(("approval_id", json!(9)))),
        "work_open" => (json!({"workspace_id": "s", "title": "t"}), Some(("title", json!(1)))),
        "steer_status" | "steer_claim_next" | "work_finish" => (json!({"work_id": f.get("work")}), Some(("work_id", json!(1)))),
        "steer_complete" => {
            (json!({"work_id": f.get("work"), "intent_id": f.get("claimed_intent"), "outcome": "done"}), Some(("outcome", json!(1))))
        }
        // A query string is text: a string field of a GET cannot be mistyped.
        "inbox_works" => (json!({}), None),
        "inbox_work" | "inbox_work_stop" => (json!({"work_id": f.get("inbox_work")}), None),
        "inbox_intent_create" => (json!({"work_id": f.get("inbox_work"), "body": "do this"}), Some(("body", json!(1)))),
        "inbox_reorder" => (json!({"work_id": f.get("inbox_work"), "intent_ids": [f.get("intent")]}), Some(("intent_ids", json!("x")))),
        "inbox_intent_edit" => (json!({"intent_id": f.get("intent"), "body": "do that", "revision": 1}), Some(("revision", json!("one")))),
        "inbox_intent_queue" => (json!({"intent_id": f.get("intent"), "revision": 2}), Some(("revision", json!("two")))),
        "inbox_intent_cancel" => (json!({"intent_id": f.get("intent")}), None),
        "space_remove" => (json!({"name": "extra"}), Some(("force", json!("yes")))),
        "agent_remove" => (json!({"space": "s", "run_id": f.get("stopped_run")}), None),
        "agent_prune" => (json!({"space": "s", "older_than_ms": 86_400_000}), Some(("older_than_ms", json!("a week")))),
        "agent_usage" => (json!({"space": "s", "run_id": f.get("run"), "turns": true}), None),
        "webhook_add" => (json!({"url": "http://127.0.0.1:9/hook", "secret": "a-secret-of-sixteen-bytes"}), Some(("events", json!("all")))),
        "webhook_list" => (json!({}), None),
        "webhook_deliveries" => (json!({"max": 10}), Some(("max", json!("ten")))),
        "webhook_remove" => (json!({"webhook_id": "wh-none"}), None),
        "agent_budget" => (json!({"space": "s", "run_id": f.get("run"), "budget": {"turns": 5}}), Some(("budget", json!(5)))),
        "agent_diff" => (json!({"space": "s", "run_id": f.get("run")}), Some(("turn", json!("one")))),
        "agent_rewind" => {
            (json!({"space": "s", "run_id": f.get("ended_run"), "to_turn": 0, "what": "files"}), Some(("to_turn", json!("zero"))))
        }
        "agent_fork" => (json!({"space": "s", "run_id": f.get("ended_run"), "at_turn": 0}), Some(("at_turn", json!("zero")))),
        "agent_merge" => (json!({"space": "s", "run_id": f.get("fork")}), None),
        "persistent_agent_send" => (json!({"name": "h", "text": "again"}), Some(("text", json!(1)))),
        "home_list" => (json!({}), None),
        "home_snapshots" => (json!({"name": "h"}), None),
        "home_export" => (json!({"name": "h", "path": f.get("export_file")}), Some(("at", json!(1)))),
        "home_import" => (json!({"name": "h2", "path": f.get("export_file")}), None),
        "home_restore" => (json!({"name": "h", "to": f.get("restore_dir")}), Some(("at", json!(1)))),
        "home_delete" => (json!({"name": "h2"}), None),
        // "h3", imported from an archive, belongs to no Space until moved (set up in `prepare`;
        // "h" is held by the run `persistent_agent_send` started).
        "home_move" => (json!({"name": "h3", "space": "s"}), Some(("space", json!(1)))),
        other => panic!("no minimal request for operation {other:?}: add one to tests/tests/suite/contract.rs"),
    }
}

/// Ids a valid call's result provides to later requests.
fn remember(name: &str, result: &Value, f: &mut Fixtures) {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    match name {
        "agent_start" => drop(f.ids.insert("run", s(&result["run_id"]))),
        "agent_fork" => drop(f.ids.insert("fork", s(&result["run_id"]))),
        "apply_patch" => drop(f.ids.insert("operation", s(&result["operation_id"]))),
        "approval_create" => drop(f.ids.insert("approval", s(&result["approval_id"]))),
        "work_open" => drop(f.ids.insert("work", s(&result["work_id"]))),
        "inbox_intent_create" => drop(f.ids.insert("intent", s(&result["intent_id"]))),
        _ => {}
    }
}

/// Set-up some operations need before their turn: a live PTY process for the process tools,
/// a claimed intent for `steer_complete`, an inbox work for the inbox routes.
async fn prepare(d: &TestDaemon, name: &str, f: &mut Fixtures) {
    match name {
        "read_process" => {
            let r = d.client.call_named("exec_command", json!({"workspace_id": "p", "command": ["cat"], "tty": true})).await.unwrap();
            f.ids.insert("process", r["process_id"].as_str().unwrap().to_owned());
        }
        "steer_claim_next" => {
            let work = f.get("work");
            let intent = d.client.call_named("inbox_intent_create", json!({"work_id": work, "body": "x"})).await.unwrap();
            let id = intent["intent_id"].as_str().unwrap().to_owned();
            d.client.call_named("inbox_intent_queue", json!({"intent_id": id, "revision": intent["revision"]})).await.unwrap();
            f.ids.insert("claimed_intent", id);
        }
        "agent_remove" => {
            let r = d.client.call_named("agent_start", json!({"space": "s", "agent": "claude-code", "prompt": "to remove"})).await.unwrap();
            let run = r["run_id"].as_str().unwrap().to_owned();
            d.client.call_named("agent_stop", json!({"space": "s", "run_id": run})).await.unwrap();
            f.ids.insert("stopped_run", run);
        }
        "persistent_agent_send" => {
            // A persistent agent "h" with a saved home: a run of it (the fake writes into its
            // config dir), stopped, which saves the home and frees the agent.
            let r = d
                .client
                .call_named("agent_start", json!({"space": "s", "agent": "claude-code", "prompt": "hi", "options": {"home": "h"}}))
                .await
                .unwrap();
            let run = r["run_id"].as_str().unwrap().to_owned();
            // Stop once the fake has written its config dir (before that, the home has nothing to save).
            let written = d.state_dir().join("runs").join(&run).join("home/.claude/settings.json");
            let deadline = Instant::now() + Duration::from_secs(30);
            while !written.is_file() {
                assert!(Instant::now() < deadline, "the fake agent never wrote {}", written.display());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            d.client.call_named("agent_stop", json!({"space": "s", "run_id": run})).await.unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let homes = d.client.call_named("home_list", json!({})).await.unwrap();
                let h = homes.as_array().unwrap().iter().find(|h| h["name"] == "h").cloned();
                if h.is_some_and(|h| h["lease"].is_null() && h["snapshots"].as_u64() > Some(0)) {
                    break;
                }
                assert!(Instant::now() < deadline, "home h not saved and freed: {homes}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            f.ids.insert("export_file", d.dir.path().join("h.tar.zst").display().to_string());
            f.ids.insert("restore_dir", d.dir.path().join("h-restored").display().to_string());
        }
        "agent_rewind" => {
            // A run that ended (stopped) after its agent started: checkpoint 0 exists.
            let r = d.client.call_named("agent_start", json!({"space": "s", "agent": "claude-code", "prompt": "to rewind"})).await.unwrap();
            let run = r["run_id"].as_str().unwrap().to_owned();
            let deadline = Instant::now() + Duration::from_secs(60);
            while d.client.call_named("agent_diff", json!({"space": "s", "run_id": run, "from_turn": 0, "to_turn": 0})).await.is_err() {
                assert!(Instant::now() < deadline, "run {run} never took its first checkpoint");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            d.client.call_named("agent_stop", json!({"space": "s", "run_id": run})).await.unwrap();
            f.ids.insert("ended_run", run);
        }
        "home_move" => {
            d.client.call_named("home_import", json!({"name": "h3", "path": f.get("export_file")})).await.unwrap();
        }
        "inbox_works" => {
            let w = d.client.call_named("work_open", json!({"workspace_id": "s", "title": "inbox"})).await.unwrap();
            f.ids.insert("inbox_work", w["work_id"].as_str().unwrap().to_owned());
        }
        _ => {}
    }
}

/// What a refused request must not change.
async fn state(d: &TestDaemon) -> Value {
    let spaces = d.client.call_named("space_list", json!({})).await.unwrap();
    let runs = d.client.call_named("agent_list", json!({"space": "s"})).await.unwrap();
    let runs: Vec<Value> = runs.as_array().unwrap().iter().map(|r| r["run_id"].clone()).collect();
    let files = std::fs::read_dir(d.dir.path().join("space-s")).unwrap().count();
    json!({"spaces": spaces, "runs": runs, "files": files})
}

fn refusal(r: Result<Value, ClientError>, what: &str) -> spaces_sdk::ApiError {
    match r {
        Err(ClientError::Api(e)) => e,
        other => panic!("{what}: expected a typed refusal, got {other:?}"),
    }
}

/// A daemon whose `claude-code` is a fake that sleeps silently: a run stays mid-turn.
async fn daemon_with_a_silent_claude() -> (TestDaemon, tempfile::TempDir) {
    let bin_dir = tempfile::tempdir().unwrap();
    let fake = bin_dir.path().join("fake-claude");
    // It writes into its config dir first, so a persistent agent's home has something to save.
    std::fs::write(&fake, "#!/bin/sh\nmkdir -p \"$CLAUDE_CONFIG_DIR\" && echo x > \"$CLAUDE_CONFIG_DIR/settings.json\"\nexec sleep 60\n")
        .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let d = TestDaemon::start_with_env(vec![("SPACES_HARNESS_BIN_CLAUDE_CODE".into(), fake.display().to_string())]).await;
    (d, bin_dir)
}

#[tokio::test]
async fn every_operation_over_http_three_ways() {
    let (d, _bin_dir) = daemon_with_a_silent_claude().await;
    let root = d.space("s").await;
    std::fs::write(root.join("a.txt"), "alpha\n").unwrap();
    d.space("x").await;
    d.space("p").await;
    let extra = d.dir.path().join("extra");
    std::fs::create_dir_all(&extra).unwrap();
    let mut f = Fixtures::default();
    f.ids.insert("extra_root", extra.display().to_string());

    for op in spaces_sdk::op::catalogue() {
        let name = op.name;
        prepare(&d, name, &mut f).await;
        let (valid, mistype) = minimal(name, &f);
        let before = state(&d).await;

        let mut unknown = valid.clone();
        unknown["bogus_key"] = json!(1);
        let e = refusal(d.client.call_named(name, unknown).await, &format!("{name} with an unknown key"));
        assert_eq!(e.code, ErrorCode::InvalidArgument, "{name}: {e:?}");
        assert!(e.message.contains("bogus_key"), "{name}: the refusal names the key: {}", e.message);

        if let Some((field, bad)) = mistype {
            let mut wrong = valid.clone();
            wrong[field] = bad;
            let e = refusal(d.client.call_named(name, wrong).await, &format!("{name} with a mistyped {field}"));
            assert_eq!(e.code, ErrorCode::InvalidArgument, "{name}: {e:?}");
            assert!(e.message.contains(field), "{name}: the refusal names `{field}`: {}", e.message);
        }
        assert_eq!(state(&d).await, before, "{name}: a refused request changed something");

        let result = d.client.call_named(name, valid.clone()).await.unwrap_or_else(|e| panic!("{name} {valid}: {e}"));
        remember(name, &result, &mut f);
    }
}

/// C1: Node-style option keys, an unknown top-level key and a misspelt tool argument are refused
/// with `INVALID_ARGUMENT` naming the key and suggesting the right one; no run is created.
#[tokio::test]
async fn case_c1_unknown_keys_are_refused_with_a_suggestion() {
    let d = TestDaemon::start().await;
    d.space("demo").await;
    let body = r#"{"agent": "claude-code", "prompt": "hi", "options": {"baseUrl": "http://127.0.0.1:9", "exitWhenIdle": true}}"#;
    let (status, text) = d.raw("POST", "/v1/spaces/demo/agents", Some(body));
    assert_eq!(status, 400, "{text}");
    let e: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(e["error"]["code"], "INVALID_ARGUMENT", "{text}");
    let message = e["error"]["message"].as_str().unwrap();
    assert!(message.contains("baseUrl") && message.contains("base_url"), "{message}");
    assert_eq!(e["error"]["field"], "options.baseUrl");

    let (status, text) = d.raw("POST", "/v1/spaces/demo/agents", Some(r#"{"agent": "claude-code", "prompt": "hi", "promt": "x"}"#));
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("promt") && text.contains("did you mean `prompt`"), "{text}");

    let (status, text) = d.raw("POST", "/v1/tools/read", Some(r#"{"workspace_id": "demo", "paht": "a.txt"}"#));
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("paht") && text.contains("did you mean `path`"), "{text}");

    let runs = d.client.space("demo").agent_list().await.unwrap();
    assert!(runs.is_empty(), "no run was created: {runs:?}");
}

/// C2: malformed query strings, unknown routes and wrong methods answer in the JSON envelope
/// with a typed code and the right status.
#[tokio::test]
async fn case_c2_every_refusal_comes_in_the_envelope() {
    let d = TestDaemon::start().await;
    d.space("s").await;
    for (method, path, want) in [
        ("GET", "/v1/spaces/s/agents/run-0000/events?max=lots", 400),
        ("GET", "/v1/spaces/s/agents/run-0000/events?wait_ms=-1", 400),
        ("GET", "/v1/spaces/s/agents/run-0000/events?cursor=abc", 400),
        ("GET", "/v1/spaces/s/agents/run-0000?tail=-3", 400),
        ("GET", "/v1/nope", 404),
        ("DELETE", "/v1/capabilities", 405),
        ("PUT", "/v1/spaces", 405),
    ] {
        let (status, text) = d.raw(method, path, None);
        assert_eq!(status, want, "{method} {path}: {text}");
        let e: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{method} {path}: not JSON: {text:?}"));
        let code = e["error"]["code"].as_str().unwrap_or_else(|| panic!("{method} {path}: no code: {text}"));
        assert_eq!(code, "INVALID_ARGUMENT", "{method} {path}: {text}");
        assert!(!e["error"]["message"].as_str().unwrap().is_empty());
    }
    let (_, text) = d.raw("GET", "/v1/spaces/s/agents/run-0000/events?max=lots", None);
    assert!(text.contains("`max`"), "the refusal names the field: {text}");
}

/// C3: a cursor past the last event is answered at once with a typed error that gives the
/// last cursor, never a wait followed by `caught_up: true`.
#[tokio::test]
async fn case_c3_a_cursor_past_the_end_is_refused_at_once() {
    let (d, _bin_dir) = daemon_with_a_silent_claude().await;
    d.space("s").await;
    let run = d.client.space("s").agent_start("claude-code", "hi", None, None).await.unwrap().run_id;
    d.wait_for_event("s", &run, Duration::from_secs(30), |e| e.kind == EventKind::TurnStarted).await;
    let last = d.events("s", &run).await.last().map(|e| e.seq).unwrap();
    let past = last + 35;
    let started = Instant::now();
    let r = d
        .client
        .agent_events(&spaces_sdk::AgentEventsRequest {
            space: "s".into(),
            run_id: run.clone(),
            cursor: Some(past),
            wait_ms: Some(3_000),
            ..Default::default()
        })
        .await;
    let waited = started.elapsed();
    let e = refusal(r.map(|p| serde_json::to_value(p).unwrap()), "a cursor past the end");
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    assert_eq!(e.field.as_deref(), Some("cursor"));
    assert!(e.message.contains(&last.to_string()), "the refusal gives the last cursor {last}: {}", e.message);
    assert!(waited < Duration::from_millis(2_500), "answered at once, not after the long-poll: {waited:?}");
    // The last cursor itself is fine: caught up, nothing new.
    let page = d.client.space("s").agent_events(&run, Some(last), None).await.unwrap();
    assert!(page.caught_up && page.events.is_empty());
    d.client.space("s").agent_stop(&run).await.unwrap();
}

/// A run holds a bounded queue of follow-ups: one past the limit is refused with
/// `RESOURCE_QUEUE_FULL` (HTTP 429), and the queued ones stay queued.
#[tokio::test]
async fn follow_ups_past_the_queue_limit_are_refused_with_resource_queue_full() {
    let (d, _bin_dir) = daemon_with_a_silent_claude().await;
    d.space("s").await;
    let space = d.client.space("s");
    let run = space.agent_start("claude-code", "hi", None, None).await.unwrap().run_id;
    d.wait_for_event("s", &run, Duration::from_secs(30), |e| e.kind == EventKind::TurnStarted).await;
    let mut queued = 0;
    let refused = loop {
        match space.agent_message(&run, "more", None).await {
            Ok(r) => {
                assert!(r.ok, "{r:?}");
                queued += 1;
                assert!(queued <= 1000, "the queue never filled");
            }
            Err(ClientError::Api(e)) => break e,
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(refused.code, ErrorCode::ResourceQueueFull, "{refused:?}");
    assert!(queued >= 1, "some follow-ups were queued first");
    let (status, _) = d.raw("POST", &format!("/v1/spaces/s/agents/{run}/message"), Some(r#"{"text": "one more"}"#));
    assert_eq!(status, 429);
    let st = space.agent_status(&run, None).await.unwrap();
    assert_eq!(st.status, spaces_sdk::Status::Running, "{st:?}");
    space.agent_stop(&run).await.unwrap();
}
