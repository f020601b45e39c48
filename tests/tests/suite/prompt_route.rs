//! One prompt, followed from each front door to the agent's stdin (docs/architecture.md, "A
//! prompt, from a front door to the agent's stdin"): the typed client (what the Python and Node
//! SDKs call), the CLI and MCP over stdio. The prompt is one that careless handling breaks:
//! combining marks, a ZWJ emoji sequence, right-to-left and byte-order marks, U+2028, CRLF,
//! quotes and backslashes, a NUL, and a four-byte character straddling the 64 KiB mark, where a
//! buffer split in the middle of a character turns it into U+FFFD. The fake agents write what
//! reached their stdin into the Space, and the test compares bytes.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use spaces_sdk::{AgentStartRequest, SpaceAgentOptions, StopReason};

use super::fake_agents::fake;
use crate::support::{describe, mcp::StdioMcp, TestDaemon};

const WAIT: Duration = Duration::from_secs(60);

/// The prompt: awkward characters first, ASCII up to the 64 KiB mark, then a four-byte
/// character whose bytes straddle it.
fn awkward_prompt() -> String {
    let head =
        "naïve café (e\u{301}) 日本語 🧑\u{200d}💻 \u{202e}rtl\u{202c} \u{feff}bom \u{2028}ls \"q\" \\b\\ \t tab\r\ncrlf \u{0} nul\n";
    let mut p = head.to_owned();
    while p.len() < 65_534 {
        p.push('x');
    }
    p.push('😀');
    p.push_str(" end");
    p
}

/// Codex's wire: the prompt is stdin to EOF; the fake keeps those bytes as `stdin-<run>.bin`.
const CODEX: &str = r#"cat > "stdin-$SPACES_RUN_ID.bin"
echo '{"type":"thread.started","thread_id":"fake-thread"}'
echo '{"type":"turn.started"}'
echo '{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"kept"}}'
echo '{"type":"turn.completed","usage":{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1}}'"#;

/// Claude Code's stream-json: the prompt is a JSON line on stdin; the fake keeps that line.
const CLAUDE: &str = r#"IFS= read -r line
printf '%s' "$line" > "stdin-$SPACES_RUN_ID.bin"
echo '{"type":"system","subtype":"init","cwd":"/","session_id":"fake-session","tools":[],"model":"fake"}'
echo '{"type":"result","subtype":"success","is_error":false,"duration_ms":1,"num_turns":1,"result":"kept","stop_reason":"end_turn","session_id":"fake-session","usage":{"input_tokens":1,"output_tokens":1}}'
cat > /dev/null"#;

async fn daemon(bin: &Path) -> (TestDaemon, std::path::PathBuf) {
    let codex = fake(bin, "fake-codex", CODEX);
    let claude = fake(bin, "fake-claude", CLAUDE);
    let d = TestDaemon::start_with_env(vec![
        ("SPACES_HARNESS_BIN_OPENAI_CODEX".into(), codex.display().to_string()),
        ("SPACES_HARNESS_BIN_CLAUDE_CODE".into(), claude.display().to_string()),
    ])
    .await;
    let root = d.space("s").await;
    (d, root)
}

/// What reached the agent's stdin in run `run`, once its first turn ended well.
async fn stdin_of(d: &TestDaemon, root: &Path, run: &str) -> Vec<u8> {
    let ended = d.wait_turn_end("s", run, 1, WAIT).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{}", describe(&d.events("s", run).await));
    std::fs::read(root.join(format!("stdin-{run}.bin"))).expect("the fake agent kept its stdin")
}

/// The text of Claude Code's stream-json user message line.
fn claude_text(line: &[u8]) -> String {
    let v: Value = serde_json::from_slice(line).expect("the user message is one JSON line");
    let content = &v["message"]["content"];
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        other => panic!("no content in {other}"),
    }
}

#[tokio::test]
async fn a_prompt_careless_handling_breaks_reaches_the_agents_stdin_byte_for_byte_from_every_front_door() {
    let bin = tempfile::tempdir().unwrap();
    let (d, root) = daemon(bin.path()).await;
    let prompt = awkward_prompt();
    let request = |agent: &str| AgentStartRequest {
        space: "s".into(),
        agent: agent.into(),
        prompt: prompt.clone(),
        show: None,
        options: Some(SpaceAgentOptions::default()),
        request_id: None,
        traceparent: None,
    };

    // The typed client: what `Space.agent_start` in Python and `space.agentStart` in Node call.
    let run = d.client.agent_start(&request("openai-codex-exec")).await.unwrap().run_id;
    assert!(stdin_of(&d, &root, &run).await == prompt.as_bytes(), "the typed client's prompt changed on its way (Codex)");
    let run = d.client.agent_start(&request("claude-code")).await.unwrap().run_id;
    assert!(claude_text(&stdin_of(&d, &root, &run).await) == prompt, "the typed client's prompt changed on its way (Claude Code)");

    // The CLI, reading the prompt from a file.
    let file = bin.path().join("prompt.txt");
    std::fs::write(&file, &prompt).unwrap();
    let (ok, out) = d.cli(&["agent", "start", "--space", "s", "--json", "--prompt-file", file.to_str().unwrap(), "openai-codex-exec"]);
    assert!(ok, "{out}");
    let report: Value = serde_json::from_str(&out).expect(&out);
    let run = report["run_id"].as_str().expect("run_id").to_owned();
    assert!(stdin_of(&d, &root, &run).await == prompt.as_bytes(), "the CLI's prompt changed on its way");

    // MCP over stdio.
    let log = bin.path().join("mcp.log");
    let mut mcp = StdioMcp::start(&d.state_dir(), &[], &log);
    mcp.initialize();
    use crate::support::mcp::Mcp;
    let started = mcp.ok("agent_start", json!({"space": "s", "agent": "openai-codex-exec", "prompt": prompt}));
    let run = started["run_id"].as_str().expect("run_id").to_owned();
    assert!(stdin_of(&d, &root, &run).await == prompt.as_bytes(), "the MCP prompt changed on its way");
}

/// A prompt file that is not UTF-8 cannot be a JSON string: the CLI refuses it, naming the
/// file and the byte offset, and starts nothing.
#[tokio::test]
async fn a_prompt_file_that_is_not_utf8_is_refused_by_name_and_starts_nothing() {
    let bin = tempfile::tempdir().unwrap();
    let (d, _root) = daemon(bin.path()).await;
    let file = bin.path().join("latin1.txt");
    std::fs::write(&file, b"caf\xe9 au lait").unwrap();
    let (ok, out) = d.cli(&["agent", "start", "--space", "s", "--prompt-file", file.to_str().unwrap(), "openai-codex-exec"]);
    assert!(!ok, "a Latin-1 prompt file was accepted: {out}");
    assert!(out.contains("latin1.txt") && out.contains("UTF-8"), "{out}");
    let (ok, list) = d.cli(&["agent", "list", "--space", "s", "--json"]);
    assert!(ok && !list.contains("run-"), "a run was started: {list}");
}
