//! Latency from a line written by an agent process to a waiting long-poll reader, end to end
//! through a real `spacesd serve`.
//!
//! The fake agent is this very executable: the daemon launches it as the claude-code CLI
//! (`SPACES_HARNESS_BIN_CLAUDE_CODE` points at it) with Claude's argv (`-p --input-format
//! stream-json ...`), which is how it knows to act as the agent. It reads the user message line
//! from stdin, prints a `system/init` line, then `assistant` text lines `t_ns=<unix ns> i=<n>`
//! (one every `interval_us`, on an absolute schedule so the rate does not drift), then a
//! `result` line, and waits for more messages until stdin closes. The count and interval travel in
//! the prompt text (the daemon gives agents none of its own environment).
//!
//! The reader is `spaces_sdk::client::Client` over the daemon's Unix socket, looping
//! `agent_events` with `wait_ms` (long-poll, `max=1000`). For every `message` event it records
//! `now - t_ns` as soon as the page arrives. Printed: events counted, p50, p99, max and mean in
//! ms, and how many polls it took. Nothing is asserted.
//!
//! Run: `cargo bench -p spacesd --bench longpoll_latency`. Environment:
//! `SPACES_BENCH_EVENTS` (default 1000), `SPACES_BENCH_INTERVAL_US` (default 2000),
//! `SPACESD_BIN` (default: the `spacesd` built with this bench).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use spaces_sdk::client::{Client, Endpoint};
use spaces_sdk::{AgentEventsRequest, AgentStartRequest, EventKind, SpaceAddRequest};

const SESSION_ID: &str = "00000000-0000-4000-8000-00000000bench";

fn now_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos()
}

fn env_num(key: &str, default: u64) -> u64 {
    std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--input-format") {
        fake_agent();
        return;
    }
    // `cargo bench` passes `--bench`; without it (e.g. `cargo test --benches`) run a short smoke.
    let full = args.iter().any(|a| a == "--bench");
    let count = env_num("SPACES_BENCH_EVENTS", if full { 1000 } else { 50 });
    let interval_us = env_num("SPACES_BENCH_INTERVAL_US", 2000);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(measure(count, interval_us));
}

// ----- the fake agent -----

fn fake_agent() {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let cwd = std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_default();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else { continue };
        if msg.get("type").and_then(Value::as_str) != Some("user") {
            continue; // control requests (interrupts) are not part of this benchmark
        }
        let prompt = msg.pointer("/message/content/0/text").and_then(Value::as_str).unwrap_or("");
        let param = |key: &str, default: u64| {
            prompt
                .split_whitespace()
                .find_map(|w| w.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        let count = param("count", 1000);
        let interval = Duration::from_micros(param("interval_us", 2000));
        let emit = |out: &mut std::io::StdoutLock<'_>, v: Value| {
            writeln!(out, "{v}").unwrap();
            out.flush().unwrap();
        };
        emit(
            &mut out,
            json!({"type": "system", "subtype": "init", "cwd": cwd, "session_id": SESSION_ID,
                   "tools": [], "model": "fake-bench-model", "claude_code_version": "bench"}),
        );
        let start = Instant::now();
        for i in 0..count {
            let due = start + interval * (i as u32);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let text = format!("t_ns={} i={i}", now_ns());
            emit(
                &mut out,
                json!({"type": "assistant", "message": {"id": format!("msg_bench_{i}"), "type": "message",
                       "role": "assistant", "model": "fake-bench-model",
                       "content": [{"type": "text", "text": text}], "stop_reason": null,
                       "usage": {"input_tokens": 1, "output_tokens": 1}},
                       "parent_tool_use_id": null, "session_id": SESSION_ID}),
            );
        }
        emit(
            &mut out,
            json!({"type": "result", "subtype": "success", "is_error": false, "num_turns": 1,
                   "result": "done", "stop_reason": "end_turn", "session_id": SESSION_ID,
                   "usage": {"input_tokens": 1, "output_tokens": count}}),
        );
    }
}

// ----- the daemon and the reader -----

