//! Issue 28's Landlock level (`SPACES_SANDBOX=landlock`; `spaces_os::sandbox::landlock`): where
//! bubblewrap cannot make a sandbox, the helper confines each tree with Landlock. The same
//! attacks as under bubblewrap (`boundary.rs`) fail, against a root daemon and an unprivileged
//! one; a command writes only its Space and its own temporary directory, keeps no capability,
//! and cannot signal another Space's process; a real Claude Code run still works.

use std::time::{Duration, Instant};

use serde_json::json;
use spaces_sdk::{AgentStartRequest, SpaceAgentOptions};
use spaces_testkit::{Reply, Script, ScriptedServer};

use super::boundary::{
    a_commands_processes_reach_nothing_of_the_operator, an_escapee_that_kills_its_parent_is_still_inside, run_in, section, tool,
};
use super::harness::CLAUDE;
use crate::support::{describe, require_cli, settled, TestDaemon};

fn landlock() -> Vec<(String, String)> {
    vec![("SPACES_SANDBOX".to_owned(), "landlock".to_owned())]
}

fn tcp() -> Vec<String> {
    vec!["--tcp".into(), "127.0.0.1:0".into()]
}

#[tokio::test]
async fn case_28_landlock_a_commands_processes_reach_nothing_of_the_operator_root_daemon() {
    let d = TestDaemon::start_with(landlock(), tcp()).await;
    a_commands_processes_reach_nothing_of_the_operator(d).await
}

#[tokio::test]
async fn case_28_landlock_a_commands_processes_reach_nothing_of_the_operator_unprivileged_daemon() {
    let d = TestDaemon::start_unprivileged(landlock(), tcp()).await;
    a_commands_processes_reach_nothing_of_the_operator(d).await
}

#[tokio::test]
async fn case_28_landlock_an_escapee_that_kills_its_parent_is_still_inside_root_daemon() {
    an_escapee_that_kills_its_parent_is_still_inside(TestDaemon::start_with_env(landlock()).await).await
}

#[tokio::test]
async fn case_28_landlock_an_escapee_that_kills_its_parent_is_still_inside_unprivileged_daemon() {
    an_escapee_that_kills_its_parent_is_still_inside(TestDaemon::start_unprivileged(landlock(), vec![]).await).await
}

/// What a command may write and hold at the Landlock level: its Space and its `$TMPDIR` (not
/// `/tmp`, not beside the Space, not the state dir, not `/dev/shm`), no capability, no listing
/// of the state dir; and the operator's socket refuses a peer without the token.
async fn a_command_writes_only_its_space_and_its_own_tmp(d: TestDaemon) {
    let own = d.space("own").await;
    let beside = own.parent().unwrap().to_path_buf();
    let marker = format!("spaces-landlock-{}", std::process::id());
    let script = format!(
        r#"
S='{state}'
t() {{ name=$1; shift; echo "== $name"; "$@" 2>&1; echo "exit=$?"; }}
t own_write sh -c 'echo written > "$0/w.txt"' '{own}'
t beside_write sh -c 'echo x > "$0/outside.txt"' '{beside}'
t tmp_write sh -c 'echo x > "/tmp/$0"' '{marker}'
t shm_write sh -c 'echo x > "/dev/shm/$0"' '{marker}'
t state_write sh -c 'echo x > "$0/planted"' "$S"
t state_list ls "$S"
t tmpdir sh -c 'echo x > "$TMPDIR/t" && cat "$TMPDIR/t" && echo "tmpdir=$TMPDIR"'
t dev_null sh -c 'echo x > /dev/null'
t caps grep CapEff /proc/self/status
t operator_socket curl -s --unix-socket "$S/spacesd.sock" http://localhost/v1/spaces
echo "== end"
"#,
        state = d.state_dir().display(),
        own = own.display(),
        beside = beside.display(),
    );
    let out = run_in(&d, "own", &script).await;
    for allowed in ["own_write", "tmpdir", "dev_null"] {
        assert!(section(&out, allowed).contains("exit=0\n"), "{allowed} failed inside the command:\n{out}");
    }
    for refused in ["beside_write", "tmp_write", "shm_write", "state_write", "state_list"] {
        assert!(!section(&out, refused).contains("exit=0\n"), "{refused} succeeded inside the command:\n{out}");
    }
    assert_eq!(std::fs::read_to_string(own.join("w.txt")).unwrap(), "written\n");
    assert!(!beside.join("outside.txt").exists() && !d.state_dir().join("planted").exists(), "{out}");
    assert!(!std::path::Path::new("/tmp").join(&marker).exists() && !std::path::Path::new("/dev/shm").join(&marker).exists(), "{out}");
    // The private temporary directory is the command's own, under its shim's (unreadable) dir.
    let tmpdir = section(&out, "tmpdir").lines().find_map(|l| l.strip_prefix("tmpdir=")).unwrap_or_else(|| panic!("{out}")).to_owned();
    assert!(tmpdir.starts_with(&d.state_dir().display().to_string()) && tmpdir.ends_with("/tmp"), "{tmpdir}");
    assert!(section(&out, "caps").contains("CapEff:\t0000000000000000"), "the command kept capabilities:\n{out}");
    let answer = section(&out, "operator_socket");
    assert!(answer.contains("UNAUTHORIZED") && answer.contains("Landlock") && !answer.contains("\"own\""), "{out}");
    // The operator (this test's client, which sends the token beside the socket) still is.
    assert_eq!(d.client.space_list(&spaces_sdk::Empty {}).await.unwrap().len(), 1);
    let info = tool(&d, "workspace_info", json!({"workspace_id": "own"})).await;
    assert_eq!(info["execution"]["isolation"]["command_sandbox"], "landlock", "{info}");
}

