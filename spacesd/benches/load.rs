//! `scripts/bench load`: the hot path under load (issue 12), every figure beside its baseline.
//!
//! For each daemon binary given (`SPACESD_BIN`, and `SPACESD_BASE_BIN` when set: the build to
//! compare with), in interleaved rounds (`SPACES_BENCH_ROUNDS`, default 2), on a fresh state dir
//! each time. The order alternates (base then new, then new then base, ...), and the file
//! system is synced before each binary's turn: whoever ran second used to pay for the first
//! one's writeback (an A/A run of one binary read 1.66x on the quiet line under load):
//! 1. **idle**: `agent_start` → agent exec'd (10 starts), follow-up → bytes on the agent's stdin
//!    (10 follow-ups to idle long-lived agents), and a quiet run printing a line every 2 ms read
//!    by a long-poll reader (line written → page received);
//! 2. **load**: the same three measures while `SPACES_BENCH_NOISY` (default 20) noisy agents print
//!    turns of 5,000 lines of 1.6 KB as fast as they can, each given its next turn as soon as
//!    the daemon has taken the last (`keep_noisy`);
//!    the quiet run is read at once by a long-poll reader and by an SSE follower;
//! 3. **ingest** (a fresh daemon): `SPACES_BENCH_INGEST_RUNS` (50) agents × 2,000 lines of
//!    1.6 KB started at once; when the last `agent_start` was answered (`ingest.starts_ms`);
//!    events/s from the first `agent_start` to the last run idle, beside a raw
//!    rusqlite insert of the same rows (1,000 rows a transaction, a plain rowid table, WAL,
//!    `synchronous=NORMAL`), and the state database's bytes per event (after the runs and the
//!    daemon stopped gracefully) beside the row's own bytes (event JSON + raw line); then the
//!    same agents and lines through the ingest floor (`load/floor.rs`: the least work a daemon
//!    of this design does, no service around it), `ingest.floor_events_per_s`. `--floor` runs
//!    the floor alone.
//!
//! Each daemon is torn down before the next phase starts: its runs stopped, the daemon stopped,
//! and every process left from its temp dir ended and waited for (`Daemon::teardown`).
//!
//! With `SPACES_BENCH_OBSERVE=1` (`scripts/bench observe`, issue 33) the `new` daemon also has
//! what an operator watching runs turns on: a webhook endpoint for every event type and an OTLP
//! collector (`SPACES_OTLP_ENDPOINT`), both a sink on 127.0.0.1 that answers 200 to every post;
//! its usage ledger is always on. Beside `SPACESD_BASE_BIN` built without them, the ratios are
//! what they cost.
//!
//! The fake agent is this executable, launched as the claude-code CLI: it records its exec time
//! and the time each user message reached its stdin in `bench-times.log` in its cwd, and prints
//! what its prompt asks (`mode=idle|quiet|noisy`). Nothing is asserted; figures are printed as
//! `load:` lines, min and median over the rounds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use spaces_sdk::client::{Client, Endpoint};
use spaces_sdk::{AgentEventsRequest, AgentMessageRequest, AgentStartRequest, AgentStatusRequest, EventKind, SpaceAddRequest, Status};

#[path = "load/floor.rs"]
mod floor;

