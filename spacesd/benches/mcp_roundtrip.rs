//! Round trip of one `read` of a small file through MCP, beside the same call over the plain
//! HTTP API, end to end through a real `spacesd serve`.
//!
//! Three variants, all to one daemon over its Unix socket, interleaved call by call (one call
//! of each in turn) so drift and noise hit them alike:
//! - `plain_http`: `POST /v1/tools/read` (JSON in, JSON out), a fresh connection per call: the
//!   baseline. It is also what `spacesd mcp` does for each tool call.
//! - `mcp_stdio`: `tools/call read` written to a `spacesd mcp` child's stdin, its answer read
//!   from its stdout (so: the plain call plus the stdio hop, JSON-RPC and the result shaping).
//! - `mcp_http`: `tools/call read` as `POST /mcp` in an initialized Streamable HTTP session
//!   (SSE answer), a fresh connection per call like the baseline.
//!
//! Each condition runs `SPACES_BENCH_ROUNDS` rounds (default 5) of `SPACES_BENCH_CALLS` calls of
//! each variant (default 200), after a warm-up. Conditions: `idle`, then `loaded`, with a child
//! spinning on one core (this executable with `--busy`, which stops by itself after 10 min). It
//! prints p50 and p99 per variant and their ratios to `plain_http`, overall and per round
//! (min..max over rounds). Nothing is asserted.
//!
//! Run: `cargo bench -p spacesd --bench mcp_roundtrip` (or `scripts/bench mcp`). Without
//! `--bench` (e.g. `cargo test --benches`) it runs a short smoke.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "common/mod.rs"]
mod common;
use common::{ms, pct, post, post_raw, ratio};

const VARIANTS: [&str; 3] = ["plain_http", "mcp_stdio", "mcp_http"];

fn main() {
    let Some((rounds, calls)) = common::counts((200, 10)) else { return };
    let mut bench = Bench::start();
    for _ in 0..(calls / 4).max(5) {
        for v in 0..VARIANTS.len() {
            bench.one(v);
        }
    }
    println!("mcp_roundtrip: read of a {} byte file; {rounds} rounds x {calls} calls per variant, interleaved", FILE.len());
    bench.condition("idle", rounds, calls);
    let mut spinner = Command::new(std::env::current_exe().unwrap()).arg("--busy").spawn().unwrap();
    bench.condition("loaded", rounds, calls);
    let _ = spinner.kill();
    let _ = spinner.wait();
}

const FILE: &str = "fn main() {\n    println!(\"hello from a small file\");\n}\n";

fn spacesd_bin() -> PathBuf {
    common::spacesd_bin(env!("CARGO_BIN_EXE_spacesd"))
}

struct Bench {
    _tmp: tempfile::TempDir,
    daemon: Child,
    stdio: Child,
    stdio_in: ChildStdin,
    stdio_out: BufReader<ChildStdout>,
    socket: PathBuf,
    session: String,
    next_id: u64,
}

