//! Issue 15, "A security boundary": Space policy belongs to the directory, operators and tool
//! callers have different rights, and the listeners hold up under idle and slow connections.
//! Every refusal is shown with the code of its envelope.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use spaces_sdk::client::{Client, ClientError, Endpoint};
use spaces_sdk::ErrorCode;

use crate::support::mcp::{refusal, success, Dial, HttpMcp, Mcp};
use crate::support::TestDaemon;

/// A daemon with TCP on: (daemon, address, the operator's token).
async fn tcp_daemon(env: Vec<(String, String)>) -> (TestDaemon, String, String) {
    let d = TestDaemon::start_with(env, vec!["--tcp".into(), "127.0.0.1:0".into()]).await;
    let addr = std::fs::read_to_string(d.state_dir().join("tcp.addr")).unwrap().trim().to_owned();
    let token = std::fs::read_to_string(d.state_dir().join("token")).unwrap().trim().to_owned();
    (d, addr, token)
}

/// A caller's token made with the CLI, as an operator would.
fn caller_token(d: &TestDaemon, space: &str, scope: &str) -> String {
    let (ok, out) = d.cli(&["token", "create", "--space", space, "--scope", scope]);
    assert!(ok, "token create: {out}");
    out.lines().next().unwrap().trim().to_owned()
}

fn tcp(addr: &str, token: &str) -> Client {
    Client::new(Endpoint::Tcp { addr: addr.to_owned(), token: token.to_owned() })
}

