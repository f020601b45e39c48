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
    // In the Space (the agent's working folder): the only place outside its home the agent's
    // sandbox lets it write that this test can read.
    let (d, _bin) = daemon_with_fake_claude("exec cat >> stdin.jsonl").await;
    let log = std::fs::canonicalize(d.dir.path().join("space-s")).unwrap().join("stdin.jsonl");
    let logs = tempfile::tempdir().unwrap();
    let run_with = |args: &[&str], stdin: Option<&str>| {
        let mut c = cli(&d);
        c.args(args).arg("--json").stdout(Stdio::piped()).stderr(Stdio::piped());
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

/// The CLI's output of `cmd` (stdout, stderr) and whether it succeeded.
fn run_cli(c: &mut Command) -> (bool, String, String) {
    let out = c.output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Issue 14, items 5 and 6: with two Spaces registered a run is addressed by its id alone;
/// `agent list --all` lists across Spaces; every command takes `--json` and prints JSON; the
/// default output is for people (tables with a header, an empty list that says so).
#[tokio::test]
async fn run_ids_are_global_and_every_command_has_a_json_form() {
    let (d, _bin) = daemon_with_fake_claude("exec sleep 60").await;
    d.space("other").await;
    let (ok, out, err) = run_cli(cli(&d).args(["agent", "list", "--space", "other"]));
    assert!(ok && out.contains("no runs in Space other"), "{out}{err}");
    let (ok, out, err) = run_cli(cli(&d).args(["agent", "start", "claude-code", "hi", "--space", "s", "--json"]));
    assert!(ok, "{err}");
    let run = serde_json::from_str::<serde_json::Value>(&out).unwrap()["run_id"].as_str().unwrap().to_owned();

    // No --space: the run's id finds its Space.
    for args in [vec!["agent", "status", &run, "--json"], vec!["agent", "events", &run, "--json"]] {
        let (ok, out, err) = run_cli(cli(&d).args(&args));
        assert!(ok, "{args:?}: {err}");
        for line in out.lines().filter(|l| !l.trim().is_empty()) {
            serde_json::from_str::<serde_json::Value>(line)
                .or_else(|_| serde_json::from_str::<serde_json::Value>(&out))
                .unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"));
        }
    }
    let (ok, out, _) = run_cli(cli(&d).args(["agent", "status", &run]));
    assert!(ok && out.starts_with("run ") && out.contains("claude-code in Space s"), "{out}");
    let (ok, out, err) = run_cli(cli(&d).args(["agent", "status", "run-000000000000"]));
    assert!(!ok && err.contains("RUN_NOT_FOUND"), "{out}{err}");

    let (ok, out, err) = run_cli(cli(&d).args(["agent", "list", "--all", "--json"]));
    assert!(ok, "{err}");
    let all: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(all.len(), 1);
    let (ok, out, _) = run_cli(cli(&d).args(["agent", "list", "--all"]));
    assert!(ok && out.lines().count() == 2 && out.contains(&run), "{out}");
    for args in [vec!["space", "list", "--json"], vec!["home", "list", "--json"], vec!["capabilities"]] {
        let (ok, out, err) = run_cli(cli(&d).args(&args));
        assert!(ok, "{args:?}: {err}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"));
    }
    let (ok, out, _) = run_cli(cli(&d).args(["space", "list"]));
    assert!(ok && out.starts_with("NAME") && out.contains("other"), "{out}");
    for args in
        [vec!["agent", "send", &run, "more", "--json"], vec!["agent", "interrupt", &run, "--json"], vec!["agent", "stop", &run, "--json"]]
    {
        let (_, out, err) = run_cli(cli(&d).args(&args));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}{err}"));
        assert_eq!(v["run_id"], run.as_str(), "{args:?}");
    }
}

