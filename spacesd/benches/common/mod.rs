//! What the end-to-end benches share: HTTP over the daemon's Unix socket, percentiles, a CPU
//! spinner for the loaded condition. (A module, not a bench: `benches/*/mod.rs` is not built
//! on its own.)

#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// What a run of an end-to-end bench was asked: `None` when it is the spinner child
/// (`--busy`: it spun and is done); else `(rounds, calls)` from `SPACES_BENCH_ROUNDS` and
/// `SPACES_BENCH_CALLS`, defaulting to 5 rounds of `calls.0` calls under `--bench` and to one
/// round of `calls.1` (a smoke) without it.
pub fn counts(calls: (usize, usize)) -> Option<(usize, usize)> {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--busy") {
        busy(Duration::from_secs(600));
        return None;
    }
    let full = args.iter().any(|a| a == "--bench");
    let num = |key: &str, default: usize| std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    Some((num("SPACES_BENCH_ROUNDS", if full { 5 } else { 1 }), num("SPACES_BENCH_CALLS", if full { calls.0 } else { calls.1 })))
}

/// The `spacesd` to measure: `SPACESD_BIN`, else `fallback` (the bench's own build).
pub fn spacesd_bin(fallback: &str) -> PathBuf {
    std::env::var_os("SPACESD_BIN").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(fallback))
}

/// `spacesd` (`bin`) serving the state dir `<dir>/state` with `env` added, its log in
/// `<dir>/spacesd.log`, and a Space `bench` registered at `root`: the daemon and its socket.
pub fn start_daemon(bin: &Path, dir: &Path, env: &[(&str, &str)], root: &Path) -> (Child, PathBuf) {
    let state = dir.join("state");
    let log = std::fs::File::create(dir.join("spacesd.log")).unwrap();
    let mut cmd = Command::new(bin);
    cmd.arg("--state-dir").arg(&state).arg("serve").env_remove("SPACES_LOG").env_remove("RUST_LOG");
    cmd.envs(env.iter().copied());
    let daemon = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(log).spawn().unwrap();
    let socket = state.join("spacesd.sock");
    let deadline = Instant::now() + Duration::from_secs(20);
    while UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "spacesd did not come up within 20 s (see {}/spacesd.log)", dir.display());
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, body) = post(&socket, "/v1/spaces", &[], &json!({"name": "bench", "root": root.display().to_string()}));
    assert_eq!(status, 200, "{body}");
    (daemon, socket)
}

/// Spins one core until `limit` passes (or it is killed).
pub fn busy(limit: Duration) {
    let start = Instant::now();
    let mut x = 0u64;
    while start.elapsed() < limit {
        for i in 0..1_000_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
        std::hint::black_box(x);
    }
}

pub fn pct(samples: &[Duration], q: f64) -> Duration {
    let mut s = samples.to_vec();
    s.sort_unstable();
    s[((s.len() as f64 - 1.0) * q).round() as usize]
}

pub fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One POST over the Unix socket (a fresh connection, `Connection: close`): status and body.
pub fn post(socket: &Path, path: &str, headers: &[(&str, &str)], body: &Value) -> (u16, String) {
    let (status, _, body) = post_raw(socket, path, headers, body);
    (status, body)
}

/// One POST: status, raw header block, body (chunked transfer decoded).
pub fn post_raw(socket: &Path, path: &str, headers: &[(&str, &str)], body: &Value) -> (u16, String, String) {
    send(socket, "POST", path, headers, &body.to_string())
}

/// One GET over the Unix socket (a fresh connection): status and body.
pub fn get(socket: &Path, path: &str) -> (u16, String) {
    let (status, _, body) = send(socket, "GET", path, &[], "");
    (status, body)
}

/// One request: status, raw header block, body (chunked transfer decoded).
fn send(socket: &Path, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String, String) {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    let mut s = UnixStream::connect(socket).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let mut rest = &raw[split + 4..];
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        let mut out = Vec::new();
        while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
            let size = usize::from_str_radix(String::from_utf8_lossy(&rest[..eol]).trim(), 16).unwrap_or(0);
            if size == 0 {
                break;
            }
            out.extend_from_slice(&rest[eol + 2..eol + 2 + size]);
            rest = &rest[(eol + 4 + size).min(rest.len())..];
        }
        out
    } else {
        rest.to_vec()
    };
    (status, head, String::from_utf8_lossy(&body).into_owned())
}