/// The code of a refusal (panics on success).
fn code(r: Result<Value, ClientError>) -> ErrorCode {
    match r {
        Err(ClientError::Api(e)) => e.code,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn dir(d: &TestDaemon, name: &str) -> PathBuf {
    let p = d.dir.path().join(name);
    std::fs::create_dir_all(&p).unwrap();
    std::fs::canonicalize(p).unwrap()
}

fn space(name: &str, root: &Path, read_only: bool, approvals: &str, replace: bool) -> Value {
    json!({"name": name, "root": root.display().to_string(), "read_only": read_only, "approvals": approvals, "replace": replace})
}

const PATCH: &str = "*** Begin Patch\n*** Update File: f.txt\n@@\n-original\n+changed\n*** End Patch\n";

#[tokio::test]
async fn an_alias_a_replace_or_a_root_reaching_the_state_cannot_lift_a_policy() {
    let (d, addr, operator_token) = tcp_daemon(vec![]).await;
    let operator = tcp(&addr, &operator_token);
    let ro = dir(&d, "work/ro");
    std::fs::write(ro.join("f.txt"), "original\n").unwrap();
    std::fs::create_dir_all(ro.join("sub")).unwrap();
    let held = dir(&d, "space-held");
    operator.call_named("space_add", space("ro", &ro, true, "off", false)).await.unwrap();
    operator.call_named("space_add", space("held", &held, false, "confirm", false)).await.unwrap();
    let caller = tcp(&addr, &caller_token(&d, "ro", "control"));

    // A tool caller registers and re-policies nothing.
    for attempt in [
        space("alias", &ro, false, "off", false),
        space("alias", &ro, false, "off", true),
        space("ro", &ro, false, "off", true),
        space("root", Path::new("/"), false, "off", true),
    ] {
        assert_eq!(code(caller.call_named("space_add", attempt.clone()).await), ErrorCode::Forbidden, "{attempt}");
    }

    // Not even the operator lifts a policy by a second name without --replace.
    for attempt in [
        space("alias", &ro, false, "off", false),
        space("inner", &ro.join("sub"), false, "off", false),
        space("outer", &dir(&d, "work"), false, "off", false),
        space("unheld", &held, false, "off", false),
    ] {
        assert_eq!(code(operator.call_named("space_add", attempt.clone()).await), ErrorCode::InvalidArgument, "{attempt}");
    }
    let args = json!({"workspace_id": "alias", "patch": PATCH});
    assert_eq!(code(operator.call_named("apply_patch", args.clone()).await), ErrorCode::WorkspaceNotFound, "no alias was made");
    assert_eq!(std::fs::read_to_string(ro.join("f.txt")).unwrap(), "original\n");

    // Roots that reach the daemon's state or token are refused to everyone, --replace or not.
    for root in [PathBuf::from("/"), d.dir.path().to_path_buf(), d.state_dir(), d.state_dir().join("runs")] {
        std::fs::create_dir_all(&root).unwrap();
        let attempt = space("state", &root, true, "confirm", true);
        assert_eq!(code(operator.call_named("space_add", attempt.clone()).await), ErrorCode::InvalidArgument, "{attempt}");
    }
    assert_eq!(
        code(d.client.call_named("space_add", space("state", Path::new("/"), true, "confirm", true)).await),
        ErrorCode::InvalidArgument
    );

    // A stricter view is fine, and the operator's --replace is a deliberate choice.
    operator.call_named("space_add", space("view", &ro, true, "confirm", false)).await.unwrap();
    operator.call_named("space_add", space("alias", &ro, false, "off", true)).await.unwrap();
    let applied = operator.call_named("apply_patch", args).await.unwrap();
    assert_eq!(applied["status"], "applied", "{applied}");
    operator.call_named("space_add", space("ro", &ro, false, "off", true)).await.unwrap();
}

#[tokio::test]
async fn a_caller_token_acts_on_its_space_only_and_watch_only_reads() {
    let (d, addr, operator_token) = tcp_daemon(vec![]).await;
    let operator = tcp(&addr, &operator_token);
    for name in ["proj", "other"] {
        let root = d.space(name).await;
        std::fs::write(root.join("f.txt"), "original\n").unwrap();
    }
    let control_token = caller_token(&d, "proj", "control");
    let control = tcp(&addr, &control_token);
    let watch_token = caller_token(&d, "proj", "watch");
    let watch = tcp(&addr, &watch_token);

    // Its own Space, named or left out.
    for c in [&control, &watch] {
        let r = c.call_named("read", json!({"workspace_id": "proj", "path": "f.txt"})).await.unwrap();
        assert_eq!(r["content"], "original\n");
        c.call_named("read", json!({"path": "f.txt"})).await.unwrap();
        assert!(c.call_named("agent_list", json!({"space": "proj"})).await.unwrap().as_array().unwrap().is_empty());
    }
    // Another Space, the operator's operations, and another Space's process: FORBIDDEN.
    let started = operator.call_named("exec_command", json!({"workspace_id": "other", "command": ["sleep", "30"]})).await.unwrap();
    let theirs = started["process_id"].as_str().unwrap().to_owned();
    for (name, args) in [
        ("read", json!({"workspace_id": "other", "path": "f.txt"})),
        ("agent_list", json!({"space": "other"})),
        ("space_list", json!({})),
        ("approval_resolve", json!({"approval_id": "appr-00000000-0000-0000-0000-000000000000", "decision": "grant"})),
        ("inbox_works", json!({})),
        ("process_status", json!({"process_id": theirs})),
        ("terminate_process", json!({"process_id": theirs})),
    ] {
        assert_eq!(code(control.call_named(name, args.clone()).await), ErrorCode::Forbidden, "{name} {args}");
    }
    // Watch scope changes nothing.
    for (name, args) in [
        ("apply_patch", json!({"workspace_id": "proj", "patch": PATCH})),
        ("exec_command", json!({"workspace_id": "proj", "command": ["true"]})),
        ("agent_start", json!({"space": "proj", "agent": "claude-code", "prompt": "hi"})),
        ("work_open", json!({"workspace_id": "proj"})),
    ] {
        assert_eq!(code(watch.call_named(name, args.clone()).await), ErrorCode::Forbidden, "{name}");
    }
    let patched = control.call_named("apply_patch", json!({"workspace_id": "proj", "patch": PATCH})).await.unwrap();
    assert_eq!(patched["status"], "applied");
    operator.call_named("terminate_process", json!({"process_id": theirs})).await.unwrap();
    assert_eq!(operator.call_named("space_list", json!({})).await.unwrap().as_array().unwrap().len(), 2, "the operator sees all");

    // No credential, a wrong one, a revoked one: UNAUTHORIZED.
    assert_eq!(code(tcp(&addr, "spc_guessed").call_named("space_list", json!({})).await), ErrorCode::Unauthorized);
    let listed = d.cli(&["token", "list"]).1;
    assert!(!listed.contains(&control_token), "list never shows a secret: {listed}");
    let id = serde_json::from_str::<Value>(&listed).unwrap().as_array().unwrap()[0]["id"].as_str().unwrap().to_owned();
    assert!(d.cli(&["token", "revoke", &id]).0);
    assert_eq!(code(control.call_named("read", json!({"path": "f.txt"})).await), ErrorCode::Unauthorized, "revoked");
    let stored = std::fs::read_to_string(d.state_dir().join("tokens.json")).unwrap();
    assert!(!stored.contains(&watch_token), "tokens are stored hashed");

    // The same rules on /mcp: the tool list is the caller's, and refusals carry FORBIDDEN.
    let mut mcp = HttpMcp::new(Dial::Tcp { addr: addr.clone(), token: watch_token.clone() });
    mcp.initialize();
    let names: Vec<String> = mcp.list_tools().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect();
    assert!(names.contains(&"read".to_owned()) && names.contains(&"agent_events".to_owned()), "{names:?}");
    for gone in ["space_add", "space_list", "apply_patch", "exec_command", "approval_resolve", "agent_start"] {
        assert!(!names.contains(&gone.to_owned()), "{gone} is not offered to a watcher: {names:?}");
    }
    let args = json!({"path": "f.txt"});
    success("read", &args, &mcp.call("read", args.clone()));
    for (name, args) in [
        ("apply_patch", json!({"patch": PATCH})),
        ("space_add", space("x", &d.dir.path().join("space-proj"), false, "off", true)),
        ("read", json!({"workspace_id": "other", "path": "f.txt"})),
    ] {
        let e = refusal(name, &args, &mcp.call(name, args.clone()));
        assert_eq!(e["code"], "FORBIDDEN", "{name}: {e}");
    }
    let mut unknown = HttpMcp::new(Dial::Tcp { addr, token: "spc_guessed".into() });
    unknown.session = None;
    let reply = unknown.post(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}), &[]);
    assert_eq!(reply.status, 403, "{reply:?}");
    assert!(reply.body.contains("UNAUTHORIZED"), "{reply:?}");

    // On the Unix socket a bearer token is honoured too: a process may act with less.
    let (status, body) = unix_request(&d.state_dir().join("spacesd.sock"), "GET /v1/spaces", Some(&watch_token), "");
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("FORBIDDEN"), "{body}");
}