#[tokio::test]
async fn case_28_landlock_a_command_writes_only_its_space_and_its_own_tmp_root_daemon() {
    a_command_writes_only_its_space_and_its_own_tmp(TestDaemon::start_with_env(landlock()).await).await
}

#[tokio::test]
async fn case_28_landlock_a_command_writes_only_its_space_and_its_own_tmp_unprivileged_daemon() {
    a_command_writes_only_its_space_and_its_own_tmp(TestDaemon::start_unprivileged(landlock(), vec![]).await).await
}

/// A real Claude Code run at the Landlock level: a tool call writes a file in the Space, the
/// agent answers, and its start report says what the level does not give.
#[tokio::test]
async fn case_28_landlock_a_claude_code_run_works() {
    let h = CLAUDE;
    require_cli(h.tools, h.binary);
    let server = ScriptedServer::start(h.wire, Script::new([])).await.unwrap();
    let d = TestDaemon::start_with_env(landlock()).await;
    let root = d.space("s").await;
    server.push(h.create_file(&root, "hello.txt", "hello from the agent\n"));
    server.push(Reply::Text("I created hello.txt.".into()));
    let req = AgentStartRequest {
        space: "s".into(),
        agent: h.id.into(),
        prompt: "Create hello.txt please".into(),
        show: None,
        options: Some(SpaceAgentOptions { base_url: Some(server.base_url()), ..Default::default() }),
        request_id: None,
        traceparent: None,
    };
    let report = d.client.agent_start(&req).await.unwrap();
    assert!(report.notes.iter().any(|n| n.starts_with("landlock:")), "{:?}", report.notes);
    let turn = Duration::from_secs(90);
    let t0 = Instant::now();
    d.wait_turn_end("s", &report.run_id, 1, turn).await;
    let st = d.wait_status("s", &report.run_id, turn, settled).await;
    let events = d.events("s", &report.run_id).await;
    assert_eq!(
        std::fs::read_to_string(root.join("hello.txt")).map(|s| s.trim_end().to_owned()).ok().as_deref(),
        Some("hello from the agent"),
        "after {:?}: {}",
        t0.elapsed(),
        describe(&events)
    );
    assert_eq!(st.result_text.as_deref(), Some("I created hello.txt."), "{st:#?}\n{}", describe(&events));
}

/// A `bwrap` that cannot make a sandbox, as in a container without user namespaces, first on
/// `PATH` (the real one stays behind it): returns the dir holding it and that `PATH`.
fn broken_bubblewrap() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let bwrap = dir.path().join("bwrap");
    std::fs::write(&bwrap, "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n").unwrap();
    std::fs::set_permissions(&bwrap, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", dir.path().display(), std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()));
    (dir, path)
}

/// `auto` (the default) falls back to Landlock where bubblewrap cannot make a sandbox, says so,
/// and commands are confined; `bubblewrap` asked for explicitly refuses to start there, naming
/// bubblewrap's words and the fix.
#[tokio::test]
async fn case_28_landlock_is_the_fallback_where_bubblewrap_cannot_make_a_sandbox() {
    let (_bin, path) = broken_bubblewrap();
    let d = TestDaemon::start_with_env(vec![("PATH".to_owned(), path.clone())]).await;
    let caps = d.client.agent_capabilities(&spaces_sdk::Empty {}).await.unwrap();
    assert_eq!(caps.sandbox, "landlock");
    d.space("s").await;
    let out = run_in(&d, "s", &format!("cat '{}/token' && echo read", d.state_dir().display())).await;
    assert!(!out.contains("read"), "{out}");

    let state = tempfile::tempdir().unwrap();
    let out = crate::support::hermetic(&mut std::process::Command::new(crate::support::spacesd_bin()))
        .args(["serve", "--state-dir"])
        .arg(state.path().join("state"))
        .env("PATH", &path)
        .env("SPACES_SANDBOX", "bubblewrap")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("No permissions to create new namespace") && said.contains("SPACES_SANDBOX=off"), "{said}");
    assert!(!state.path().join("state/spacesd.sock").exists());
}

/// `spacesd demo` works at the Landlock level too (found timing a newcomer's install on a
/// machine without bubblewrap): its daemon's socket takes only the operator's token there, and
/// the demo's own client sends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_runs_at_the_landlock_level() {
    crate::support::require_cli("claude-code", "node_modules/@anthropic-ai/claude-code-linux-x64/claude");
    let (_bin, path) = broken_bubblewrap();
    let model = super::cli::demo_model().await;
    let dir = tempfile::tempdir().unwrap();
    let mut c = std::process::Command::new(crate::support::spacesd_bin());
    crate::support::hermetic(&mut c).stdin(std::process::Stdio::null()).env("PATH", &path);
    c.args(["demo", "--state-dir"])
        .arg(dir.path().join("state"))
        .args(["--base-url", &model.base_url(), "--space-dir"])
        .arg(dir.path().join("space"));
    let out = tokio::task::spawn_blocking(move || c.output().unwrap()).await.unwrap();
    let (text, err) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}{err}");
    assert!(err.contains("the sandbox is Landlock"), "{err}");
    assert!(text.contains("== stop: ok=true"), "{text}");
}
