//! What the end-to-end benches share: HTTP over the daemon's Unix socket, percentiles, a CPU
//! spinner for the loaded condition. (A module, not a bench: `benches/*/mod.rs` is not built
//! on its own.)

#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

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
    let body = body.to_string();
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(&body);
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
