//! Output collection throughput: a fast producer drained through `exec` + `read_process`,
//! beside a plain pipe read of the same producer (what `cat` would see).
//!
//! Workload: `head -c 50000000 /dev/zero` (50 MB of output, valid UTF-8) per iteration.
//! Variants:
//! - `exec_read_process`: `Processes::exec` in pipe mode, then `read` long-polls from the last
//!   cursor until `eof`, as a client of `read_process` would. The ring keeps 256 KiB, so a reader
//!   that falls behind loses bytes (the collector never waits for readers); the summary line
//!   reports the bytes delivered to the reader (the sum of the chunks it got), beside the
//!   producer's.
//! - `plain_pipe`: the same producer via `std::process::Command` with stdout piped, read to the
//!   end into a 64 KiB buffer (the floor: spawn + pipe, no ring, no UTF-8 conversion).
//!
//! Each variant prints one `summary:` line with the mean MB/s over every iteration criterion ran.
//! Run: `cargo bench -p spaces-codespace --bench read_process`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use spaces_codespace::exec::{ExecLimits, ExecSpec, Processes};

const BYTES: u64 = 50_000_000;

fn producer() -> Vec<String> {
    ["head", "-c", &BYTES.to_string(), "/dev/zero"].iter().map(|s| s.to_string()).collect()
}

/// Drain one producer through exec + read; returns (the producer's bytes, as the final cursor
/// counts them; the bytes delivered to the reader, the sum of the chunks it got).
async fn exec_and_drain(p: &Processes, dir: &std::path::Path) -> (u64, u64) {
    let spec = ExecSpec {
        argv: producer(),
        cwd: dir.to_path_buf(),
        env: BTreeMap::from([("PATH".to_owned(), "/usr/bin:/bin".to_owned())]),
        tty: false,
        tty_size: None,
        owner: format!("bench-{}", uuid::Uuid::new_v4()),
        workspace_id: "bench".to_owned(),
        timeout: None,
        tag: String::new(),
        sandbox: None,
    };
    let id = p.exec(spec).unwrap().process_id;
    let mut cursor = 0;
    let mut delivered = 0u64;
    loop {
        let r = p.read(&id, Some(cursor), Some(Duration::from_secs(5))).await.unwrap();
        delivered += r.chunk.len() as u64;
        black_box(&r.chunk);
        cursor = r.cursor;
        if r.eof {
            return (cursor, delivered);
        }
    }
}

fn plain_pipe() -> u64 {
    let argv = producer();
    let mut child = Command::new(&argv[0]).args(&argv[1..]).stdout(Stdio::piped()).spawn().unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = out.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        total += n as u64;
        black_box(&buf[..n]);
    }
    child.wait().unwrap();
    total
}

/// One `summary:` line: the producer's MB/s, and the MB/s of bytes the reader got (`runs`
/// holds each iteration's time, producer bytes and delivered bytes).
fn summary(name: &str, runs: &[(Duration, u64, u64)]) {
    let secs: f64 = runs.iter().map(|(d, _, _)| d.as_secs_f64()).sum();
    let bytes: u64 = runs.iter().map(|(_, b, _)| b).sum();
    let delivered: u64 = runs.iter().map(|(_, _, d)| d).sum();
    println!(
        "summary: {name}: {:.0} MB/s produced, {:.0} MB/s delivered to the reader ({:.1}% of the bytes) over {} iterations",
        bytes as f64 / secs / 1e6,
        delivered as f64 / secs / 1e6,
        delivered as f64 * 100.0 / bytes.max(1) as f64,
        runs.len(),
    );
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let dir = tempfile::TempDir::new().unwrap();
    let processes = Processes::new(ExecLimits::default());
    let mut group = c.benchmark_group("read_process");
    group.sample_size(10).throughput(Throughput::Bytes(BYTES));

    let mut runs = Vec::new();
    group.bench_function("exec_read_process", |b| {
        b.iter(|| {
            let start = Instant::now();
            let (produced, delivered) = rt.block_on(exec_and_drain(&processes, dir.path()));
            assert_eq!(produced, BYTES);
            runs.push((start.elapsed(), produced, delivered));
        })
    });
    summary("exec_read_process", &runs);

    let mut runs = Vec::new();
    group.bench_function("plain_pipe", |b| {
        b.iter(|| {
            let start = Instant::now();
            let seen = plain_pipe();
            assert_eq!(seen, BYTES);
            runs.push((start.elapsed(), seen, seen));
        })
    });
    summary("plain_pipe", &runs);
    group.finish();
}

criterion::criterion_group!(benches, bench);
criterion::criterion_main!(benches);
