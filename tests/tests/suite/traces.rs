//! Issue 33, traces: with `SPACES_OTLP_ENDPOINT` set, a local OTLP/HTTP receiver on 127.0.0.1
//! sees one trace for a real Claude Code run started with the caller's `traceparent`: the run's
//! span under the caller's span, the turn under the run, each tool call under the turn, usage
//! as attributes. The agent got the turn's `TRACEPARENT`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use spaces_sdk::{AgentStartRequest, EventKind, SpaceAgentOptions, Status};
use spaces_testkit::{Reply, Script, ScriptedServer};

use super::harness::CLAUDE as H;
use crate::support::{describe, require_cli, wait_until, TestDaemon};

const TURN: Duration = Duration::from_secs(120);
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER: &str = "00f067aa0ba902b7";

/// An OTLP/HTTP (JSON) receiver: every span it got.
async fn collector() -> (String, Arc<Mutex<Vec<Value>>>) {
    let spans = Arc::new(Mutex::new(Vec::new()));
    let shared = spans.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: String| {
            let spans = shared.clone();
            async move {
                let v: Value = serde_json::from_str(&body).unwrap_or_default();
                let mut got = spans.lock().unwrap();
                for rs in v["resourceSpans"].as_array().into_iter().flatten() {
                    for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                        got.extend(ss["spans"].as_array().into_iter().flatten().cloned());
                    }
                }
                "{}"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), spans)
}

fn attr(span: &Value, key: &str) -> Option<Value> {
    span["attributes"].as_array()?.iter().find(|a| a["key"] == key).map(|a| a["value"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_sees_one_trace_caller_run_turn_and_tool_calls() {
    require_cli(H.tools, H.binary);
    let (endpoint, spans) = collector().await;
    let d = TestDaemon::start_with_env(vec![("SPACES_OTLP_ENDPOINT".into(), endpoint)]).await;
    let root = d.space("s").await;
    let server = ScriptedServer::start(H.wire, Script::new([])).await.unwrap();
    server.push(H.create_file(&root, "traced.txt", "hello\n"));
    server.push(Reply::ToolCall {
        name: "Bash".into(),
        input: serde_json::json!({"command": "echo \"$TRACEPARENT\" > tp.txt", "description": "trace"}),
    });
    server.push(Reply::Text("done".into()));
    let req = AgentStartRequest {
        space: "s".into(),
        agent: H.id.into(),
        prompt: "write a file".into(),
        show: None,
        options: Some(SpaceAgentOptions { base_url: Some(server.base_url()), exit_when_idle: Some(true), ..Default::default() }),
        request_id: None,
        traceparent: Some(format!("00-{TRACE}-{CALLER}-01")),
    };
    let run = d.client.agent_start(&req).await.unwrap().run_id;
    d.wait_status("s", &run, TURN, |s| s.status == Status::Done).await;
    let events = d.events("s", &run).await;
    let tools = events.iter().filter(|e| e.kind == EventKind::ToolCall).count();
    assert_eq!(tools, 2, "{}", describe(&events));
    wait_until("the run's span", TURN, || spans.lock().unwrap().iter().any(|s| s["name"].as_str().is_some_and(|n| n.starts_with("run "))))
        .await;

    let got = spans.lock().unwrap().clone();
    assert!(got.iter().all(|s| s["traceId"] == TRACE), "one trace, the caller's: {got:#?}");
    let named =
        |prefix: &str| got.iter().filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with(prefix))).cloned().collect::<Vec<_>>();
    let (runs, turns, tool_spans) = (named("run "), named("turn "), named("tool "));
    assert_eq!((runs.len(), turns.len(), tool_spans.len()), (1, 1, 2), "{got:#?}");
    let (run_span, turn) = (&runs[0], &turns[0]);
    assert_eq!(run_span["parentSpanId"], CALLER, "the run under the caller's span");
    assert_eq!(turn["parentSpanId"], run_span["spanId"], "the turn under the run");
    assert!(tool_spans.iter().all(|t| t["parentSpanId"] == turn["spanId"]), "each tool call under the turn: {tool_spans:#?}");
    assert!(attr(turn, "gen_ai.usage.input_tokens").is_some() && attr(run_span, "spaces.usage.cost_usd").is_some(), "{turn:#}");
    // The agent's commands saw the turn's trace context.
    let seen = std::fs::read_to_string(root.join("tp.txt")).unwrap();
    assert_eq!(seen.trim(), format!("00-{TRACE}-{}-01", turn["spanId"].as_str().unwrap()));
}