fn spacesd_bin() -> PathBuf {
    std::env::var_os("SPACESD_BIN").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_spacesd")))
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn measure(count: u64, interval_us: u64) {
    let tmp = tempfile::Builder::new().prefix("spaces-bench-longpoll-").tempdir().unwrap();
    let state = tmp.path().join("state");
    let space_root = tmp.path().join("space");
    std::fs::create_dir_all(&space_root).unwrap();
    let space_root = std::fs::canonicalize(space_root).unwrap();
    let me = std::env::current_exe().unwrap();
    let bin = spacesd_bin();
    let log_path = tmp.path().join("spacesd.log");
    let child = Command::new(&bin)
        .arg("serve")
        .arg("--state-dir")
        .arg(&state)
        .env("SPACES_HARNESS_BIN_CLAUDE_CODE", &me)
        .env("SPACES_TOOLS_DIR", tmp.path().join("tools"))
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    let _daemon = Daemon(child);
    let client = Client::new(Endpoint::Unix(state.join("spacesd.sock")));
    let deadline = Instant::now() + Duration::from_secs(20);
    while client.space_list(&spaces_sdk::Empty {}).await.is_err() {
        assert!(Instant::now() < deadline, "spacesd did not come up within 20 s (log: {})", log_path.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    client
        .space_add(&SpaceAddRequest {
            name: "bench".into(),
            root: space_root.display().to_string(),
            read_only: false,
            approvals: Default::default(),
            network: Default::default(),
            replace: false,
        })
        .await
        .unwrap();
    let req = AgentStartRequest {
        space: "bench".into(),
        agent: "claude-code".into(),
        prompt: format!("latency-bench count={count} interval_us={interval_us}"),
        show: None,
        options: None,
        request_id: None,
        traceparent: None,
    };
    let run = client.agent_start(&req).await.unwrap().run_id;

    let mut latencies_ns: Vec<u128> = Vec::with_capacity(count as usize);
    let mut cursor = 0;
    let mut polls = 0u64;
    let mut empty_polls = 0u64;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(60 + count * interval_us / 1_000_000 * 2);
    'read: loop {
        assert!(Instant::now() < deadline, "the turn did not end in time; {} events so far", latencies_ns.len());
        let q = AgentEventsRequest {
            space: "bench".into(),
            run_id: run.clone(),
            cursor: Some(cursor),
            max: Some(1000),
            wait_ms: Some(5_000),
            raw: None,
        };
        let page = client.agent_events(&q).await.unwrap();
        let received = now_ns();
        polls += 1;
        if page.events.is_empty() {
            empty_polls += 1;
        }
        cursor = page.cursor;
        for e in &page.events {
            match e.kind {
                EventKind::Message => {
                    let t = e.text.as_deref().and_then(|t| t.strip_prefix("t_ns=")).and_then(|t| t.split(' ').next());
                    if let Some(t) = t.and_then(|t| t.parse::<u128>().ok()) {
                        latencies_ns.push(received.saturating_sub(t));
                    }
                }
                EventKind::TurnEnded => {
                    if e.stop_reason != Some(spaces_sdk::StopReason::EndTurn) {
                        eprintln!("note: the turn ended {:?}: {:?}", e.stop_reason, e.text);
                    }
                    break 'read;
                }
                _ => {}
            }
        }
    }
    let elapsed = started.elapsed();
    let _ = client.space("bench").agent_stop(&run).await;

    let n = latencies_ns.len();
    if n == 0 {
        println!("longpoll_latency: no events measured (daemon log: {})", log_path.display());
        return;
    }
    latencies_ns.sort_unstable();
    let ms = |ns: u128| ns as f64 / 1e6;
    let pct = |p: f64| latencies_ns[(((n as f64) * p).ceil() as usize).clamp(1, n) - 1];
    let mean = latencies_ns.iter().sum::<u128>() / n as u128;
    println!(
        "longpoll_latency: events={n} (of {count}) interval={:.1} ms p50={:.3} ms p99={:.3} ms max={:.3} ms mean={:.3} ms min={:.3} ms",
        interval_us as f64 / 1000.0,
        ms(pct(0.50)),
        ms(pct(0.99)),
        ms(latencies_ns[n - 1]),
        ms(mean),
        ms(latencies_ns[0]),
    );
    println!(
        "longpoll_latency: {polls} polls ({empty_polls} empty), {:.2} events/poll, {:.2} s reading; spacesd {}",
        n as f64 / polls as f64,
        elapsed.as_secs_f64(),
        bin.display()
    );
}
