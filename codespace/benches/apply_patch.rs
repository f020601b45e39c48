//! `apply_patch` throughput on a large file: the V4A engine beside `git apply` of the same change.
//!
//! Workload (generated, deterministic): one text file of [`LINES`] code-like lines (about 10 MB,
//! every line unique) and one change of [`HUNKS`] hunks spread evenly across it, each replacing
//! one line. The change is written twice:
//! - as a V4A patch: per hunk `@@`, 3 context lines, 1 `-` line, 1 `+` line;
//! - as a unified diff with 3 lines of context on both sides (what `git diff` writes).
//!
//! Variants (criterion group `apply_patch`; throughput in bytes of the V4A text for `parse`, of
//! the original file for the others):
//! - `parse`: `spaces_v4a::parse` of the V4A text alone;
//! - `plan`: `spaces_v4a::plan` against an in-memory source (parse, match every hunk, build the new
//!   content);
//! - `plan_write`: read the file from disk, `spaces_v4a::plan`, then write the result atomically
//!   (temp file in the same directory, `fsync`, rename over the file, `fsync` of the directory);
//! - `git_apply`: the baseline, `git apply` of the unified diff on a copy of the file in a temp
//!   dir (outside any repository; one process spawn per iteration).
//!
//! Before timing, `plan_write` and `git_apply` each run once on their own copy and the two
//! resulting files must be byte-identical (and equal to the expected content), else the bench
//! panics. For the on-disk variants the file is restored before each iteration, outside the
//! timed part.
//!
//! Run: `cargo bench -p spaces-codespace --bench apply_patch` (about 2 minutes on 2 cores).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, SamplingMode, Throughput};
use spaces_codespace::fs::{CommitStatus, Root};

/// Lines in the generated file (about 10 MB at ~52 bytes a line).
const LINES: usize = 200_000;
/// Hunks in the change, one every `LINES / HUNKS` lines.
const HUNKS: usize = 1_000;
/// Context lines in each hunk (before the changed line in V4A; on both sides in the diff).
const CONTEXT: usize = 3;
const FILE_NAME: &str = "big.rs";

/// The generated workload.
struct Workload {
    original: Vec<u8>,
    expected: Vec<u8>,
    v4a: String,
    unified: String,
}

/// Small deterministic generator (xorshift64*), so every run benches the same bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

const WORDS: &[&str] = &["alpha", "beta", "gamma", "delta", "offset", "buffer", "index", "count", "state", "value"];

fn line(i: usize, rng: &mut Rng) -> String {
    let a = WORDS[(rng.next() % WORDS.len() as u64) as usize];
    let b = WORDS[(rng.next() % WORDS.len() as u64) as usize];
    format!("    let {a}_{i} = {b}.compute({}, {}); // step\n", rng.next() % 10_000, rng.next() % 1_000)
}

fn workload() -> Workload {
    let mut rng = Rng(0x5eed_cafe_f00d_beef);
    let lines: Vec<String> = (0..LINES).map(|i| line(i, &mut rng)).collect();
    let spacing = LINES / HUNKS;
    // 0-based index of the line each hunk replaces: mid-block, so contexts never overlap.
    let changed: Vec<usize> = (0..HUNKS).map(|h| h * spacing + spacing / 2).collect();

    let mut new_lines = lines.clone();
    for (h, &at) in changed.iter().enumerate() {
        new_lines[at] = format!("    changed_line_{h}(); // replaced by the benchmark\n");
    }

    let body = |l: &str| l.trim_end_matches('\n').to_owned();
    let mut v4a = format!("*** Begin Patch\n*** Update File: {FILE_NAME}\n");
    let mut unified = format!("--- a/{FILE_NAME}\n+++ b/{FILE_NAME}\n");
    for &at in &changed {
        v4a.push_str("@@\n");
        for l in &lines[at - CONTEXT..at] {
            let _ = writeln!(v4a, " {}", body(l));
        }
        let _ = writeln!(v4a, "-{}", body(&lines[at]));
        let _ = writeln!(v4a, "+{}", body(&new_lines[at]));

        let start = at - CONTEXT + 1; // 1-based
        let len = 2 * CONTEXT + 1;
        let _ = writeln!(unified, "@@ -{start},{len} +{start},{len} @@");
        for l in &lines[at - CONTEXT..at] {
            let _ = write!(unified, " {l}");
        }
        let _ = write!(unified, "-{}", lines[at]);
        let _ = write!(unified, "+{}", new_lines[at]);
        for l in &lines[at + 1..=at + CONTEXT] {
            let _ = write!(unified, " {l}");
        }
    }
    v4a.push_str("*** End Patch\n");

    Workload { original: lines.concat().into_bytes(), expected: new_lines.concat().into_bytes(), v4a, unified }
}

