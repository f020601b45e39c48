//! What the sandbox costs a start (issue 28): `agent_start` -> the agent's first instruction,
//! and `exec_command` -> the command's first output byte, each with the sandbox
//! (`spaces_os::sandbox`, bubblewrap) and without it (`SPACES_SANDBOX=off`), end to end through
//! two real `spacesd serve` of the same binary.
//!
//! - `agent_start`: a fake Codex CLI (bash) writes `$EPOCHREALTIME` into the Space as its first
//!   command, then ends its turn; the figure is that time minus the wall clock just before the
//!   request was sent. The next start waits for the run to be idle again.
//! - `exec_command`: `echo x` in the Space of every call; the figure is the time from sending
//!   `exec_command` to the `read_process` (long poll, 5 s) answer that holds its first byte.
//!   From its second command on, a Space's command starts in a warm sandbox made after the one
//!   before (`os/src/shim/spare.rs`, "Warm sandboxes").
//! - `exec_command_cold`: the same, each call in the next of six other Spaces in turn: more
//!   policies than the daemon keeps warm sandboxes for (4), so each command's sandbox is made
//!   on its start path, as for the first command of a Space.
//!
//! The two daemons are measured call by call in turn (`off`, then `sandbox`), so drift and noise
//! hit both alike. Each condition runs twice: back to back (a call starts while the daemon still
//! does what the call before left it in the background: renewing a spare shim, making the next
//! run's warm sandbox ahead) and `-settled` (100 ms after each call: what a start itself waits
//! for). `SPACES_BENCH_ROUNDS` rounds (default 5) of `SPACES_BENCH_CALLS` calls per
//! variant (default 20), idle and then with one core spinning (this executable with `--busy`).
//! It prints p50 and p99 per variant, the sandbox's p50 minus the unsandboxed one (the goal:
//! at most 5 ms) and their ratio, overall and per round (min..max). Nothing is asserted.
//!
//! Run: `cargo bench -p spacesd --bench sandbox_start` (or `scripts/bench sandbox`). Needs
//! bubblewrap. Without `--bench` it runs a short smoke.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

#[path = "common/mod.rs"]
mod common;
use common::{get, ms, pct, post, ratio};

const WHAT: [&str; 3] = ["agent_start", "exec_command", "exec_command_cold"];

/// The Spaces `exec_command_cold` goes round: more than the warm sandboxes kept (4).
const COLD_SPACES: usize = 6;

fn spacesd_bin() -> PathBuf {
    common::spacesd_bin(env!("CARGO_BIN_EXE_spacesd"))
}

/// The fake Codex: its first command stamps the time into the Space, then it ends its turn.
const FAKE_CODEX: &str = r#"#!/bin/bash
echo "$EPOCHREALTIME" > ".started-$SPACES_RUN_ID"
echo '{"type":"thread.started","thread_id":"bench-thread"}'
echo '{"type":"turn.started"}'
echo '{"type":"item.completed","item":{"id":"m","type":"agent_message","text":"done"}}'
echo '{"type":"turn.completed","usage":{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1}}'
"#;

fn main() {
    let Some((rounds, calls)) = common::counts((20, 3)) else { return };
    let daemons = [Daemon::start(false), Daemon::start(true)];
    for d in &daemons {
        d.agent_start();
        d.exec_command("bench");
    }
    println!("sandbox_start: {rounds} rounds x {calls} calls per variant, interleaved (off, sandbox)");
    let settled = Duration::from_millis(SETTLE_MS);
    condition("idle", &daemons, rounds, calls, Duration::ZERO);
    condition("idle-settled", &daemons, rounds, calls, settled);
    let mut spinner = Command::new(std::env::current_exe().unwrap()).arg("--busy").spawn().unwrap();
    condition("loaded", &daemons, rounds, calls, Duration::ZERO);
    condition("loaded-settled", &daemons, rounds, calls, settled);
    let _ = spinner.kill();
    let _ = spinner.wait();
}

/// How long a `-settled` condition waits after each call before the next: the background work a
/// start leaves (a spare shim renewed, the next run's warm sandbox made ahead) is done by then.
const SETTLE_MS: u64 = 100;

