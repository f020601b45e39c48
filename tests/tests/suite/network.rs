//! Issue 28, a Space's network: open by default (agents must reach their provider), and a
//! `network: none` Space's commands and agents start in a network namespace of their own
//! (loopback only; at the Landlock level, no TCP), against a root daemon and an unprivileged
//! one. Without a sandbox such a Space runs nothing. The test's own TCP listener on 127.0.0.1
//! is what they try to reach.

use std::net::TcpListener;
use std::time::Duration;

use serde_json::{json, Value};
use spaces_sdk::client::ClientError;
use spaces_sdk::{ApiError, ErrorCode, SpaceNetwork};

use super::boundary::run_in;
use crate::support::{spacesd_bin, wait_until, TestDaemon};

/// The typed error of a call that must fail.
fn refusal<T: std::fmt::Debug>(r: Result<T, ClientError>) -> ApiError {
    match r {
        Err(ClientError::Api(e)) => e,
        other => panic!("expected a typed error, got {other:?}"),
    }
}

async fn tool(d: &TestDaemon, name: &str, args: Value) -> Value {
    match d.client.call_named(name, args.clone()).await {
        Ok(v) => v,
        Err(e) => panic!("{name} {args} failed: {e}"),
    }
}

/// A shell script that prints `== dev` and the network interfaces it sees (from
/// `/proc/net/dev`, its own network namespace's), then `== tcp` and `connected` or `refused`
/// for a TCP connect to 127.0.0.1:`port` (bash's `/dev/tcp`).
fn probe(port: u16) -> String {
    format!(
        "echo '== dev'; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\\n' ' '; echo; \
         echo '== tcp'; if /usr/bin/bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' 2>/dev/null; then echo connected; else echo refused; fi"
    )
}

/// The line after `== name` in `out`.
fn section<'a>(out: &'a str, name: &str) -> &'a str {
    let at = out.find(&format!("== {name}\n")).unwrap_or_else(|| panic!("no section {name} in:\n{out}"));
    out[at + name.len() + 4..].lines().next().unwrap_or("").trim()
}

/// How many connections wait on `listener` (non-blocking), each taken.
fn accepted(listener: &TcpListener) -> usize {
    let mut n = 0;
    while listener.accept().is_ok() {
        n += 1;
    }
    n
}

/// Registers `name` (made by [`TestDaemon::space`], so an unprivileged daemon owns it), then
/// registers it again with `--network none --replace` through the CLI.
async fn offline_space(d: &TestDaemon, name: &str) -> std::path::PathBuf {
    let root = d.space(name).await;
    let (ok, out) = d.cli(&["space", "add", name, &root.display().to_string(), "--network", "none", "--replace"]);
    assert!(ok, "space add --network none: {out}");
    assert!(out.contains("\"network\": \"none\""), "the record says it: {out}");
    root
}

/// `namespaced`: the sandbox makes a network namespace (bubblewrap), so only `lo` is seen;
/// at the Landlock level the host's interfaces stay visible and TCP is refused instead.
async fn a_network_none_spaces_commands_reach_no_network(d: TestDaemon, namespaced: bool) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    d.space("open").await;
    offline_space(&d, "offline").await;
    let listed = d.client.space_list(&spaces_sdk::Empty {}).await.unwrap();
    let network_of = |n: &str| listed.iter().find(|s| s.name == n).map(|s| s.network);
    assert_eq!((network_of("open"), network_of("offline")), (Some(SpaceNetwork::Enabled), Some(SpaceNetwork::None)));

    // The default: the host's network, so the test's listener is reached.
    let out = run_in(&d, "open", &probe(port)).await;
    assert_eq!(section(&out, "tcp"), "connected", "{out}");
    assert_eq!(accepted(&listener), 1, "the open Space's command reached the listener:\n{out}");
    // `none`: its own namespace, loopback alone, and 127.0.0.1 is not the host's (Landlock:
    // no TCP connect).
    let out = run_in(&d, "offline", &probe(port)).await;
    if namespaced {
        assert_eq!(section(&out, "dev"), "lo", "only a loopback inside:\n{out}");
    }
    assert_eq!(section(&out, "tcp"), "refused", "{out}");
    assert_eq!(accepted(&listener), 0, "nothing of the offline Space reached the listener:\n{out}");

    let info = tool(&d, "workspace_info", json!({"workspace_id": "offline"})).await;
    assert_eq!(
        info["execution"]["network"],
        json!({"policy": "restricted", "enforcement": "enforced", "client_may_escalate": false}),
        "{info}"
    );
    assert_eq!(info["execution"]["process"]["available"], json!(true), "{info}");
    let info = tool(&d, "workspace_info", json!({"workspace_id": "open"})).await;
    assert_eq!(info["execution"]["network"], json!({"policy": "enabled", "enforcement": "none", "client_may_escalate": false}), "{info}");
    // A client's request cannot open it: unknown keys are refused, never a grant.
    let e = refusal(d.client.call_named("exec_command", json!({"workspace_id": "offline", "command": ["true"], "network": true})).await);
    assert_eq!(e.code, ErrorCode::InvalidArgument, "{}", e.message);
}

#[tokio::test]
async fn case_28_a_network_none_spaces_commands_reach_no_network_root_daemon() {
    a_network_none_spaces_commands_reach_no_network(TestDaemon::start().await, true).await
}

#[tokio::test]
async fn case_28_a_network_none_spaces_commands_reach_no_network_unprivileged_daemon() {
    a_network_none_spaces_commands_reach_no_network(TestDaemon::start_unprivileged(vec![], vec![]).await, true).await
}

fn landlock() -> Vec<(String, String)> {
    vec![("SPACES_SANDBOX".to_owned(), "landlock".to_owned())]
}

