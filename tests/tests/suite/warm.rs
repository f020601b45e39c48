//! Issue 28, the sandbox's cost: after a command in a Space, the daemon keeps a warm sandbox
//! made for that Space's exact policy (`os/src/shim/spare.rs`, "Warm sandboxes"), and the next
//! command starts in it with one exec. What a program sees must not tell a warm sandbox from a
//! cold one: the same user, directory, environment, hidden state dir, limits, seccomp,
//! `no_new_privs`, capabilities and exit codes, against a root daemon and an unprivileged one.
//!
//! An agent's sandbox names its run's own folders, so the daemon makes the next run of a Space
//! and harness ready ahead, with a warm sandbox for its first process
//! (`host/src/supervisor/ahead.rs`). The same holds there: the agent sees what a cold start
//! shows it, its stdout still apart from bubblewrap's (so a closed stdout is seen: case R42).

use std::time::Duration;

use serde_json::json;

use super::boundary::{run_in, section};
use crate::support::TestDaemon;

/// What a command reports of its sandbox, one section each; `== warm` says whether it started
/// in a warm sandbox (the namespace's first process is bubblewrap, whose command line ends in
/// `--await FD` there).
fn probe(state: &std::path::Path) -> String {
    format!(
        "echo '== warm'; tr '\\0' '\\n' < /proc/1/cmdline | tail -n 2 | head -n 1 | grep -cx -- '--await' || true
         echo '== id'; id -u; id -g
         echo '== pwd'; pwd
         echo '== env'; env | grep -v -e '^_=' -e '^SPACES_PROCESS_TAG=exec/proc-' | sort
         echo '== state'; ls -A {state} 2>&1 | head -3
         echo '== self'; grep -E '^(NoNewPrivs|Seccomp|CapEff|CapBnd):' /proc/self/status
         echo '== limits'; ulimit -u; ulimit -n
         echo '== pid'; echo $$
         echo '== write'; touch made-here && echo yes; rm -f made-here
         echo '== end'",
        state = state.display()
    )
}