/// One HTTP/1.1 request on the Unix socket with an optional bearer token: (status, body).
fn unix_request(socket: &Path, line: &str, token: Option<&str>, body: &str) -> (u16, String) {
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(s, "{line} HTTP/1.1\r\nHost: localhost\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, out.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
}

#[tokio::test]
async fn another_uid_on_the_unix_socket_is_refused() {
    // Connecting as another uid needs root: CI runs as root; elsewhere this fails, saying so.
    assert!(nix::unistd::geteuid().is_root(), "this test connects as another uid, which needs root: run the suite as root");
    let d = TestDaemon::start().await;
    // Open the way to the socket (as a careless chmod would): the uid check still holds.
    for p in [d.dir.path().to_path_buf(), d.state_dir()] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o711)).unwrap();
    }
    std::fs::set_permissions(d.state_dir().join("spacesd.sock"), std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = std::process::Command::new(crate::support::spacesd_bin())
        .arg("--state-dir")
        .arg(d.state_dir())
        .args(["space", "list"])
        .env("HOME", "/tmp")
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("UNAUTHORIZED") && stderr.contains("uid 65534"), "{stderr}");
    assert!(d.client.space_list(&spaces_sdk::Empty {}).await.is_ok(), "the daemon's own uid is the operator");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_tcp_connections_leave_the_unix_socket_answering() {
    // The daemon gets an ordinary descriptor limit; this test needs more than 1,100 of its own.
    let (soft, hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
    if soft < 4096 {
        nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, hard.min(4096), hard).unwrap();
    }
    let d = TestDaemon::start_limited(vec![], vec!["--tcp".into(), "127.0.0.1:0".into()], Some(1024)).await;
    let addr = std::fs::read_to_string(d.state_dir().join("tcp.addr")).unwrap().trim().to_owned();
    d.space("s").await;

    let mut connecting = tokio::task::JoinSet::new();
    for _ in 0..1100 {
        let addr = addr.clone();
        connecting.spawn(async move { tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr)).await });
    }
    let mut idle = Vec::new();
    while let Some(r) = connecting.join_next().await {
        if let Ok(Ok(Ok(stream))) = r {
            idle.push(stream);
        }
    }
    assert_eq!(idle.len(), 1100, "every connection was made (the cap leaves the rest in the backlog)");

    let socket = d.state_dir().join("spacesd.sock");
    let started = Instant::now();
    let (status, body) = tokio::task::spawn_blocking(move || unix_request(&socket, "GET /v1/health", None, "")).await.unwrap();
    let took = started.elapsed();
    assert_eq!(status, 200, "{body}");
    assert!(took < Duration::from_secs(1), "/v1/health took {took:?} with {} idle TCP connections", idle.len());
    // Commands still start (they need descriptors too).
    let started = d.client.call_named("exec_command", json!({"workspace_id": "s", "command": ["true"]})).await.unwrap();
    assert!(started["process_id"].as_str().is_some(), "{started}");
    drop(idle);
}

