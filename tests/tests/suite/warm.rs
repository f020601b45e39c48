//! Issue 28, the sandbox's cost: after a command in a Space, the daemon keeps a warm sandbox
//! made for that Space's exact policy (`os/src/shim/spare.rs`, "Warm sandboxes"), and the next
//! command starts in it with one exec. What a program sees must not tell a warm sandbox from a
//! cold one: the same user, directory, environment, hidden state dir, limits, seccomp,
//! `no_new_privs`, capabilities and exit codes, against a root daemon and an unprivileged one.

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
