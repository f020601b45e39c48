//! Issue 33, webhooks: a real HTTP receiver on 127.0.0.1 gets every chosen event of a real
//! Claude Code run, each delivery id with a valid Standard Webhooks signature (checked here
//! with `hmac` on its own), through a receiver that fails the first two tries and a `kill -9`
//! of the daemon while a delivery waits for its retry; in order per run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use spaces_sdk::{AgentStartRequest, EventKind, SpaceAgentOptions};
use spaces_testkit::{Reply, Script, ScriptedServer};

use super::harness::CLAUDE as H;
use crate::support::{require_cli, settled, wait_until, TestDaemon};

const TURN: Duration = Duration::from_secs(120);
const SECRET: &str = "a-secret-of-the-operator-0123456789";

/// What the receiver got: each request's headers and body, in arrival order.
#[derive(Default)]
struct Got {
    requests: Vec<(HeaderMap, String)>,
}

/// A receiver on 127.0.0.1 that answers 503 to its first `fail` requests, then 200.
async fn receiver(fail: usize) -> (String, Arc<Mutex<Got>>) {
    let got = Arc::new(Mutex::new(Got::default()));
    let shared = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: String| {
            let got = shared.clone();
            async move {
                let mut g = got.lock().unwrap();
                g.requests.push((headers, body));
                if g.requests.len() <= fail {
                    StatusCode::SERVICE_UNAVAILABLE
                } else {
                    StatusCode::OK
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/hook"), got)
}

/// The Standard Webhooks signature of a request, computed here.
fn expected_signature(id: &str, ts: &str, body: &str) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{id}.{ts}.{body}").as_bytes());
    format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_gets_every_chosen_event_signed_through_failures_and_a_kill() {
    require_cli(H.tools, H.binary);
    let (url, got) = receiver(2).await;
    let script = Script::new([Reply::Text("first answer".into()), Reply::Text("second answer".into())]);
    let server = ScriptedServer::start(H.wire, script).await.unwrap();
    let mut d = TestDaemon::start().await;
    d.space("s").await;
    let hook = d
        .client
        .call_named("webhook_add", json!({"url": url, "secret": SECRET, "events": ["run.started", "turn.ended", "run.idle"]}))
        .await
        .unwrap();
    let hook_id = hook["webhook_id"].as_str().unwrap().to_owned();

    let req = AgentStartRequest {
        space: "s".into(),
        agent: H.id.into(),
        prompt: "answer twice".into(),
        show: None,
        options: Some(SpaceAgentOptions { base_url: Some(server.base_url()), ..Default::default() }),
        request_id: None,
        traceparent: None,
    };
    let run = d.client.agent_start(&req).await.unwrap().run_id;
    d.wait_turn_end("s", &run, 1, TURN).await;
    // The first delivery failed once (503) and waits for its retry: the daemon dies now.
    wait_until("the first try", TURN, || !got.lock().unwrap().requests.is_empty()).await;
    d.restart().await;
    d.wait_status("s", &run, TURN, settled).await;
    d.client.space("s").agent_message(&run, "again", None).await.unwrap();
    d.wait_turn_end("s", &run, 2, TURN).await;

    // Every chosen event of the run's log, by delivery id.
    let events = d.events("s", &run).await;
    let mut expected = Vec::new();
    for e in &events {
        let kinds: &[&str] = match (e.kind, e.stop_reason) {
            (EventKind::TurnStarted, _) if e.turn == 1 => &["run.started"],
            (EventKind::TurnEnded, Some(spaces_sdk::StopReason::EndTurn)) => &["turn.ended", "run.idle"],
            _ => &[],
        };
        expected.extend(kinds.iter().map(|k| format!("{hook_id}:{run}:{}:{k}", e.seq)));
    }
    assert_eq!(expected.len(), 5, "run.started, then turn.ended and run.idle twice");
    wait_until("every delivery", TURN, || {
        let g = got.lock().unwrap();
        let ids: std::collections::BTreeSet<String> =
            g.requests.iter().filter_map(|(h, _)| h.get("webhook-id").and_then(|v| v.to_str().ok()).map(str::to_owned)).collect();
        expected.iter().all(|id| ids.contains(id))
    })
    .await;

    let requests = got.lock().unwrap().requests.clone();
    let mut first_seen: Vec<String> = Vec::new();
    let mut bodies: BTreeMap<String, String> = BTreeMap::new();
    for (headers, body) in &requests {
        let h = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        let (id, ts) = (h("webhook-id"), h("webhook-timestamp"));
        assert!(expected.contains(&id), "only chosen events: {id}");
        assert_eq!(h("webhook-signature"), expected_signature(&id, &ts, body), "a valid signature for {id}");
        let v: Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["data"]["run_id"], json!(run));
        assert_eq!(
            format!("{hook_id}:{run}:{}:{}", v["data"]["event"]["seq"], v["type"].as_str().unwrap()),
            id,
            "the body is the event the id names"
        );
        // A repeat (sent again after the kill) carries the same body.
        assert_eq!(bodies.entry(id.clone()).or_insert_with(|| body.clone()), body);
        if !first_seen.contains(&id) {
            first_seen.push(id);
        }
    }
    assert_eq!(first_seen, expected, "in order per run, every one");

    let deliveries = d.client.call_named("webhook_deliveries", json!({"webhook_id": hook_id})).await.unwrap();
    let list = deliveries.as_array().unwrap();
    assert_eq!(list.len(), 5, "{deliveries:#}");
    assert!(list.iter().all(|x| x["status"] == "delivered"), "{deliveries:#}");
    let first = list.iter().find(|x| x["delivery_id"] == json!(expected[0])).unwrap();
    assert!(first["attempts"].as_u64().unwrap() >= 2, "the first one was tried again: {first:#}");
    let hooks = d.client.call_named("webhook_list", json!({})).await.unwrap();
    assert_eq!(hooks[0]["delivered"], 5, "{hooks:#}");
    assert!(hooks[0].get("secret").is_none(), "the secret is never returned: {hooks:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_webhooks_are_refused_naming_the_field() {
    let d = TestDaemon::start().await;
    for (args, field) in [
        (json!({"url": "ftp://x", "secret": SECRET}), "url"),
        (json!({"url": "http://127.0.0.1:1/h", "secret": "short"}), "secret"),
        (json!({"url": "http://127.0.0.1:1/h", "secret": SECRET, "events": ["run.exploded"]}), "events"),
    ] {
        match d.client.call_named("webhook_add", args).await {
            Err(spaces_sdk::client::ClientError::Api(e)) => {
                assert_eq!((e.code, e.field.as_deref()), (spaces_sdk::ErrorCode::InvalidArgument, Some(field)), "{e:?}")
            }
            other => panic!("refused naming {field}: {other:?}"),
        }
    }
}
