//! Issue 28, "the smaller holes": error bodies show request values cut short, an agent's
//! environment can come from the CLI's own environment or a file (no secret in argv), and an MCP
//! session belongs to the credential that opened it. (A host-path `repo`: `repos.rs`; approval
//! holds capped by size: the ledger's unit tests.)

use std::process::{Command, Stdio};

use serde_json::{json, Value};

use super::survive::{fake_codex, DONE};
use crate::support::mcp::{refusal, Dial, HttpMcp, Mcp};
use crate::support::{hermetic, spacesd_bin, TestDaemon};

/// Big enough that a body echoing it is obvious; a request this size is read like any other.
const HUGE: usize = 8 << 20;

/// The longest error body a refusal of a huge value may have: its message shows at most 200
/// characters of each value (and the length in bytes).
const SHORT: usize = 1500;

/// A huge path, Space name, workspace id, agent name or option value is refused with a short
/// error body over HTTP and over `/mcp`: the value is shown cut, with its length in bytes,
/// never whole.
#[tokio::test]
async fn a_huge_path_or_name_gets_a_short_error() {
    let d = TestDaemon::start().await;
    let root = d.space("s").await;
    let huge = "p".repeat(HUGE);
    let big = |v: Value| v.to_string();
    let cases = [
        ("POST", "/v1/tools/read", big(json!({"workspace_id": "s", "path": huge}))),
        ("POST", "/v1/tools/read", big(json!({"workspace_id": "s", "path": format!("sub/{huge}")}))),
        ("POST", "/v1/tools/read", big(json!({"workspace_id": huge, "path": "f"}))),
        (
            "POST",
            "/v1/tools/apply_patch",
            big(json!({"workspace_id": "s", "patch": format!("*** Begin Patch\n*** Update File: {huge}\n@@\n-a\n+b\n*** End Patch\n")})),
        ),
        ("POST", "/v1/spaces", big(json!({"name": huge, "root": root.display().to_string()}))),
        ("POST", "/v1/spaces", big(json!({"name": "t", "root": format!("/nonexistent/{huge}")}))),
        ("POST", "/v1/spaces/s/agents", big(json!({"agent": huge, "prompt": "hi"}))),
        ("POST", "/v1/spaces/s/agents", big(json!({"agent": "openai-codex-exec", "prompt": "hi", "options": {"cwd": huge}}))),
        ("POST", "/v1/spaces/s/agents", big(json!({"agent": "openai-codex-exec", "prompt": "hi", "options": {"base_url": huge}}))),
        (
            "POST",
            "/v1/spaces/s/agents",
            big(json!({"agent": "openai-codex-exec", "prompt": "hi", "options": {"files": [{"name": huge, "content_base64": ""}]}})),
        ),
        ("POST", "/v1/spaces/s/agents", big(json!({"agent": "openai-codex-exec", "prompt": "hi", "options": {"repo": huge}}))),
        ("POST", "/v1/spaces/s/agents", big(json!({"agent": "openai-codex-exec", "prompt": "hi", "options": {"branch": huge}}))),
    ];
    for (method, path, body) in &cases {
        let (status, answer) = d.raw(method, path, Some(body));
        let shown: String = answer.chars().take(300).collect();
        assert!((400..500).contains(&status), "{method} {path}: {status} {shown}");
        assert!(answer.contains("\"code\""), "{method} {path}: in the envelope: {shown}");
        assert!(answer.len() < SHORT, "{method} {path}: a {} byte error body: {shown}...", answer.len());
    }
    // Where the refusal names the value, it says how long it was.
    let (_, answer) = d.raw("POST", "/v1/tools/read", Some(&cases[0].2));
    assert!(answer.contains(&format!("({HUGE} bytes)")), "{answer}");

    // The same over MCP (Streamable HTTP on the Unix socket).
    let mut mcp = HttpMcp::new(Dial::Unix(d.state_dir().join("spacesd.sock")));
    mcp.initialize();
    let r = mcp.call("read", json!({"workspace_id": "s", "path": huge}));
    let text = r.to_string();
    assert!(text.len() < SHORT, "a {} byte MCP refusal", text.len());
    let e = refusal("read", &json!({}), &r);
    assert!(e["message"].as_str().unwrap().contains(&format!("({HUGE} bytes)")), "{e}");
}