/// The workspace path of `apply_patch`: opens `dir` as a confined [`Root`], plans the V4A patch
/// against the file on disk (confined open, read, match every hunk), then commits it (temp file
/// beside it, fsync, rename, fsync of the directory, after-version verified on disk).
fn plan_and_write(dir: &Path, v4a: &str) {
    let root = Root::open(dir).unwrap();
    let plan = root.plan_patch(v4a, &BTreeMap::new()).unwrap();
    let report = root.commit(&plan);
    assert_eq!(report.status, CommitStatus::Applied, "{:?}", report.error);
}

/// `git apply` of the unified diff in `dir` (outside any repository).
fn git_apply(dir: &Path, diff: &Path) {
    let out = Command::new("git")
        .arg("apply")
        .arg(diff)
        .current_dir(dir)
        .env("GIT_CEILING_DIRECTORIES", dir.parent().unwrap_or(dir))
        .output()
        .expect("git must be installed for the baseline");
    assert!(out.status.success(), "git apply failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// Runs both on-disk variants once and checks they write the same bytes.
fn verify(w: &Workload, diff: &Path) {
    let ours = tempfile::tempdir().unwrap();
    fs::write(ours.path().join(FILE_NAME), &w.original).unwrap();
    plan_and_write(ours.path(), &w.v4a);
    let ours = fs::read(ours.path().join(FILE_NAME)).unwrap();

    let git = tempfile::tempdir().unwrap();
    fs::write(git.path().join(FILE_NAME), &w.original).unwrap();
    git_apply(git.path(), diff);
    let git = fs::read(git.path().join(FILE_NAME)).unwrap();

    assert!(ours == git, "plan_write and git apply disagree");
    assert!(ours == w.expected, "the result is not the expected content");
    assert!(ours != w.original, "the patch changed nothing");
}

fn bench(c: &mut Criterion) {
    let w = workload();
    let diff_dir = tempfile::tempdir().unwrap();
    let diff = diff_dir.path().join("change.diff");
    fs::write(&diff, &w.unified).unwrap();
    verify(&w, &diff);
    println!(
        "workload: {} lines, {} bytes; {} hunks; V4A patch {} bytes, unified diff {} bytes",
        LINES,
        w.original.len(),
        HUNKS,
        w.v4a.len(),
        w.unified.len()
    );

    let mut group = c.benchmark_group("apply_patch");
    group.sample_size(10).sampling_mode(SamplingMode::Flat).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));

    group.throughput(Throughput::Bytes(w.v4a.len() as u64));
    group.bench_function("parse", |b| b.iter(|| spaces_v4a::parse(black_box(&w.v4a)).unwrap()));

    group.throughput(Throughput::Bytes(w.original.len() as u64));

    let source = BTreeMap::from([(FILE_NAME.to_owned(), w.original.clone())]);
    let none = BTreeMap::new();
    group.bench_function("plan", |b| b.iter(|| spaces_v4a::plan(black_box(&w.v4a), &none, &source).unwrap()));

    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join(FILE_NAME);
    let restore = || fs::write(&target, &w.original).unwrap();
    group.bench_function("plan_write", |b| b.iter_batched(restore, |()| plan_and_write(dir.path(), &w.v4a), BatchSize::PerIteration));
    group.bench_function("git_apply", |b| b.iter_batched(restore, |()| git_apply(dir.path(), &diff), BatchSize::PerIteration));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