impl Drop for Bench {
    fn drop(&mut self) {
        for c in [&mut self.stdio, &mut self.daemon] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Bench {
    fn start() -> Bench {
        let tmp = tempfile::Builder::new().prefix("spaces-bench-mcp-").tempdir().unwrap();
        let state = tmp.path().join("state");
        let root = tmp.path().join("space");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("small.rs"), FILE).unwrap();
        let root = std::fs::canonicalize(root).unwrap();
        let (daemon, socket) = common::start_daemon(&spacesd_bin(), tmp.path(), &[], &root);

        let mut stdio = Command::new(spacesd_bin())
            .arg("--state-dir")
            .arg(&state)
            .arg("mcp")
            .env_remove("SPACES_LOG")
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdio_in = stdio.stdin.take().unwrap();
        let stdio_out = BufReader::new(stdio.stdout.take().unwrap());
        let mut b = Bench { _tmp: tmp, daemon, stdio, stdio_in, stdio_out, socket, session: String::new(), next_id: 1 };
        let init = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}});
        b.stdio_rpc("initialize", init.clone());
        writeln!(b.stdio_in, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();

        let (status, headers, _) =
            post_raw(&b.socket, "/mcp", &[], &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}));
        assert_eq!(status, 200);
        b.session = headers
            .lines()
            .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("mcp-session-id")).map(|(_, v)| v.trim().to_owned()))
            .expect("a session id");
        let session = b.session.clone();
        let hdrs = [("Mcp-Session-Id", session.as_str()), ("MCP-Protocol-Version", "2025-11-25")];
        let (status, _, _) = post_raw(&b.socket, "/mcp", &hdrs, &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert_eq!(status, 202);
        b
    }

    fn stdio_rpc(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        writeln!(self.stdio_in, "{}", json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).unwrap();
        self.stdio_in.flush().unwrap();
        let mut line = String::new();
        loop {
            line.clear();
            assert!(self.stdio_out.read_line(&mut line).unwrap() > 0, "spacesd mcp closed stdout");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v["result"].clone();
            }
        }
    }

    /// One round trip of variant `v`; checks the answer.
    fn one(&mut self, v: usize) -> Duration {
        let args = json!({"workspace_id": "bench", "path": "small.rs"});
        let t = Instant::now();
        let content = match VARIANTS[v] {
            "plain_http" => {
                let (status, body) = post(&self.socket, "/v1/tools/read", &[], &args);
                assert_eq!(status, 200, "{body}");
                serde_json::from_str::<Value>(&body).unwrap()["content"].clone()
            }
            "mcp_stdio" => {
                let r = self.stdio_rpc("tools/call", json!({"name": "read", "arguments": args}));
                r["structuredContent"]["content"].clone()
            }
            _ => {
                let id = self.next_id;
                self.next_id += 1;
                let hdrs = [("Mcp-Session-Id", self.session.as_str()), ("MCP-Protocol-Version", "2025-11-25")];
                let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "read", "arguments": args}});
                let (status, _, body) = post_raw(&self.socket, "/mcp", &hdrs, &msg);
                assert_eq!(status, 200);
                let answer = body
                    .split("\n\n")
                    .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
                    .filter_map(|d| serde_json::from_str::<Value>(d).ok())
                    .find(|m| m["id"] == id)
                    .expect("an answer");
                answer["result"]["structuredContent"]["content"].clone()
            }
        };
        let took = t.elapsed();
        assert_eq!(content, FILE, "{}", VARIANTS[v]);
        took
    }

    fn condition(&mut self, name: &str, rounds: usize, calls: usize) {
        let mut all: Vec<Vec<Duration>> = vec![Vec::new(); VARIANTS.len()];
        let mut round_ratios: Vec<Vec<(f64, f64)>> = vec![Vec::new(); VARIANTS.len()];
        for _ in 0..rounds {
            let mut this: Vec<Vec<Duration>> = vec![Vec::with_capacity(calls); VARIANTS.len()];
            for _ in 0..calls {
                for (v, samples) in this.iter_mut().enumerate() {
                    samples.push(self.one(v));
                }
            }
            let base = (pct(&this[0], 0.5), pct(&this[0], 0.99));
            for (v, samples) in this.iter().enumerate() {
                round_ratios[v].push((ratio(pct(samples, 0.5), base.0), ratio(pct(samples, 0.99), base.1)));
                all[v].extend_from_slice(samples);
            }
        }
        let base = (pct(&all[0], 0.5), pct(&all[0], 0.99));
        println!("mcp_roundtrip/{name}: load average {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
        for (v, samples) in all.iter().enumerate() {
            let (p50, p99) = (pct(samples, 0.5), pct(samples, 0.99));
            let spread = |f: fn(&(f64, f64)) -> f64| {
                let xs: Vec<f64> = round_ratios[v].iter().map(f).collect();
                let (lo, hi) = xs.iter().fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
                format!("{lo:.2}..{hi:.2}")
            };
            println!(
                "mcp_roundtrip/{name}/{}: p50 {:.3} ms ({:.2}x, rounds {}), p99 {:.3} ms ({:.2}x, rounds {}), n={}",
                VARIANTS[v],
                ms(p50),
                ratio(p50, base.0),
                spread(|r| r.0),
                ms(p99),
                ratio(p99, base.1),
                spread(|r| r.1),
                samples.len()
            );
        }
    }
}