/// An MCP session is its opener's: a session opened with caller token A cannot be used or ended
/// (`DELETE`) with caller token B of the same Space, nor with the operator's token (403,
/// `FORBIDDEN`), and it goes on working for A; A may end it, after which it is gone (404).
#[tokio::test]
async fn an_mcp_session_is_used_and_ended_only_by_the_credential_that_opened_it() {
    let d = TestDaemon::start_with(vec![], vec!["--tcp".into(), "127.0.0.1:0".into()]).await;
    d.space("s").await;
    let addr = std::fs::read_to_string(d.state_dir().join("tcp.addr")).unwrap().trim().to_owned();
    let operator = std::fs::read_to_string(d.state_dir().join("token")).unwrap().trim().to_owned();
    let token = |scope: &str| {
        let (ok, out) = d.cli(&["token", "create", "--space", "s", "--scope", scope]);
        assert!(ok, "token create: {out}");
        out.lines().next().unwrap().trim().to_owned()
    };
    let (a, b) = (token("control"), token("control"));
    let mut owner = HttpMcp::new(Dial::Tcp { addr: addr.clone(), token: a });
    owner.initialize();
    let session = owner.session.clone().unwrap();
    let list = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}});
    for (who, other) in [("caller token B", b), ("the operator's token", operator)] {
        let mut intruder = HttpMcp::new(Dial::Tcp { addr: addr.clone(), token: other });
        intruder.session = Some(session.clone());
        let used = intruder.post(&list, &[]);
        assert_eq!(used.status, 403, "{who} used A's session: {used:?}");
        assert!(used.body.contains("FORBIDDEN"), "{who}: {used:?}");
        let ended = intruder.delete();
        assert_eq!(ended.status, 403, "{who} ended A's session: {ended:?}");
        assert!(!owner.list_tools().is_empty(), "A's session goes on after {who}'s try");
    }
    let ended = owner.delete();
    assert_eq!(ended.status, 200, "{ended:?}");
    let gone = owner.post(&list, &[]);
    assert_eq!(gone.status, 404, "an ended session is gone: {gone:?}");
}

/// `agent start --env NAME` takes the value from the CLI's own environment and `--env-file FILE`
/// reads NAME=VALUE lines, so no secret is in the command line; `--env NAME=VALUE` still works
/// and wins. A variable that is not set, an unreadable file and a malformed line are refused by
/// the CLI with a message naming them (never the value), and no run starts.
#[tokio::test]
async fn agent_env_comes_from_the_clis_environment_or_a_file() {
    let bin = tempfile::tempdir().unwrap();
    let agent = fake_codex(bin.path(), &format!("cat > /dev/null\n{DONE}"));
    let d = TestDaemon::start_with_env(vec![("SPACES_HARNESS_BIN_OPENAI_CODEX".into(), agent.display().to_string())]).await;
    d.space("s").await;
    let env_file = bin.path().join("agent.env");
    std::fs::write(&env_file, "# provider\nexport FILE_KEY=\"sk-from-file-123\"\nOVERRIDDEN=from-file\n").unwrap();
    let cli = |args: &[&str]| {
        let out = hermetic(&mut Command::new(spacesd_bin()))
            .arg("--state-dir")
            .arg(d.state_dir())
            .args(["agent", "start", "openai-codex-exec", "hi", "--space", "s"])
            .args(args)
            .env("SHELL_KEY", "sk-from-shell-456")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let file = env_file.display().to_string();
    let (ok, out, err) = cli(&["--json", "--env", "SHELL_KEY", "--env-file", &file, "--env", "OVERRIDDEN=flag"]);
    assert!(ok, "{out}{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    let run = report["run_id"].as_str().unwrap();
    let stored: Value =
        serde_json::from_str(&std::fs::read_to_string(d.state_dir().join("runs").join(run).join("env.json")).unwrap()).unwrap();
    let text = stored.to_string();
    for (name, value) in [("SHELL_KEY", "sk-from-shell-456"), ("FILE_KEY", "sk-from-file-123"), ("OVERRIDDEN", "flag")] {
        assert!(text.contains(&format!("\"{name}\":\"{value}\"")), "{name}={value} reaches the run: {text}");
    }

    std::fs::write(bin.path().join("bad.env"), "GOOD=1\nsk-leaked-secret\n").unwrap();
    let bad = bin.path().join("bad.env").display().to_string();
    let missing = bin.path().join("missing.env").display().to_string();
    for (args, says) in [
        (vec!["--env", "NOT_SET_ANYWHERE"], "--env NOT_SET_ANYWHERE: no such variable in this shell's environment".to_owned()),
        (vec!["--env-file", missing.as_str()], format!("--env-file {missing}: cannot read it")),
        (vec!["--env-file", bad.as_str()], format!("--env-file {bad}, line 2: expected NAME=VALUE")),
    ] {
        let (ok, out, err) = cli(&args);
        assert!(!ok, "{args:?}: {out}");
        assert!(err.contains(&says), "{args:?}: {err}");
        assert!(!err.contains("sk-leaked"), "{args:?}: the value is not repeated: {err}");
    }
    assert_eq!(d.client.space("s").agent_list().await.unwrap().len(), 1, "no run started for a refused environment");
}