const SESSION_ID: &str = "00000000-0000-4000-8000-0000000bload";
const LINE_BYTES: usize = 1600;
/// Stands for a noisy line's count in its template (never printed).
const MARK: &str = "@COUNT@";

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
    if args.iter().any(|a| a == "--floor") {
        // The floor alone: `SPACES_BENCH_ROUNDS` rounds of the ingest phase's agents and lines.
        let runs = env_num("SPACES_BENCH_INGEST_RUNS", 50) as usize;
        let lines = env_num("SPACES_BENCH_INGEST_LINES", 2000);
        for round in 0..env_num("SPACES_BENCH_ROUNDS", 3) {
            println!("load-raw: floor round={} ingest.floor_events_per_s={:.0}", round + 1, floor::events_per_s(runs, lines));
        }
        return;
    }
    let full = args.iter().any(|a| a == "--bench");
    let mut bins =
        vec![("new", std::env::var_os("SPACESD_BIN").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_spacesd"))))];
    if let Some(base) = std::env::var_os("SPACESD_BASE_BIN") {
        bins.insert(0, ("base", PathBuf::from(base)));
    }
    let cfg = Cfg {
        rounds: env_num("SPACES_BENCH_ROUNDS", if full { 2 } else { 1 }),
        noisy: env_num("SPACES_BENCH_NOISY", if full { 20 } else { 2 }) as usize,
        ingest_runs: env_num("SPACES_BENCH_INGEST_RUNS", if full { 50 } else { 2 }) as usize,
        ingest_lines: env_num("SPACES_BENCH_INGEST_LINES", if full { 2000 } else { 50 }),
        quiet_events: env_num("SPACES_BENCH_EVENTS", if full { 500 } else { 20 }),
        samples: if full { 10 } else { 2 },
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let observe = (std::env::var("SPACES_BENCH_OBSERVE").as_deref() == Ok("1")).then(|| rt.block_on(Sink::start()));
    let mut results: Vec<(String, String, f64)> = Vec::new(); // (bin, measure, value)
    for round in 0..cfg.rounds {
        let mut order: Vec<&(&str, PathBuf)> = bins.iter().collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for (name, bin) in order {
            // The previous binary's writes (its ingest: hundreds of MB) reach the disk now,
            // not during this one's load phase.
            nix::unistd::sync();
            eprintln!("== round {} of {}: {name} ({})", round + 1, cfg.rounds, bin.display());
            let watched = observe.as_ref().filter(|_| *name == "new");
            for (measure, v) in rt.block_on(one_round(bin, &cfg, watched)) {
                println!("load-raw: {name} round={} {measure}={v:.3}", round + 1);
                results.push((name.to_string(), measure, v));
            }
        }
    }
    report(&bins.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>(), &results);
    if let Some(sink) = &observe {
        let (hooks, spans) = (sink.hooks.load(std::sync::atomic::Ordering::Relaxed), sink.spans.load(std::sync::atomic::Ordering::Relaxed));
        println!("load: observed (new): {hooks} webhook posts and {spans} OTLP span batches taken by the sink");
    }
}

/// The observers' sink (`SPACES_BENCH_OBSERVE=1`): answers 200 to every post, counting them.
struct Sink {
    url: String,
    hooks: std::sync::Arc<std::sync::atomic::AtomicU64>,
    spans: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Sink {
    async fn start() -> Sink {
        use std::sync::atomic::{AtomicU64, Ordering};
        let (hooks, spans) = (std::sync::Arc::new(AtomicU64::new(0)), std::sync::Arc::new(AtomicU64::new(0)));
        let (h, s) = (hooks.clone(), spans.clone());
        let app = axum::Router::new()
            .route(
                "/hook",
                axum::routing::post(move || async move {
                    h.fetch_add(1, Ordering::Relaxed);
                    ""
                }),
            )
            .route(
                "/v1/traces",
                axum::routing::post(move || async move {
                    s.fetch_add(1, Ordering::Relaxed);
                    "{}"
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Sink { url, hooks, spans }
    }
}

struct Cfg {
    rounds: u64,
    noisy: usize,
    ingest_runs: usize,
    ingest_lines: u64,
    quiet_events: u64,
    samples: usize,
}

// ----- the fake agent -----

fn fake_agent() {
    let exec_ns = now_ns();
    let cwd = std::env::current_dir().unwrap();
    let times = cwd.join("bench-times.log");
    let record = |line: String| {
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&times).unwrap();
        f.write_all(format!("{line}\n").as_bytes()).unwrap();
    };
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut first = true;
    for line in stdin.lock().lines() {
        let got_ns = now_ns();
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else { continue };
        if msg.get("type").and_then(Value::as_str) != Some("user") {
            continue;
        }
        let prompt = msg.pointer("/message/content/0/text").and_then(Value::as_str).unwrap_or("").to_owned();
        let word =
            |key: &str| prompt.split_whitespace().find_map(|w| w.strip_prefix(key).and_then(|v| v.strip_prefix('='))).map(str::to_owned);
        let num = |key: &str, d: u64| word(key).and_then(|v| v.parse().ok()).unwrap_or(d);
        let tag = word("tag").unwrap_or_default();
        if first {
            record(format!("{tag} exec {exec_ns}"));
            first = false;
        }
        record(format!("{tag} stdin {got_ns}"));
        let emit = |out: &mut dyn Write, v: Value, flush: bool| {
            writeln!(out, "{v}").unwrap();
            if flush {
                out.flush().unwrap();
            }
        };
        emit(
            &mut out,
            json!({"type": "system", "subtype": "init", "cwd": cwd, "session_id": SESSION_ID, "tools": [], "model": "fake-load-model", "claude_code_version": "bench"}),
            true,
        );
        let text_line = |i: u64, text: String| {
            json!({"type": "assistant", "message": {"id": format!("msg_{i}"), "type": "message", "role": "assistant", "model": "fake-load-model",
                   "content": [{"type": "text", "text": text}], "stop_reason": null, "usage": {"input_tokens": 1, "output_tokens": 1}},
                   "parent_tool_use_id": null, "session_id": SESSION_ID})
        };
        let mut count = 0;
        match word("mode").as_deref() {
            Some("quiet") => {
                count = num("count", 500);
                let interval = Duration::from_micros(num("interval_us", 2000));
                let start = Instant::now();
                for i in 0..count {
                    if let Some(w) = (start + interval * i as u32).checked_duration_since(Instant::now()) {
                        std::thread::sleep(w);
                    }
                    emit(&mut out, text_line(i, format!("t_ns={} i={i}", now_ns())), true);
                }
            }
            Some("noisy") => {
                let max = num("count", u64::MAX);
                let stop = cwd.join("stop-noise");
                let pad = "x".repeat(LINE_BYTES.saturating_sub(330));
                // The line `text_line(count, "noise {count} {pad}")` prints, serialized once with a
                // marker where the count goes (twice): the generator's own JSON work was 15% of
                // the machine during ingest, taken from the daemon it measures.
                let template = text_line(0, format!("noise {MARK} {pad}")).to_string().replace("\"msg_0\"", &format!("\"msg_{MARK}\""));
                let parts: Vec<&str> = template.split(MARK).collect();
                assert_eq!(parts.len(), 3, "the count goes in the message id and the text");
                while count < max {
                    if count % 200 == 0 && stop.exists() {
                        break;
                    }
                    writeln!(out, "{}{count}{}{count}{}", parts[0], parts[1], parts[2]).unwrap();
                    count += 1;
                }
            }
            _ => {}
        }
        emit(
            &mut out,
            json!({"type": "result", "subtype": "success", "is_error": false, "num_turns": 1, "result": "done", "stop_reason": "end_turn",
                    "session_id": SESSION_ID, "usage": {"input_tokens": 1, "output_tokens": count}}),
            true,
        );
    }
}

// ----- one round against one daemon binary -----

struct Daemon {
    child: Child,
    client: Client,
    state: PathBuf,
    root: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let status = self.child.try_wait().ok().flatten();
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            // The temp dir goes with this value: say what the daemon said before it does.
            let log = std::fs::read_to_string(self._tmp.path().join("spacesd.log")).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            eprintln!("== the daemon (exited: {status:?}) logged, last lines:");
            for l in &lines[lines.len().saturating_sub(30)..] {
                eprintln!("{l}");
            }
        }
    }
}

impl Daemon {
    async fn start(bin: &Path, observe: Option<&Sink>) -> Daemon {
        let tmp = tempfile::Builder::new().prefix("spaces-bench-load-").tempdir().unwrap();
        let state = tmp.path().join("state");
        let root = tmp.path().join("space");
        std::fs::create_dir_all(&root).unwrap();
        let root = std::fs::canonicalize(root).unwrap();
        let mut cmd = Command::new(bin);
        // A session (so a scheduler autogroup) of its own, as a service manager starts it: the
        // daemon's share of the CPU must not depend on the autogroup of whoever runs the bench
        // (a shell whose autogroup was lowered would lower the daemon with it).
        // SAFETY: `setsid` is async-signal-safe and touches no memory.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || nix::unistd::setsid().map(|_| ()).map_err(std::io::Error::from));
        }
        let child = cmd
            .arg("serve")
            .arg("--state-dir")
            .arg(&state)
            .env("SPACES_HARNESS_BIN_CLAUDE_CODE", std::env::current_exe().unwrap())
            .env("SPACES_TOOLS_DIR", tmp.path().join("tools"))
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .envs(observe.map(|s| ("SPACES_OTLP_ENDPOINT", s.url.clone())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(tmp.path().join("spacesd.log")).unwrap())
            .spawn()
            .unwrap();
        let client = Client::new(Endpoint::Unix(state.join("spacesd.sock")));
        let deadline = Instant::now() + Duration::from_secs(20);
        while client.space_list(&spaces_sdk::Empty {}).await.is_err() {
            assert!(Instant::now() < deadline, "spacesd did not come up");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        client
            .space_add(&SpaceAddRequest {
                name: "b".into(),
                root: root.display().to_string(),
                read_only: false,
                approvals: Default::default(),
                network: Default::default(),
                replace: false,
            })
            .await
            .unwrap();
        if let Some(sink) = observe {
            let hook = json!({"url": format!("{}/hook", sink.url), "secret": "bench-secret-0123456789"});
            client.call_named("webhook_add", hook).await.unwrap();
        }
        Daemon { child, client, state, root, _tmp: tmp }
    }

    async fn start_run(&self, prompt: String) -> String {
        let req = AgentStartRequest {
            space: "b".into(),
            agent: "claude-code".into(),
            prompt,
            show: None,
            options: None,
            request_id: None,
            traceparent: None,
        };
        self.client.agent_start(&req).await.unwrap().run_id
    }

    /// The time the fake agent recorded for `tag`/`what`, waiting for it to appear.
    async fn recorded(&self, tag: &str, what: &str) -> u128 {
        let deadline = Instant::now() + Duration::from_secs(60);
        let prefix = format!("{tag} {what} ");
        loop {
            let text = std::fs::read_to_string(self.root.join("bench-times.log")).unwrap_or_default();
            if let Some(t) = text.lines().find_map(|l| l.strip_prefix(&prefix)) {
                return t.trim().parse().unwrap();
            }
            assert!(Instant::now() < deadline, "the agent never recorded {prefix}");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    async fn wait_idle(&self, run: &str) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let st = self.client.agent_status(&AgentStatusRequest { space: "b".into(), run_id: run.into(), tail: Some(0) }).await.unwrap();
            if st.status == Status::Idle {
                return;
            }
            assert!(Instant::now() < deadline, "run {run} not idle: {:?} {}", st.status, st.reason);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Ends this daemon and everything its runs started, and waits until it is all gone: every
    /// run stopped through the API, the daemon stopped, then any process still running from
    /// this daemon's temp dir (a shim names its directory; an agent's cwd is the Space) ended.
    /// Shims outlive their daemon by design (runs survive a restart): left alone, the last
    /// phase's 20 to 50 shims and agents wound down during the next phase, another binary's
    /// as often as not, deleting their files meanwhile.
    async fn teardown(&mut self) {
        let space = self.client.space("b");
        for run in space.agent_list().await.unwrap_or_default() {
            let _ = space.agent_stop(&run.run_id).await;
        }
        self.stop_gracefully().await;
        let _ = self.child.kill();
        let _ = self.child.wait();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = leftovers(self._tmp.path());
            if left.is_empty() {
                return;
            }
            let signal = if Instant::now() < deadline { nix::sys::signal::Signal::SIGTERM } else { nix::sys::signal::Signal::SIGKILL };
            for pid in left {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn stop_gracefully(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Processes whose command line or working directory is inside `dir`.
fn leftovers(dir: &Path) -> Vec<i32> {
    let dir = dir.to_string_lossy().into_owned();
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cwd = std::fs::read_link(entry.path().join("cwd")).map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&dir) || cwd.starts_with(&dir) {
            out.push(pid);
        }
    }
    out
}

static TAGS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
fn tag() -> String {
    format!("t{}", TAGS.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

/// `agent_start` → exec (ms) and follow-up → stdin (ms), `n` of each.
async fn start_and_followup(d: &Daemon, n: usize) -> (Vec<f64>, Vec<f64>) {
    let (mut starts, mut follows) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let t = tag();
        let t0 = now_ns();
        let run = d.start_run(format!("mode=idle tag={t}")).await;
        starts.push((d.recorded(&t, "exec").await.saturating_sub(t0)) as f64 / 1e6);
        d.wait_idle(&run).await;
        let t2 = tag();
        let t0 = now_ns();
        let m = AgentMessageRequest {
            space: "b".into(),
            run_id: run.clone(),
            text: format!("mode=idle tag={t2}"),
            force: None,
            message_id: None,
            traceparent: None,
        };
        d.client.agent_message(&m).await.unwrap();
        follows.push((d.recorded(&t2, "stdin").await.saturating_sub(t0)) as f64 / 1e6);
        let _ = d.client.space("b").agent_stop(&run).await;
    }
    (starts, follows)
}

/// The `t_ns=` stamp of a quiet run's line, if `e` is one.
fn stamp(e: &spaces_sdk::Event) -> Option<u128> {
    if e.kind != EventKind::Message {
        return None;
    }
    e.text.as_deref()?.strip_prefix("t_ns=")?.split(' ').next()?.parse().ok()
}

/// A quiet run printing `count` lines every 2 ms, read at once by a long-poll reader and by an
/// SSE follower (`client.follow`, `Accept: text/event-stream`): line written → page received,
/// and line written → SSE event received, ms. The SSE list is empty when the daemon has no
/// stream (a daemon from before issue 13 refuses it, or answers JSON and the follower falls
/// back to long-polls).
async fn quiet_latency(d: &Daemon, count: u64) -> (Vec<f64>, Vec<f64>) {
    let run = d.start_run(format!("mode=quiet count={count} interval_us=2000 tag={}", tag())).await;
    let follower = {
        let client = d.client.clone();
        let run = run.clone();
        tokio::spawn(async move {
            let mut follow = client.follow("b", &run, 0, spaces_sdk::follow::Until::Turn);
            let mut out = Vec::new();
            loop {
                let e = match follow.next().await {
                    Ok(Some(e)) => e,
                    Ok(None) => break,
                    Err(e) => {
                        // A daemon from before issue 13 refuses the stream's `until`.
                        eprintln!("== no SSE figures from this daemon: {e}");
                        return Vec::new();
                    }
                };
                let got = now_ns();
                if let Some(t) = stamp(&e) {
                    out.push(got.saturating_sub(t) as f64 / 1e6);
                }
                if e.kind == EventKind::TurnEnded {
                    break;
                }
            }
            if follow.transport() == spaces_sdk::follow::Transport::Sse {
                out
            } else {
                Vec::new()
            }
        })
    };
    let mut out = Vec::new();
    let mut cursor = 0;
    loop {
        let q = AgentEventsRequest {
            space: "b".into(),
            run_id: run.clone(),
            cursor: Some(cursor),
            max: Some(1000),
            wait_ms: Some(5000),
            raw: None,
        };
        let page = d.client.agent_events(&q).await.unwrap();
        let got = now_ns();
        cursor = page.cursor;
        let mut ended = false;
        for e in &page.events {
            if let Some(t) = stamp(e) {
                let ms = got.saturating_sub(t) as f64 / 1e6;
                trace_slow(ms, (e.ts_ms as f64 - t as f64 / 1e6, got as f64 / 1e6 - e.ts_ms as f64));
                out.push(ms);
            }
            ended |= e.kind == EventKind::TurnEnded;
        }
        if ended {
            let sse = follower.await.unwrap();
            let _ = d.client.space("b").agent_stop(&run).await;
            return (out, sse);
        }
    }
}

/// With `SPACES_BENCH_TRACE_MS` set: a quiet line that took longer than that many ms is printed
/// with the `CLOCK_MONOTONIC` time it was received at, to find it in a `perf sched record -k
/// CLOCK_MONOTONIC` (or `perf record`) trace of the same run, and its time split in two at the
/// event's `ts_ms` (when the daemon prepared its chunk for the writer; wall clock, 1 ms steps):
/// written → prepared (shim, journal, follower, normalizer) and prepared → received (writer,
/// commit, wake-up, HTTP).
fn trace_slow(ms: f64, (to_prepared, to_received): (f64, f64)) {
    static LIMIT: std::sync::OnceLock<Option<f64>> = std::sync::OnceLock::new();
    let Some(limit) = *LIMIT.get_or_init(|| std::env::var("SPACES_BENCH_TRACE_MS").ok().and_then(|v| v.parse().ok())) else { return };
    if ms > limit {
        let mut now = nix::libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes the timespec it is given.
        unsafe { nix::libc::clock_gettime(nix::libc::CLOCK_MONOTONIC, &mut now) };
        eprintln!(
            "== slow quiet line: {ms:.1} ms ({to_prepared:.0} ms to prepared, {to_received:.0} ms to received), received at {}.{:06} (monotonic)",
            now.tv_sec,
            now.tv_nsec / 1000
        );
    }
}

/// Lines of one noisy turn (the "20 agents each printing 5,000 lines fast").
const NOISY_TURN_LINES: u64 = 5000;

/// Keeps the noisy runs printing while `keeping`: every 100 ms, a noisy run whose turn is over
/// gets the next one. Returns how many turns it sent. The agent prints a turn as fast as its
/// shim journals it; the daemon ingests it at its own pace, so the load is the daemon's
/// backlog of at most one turn per noisy run.
async fn keep_noisy(client: Client, runs: Vec<String>, keeping: std::sync::Arc<std::sync::atomic::AtomicBool>) -> u64 {
    let mut sent = 0;
    while keeping.load(std::sync::atomic::Ordering::Relaxed) {
        for run in &runs {
            let Ok(st) = client.agent_status(&AgentStatusRequest { space: "b".into(), run_id: run.clone(), tail: Some(0) }).await else {
                continue;
            };
            if st.status == Status::Idle {
                let m = AgentMessageRequest {
                    space: "b".into(),
                    run_id: run.clone(),
                    text: format!("mode=noisy count={NOISY_TURN_LINES} tag={}", tag()),
                    force: None,
                    message_id: None,
                    traceparent: None,
                };
                sent += u64::from(client.agent_message(&m).await.is_ok());
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sent
}

async fn one_round(bin: &Path, cfg: &Cfg, observe: Option<&Sink>) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    let mut put = |name: &str, mut v: Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        if v.is_empty() {
            return;
        }
        out.push((format!("{name}.p50"), pct(&v, 0.50)));
        out.push((format!("{name}.p99"), pct(&v, 0.99)));
    };
    {
        let mut d = Daemon::start(bin, observe).await;
        // idle
        let (s, f) = start_and_followup(&d, cfg.samples).await;
        let (q, sse) = quiet_latency(&d, cfg.quiet_events).await;
        put("idle.start_exec_ms", s);
        put("idle.followup_stdin_ms", f);
        put("idle.quiet_poll_ms", q);
        put("idle.quiet_sse_ms", sse);
        // under load
        let _ = std::fs::remove_file(d.root.join("stop-noise"));
        let mut noisy = Vec::new();
        for _ in 0..cfg.noisy {
            noisy.push(d.start_run(format!("mode=noisy count={NOISY_TURN_LINES} tag={}", tag())).await);
        }
        let keeping = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let keeper = tokio::spawn(keep_noisy(d.client.clone(), noisy.clone(), keeping.clone()));
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (q, sse) = quiet_latency(&d, cfg.quiet_events).await;
        let (s, f) = start_and_followup(&d, cfg.samples).await;
        keeping.store(false, std::sync::atomic::Ordering::Relaxed);
        let turns = keeper.await.unwrap();
        eprintln!("== {turns} noisy turns of {NOISY_TURN_LINES} lines during the load phase");
        std::fs::write(d.root.join("stop-noise"), "").unwrap();
        put("load.start_exec_ms", s);
        put("load.followup_stdin_ms", f);
        put("load.quiet_poll_ms", q);
        put("load.quiet_sse_ms", sse);
        for r in &noisy {
            d.wait_idle(r).await;
        }
        d.teardown().await;
    }
    // ingest
    let mut d = Daemon::start(bin, observe).await;
    let started = Instant::now();
    // Started at once, as a caller starting 50 agents would (`asyncio.gather`); until session 13
    // the bench awaited each start before sending the next, so 50 starts of about 13 ms each were
    // a third of the window. `ingest.starts_ms` is when the last start was answered.
    let starts = (0..cfg.ingest_runs).map(|_| d.start_run(format!("mode=noisy count={} tag={}", cfg.ingest_lines, tag())));
    let runs: Vec<String> = futures_util::future::join_all(starts).await;
    let starts_ms = started.elapsed().as_secs_f64() * 1000.0;
    for r in &runs {
        d.wait_idle(r).await;
    }
    let secs = started.elapsed().as_secs_f64();
    out.push(("ingest.starts_ms".into(), starts_ms));
    // Every run's events, counted; one run's rows (JSON + raw) for the raw insert and row size.
    let mut total = 0u64;
    let mut rows: Vec<(String, String)> = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let mut cursor = 0;
        loop {
            let q = AgentEventsRequest {
                space: "b".into(),
                run_id: r.clone(),
                cursor: Some(cursor),
                max: Some(1000),
                wait_ms: Some(0),
                raw: Some(i == 0),
            };
            let page = d.client.agent_events(&q).await.unwrap();
            if page.events.is_empty() {
                break;
            }
            cursor = page.cursor;
            total += page.events.len() as u64;
            if i == 0 {
                for mut e in page.events {
                    let raw = e.raw.take().unwrap_or_default();
                    rows.push((serde_json::to_string(&e).unwrap(), raw));
                }
            }
        }
    }
    out.push(("ingest.events_per_s".into(), total as f64 / secs));
    out.push(("ingest.raw_insert_events_per_s".into(), raw_insert(&rows, cfg.ingest_runs)));
    let row_bytes = rows.iter().map(|(b, r)| (b.len() + r.len()) as f64).sum::<f64>() / rows.len().max(1) as f64;
    // The runs stopped (a few events each), the daemon stopped gracefully, nothing left running.
    d.teardown().await;
    let db = d.state.join("spaces.db");
    let size = |p: PathBuf| std::fs::metadata(p).map_or(0, |m| m.len());
    let disk = size(db.clone()) + size(PathBuf::from(format!("{}-wal", db.display())));
    out.push(("ingest.row_bytes".into(), row_bytes));
    out.push(("ingest.disk_bytes_per_event".into(), disk as f64 / total.max(1) as f64));
    // The same agents and lines through the least work this design needs (`load/floor.rs`),
    // after the daemon's writes reached the disk.
    nix::unistd::sync();
    out.push(("ingest.floor_events_per_s".into(), floor::events_per_s(cfg.ingest_runs, cfg.ingest_lines)));
    out
}

/// The same rows `runs` times over, 1,000 rows a transaction, into a plain rowid table.
fn raw_insert(rows: &[(String, String)], runs: usize) -> f64 {
    let tmp = tempfile::tempdir().unwrap();
    let conn = rusqlite::Connection::open(tmp.path().join("raw.db")).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    conn.execute_batch(
        "CREATE TABLE events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, raw TEXT, PRIMARY KEY (run_id, seq))",
    )
    .unwrap();
    let started = Instant::now();
    let mut n = 0u64;
    let mut pending = 0;
    conn.execute_batch("BEGIN").unwrap();
    {
        let mut stmt = conn.prepare("INSERT INTO events (run_id, seq, body, raw) VALUES (?1, ?2, ?3, ?4)").unwrap();
        for run in 0..runs {
            let run_id = format!("run-{run:032x}");
            for (i, (body, raw)) in rows.iter().enumerate() {
                stmt.execute(rusqlite::params![run_id, i as i64 + 1, body, raw]).unwrap();
                n += 1;
                pending += 1;
                if pending == 1000 {
                    conn.execute_batch("COMMIT; BEGIN").unwrap();
                    pending = 0;
                }
            }
        }
    }
    conn.execute_batch("COMMIT").unwrap();
    n as f64 / started.elapsed().as_secs_f64()
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    sorted[(((n as f64) * p).ceil() as usize).clamp(1, n) - 1]
}

/// The goal for `measure` under load, as (bound, whether a value must stay at or below it).
fn goal(measure: &str) -> Option<(f64, bool)> {
    Some(match measure {
        "load.quiet_poll_ms.p50" => (2.0, true),
        "load.quiet_poll_ms.p99" => (10.0, true),
        "load.start_exec_ms.p50" => (30.0, true),
        "load.followup_stdin_ms.p50" => (5.0, true),
        "ingest.events_per_s" => (200_000.0, false),
        _ => return None,
    })
}

fn report(bins: &[String], results: &[(String, String, f64)]) {
    let mut by: HashMap<(String, String), Vec<f64>> = HashMap::new();
    let mut measures: Vec<String> = Vec::new();
    for (b, m, v) in results {
        by.entry((b.clone(), m.clone())).or_default().push(*v);
        if !measures.contains(m) {
            measures.push(m.clone());
        }
    }
    let stat = |b: &str, m: &str| {
        let mut v = by.get(&(b.to_owned(), m.to_owned())).cloned().unwrap_or_default();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        if v.is_empty() {
            return (f64::NAN, f64::NAN);
        }
        // The median of an even count is the mean of the middle two.
        (v[0], (v[(v.len() - 1) / 2] + v[v.len() / 2]) / 2.0)
    };
    let last = bins.last().cloned().unwrap_or_default();
    let ratio_col = if bins.len() > 1 { format!(" | {last} / {} (medians)", bins[0]) } else { String::new() };
    println!("load: measure | {} (min / median over rounds){ratio_col} | goal under load ({last}, median)", bins.join(" | "));
    for m in &measures {
        let cells: Vec<String> = bins
            .iter()
            .map(|b| {
                let (mn, md) = stat(b, m);
                format!("{mn:.3} / {md:.3}")
            })
            .collect();
        let ratio = if bins.len() > 1 { format!(" | {:.2}x", stat(&last, m).1 / stat(&bins[0], m).1) } else { String::new() };
        let verdict = match goal(m) {
            Some((bound, at_most)) => {
                let v = stat(&last, m).1;
                let met = if at_most { v <= bound } else { v >= bound };
                format!("{} {bound}: {}", if at_most { "<=" } else { ">=" }, if met { "met" } else { "MISSED" })
            }
            None => "-".to_owned(),
        };
        println!("load: {m} | {}{ratio} | {verdict}", cells.join(" | "));
    }
    for b in bins {
        let (_, ing) = stat(b, "ingest.events_per_s");
        let (_, raw) = stat(b, "ingest.raw_insert_events_per_s");
        let (_, disk) = stat(b, "ingest.disk_bytes_per_event");
        let (_, row) = stat(b, "ingest.row_bytes");
        let (_, floor) = stat(b, "ingest.floor_events_per_s");
        println!("load: {b}: ingest {:.2}x the floor ({floor:.0} events/s: the least work of this design, `load/floor.rs`)", ing / floor);
        println!(
            "load: {b}: ingest {:.2}x the raw insert (goal >= 1.0: {}); disk {:.2}x the row's bytes (goal <= 1.5: {})",
            ing / raw,
            if ing / raw >= 1.0 { "met" } else { "MISSED" },
            disk / row,
            if disk / row <= 1.5 { "met" } else { "MISSED" }
        );
        for cond in ["idle", "load"] {
            for p in ["p50", "p99"] {
                let (_, sse) = stat(b, &format!("{cond}.quiet_sse_ms.{p}"));
                let (_, poll) = stat(b, &format!("{cond}.quiet_poll_ms.{p}"));
                if sse.is_finite() {
                    println!("load: {b}: {cond} SSE / long-poll delivery {p}: {sse:.3} / {poll:.3} ms = {:.2}x", sse / poll);
                }
            }
        }
    }
}