/// Issue 14, item 8: the CLI reaches a daemon over TCP with `--url` and `--token-file`; with no
/// daemon it says so once and how to start one; `tcp.addr` is removed at shutdown.
#[tokio::test]
async fn the_cli_reaches_a_remote_daemon_and_says_how_to_start_a_missing_one() {
    let mut d = TestDaemon::start_with(vec![], vec!["--tcp".into(), "127.0.0.1:0".into()]).await;
    d.space("s").await;
    let state = d.state_dir();
    let addr = std::fs::read_to_string(state.join("tcp.addr")).unwrap().trim().to_owned();
    // Another state dir: only --url and the token file lead to the daemon.
    let elsewhere = tempfile::tempdir().unwrap();
    let mut c = Command::new(spacesd_bin());
    crate::support::hermetic(&mut c).arg("--state-dir").arg(elsewhere.path()).stdin(Stdio::null());
    c.args(["--url", &format!("http://{addr}"), "--token-file", state.join("token").to_str().unwrap(), "space", "list", "--json"]);
    let (ok, out, err) = run_cli(&mut c);
    assert!(ok, "{err}");
    assert!(out.contains("\"s\""), "{out}");
    let mut c = Command::new(spacesd_bin());
    crate::support::hermetic(&mut c).arg("--state-dir").arg(elsewhere.path()).stdin(Stdio::null());
    let (ok, _, err) = run_cli(c.args(["--url", &format!("http://{addr}"), "--token-file", "/nonexistent/token", "space", "list"]));
    assert!(!ok && err.contains("/nonexistent/token"), "{err}");

    d.terminate();
    assert!(!state.join("tcp.addr").exists(), "a stale tcp.addr is removed at shutdown");
    let (ok, _, err) = run_cli(cli(&d).args(["agent", "list"]));
    assert!(!ok, "{err}");
    assert!(err.contains("start it with: spacesd serve"), "{err}");
    assert_eq!(err.matches("os error").count(), 1, "the OS error once: {err}");
}

/// Issue 14, item 9: version, completions and the man page come from the same definition.
#[test]
fn version_completions_and_man_page() {
    let out = Command::new(spacesd_bin()).arg("version").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("claude-code") && text.contains("@openai/codex@"), "{text}");
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(spacesd_bin()).args(["completions", shell]).output().unwrap();
        assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("agent"), "{shell}");
    }
    let out = Command::new(spacesd_bin()).arg("man").output().unwrap();
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains(".TH spacesd"));
    let out = Command::new(spacesd_bin()).args(["tools", "install", "nope"]).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("claude-code, openai-codex"));
}

/// `agent events --follow --until stopped` follows across turns and ends only when the run is
/// stopped, like `docker logs -f`; `--timestamps` prefixes each line with its time.
#[tokio::test]
async fn follow_until_stopped_outlives_turns_and_ends_with_the_run() {
    let (d, _bin) = daemon_with_fake_claude("exec sleep 60").await;
    let run = d.client.space("s").agent_start("claude-code", "hi", None, None).await.unwrap().run_id;
    let mut child = cli(&d)
        .args(["agent", "events", &run, "--follow", "--until", "stopped", "--timestamps"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    d.wait_for_event("s", &run, WAIT, |e| e.kind == EventKind::TurnStarted).await;
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "still following a live run");
    d.client.space("s").agent_stop(&run).await.unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.lines().last().is_some_and(|l| l.starts_with("-- status: stopped")), "{text}");
    let first = text.lines().next().unwrap_or_default();
    assert!(first.len() > 13 && first.as_bytes()[2] == b':' && first[13..].starts_with('#'), "HH:MM:SS.mmm #seq ...: {first}");
}

/// The scripted model `spacesd demo --base-url` is pointed at in these tests: every answer is
/// "hello from the demo".
pub(crate) async fn demo_model() -> spaces_testkit::ScriptedServer {
    spaces_testkit::ScriptedServer::start(
        spaces_testkit::Wire::AnthropicMessages,
        spaces_testkit::Script::new([]).with_fallback(spaces_testkit::Reply::Text("hello from the demo".into())),
    )
    .await
    .unwrap()
}

