//! The `spacesd` command line as a person uses it, run as a subprocess against a real daemon:
//! output into a closed pipe, listing a long run to the end, exit codes of a followed turn.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use spaces_sdk::EventKind;

use crate::support::{spacesd_bin, TestDaemon};

const WAIT: Duration = Duration::from_secs(60);

/// A daemon whose `claude-code` is the shell script `script`.
async fn daemon_with_fake_claude(script: &str) -> (TestDaemon, tempfile::TempDir) {
    let bin_dir = tempfile::tempdir().unwrap();
    let fake = bin_dir.path().join("fake-claude");
    std::fs::write(&fake, format!("#!/bin/sh\n{script}\n")).unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let d = TestDaemon::start_with_env(vec![("SPACES_HARNESS_BIN_CLAUDE_CODE".into(), fake.display().to_string())]).await;
    d.space("s").await;
    (d, bin_dir)
}

/// A run whose agent printed 300 lines nobody can parse (each one an `other` event), then waits.
async fn long_run() -> (TestDaemon, tempfile::TempDir, String, u64) {
    let (d, bin) = daemon_with_fake_claude("i=0; while [ $i -lt 300 ]; do i=$((i+1)); echo \"line $i\"; done; exec sleep 60").await;
    let run = d.client.space("s").agent_start("claude-code", "hi", None, None).await.unwrap().run_id;
    d.wait_for_event("s", &run, WAIT, |e| e.kind == EventKind::Other && e.text.as_deref() == Some("line 300")).await;
    let total = d.events("s", &run).await.len() as u64;
    (d, bin, run, total)
}

fn cli(d: &TestDaemon) -> Command {
    let mut c = Command::new(spacesd_bin());
    crate::support::hermetic(&mut c).arg("--state-dir").arg(d.state_dir()).stdin(Stdio::null());
    c
}

#[tokio::test]
async fn a_closed_pipe_ends_the_command_quietly() {
    let (d, _bin, run, _) = long_run().await;
    for extra in [&[][..], &["--json"][..], &["--follow"][..]] {
        let mut child = cli(&d)
            .args(["agent", "events", &run, "--space", "s"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        assert!(!first.is_empty(), "{extra:?}: a first line");
        drop(out); // like `| head -1`
        let result = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&result.stderr);
        let quiet = result.status.code() == Some(0) || result.status.signal() == Some(13);
        assert!(quiet, "{extra:?}: exit 0 or SIGPIPE (141), got {:?}; stderr: {stderr}", result.status);
        assert!(!stderr.contains("panicked"), "{extra:?}: no panic text: {stderr}");
    }
    d.client.space("s").agent_stop(&run).await.unwrap();
}

#[tokio::test]
async fn listing_events_pages_through_to_the_end_or_says_where_it_stopped() {
    let (d, _bin, run, total) = long_run().await;
    assert!(total > 300, "{total} events");
    let out = cli(&d).args(["agent", "events", &run, "--space", "s"]).output().unwrap();
    assert!(out.status.success());
    let lines = String::from_utf8_lossy(&out.stdout).lines().count() as u64;
    assert_eq!(lines, total, "every event, not one page of 100");
    let out = cli(&d).args(["agent", "events", &run, "--space", "s", "--max", "120"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 120);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("stopped after 120 events at cursor 120") && stderr.contains("--cursor 120"), "{stderr}");
    let rest = cli(&d).args(["agent", "events", &run, "--space", "s", "--cursor", "120"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&rest.stdout).lines().count() as u64, total - 120);
    d.client.space("s").agent_stop(&run).await.unwrap();
}

#[tokio::test]
async fn a_followed_turn_that_fails_exits_2() {
    let (d, _bin) = daemon_with_fake_claude("echo 'Invalid API key' >&2\nexit 52").await;
    let out = cli(&d).args(["agent", "start", "claude-code", "hi", "--space", "s", "--follow"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stdout: {}\nstderr: {stderr}", String::from_utf8_lossy(&out.stdout));
    assert!(stderr.contains("the turn ended error"), "{stderr}");
}

/// Whether any string inside `v` is exactly `text`.
fn holds_string(v: &serde_json::Value, text: &str) -> bool {
    match v {
        serde_json::Value::String(s) => s == text,
        serde_json::Value::Array(a) => a.iter().any(|v| holds_string(v, text)),
        serde_json::Value::Object(m) => m.values().any(|v| holds_string(v, text)),
        _ => false,
    }
}

/// Waits until the fake agent's stdin log holds a JSON line carrying `text` verbatim.
async fn wait_for_prompt(log: &std::path::Path, text: &str) {
    let deadline = std::time::Instant::now() + crate::support::scaled(WAIT);
    loop {
        let seen = std::fs::read_to_string(log).unwrap_or_default();
        if seen.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).any(|v| holds_string(&v, text)) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the agent never got {text:?}; its stdin: {seen}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Prompts from stdin (`-`), from a file (`@FILE`, `--prompt-file`) reach the agent verbatim,
/// for `agent start` and `agent send`.
#[tokio::test]
async fn prompts_come_from_stdin_and_files_verbatim() {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("stdin.jsonl");
    let (d, _bin) = daemon_with_fake_claude(&format!("exec cat >> '{}'", log.display())).await;
    let run_with = |args: &[&str], stdin: Option<&str>| {
        let mut c = cli(&d);
        c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        if stdin.is_some() {
            c.stdin(Stdio::piped());
        }
        let mut child = c.spawn().unwrap();
        if let Some(text) = stdin {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let from_stdin = "line one\n  \"quoted\" tab\there €\n";
    let report = run_with(&["agent", "start", "claude-code", "-", "--space", "s"], Some(from_stdin));
    let run = report["run_id"].as_str().unwrap().to_owned();
    wait_for_prompt(&log, from_stdin).await;

    let file = logs.path().join("prompt.txt");
    let from_file = "from a file: `backticks` and $dollars\n";
    std::fs::write(&file, from_file).unwrap();
    let at = format!("@{}", file.display());
    run_with(&["agent", "start", "claude-code", &at, "--space", "s"], None);
    wait_for_prompt(&log, from_file).await;
    run_with(&["agent", "start", "claude-code", "--prompt-file", &file.display().to_string(), "--space", "s"], None);

    // A follow-up from stdin is queued behind the running turn and reaches the same process.
    let follow_up = "and a follow-up\nover two lines";
    let sent = run_with(&["agent", "send", &run, "-", "--space", "s"], Some(follow_up));
    assert_eq!(sent["ok"], true, "{sent}");
    let missing = cli(&d).args(["agent", "start", "claude-code", "--prompt-file", "/nonexistent/prompt", "--space", "s"]).output().unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/prompt"));
}