/// `rounds` rounds of `calls` calls of each measure on each daemon, then the figures. `settle`:
/// the pause after each call (zero: back to back, each start paying for what the one before it
/// left running in the background on this machine's cores).
fn condition(name: &str, daemons: &[Daemon; 2], rounds: usize, calls: usize, settle: Duration) {
    // [what][variant] -> all samples; per round the p50 difference and ratio.
    let mut all: [[Vec<Duration>; 2]; 3] = Default::default();
    let mut per_round: [Vec<(f64, f64)>; 3] = Default::default();
    for _ in 0..rounds {
        let mut round: [[Vec<Duration>; 2]; 3] = Default::default();
        for call in 0..calls {
            for (v, d) in daemons.iter().enumerate() {
                round[0][v].push(d.agent_start());
                std::thread::sleep(settle);
                round[1][v].push(d.exec_command("bench"));
                std::thread::sleep(settle);
                round[2][v].push(d.exec_command(&format!("cold{}", call % COLD_SPACES)));
                std::thread::sleep(settle);
            }
        }
        for w in 0..3 {
            let (off, on) = (pct(&round[w][0], 0.5), pct(&round[w][1], 0.5));
            per_round[w].push((ms(on) - ms(off), ratio(on, off)));
            for v in 0..2 {
                all[w][v].extend(round[w][v].iter().copied());
            }
        }
    }
    for w in 0..3 {
        let (off, on) = (&all[w][0], &all[w][1]);
        let (d_min, d_max) = minmax(per_round[w].iter().map(|r| r.0));
        let (r_min, r_max) = minmax(per_round[w].iter().map(|r| r.1));
        println!(
            "sandbox_start/{name}/{}: p50 off {:.2} ms, sandbox {:.2} ms (+{:.2} ms, {:.2}x; per round +{d_min:.2}..+{d_max:.2} ms, {r_min:.2}x..{r_max:.2}x); p99 off {:.2} ms, sandbox {:.2} ms",
            WHAT[w],
            ms(pct(off, 0.5)),
            ms(pct(on, 0.5)),
            ms(pct(on, 0.5)) - ms(pct(off, 0.5)),
            ratio(pct(on, 0.5), pct(off, 0.5)),
            ms(pct(off, 0.99)),
            ms(pct(on, 0.99)),
        );
    }
}

fn minmax(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// One `spacesd serve` with a Space `bench` and the fake Codex; killed on drop.
struct Daemon {
    _tmp: tempfile::TempDir,
    child: Child,
    socket: PathBuf,
    root: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    fn start(sandbox: bool) -> Daemon {
        let tmp = tempfile::Builder::new().prefix("spaces-bench-sandbox-").tempdir().unwrap();
        let root = tmp.path().join("space");
        std::fs::create_dir_all(&root).unwrap();
        let root = std::fs::canonicalize(root).unwrap();
        let fake = tmp.path().join("fake-codex");
        std::fs::write(&fake, FAKE_CODEX).unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let fake = fake.display().to_string();
        let env = [("SPACES_SANDBOX", if sandbox { "on" } else { "off" }), ("SPACES_HARNESS_BIN_OPENAI_CODEX", fake.as_str())];
        let (child, socket) = common::start_daemon(&spacesd_bin(), tmp.path(), &env, &root);
        let d = Daemon { _tmp: tmp, child, socket, root };
        for n in 0..COLD_SPACES {
            let root = d._tmp.path().join(format!("cold{n}"));
            std::fs::create_dir_all(&root).unwrap();
            let (status, body) =
                post(&d.socket, "/v1/spaces", &[], &json!({"name": format!("cold{n}"), "root": root.display().to_string()}));
            assert_eq!(status, 200, "space_add: {body}");
        }
        d
    }

    fn tool(&self, name: &str, args: Value) -> Value {
        let (status, body) = post(&self.socket, &format!("/v1/tools/{name}"), &[], &args);
        assert_eq!(status, 200, "{name}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// `agent_start` -> the fake agent's first command; waits for the run to be idle after.
    fn agent_start(&self) -> Duration {
        let sent = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let (status, body) = post(&self.socket, "/v1/spaces/bench/agents", &[], &json!({"agent": "openai-codex", "prompt": "hi"}));
        assert_eq!(status, 200, "agent_start: {body}");
        let report: Value = serde_json::from_str(&body).unwrap();
        let run = report["run_id"].as_str().unwrap().to_owned();
        let stamp = self.root.join(format!(".started-{run}"));
        let started = wait_for(&stamp);
        let at = Duration::from_secs_f64(started.trim().parse::<f64>().unwrap());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (status, body) = get(&self.socket, &format!("/v1/spaces/bench/agents/{run}?tail=0"));
            assert_eq!(status, 200, "agent_status: {body}");
            let st: Value = serde_json::from_str(&body).unwrap();
            if st["status"] == "idle" {
                break;
            }
            assert!(Instant::now() < deadline, "run {run} never came back idle: {st}");
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = std::fs::remove_file(&stamp);
        at.saturating_sub(sent)
    }

    /// `exec_command echo x` in Space `space` -> the answer holding its first byte.
    fn exec_command(&self, space: &str) -> Duration {
        let t = Instant::now();
        let started = self.tool("exec_command", json!({"workspace_id": space, "command": ["echo", "x"]}));
        let id = started["process_id"].as_str().unwrap().to_owned();
        loop {
            let r = self.tool("read_process", json!({"process_id": id, "cursor": 0, "wait_ms": 5000}));
            if !r["chunk"].as_str().unwrap_or("").is_empty() {
                let took = t.elapsed();
                // The workspace runs one command at a time: let this one finish first.
                while self.tool("process_status", json!({"process_id": id}))["state"] != "exited" {
                    std::thread::sleep(Duration::from_millis(2));
                }
                return took;
            }
        }
    }
}

/// The contents of `path` once it holds a whole line (30 s at most).
fn wait_for(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.ends_with('\n') {
                return text;
            }
        }
        assert!(Instant::now() < deadline, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_micros(200));
    }
}
