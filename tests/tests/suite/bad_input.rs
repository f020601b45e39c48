//! Bad input gets a typed error with a code from the contract, and nothing is created.

use spaces_sdk::client::ClientError;
use spaces_sdk::{AgentStartRequest, ErrorCode, SpaceAgentOptions};

use crate::support::TestDaemon;

fn code(r: Result<impl std::fmt::Debug, ClientError>) -> (ErrorCode, String) {
    match r {
        Err(ClientError::Api(e)) => (e.code, e.message),
        other => panic!("expected a typed error, got {other:?}"),
    }
}

fn start(agent: &str, prompt: &str, cwd: Option<&str>) -> AgentStartRequest {
    start_in("s", agent, prompt, cwd)
}

fn start_in(space: &str, agent: &str, prompt: &str, cwd: Option<&str>) -> AgentStartRequest {
    AgentStartRequest {
        space: space.into(),
        agent: agent.into(),
        prompt: prompt.into(),
        show: None,
        options: Some(SpaceAgentOptions { cwd: cwd.map(String::from), ..Default::default() }),
        request_id: None,
        traceparent: None,
    }
}

#[tokio::test]
async fn bad_input_gets_typed_errors_and_creates_nothing() {
    let d = TestDaemon::start().await;
    let root = d.space("s").await;
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::os::unix::fs::symlink("/tmp", root.join("escape")).unwrap();
    let c = &d.client;

    let (c1, m1) = code(c.agent_start(&start("no-such-agent", "hi", None)).await);
    assert_eq!(c1, ErrorCode::HarnessUnavailable);
    assert!(m1.contains("claude-code"), "message lists known agents: {m1}");
    let (c2, _) = code(c.agent_start(&start("claude-code", "   ", None)).await);
    assert_eq!(c2, ErrorCode::InvalidArgument);
    for (cwd, want) in [
        ("../", ErrorCode::PathEscape),
        ("/etc", ErrorCode::PathEscape),
        ("escape", ErrorCode::SymlinkRejected),
        ("missing-dir", ErrorCode::FileNotFound),
    ] {
        let (c3, m3) = code(c.agent_start(&start("claude-code", "hi", Some(cwd))).await);
        assert_eq!(c3, want, "cwd {cwd}: {m3}");
    }
    let (c4, _) = code(c.agent_start(&start_in("nope", "claude-code", "hi", None)).await);
    assert_eq!(c4, ErrorCode::WorkspaceNotFound);
    let (c5, m5) = code(c.space("s").agent_status("run-doesnotexist", None).await);
    assert_eq!(c5, ErrorCode::RunNotFound);
    assert!(m5.contains("agent list"), "message says what to do: {m5}");
    let (c6, _) = code(c.space("s").agent_message("run-doesnotexist", "hi", None).await);
    assert_eq!(c6, ErrorCode::RunNotFound);
    let (c7, _) = code(c.space("nope").agent_list().await);
    assert_eq!(c7, ErrorCode::WorkspaceNotFound);

    assert!(c.space("s").agent_list().await.unwrap().is_empty(), "no run was created");
    let runs_dir = d.state_dir().join("runs");
    let n = std::fs::read_dir(&runs_dir).map(|r| r.count()).unwrap_or(0);
    assert_eq!(n, 0, "no run directory was created");

    // The CLI reports the same typed error and fails.
    let (ok, out) = d.cli(&["agent", "start", "no-such-agent", "hi", "--space", "s"]);
    assert!(!ok);
    assert!(out.contains("HARNESS_UNAVAILABLE"), "{out}");
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_in_the_error_envelope() {
    let d = TestDaemon::start().await;
    let r = d.client.call::<_, serde_json::Value>(spaces_sdk::client::Method::GET, "/v1/nope", None::<&()>).await;
    assert_eq!(code(r).0, ErrorCode::InvalidArgument);
    let (status, _) = d.raw("GET", "/v1/nope", None);
    assert_eq!(status, 404, "an unknown route is 404");
    let r = d.client.call::<_, serde_json::Value>(spaces_sdk::client::Method::DELETE, "/v1/spaces", None::<&()>).await;
    let (c, message) = code(r);
    assert_eq!(c, ErrorCode::InvalidArgument);
    assert!(message.contains("DELETE"), "{message}");
    let (status, _) = d.raw("DELETE", "/v1/spaces", None);
    assert_eq!(status, 405, "a wrong method is 405");
}

#[tokio::test]
async fn re_registering_a_space_differently_needs_replace() {
    let d = TestDaemon::start().await;
    let root = d.space("s").await;
    let other = d.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let other = std::fs::canonicalize(other).unwrap();
    let same = spaces_sdk::SpaceAddRequest {
        name: "s".into(),
        root: root.display().to_string(),
        read_only: false,
        approvals: Default::default(),
        network: Default::default(),
        replace: false,
    };
    let record = |r: &spaces_sdk::SpaceAddRequest| spaces_sdk::SpaceRecord {
        name: r.name.clone(),
        root: r.root.clone(),
        read_only: r.read_only,
        approvals: r.approvals,
        network: r.network,
    };
    assert_eq!(d.client.space_add(&same).await.unwrap(), record(&same), "the same registration again is a no-op");
    let writable_elsewhere = spaces_sdk::SpaceAddRequest { root: other.display().to_string(), ..same.clone() };
    let (c, m) = code(d.client.space_add(&writable_elsewhere).await);
    assert_eq!(c, ErrorCode::WorkspaceExists, "a name taken is a conflict");
    assert!(m.contains("--replace"), "{m}");
    let read_only = spaces_sdk::SpaceAddRequest { read_only: true, ..same.clone() };
    assert_eq!(code(d.client.space_add(&read_only).await).0, ErrorCode::WorkspaceExists);
    let body = serde_json::to_string(&writable_elsewhere).unwrap();
    let (status, text) = d.raw("POST", "/v1/spaces", Some(&body));
    assert_eq!(status, 409, "a Space name taken answers 409 over HTTP: {text}");
    assert!(text.contains("WORKSPACE_EXISTS"), "{text}");
    assert_eq!(d.client.space_list(&spaces_sdk::Empty {}).await.unwrap(), vec![record(&same)], "nothing changed");
    let replace = spaces_sdk::SpaceAddRequest { replace: true, ..writable_elsewhere.clone() };
    assert_eq!(d.client.space_add(&replace).await.unwrap(), record(&writable_elsewhere));
    assert_eq!(d.client.space_list(&spaces_sdk::Empty {}).await.unwrap(), vec![record(&writable_elsewhere)]);
}