async fn a_warm_sandbox_is_a_cold_one(d: TestDaemon) {
    d.space("s").await;
    let script = probe(&d.state_dir());
    let cold = run_in(&d, "s", &script).await;
    assert_eq!(section(&cold, "warm").trim(), "0", "the Space's first command starts cold:\n{cold}");
    // The warm sandbox is made in the background after the first launch: within a few commands
    // one starts in it.
    let mut warm = None;
    for _ in 0..20 {
        let out = run_in(&d, "s", &script).await;
        if section(&out, "warm").trim() == "1" {
            warm = Some(out);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let warm = warm.expect("no command started in a warm sandbox within 20 commands");
    let strip = |out: &str| out.split_once("== id").map(|(_, rest)| rest.to_owned()).unwrap();
    assert_eq!(strip(&warm), strip(&cold), "a program cannot tell a warm sandbox from a cold one");
    let own = section(&cold, "self");
    assert!(own.contains("NoNewPrivs:\t1") && own.contains("Seccomp:\t2"), "{cold}");
    // Root's too: bubblewrap run by root keeps root's capabilities unless told to drop them.
    assert!(own.contains("CapEff:\t0000000000000000"), "no capability inside the sandbox: {cold}");
    // A command that fails fails alike, and the next one is warm again.
    let missing = async {
        let client = &d.client;
        let args = json!({"workspace_id": "s", "command": ["no-such-program-xyz"]});
        let started = client.call_named("exec_command", args).await.unwrap();
        let id = started["process_id"].as_str().unwrap().to_owned();
        let mut out = String::new();
        let mut cursor = 0;
        loop {
            let r = client.call_named("read_process", json!({"process_id": id, "cursor": cursor, "wait_ms": 2000})).await.unwrap();
            out.push_str(r["chunk"].as_str().unwrap());
            cursor = r["cursor"].as_u64().unwrap();
            if r["eof"] == json!(true) {
                break;
            }
        }
        let status = client.call_named("process_status", json!({"process_id": id})).await.unwrap();
        (out, status["exit_code"].as_i64())
    };
    let (out, code) = missing.await;
    assert_eq!(code, Some(127), "{out}");
    assert!(out.contains("no-such-program-xyz"), "the reason is in the output: {out}");
    let again = run_in(&d, "s", &script).await;
    assert_eq!(strip(&again), strip(&cold));
    // Another Space's policy is another sandbox: never this one's warm one.
    let other = d.space("t").await;
    let there = run_in(&d, "t", "pwd; touch made-there && echo wrote").await;
    assert_eq!(there, format!("{}\nwrote\n", std::fs::canonicalize(&other).unwrap().display()));
}

#[tokio::test]
async fn case_28_a_warm_sandbox_is_a_cold_one_root_daemon() {
    a_warm_sandbox_is_a_cold_one(TestDaemon::start().await).await
}

#[tokio::test]
async fn case_28_a_warm_sandbox_is_a_cold_one_unprivileged_daemon() {
    a_warm_sandbox_is_a_cold_one(TestDaemon::start_unprivileged(vec![], vec![]).await).await
}

/// The fake Codex CLI's probe: what the agent sees, written to `.probe-<run id>` in the Space
/// (the run's own id and tag left out: they differ by construction), then one turn's JSON lines.
fn agent_probe(state: &std::path::Path) -> String {
    format!(
        r#"#!/bin/sh
cat >/dev/null
out=$(readlink /proc/$$/fd/1); err=$(readlink /proc/$$/fd/2)
{{
echo '== warm'; tr '\0' '\n' < /proc/1/cmdline | tail -n 2 | head -n 1 | grep -cx -- '--await' || true
echo '== id'; id -u; id -g
echo '== pwd'; pwd
echo '== env'; env | grep -v -e '^_=' -e "$SPACES_RUN_ID" | sort
echo '== self'; grep -E '^(NoNewPrivs|Seccomp|CapEff|CapBnd):' /proc/self/status
echo '== home'; touch /run/home/.probe && echo writable
echo '== api'; ls -A /run/spaces
echo '== stdio'; readlink /proc/1/fd/1; [ "$out" != "$err" ] && echo apart
echo '== state'; ls -A {state} 2>&1 | head -3
echo '== end'
}} > ".probe-$SPACES_RUN_ID" 2>&1
echo '{{"type":"thread.started","thread_id":"t1"}}'
echo '{{"type":"turn.started"}}'
echo '{{"type":"item.completed","item":{{"id":"m","type":"agent_message","text":"done"}}}}'
echo '{{"type":"turn.completed","usage":{{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1}}}}'
"#,
        state = state.display()
    )
}

async fn a_run_made_ready_ahead_starts_warm_as_a_cold_one(unprivileged: bool) {
    // Readable by the unprivileged daemon's user too.
    let bin = tempfile::tempdir().unwrap();
    std::fs::set_permissions(bin.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let agent = bin.path().join("fake-codex");
    // The state dir is known once the daemon exists; the probe names it, so it is written after.
    std::fs::write(&agent, "#!/bin/sh\nexit 3\n").unwrap();
    std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // Made ahead whatever the CPU pressure of the machine running the suite (default: not
    // above 40%).
    let env = vec![
        ("SPACES_HARNESS_BIN_OPENAI_CODEX".to_owned(), agent.display().to_string()),
        ("SPACES_AHEAD_PSI_MAX".to_owned(), "100".to_owned()),
    ];
    let d = if unprivileged { TestDaemon::start_unprivileged(env, vec![]).await } else { TestDaemon::start_with_env(env).await };
    // Rewritten in place: the same file (its identity is part of a warm sandbox's policy).
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&agent)
        .and_then(|mut f| std::io::Write::write_all(&mut f, agent_probe(&d.state_dir()).as_bytes()))
        .unwrap();
    let root = d.space("s").await;
    let run = |n: usize| {
        let (d, root) = (&d, &root);
        async move {
            let report =
                d.client.agent_start(&crate::support::start_request("s", "openai-codex-exec", &format!("turn {n}"))).await.unwrap();
            let st = d.wait_status("s", &report.run_id, Duration::from_secs(60), crate::support::settled).await;
            assert_eq!(st.status, spaces_sdk::Status::Idle, "run {n} ends its turn: {st:#?}");
            let probe = std::fs::read_to_string(root.join(format!(".probe-{}", report.run_id))).unwrap();
            d.client.space("s").agent_stop(&report.run_id).await.unwrap();
            probe
        }
    };
    let cold = run(0).await;
    assert_eq!(section(&cold, "warm").trim(), "0", "the first run of a Space starts cold:\n{cold}");
    let mut warm = None;
    for n in 1..10 {
        let out = run(n).await;
        if section(&out, "warm").trim() == "1" {
            warm = Some(out);
            break;
        }
    }
    let warm = warm.expect("no run started in a warm sandbox made ahead within 9 runs");
    let strip = |out: &str| out.split_once("== id").map(|(_, rest)| rest.to_owned()).unwrap();
    assert_eq!(strip(&warm), strip(&cold), "an agent cannot tell a warm sandbox from a cold one");
    assert!(section(&cold, "home").contains("writable") && section(&cold, "api").contains("spacesd.sock"), "{cold}");
    assert_eq!(section(&cold, "stdio"), "/dev/null\napart\n", "the agent's stdout is its own, apart from bubblewrap's: {cold}");
    let own = section(&cold, "self");
    assert!(own.contains("NoNewPrivs:\t1") && own.contains("Seccomp:\t2") && own.contains("CapEff:\t0000000000000000"), "{cold}");
    // Only the way to the run's own attached files (`runs/<id>/files`, mounted where the prompt
    // names them) is in the sandbox's view of the state dir.
    assert_eq!(section(&cold, "state"), "runs\n", "nothing else of the state dir is in the sandbox: {cold}");
}

#[tokio::test]
async fn case_28_a_run_made_ready_ahead_starts_warm_as_a_cold_one_root_daemon() {
    a_run_made_ready_ahead_starts_warm_as_a_cold_one(false).await
}

#[tokio::test]
async fn case_28_a_run_made_ready_ahead_starts_warm_as_a_cold_one_unprivileged_daemon() {
    a_run_made_ready_ahead_starts_warm_as_a_cold_one(true).await
}