/// Issue 14, item 9: `spacesd demo --state-dir DIR` runs its daemon on DIR (kept afterwards),
/// not on a temporary one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_honours_state_dir() {
    crate::support::require_cli("claude-code", "node_modules/@anthropic-ai/claude-code-linux-x64/claude");
    let model = demo_model().await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("demo-state");
    let mut c = Command::new(spacesd_bin());
    crate::support::hermetic(&mut c).stdin(Stdio::null());
    c.args([
        "demo",
        "--state-dir",
        state.to_str().unwrap(),
        "--base-url",
        &model.base_url(),
        "--space-dir",
        dir.path().join("space").to_str().unwrap(),
    ]);
    let out = tokio::task::spawn_blocking(move || c.output().unwrap()).await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(&format!("state dir {}", state.display())), "{text}");
    assert!(state.join("spaces.db").is_file(), "the demo's state stays in {}", state.display());
}

/// Issue 14, item 9: the systemd user unit's `ExecStart` line, with its `Environment=`, serves
/// (`%h` stood in by a temporary home, the binary by this build's).
#[tokio::test]
async fn the_systemd_units_command_line_serves() {
    let unit =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../contrib/systemd/spacesd.service")).unwrap();
    let home = tempfile::tempdir().unwrap();
    let h = home.path().display().to_string();
    let value =
        |key: &str| unit.lines().find_map(|l| l.strip_prefix(key)).unwrap_or_else(|| panic!("no {key} in the unit")).replace("%h", &h);
    let exec = value("ExecStart=");
    let (env_name, env_value) = value("Environment=").split_once('=').map(|(a, b)| (a.to_owned(), b.to_owned())).unwrap();
    let mut argv = exec.split_whitespace();
    assert!(argv.next().unwrap().ends_with("/spacesd"), "{exec}");
    let mut c = Command::new(spacesd_bin());
    crate::support::hermetic(&mut c).env(&env_name, &env_value).args(argv).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let socket = std::path::Path::new(&env_value).join("spacesd.sock");
    let client = spaces_sdk::client::Client::new(spaces_sdk::client::Endpoint::Unix(socket.clone()));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while client.space_list(&spaces_sdk::Empty {}).await.is_err() {
        assert!(std::time::Instant::now() < deadline, "the unit's command did not serve {}", socket.display());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(unit.contains("KillMode=process"), "stopping the unit must not end the runs' shims");
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM);
    let _ = child.wait();
}

/// Issue 14, item 7: `space remove` refuses while runs live and `--force` stops them first;
/// `agent rm` refuses a live run and deletes a stopped one (row, events, run dir); `agent prune`
/// deletes the runs that are not live and old enough.
#[tokio::test]
async fn space_remove_agent_rm_and_prune_keep_the_state_dir_bounded() {
    let (d, _bin) = daemon_with_fake_claude("exec sleep 60").await;
    let start = |d: &TestDaemon| {
        let mut c = cli(d);
        c.args(["agent", "start", "claude-code", "hi", "--space", "s", "--json"]);
        let (ok, out, err) = run_cli(&mut c);
        assert!(ok, "{err}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["run_id"].as_str().unwrap().to_owned()
    };
    let live = start(&d);
    let (ok, _, err) = run_cli(cli(&d).args(["agent", "rm", &live]));
    assert!(!ok && err.contains("AGENT_BUSY") && err.contains("stop it first"), "{err}");
    let (ok, _, err) = run_cli(cli(&d).args(["space", "remove", "s"]));
    assert!(!ok && err.contains("AGENT_BUSY") && err.contains(&live), "{err}");

    // A stopped run is deleted with its events and directory.
    let old = start(&d);
    d.client.space("s").agent_stop(&old).await.unwrap();
    let dir = d.state_dir().join("runs").join(&old);
    assert!(dir.is_dir());
    let (ok, out, err) = run_cli(cli(&d).args(["agent", "rm", &old, "--json"]));
    assert!(ok, "{out}{err}");
    assert!(!dir.exists(), "its run dir is gone");
    let e = d.client.space("s").agent_status(&old, None).await.unwrap_err();
    assert!(e.to_string().contains("RUN_NOT_FOUND"), "{e}");

    // Prune: a stopped run older than 1 ms goes; the live one stays.
    let pruned = start(&d);
    d.client.space("s").agent_stop(&pruned).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let (ok, out, err) = run_cli(cli(&d).args(["agent", "prune", "--older-than", "1ms", "--json"]));
    assert!(ok, "{err}");
    assert!(out.contains(&pruned) && !out.contains(&live), "{out}");
    let (ok, _, err) = run_cli(cli(&d).args(["agent", "prune", "--older-than", "7 days"]));
    assert!(!ok && err.contains("7d"), "{err}");

    // --force stops the live run, deletes every run and unregisters the Space.
    let (ok, out, err) = run_cli(cli(&d).args(["space", "remove", "s", "--force", "--json"]));
    assert!(ok, "{err}");
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["stopped"], serde_json::json!([live]), "{out}");
    assert!(d.client.space_list(&spaces_sdk::Empty {}).await.unwrap().iter().all(|s| s.name != "s"));
    assert!(crate::support::run_processes(&live).is_empty(), "the live run's processes ended");
}