#[tokio::test]
async fn case_28_landlock_a_network_none_spaces_commands_reach_no_network_root_daemon() {
    a_network_none_spaces_commands_reach_no_network(TestDaemon::start_with_env(landlock()).await, false).await
}

#[tokio::test]
async fn case_28_landlock_a_network_none_spaces_commands_reach_no_network_unprivileged_daemon() {
    a_network_none_spaces_commands_reach_no_network(TestDaemon::start_unprivileged(landlock(), vec![]).await, false).await
}

/// A fake Codex in a `network: none` Space: its run's notes say the network is off; inside, it
/// reaches no TCP listener of the host but still reaches the daemon through its run's own API
/// socket (`/run/spaces`, a Unix socket bound into the sandbox).
async fn an_agent_in_a_network_none_space_keeps_its_api_socket(unprivileged: bool) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let bin = tempfile::tempdir().unwrap();
    let script = format!(
        "cat >/dev/null; {{ {probe}; echo '== api'; {spacesd} --state-dir /run/spaces tool workspace_info '{{\"workspace_id\": \"offline\"}}' \
         | tr -d ' \\n'; echo; echo '== end'; }} > agent.out 2>&1; sleep 60",
        probe = probe(port),
        spacesd = spacesd_bin().display()
    );
    let agent = super::fake_agents::fake(bin.path(), "fake-codex", &script);
    if unprivileged {
        std::fs::set_permissions(bin.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let env = vec![("SPACES_HARNESS_BIN_OPENAI_CODEX".to_owned(), agent.display().to_string())];
    let d = if unprivileged { TestDaemon::start_unprivileged(env, vec![]).await } else { TestDaemon::start_with_env(env).await };
    let root = offline_space(&d, "offline").await;
    let req = crate::support::start_request("offline", "openai-codex-exec", "hi");
    let report = d.client.agent_start(&req).await.unwrap();
    assert!(report.notes.iter().any(|n| n.starts_with("network: none:") && n.contains("model provider")), "{:?}", report.notes);
    let out_file = root.join("agent.out");
    wait_until("the agent's probe", Duration::from_secs(60), || std::fs::read_to_string(&out_file).is_ok_and(|o| o.contains("== end")))
        .await;
    let out = std::fs::read_to_string(&out_file).unwrap();
    assert_eq!(section(&out, "dev"), "lo", "{out}");
    assert_eq!(section(&out, "tcp"), "refused", "{out}");
    assert_eq!(accepted(&listener), 0, "{out}");
    let info: Value = serde_json::from_str(section(&out, "api")).unwrap_or_else(|e| panic!("workspace_info over /run/spaces: {e}\n{out}"));
    assert_eq!(
        info["execution"]["network"],
        json!({"policy": "restricted", "enforcement": "enforced", "client_may_escalate": false}),
        "{out}"
    );
    let stopped = d.client.space("offline").agent_stop(&report.run_id).await.unwrap();
    assert!(stopped.ok, "{stopped:?}");
}

#[tokio::test]
async fn case_28_an_agent_in_a_network_none_space_has_no_network_but_its_api_socket_root_daemon() {
    an_agent_in_a_network_none_space_keeps_its_api_socket(false).await
}

#[tokio::test]
async fn case_28_an_agent_in_a_network_none_space_has_no_network_but_its_api_socket_unprivileged_daemon() {
    an_agent_in_a_network_none_space_keeps_its_api_socket(true).await
}

/// `SPACES_SANDBOX=off`: nothing could keep a `network: none` Space off the network, so its
/// commands and agents are refused (`UNAUTHORIZED`, naming both fixes) and `workspace_info`
/// says `enforcement: none` with no process tools; a default Space still runs commands.
#[tokio::test]
async fn case_28_without_the_sandbox_a_network_none_space_runs_nothing() {
    let bin = tempfile::tempdir().unwrap();
    let ran = bin.path().join("agent-ran");
    let agent = super::fake_agents::fake(bin.path(), "fake-codex", &format!("touch {}; cat >/dev/null", ran.display()));
    let env =
        vec![("SPACES_SANDBOX".to_owned(), "off".to_owned()), ("SPACES_HARNESS_BIN_OPENAI_CODEX".to_owned(), agent.display().to_string())];
    let d = TestDaemon::start_with_env(env).await;
    d.space("open").await;
    let root = offline_space(&d, "offline").await;

    let e = refusal(d.client.call_named("exec_command", json!({"workspace_id": "offline", "command": ["touch", "ran"]})).await);
    assert_eq!(e.code, ErrorCode::Unauthorized, "{}", e.message);
    assert!(e.message.contains("network: none") && e.message.contains("SPACES_SANDBOX=off"), "{}", e.message);
    let req = crate::support::start_request("offline", "openai-codex-exec", "hi");
    let e = refusal(d.client.agent_start(&req).await);
    assert_eq!(e.code, ErrorCode::Unauthorized, "{}", e.message);
    assert!(e.message.contains("network: none") && e.message.contains("sandbox"), "{}", e.message);
    assert!(d.client.space("offline").agent_list().await.unwrap().is_empty(), "no run was created");

    let info = tool(&d, "workspace_info", json!({"workspace_id": "offline"})).await;
    let execution = &info["execution"];
    assert_eq!(execution["network"], json!({"policy": "restricted", "enforcement": "none", "client_may_escalate": false}), "{info}");
    assert_eq!((&execution["permissions"]["exec"], &execution["process"]["available"]), (&json!(false), &json!(false)), "{info}");

    assert_eq!(run_in(&d, "open", "echo fine").await.trim(), "fine", "a default Space is unaffected");
    assert!(!root.join("ran").exists() && !ran.exists(), "nothing ran in the offline Space");
}