/// Reads until EOF or `limit`; true when the peer closed within it.
fn closed_within(s: &mut std::net::TcpStream, limit: Duration) -> (bool, String) {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut out = Vec::new();
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (started.elapsed() < limit, String::from_utf8_lossy(&out).into_owned()),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => return (false, String::from_utf8_lossy(&out).into_owned()),
        }
    }
}

#[tokio::test]
async fn slow_and_idle_connections_are_cut_off() {
    let env =
        vec![("SPACES_HTTP_HEADER_TIMEOUT_MS".to_owned(), "300".to_owned()), ("SPACES_HTTP_BODY_TIMEOUT_MS".to_owned(), "300".to_owned())];
    let (d, addr, token) = tcp_daemon(env).await;
    let host = format!("localhost:{}", addr.rsplit(':').next().unwrap());

    // Silent from the start, and a request head that never ends.
    let mut silent = std::net::TcpStream::connect(&addr).unwrap();
    let mut dribble = std::net::TcpStream::connect(&addr).unwrap();
    dribble.write_all(b"GET /v1/health HTTP/1.1\r\nHost: ").unwrap();
    assert!(closed_within(&mut silent, Duration::from_secs(3)).0, "a silent connection is closed");
    assert!(closed_within(&mut dribble, Duration::from_secs(3)).0, "an unfinished head is closed");

    // Idle after a whole request (keep-alive).
    let mut kept = std::net::TcpStream::connect(&addr).unwrap();
    write!(kept, "GET /v1/health HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n").unwrap();
    let (closed, answer) = closed_within(&mut kept, Duration::from_secs(3));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(closed, "an idle keep-alive connection is closed");

    // A body that stalls: refused, and the refusal does not repeat it.
    let mut stalled = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        stalled,
        "POST /v1/tools/read HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"path\": \"SECRET-VALUE"
    )
    .unwrap();
    let (_, answer) = closed_within(&mut stalled, Duration::from_secs(3));
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("INVALID_ARGUMENT") && !answer.contains("SECRET-VALUE"), "{answer}");
    drop(d);
}

#[tokio::test]
async fn error_bodies_never_repeat_the_input() {
    let d = TestDaemon::start().await;
    d.space("s").await;
    let secret = "SECRET-7f3a<script>";
    for (method, path, body) in [
        ("POST", "/v1/tools/read".to_owned(), format!("[\"{secret}\"]")),
        ("POST", "/v1/tools/read".to_owned(), format!("{{\"workspace_id\": \"s\", \"path\": \"f\", \"limit\": \"{secret}\"}}")),
        ("POST", "/v1/tools/read".to_owned(), format!("{{\"workspace_id\": \"s\", \"path\": [\"{secret}\"]}}")),
        ("GET", "/v1/spaces/s/agents/run-00000000/events?cursor=SECRET-7f3a".to_owned(), String::new()),
        ("GET", "/v1/SECRET-7f3a".to_owned(), String::new()),
        ("DELETE", "/v1/SECRET-7f3a".to_owned(), String::new()),
        (
            "POST",
            "/v1/spaces/s/agents".to_owned(),
            format!("{{\"agent\": \"claude-code\", \"prompt\": \"hi\", \"options\": {{\"exit_when_idle\": \"{secret}\"}}}}"),
        ),
    ] {
        let (status, answer) = d.raw(method, &path, Some(&body));
        assert!((400..500).contains(&status), "{method} {path}: {status} {answer}");
        assert!(answer.contains("\"code\""), "{method} {path}: in the envelope: {answer}");
        assert!(!answer.contains("SECRET"), "{method} {path} {body}: the input is repeated: {answer}");
    }
}