/// Issue 14, item 7: over HTTP a relative Space root is refused (never resolved against the
/// daemon's working directory), and so are the daemon user's home directory and anything above
/// it.
#[tokio::test]
async fn relative_roots_and_the_home_directory_are_refused() {
    let home = tempfile::tempdir().unwrap();
    let home_dir = std::fs::canonicalize(home.path()).unwrap();
    let d = TestDaemon::start_with_env(vec![("HOME".into(), home_dir.display().to_string())]).await;
    let (status, body) = d.raw("POST", "/v1/spaces", Some(r#"{"name": "rel", "root": "some/dir"}"#));
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("relative") && body.contains("absolute"), "{body}");
    for root in [home_dir.clone(), home_dir.parent().unwrap().to_path_buf()] {
        let req = format!(r#"{{"name": "home", "root": "{}"}}"#, root.display());
        let (status, body) = d.raw("POST", "/v1/spaces", Some(&req));
        assert_eq!(status, 400, "{root:?}: {body}");
        assert!(body.contains("home directory"), "{body}");
    }
    let project = home_dir.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let req = format!(r#"{{"name": "project", "root": "{}"}}"#, project.display());
    let (status, body) = d.raw("POST", "/v1/spaces", Some(&req));
    assert_eq!(status, 200, "a project inside the home is fine: {body}");
}

/// `agent list` and `agent status` of failed runs as a person sees them in an 80-column terminal
/// (tmux): a header and one line per run, every line within 80 columns (the long reason and the
/// long output line cut with `…`, nothing wrapped), the status as labelled lines. Labels and
/// prompt excerpts: `live.rs::agent_list_and_status_render_as_tables_at_80_columns`.
#[tokio::test]
async fn list_and_status_render_as_tables_in_an_80_column_terminal() {
    let long = "a very long complaint about the configuration of this agent ".repeat(4);
    let (d, _bin) = daemon_with_fake_claude(&format!("echo '{long}'; echo 'the agent could not start: {long}' >&2; exit 3")).await;
    let space = d.client.space("s");
    let mut runs = Vec::new();
    for prompt in ["first", "second"] {
        let run = space.agent_start("claude-code", prompt, None, None).await.unwrap().run_id;
        d.wait_status("s", &run, WAIT, crate::support::settled).await;
        runs.push(run);
    }
    let bin = spacesd_bin();
    let state = d.state_dir();
    let command = format!(
        "{bin} --state-dir {state} agent list; {bin} --state-dir {state} agent status {run}; echo END-OF-OUTPUT; exec sleep 60",
        bin = bin.display(),
        state = state.display(),
        run = runs[0]
    );
    let tmux = crate::support::tmux::Tmux::start(&runs[0], 80, 40, &command);
    tmux.wait_screen(WAIT, "the commands' output", |s| s.contains("END-OF-OUTPUT")).await;
    let screen = tmux.joined_screen();
    let lines: Vec<&str> = screen.lines().take_while(|l| !l.starts_with("END-OF-OUTPUT")).collect();
    for line in &lines {
        assert!(
            line.chars().count() <= 80,
            "a line wider than the terminal ({} columns):\n{line}\n\nthe screen:\n{screen}",
            line.chars().count()
        );
    }
    let header = lines[0];
    for column in ["RUN", "STATUS", "TURNS", "AGE"] {
        assert!(header.contains(column), "the header names {column}: {header}");
    }
    for run in &runs {
        let rows: Vec<_> = lines.iter().filter(|l| l.starts_with(run.as_str())).collect();
        assert_eq!(rows.len(), 1, "one table line per run ({run}):\n{screen}");
        assert!(rows[0].contains("failed"), "the run's status: {}", rows[0]);
    }
    for label in ["run", "agent", "status", "turns"] {
        assert!(lines.iter().any(|l| l.starts_with(&format!("{label:<10}"))), "`agent status` has a `{label}` line:\n{screen}");
    }
    assert!(lines.iter().any(|l| l.starts_with("status    failed") && l.ends_with('…')), "the long reason is cut:\n{screen}");
}

/// Socket activation as `contrib/systemd/spacesd.socket` sets it up, driven by systemd's own
/// `systemd-socket-activate`: the first client connects before any daemon runs, the service's
/// command starts with the socket handed over (`LISTEN_FDS`), answers, keeps the socket 0600 and
/// close-on-exec, and leaves it in place at shutdown for the next activation.
#[tokio::test]
async fn the_socket_unit_activates_the_daemon_at_the_first_connection() {
    let contrib = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../contrib/systemd");
    let socket_unit = std::fs::read_to_string(contrib.join("spacesd.socket")).unwrap();
    let service = std::fs::read_to_string(contrib.join("spacesd.service")).unwrap();
    let home = tempfile::tempdir().unwrap();
    let h = home.path().display().to_string();
    let value = |unit: &str, key: &str| {
        unit.lines().find_map(|l| l.strip_prefix(key)).unwrap_or_else(|| panic!("no {key} in the unit")).replace("%h", &h)
    };
    let socket = std::path::PathBuf::from(value(&socket_unit, "ListenStream="));
    let (env_name, state) = value(&service, "Environment=").split_once('=').map(|(a, b)| (a.to_owned(), b.to_owned())).unwrap();
    assert_eq!(socket, std::path::Path::new(&state).join("spacesd.sock"), "the socket unit listens where the service's clients look");
    assert!(socket_unit.contains("SocketMode=0600") && socket_unit.contains("DirectoryMode=0700"));
    std::fs::create_dir_all(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    let exec = value(&service, "ExecStart=");
    let mut argv = exec.split_whitespace();
    assert!(argv.next().unwrap().ends_with("/spacesd"), "{exec}");
    let mut c = Command::new("systemd-socket-activate");
    crate::support::hermetic(&mut c)
        .arg("--listen")
        .arg(&socket)
        .arg(format!("--setenv={env_name}={state}"))
        .arg(format!("--setenv=SPACES_TOOLS_DIR={}", crate::support::tools_dir().display()))
        .arg(spacesd_bin())
        .args(argv)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let activator = c.spawn().expect("systemd-socket-activate (Debian's systemd package)");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !socket.exists() {
        assert!(std::time::Instant::now() < deadline, "systemd-socket-activate did not listen on {}", socket.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // No daemon runs yet; the first call starts it and is answered.
    let client = spaces_sdk::client::Client::new(spaces_sdk::client::Endpoint::Unix(socket.clone()));
    let spaces = tokio::time::timeout(Duration::from_secs(30), client.space_list(&spaces_sdk::Empty {}))
        .await
        .expect("the first call is answered")
        .unwrap();
    assert!(spaces.is_empty());
    assert_eq!(std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777, 0o600, "the socket is the operator's alone");
    // systemd-socket-activate execs the service in place: its pid is the daemon's.
    let pid = activator.id();
    let fdinfo = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/3")).unwrap();
    let flags = fdinfo.lines().find_map(|l| l.strip_prefix("flags:")).map(|f| u32::from_str_radix(f.trim(), 8).unwrap()).unwrap();
    assert!(flags & 0o2_000_000 != 0, "the handed-over socket is close-on-exec (no agent inherits it): {fdinfo}");
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGTERM);
    let out = activator.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the daemon ended cleanly: {log}");
    assert!(socket.exists(), "the activated socket stays for the next start (systemd owns it)");
}

/// Issue 13 (`label`) and issue 14, item 6 (a prompt excerpt): `--label` is stored with the run
/// and shown by `agent list` (a column) and `agent status` (human and JSON); the list's prompt
/// column is the first prompt on one line, secrets redacted, cut so a line fits 80 columns; a
/// label that is too long, empty or holds a newline is refused naming `options.label`.
#[tokio::test]
async fn a_label_and_a_prompt_excerpt_show_in_list_and_status() {
    let (d, _bin) = daemon_with_fake_claude("exec sleep 60").await;
    let secret = "hunter2-very-secret";
    let prompt = format!("Fix the flaky\nlogin test, the password is {secret} and then {}", "go on ".repeat(30));
    let (ok, out, err) = run_cli(cli(&d).args([
        "agent",
        "start",
        "claude-code",
        &prompt,
        "--space",
        "s",
        "--label",
        "nightly fix",
        "--env",
        &format!("PASSWORD={secret}"),
        "--json",
    ]));
    assert!(ok, "{err}");
    let run = serde_json::from_str::<serde_json::Value>(&out).unwrap()["run_id"].as_str().unwrap().to_owned();
    let (ok, out, err) = run_cli(cli(&d).args(["agent", "start", "claude-code", "unlabelled one", "--space", "s", "--json"]));
    assert!(ok, "{err}");
    let plain = serde_json::from_str::<serde_json::Value>(&out).unwrap()["run_id"].as_str().unwrap().to_owned();

    let (ok, out, err) = run_cli(cli(&d).args(["agent", "status", &run, "--json"]));
    assert!(ok, "{err}");
    let st: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(st["label"], "nightly fix", "{st}");
    let excerpt = st["prompt_excerpt"].as_str().unwrap();
    assert_eq!(excerpt.chars().count(), spaces_sdk::RunStatus::PROMPT_EXCERPT_MAX, "{excerpt}");
    assert!(excerpt.starts_with("Fix the flaky login test, the password is [redacted]") && excerpt.ends_with('…'), "{excerpt}");
    assert!(!out.contains(secret), "{out}");
    let (ok, out, _) = run_cli(cli(&d).args(["agent", "status", &run]));
    assert!(ok && out.contains("label     nightly fix") && out.contains("prompt    Fix the flaky login test"), "{out}");

    let (ok, out, err) = run_cli(cli(&d).args(["agent", "list", "--space", "s"]));
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].starts_with("RUN") && lines[0].contains("LABEL") && lines[0].contains("PROMPT") && lines[0].contains("AGE"), "{out}");
    // In a pipe lines are cut at 120 characters; a terminal's width is tested in tmux
    // (`live.rs::agent_list_and_status_render_as_tables_at_80_columns`).
    assert!(lines.iter().all(|l| l.chars().count() <= 120), "{out}");
    let row = lines.iter().find(|l| l.starts_with(&run)).unwrap();
    assert!(row.contains("nightly fix") && row.contains("Fix the flaky") && !row.contains(secret), "{row}");
    let other = lines.iter().find(|l| l.starts_with(&plain)).unwrap();
    assert!(other.contains("unlabelled one"), "{other}");
    let (ok, out, _) = run_cli(cli(&d).args(["agent", "list", "--space", "s", "--json"]));
    let listed: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert!(ok && listed.iter().any(|r| r["label"] == "nightly fix") && listed.iter().any(|r| r["label"].is_null()), "{out}");

    for bad in ["x".repeat(81), "two\nlines".into(), "  ".into()] {
        let (ok, out, err) = run_cli(cli(&d).args(["agent", "start", "claude-code", "hi", "--space", "s", "--label", &bad]));
        assert!(!ok && err.contains("INVALID_ARGUMENT") && err.contains("options.label"), "{bad:?}: {out}{err}");
    }
    assert_eq!(d.client.space("s").agent_list().await.unwrap().len(), 2, "a refused start records no run");
}

/// `spacesd attach RUN_ID`, the contract's spelling, is `agent attach`: the same help, the same
/// answer without a terminal (the real terminal test attaches with it:
/// `live.rs::attach_in_a_terminal_sends_interrupts_and_detaches_leaving_the_run_alive`).
#[tokio::test]
async fn attach_at_the_top_level_is_agent_attach() {
    let (d, _bin) = daemon_with_fake_claude("exec sleep 60").await;
    let (ok, out, _) = run_cli(cli(&d).args(["attach", "--help"]));
    assert!(ok && out.contains("Watch a run live") && out.contains("RUN_ID"), "{out}");
    // Without a terminal both say so, the same way, and how to follow the run instead.
    let (ok, _, top) = run_cli(cli(&d).args(["attach", "run-000000000000"]));
    assert!(!ok && top.contains("attach needs a terminal") && top.contains("agent events run-000000000000 --follow"), "{top}");
    let (ok, _, nested) = run_cli(cli(&d).args(["agent", "attach", "run-000000000000"]));
    assert!(!ok && nested == top, "{nested}");
}

/// Issue 30 (stop-all at a thousand runs): `agent stop --all --space S` stops every live run of
/// that Space at once and no other; `agent stop --all` the rest, of every Space; each prints a
/// summary, `--json` the reports; every process of the stopped runs is gone. A run id and
/// `--all` together are refused.
#[tokio::test]
async fn stop_all_stops_every_live_run_of_a_space_or_of_every_space() {
    let (d, _bin) = daemon_with_fake_claude("exec sleep 60").await;
    d.space("t").await;
    let start = |space: &'static str| {
        let d = &d;
        async move { d.client.space(space).agent_start("claude-code", "hi", None, None).await.unwrap().run_id }
    };
    let in_s = [start("s").await, start("s").await, start("s").await];
    let in_t = [start("t").await, start("t").await];
    let live = |space: &'static str| {
        let d = &d;
        async move {
            let runs = d.client.space(space).agent_list().await.unwrap();
            runs.iter().filter(|r| matches!(r.status, spaces_sdk::Status::Running | spaces_sdk::Status::Idle)).count()
        }
    };

    let (ok, out, err) = run_cli(cli(&d).args(["agent", "stop", "--all", "--space", "s"]));
    assert!(ok, "{out}{err}");
    assert!(out.contains("stopped 3 live run(s)"), "{out}");
    assert_eq!((live("s").await, live("t").await), (0, 2));
    for run in &in_s {
        assert!(crate::support::run_processes(run).is_empty(), "run {run}'s processes ended");
    }

    let (ok, out, err) = run_cli(cli(&d).args(["agent", "stop", "--all", "--json"]));
    assert!(ok, "{out}{err}");
    let reports: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    let mut stopped: Vec<&str> = reports.iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    stopped.sort_unstable();
    let mut expected: Vec<&str> = in_t.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(stopped, expected, "{out}");
    assert!(reports.iter().all(|r| r["ok"] == true), "{out}");
    assert_eq!(live("t").await, 0);

    let (ok, _, err) = run_cli(cli(&d).args(["agent", "stop", &in_s[0], "--all"]));
    assert!(!ok && err.contains("cannot be used with"), "{err}");
    let (ok, _, err) = run_cli(cli(&d).args(["agent", "stop"]));
    assert!(!ok && err.contains("RUN_ID"), "{err}");
}
