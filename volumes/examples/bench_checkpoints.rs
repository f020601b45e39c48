//! Benchmark (issue 34): a run's folder checkpoint beside git, interleaved over several rounds.
//! - an unchanged folder of N files (default 10,000): the checkpoint's time and the bytes it
//!   stored (goal: at most 20 ms, 0 bytes);
//! - 100 changed files: the checkpoint beside `git add -A && git commit -q` of the same change
//!   in a repository of the same folder (goal: at least 1.0x git's speed).
//!
//! Run through `scripts/bench checkpoints` (release build). Usage:
//! bench_checkpoints [--files N] [--changed C] [--rounds R] [--work DIR]

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use spaces_volumes::checkpoint::{Checkpoints, DEFAULT_EXCLUDE};

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned().unwrap_or_else(|| default.to_string())
}

/// `files` source-like files of about 2 KiB in 50 x 20 directories.
fn generate(dir: &Path, files: usize) {
    for i in 0..files {
        let sub = dir.join(format!("d{:02}/s{:02}", i % 50, (i / 50) % 20));
        std::fs::create_dir_all(&sub).unwrap();
        let body: String = (0..60).map(|l| format!("line {l} of file {i}: let x{l} = {};\n", l * i)).collect();
        std::fs::write(sub.join(format!("f{i}.rs")), body).unwrap();
    }
}

/// Change `n` files of the folder (round `round` makes each change new).
fn change(dir: &Path, files: usize, n: usize, round: usize) {
    for k in 0..n {
        let i = (k * (files / n.max(1)) + round) % files;
        let p = dir.join(format!("d{:02}/s{:02}/f{i}.rs", i % 50, (i / 50) % 20));
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str(&format!("// round {round} change {k}\n"));
        std::fs::write(&p, text).unwrap();
    }
}

fn git(dir: &Path, args: &[&str]) -> Duration {
    let t = Instant::now();
    let st = Command::new("git")
        .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(st.success(), "git {args:?}");
    t.elapsed()
}

fn stats(v: &mut [f64]) -> (f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[0], v[v.len() / 2])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let files: usize = arg(&args, "--files", "10000").parse().unwrap();
    let changed: usize = arg(&args, "--changed", "100").parse().unwrap();
    let rounds: usize = arg(&args, "--rounds", "5").parse().unwrap();
    let work = PathBuf::from(arg(&args, "--work", "/tmp/spaces-bench-checkpoints"));
    let _ = std::fs::remove_dir_all(&work);
    let (folder, state, repo) = (work.join("folder"), work.join("state"), work.join("repo"));
    generate(&folder, files);
    generate(&repo, files);
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    let exclude: Vec<String> = DEFAULT_EXCLUDE.iter().map(|s| (*s).to_owned()).collect();
    let mut cps = Checkpoints::open(&state, &exclude).unwrap();
    let mut turn = 0;
    cps.take(&folder, turn).unwrap();
    // Past the racy window, so unchanged files are trusted by their stat key.
    std::thread::sleep(Duration::from_millis(100));
    turn += 1;
    cps.take(&folder, turn).unwrap();

    let (mut unchanged_ms, mut unchanged_bytes, mut cp_ms, mut git_ms) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        // Unchanged: one walk, no byte stored.
        std::thread::sleep(Duration::from_millis(100));
        let before = cps.disk_bytes();
        turn += 1;
        let t = Instant::now();
        let r = cps.take(&folder, turn).unwrap();
        unchanged_ms.push(ms(t.elapsed()));
        assert!(r.changes.is_empty(), "{:?}", r.changes.first());
        unchanged_bytes.push((cps.disk_bytes() - before) as f64);

        // The same change in both, then each records it; who goes first alternates.
        change(&folder, files, changed, round);
        change(&repo, files, changed, round);
        std::thread::sleep(Duration::from_millis(100));
        turn += 1;
        let mut time_cp = || {
            let t = Instant::now();
            let r = cps.take(&folder, turn).unwrap();
            assert_eq!(r.changes.len(), changed);
            ms(t.elapsed())
        };
        let time_git = || ms(git(&repo, &["add", "-A"]) + git(&repo, &["commit", "-q", "-m", "turn"]));
        if round % 2 == 0 {
            cp_ms.push(time_cp());
            git_ms.push(time_git());
        } else {
            git_ms.push(time_git());
            cp_ms.push(time_cp());
        }
    }
    let (u_min, u_med) = stats(&mut unchanged_ms);
    let (b_min, b_med) = stats(&mut unchanged_bytes);
    let (c_min, c_med) = stats(&mut cp_ms);
    let (g_min, g_med) = stats(&mut git_ms);
    println!("== checkpoints: {files} files, {changed} changed per turn, {rounds} rounds (min / median)");
    println!("checkpoint.unchanged_ms: {u_min:.2} / {u_med:.2} (goal: at most 20)");
    println!("checkpoint.unchanged_bytes: {b_min} / {b_med} (goal: 0)");
    println!("checkpoint.changed_ms: {c_min:.2} / {c_med:.2}");
    println!("git.add_commit_ms: {g_min:.2} / {g_med:.2}");
    println!("checkpoint.speed_vs_git: {:.2}x / {:.2}x (git time / checkpoint time; goal: at least 1.0x)", g_min / c_min, g_med / c_med);
    let _ = std::fs::remove_dir_all(&work);
}
