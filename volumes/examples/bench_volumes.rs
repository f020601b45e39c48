//! Benchmark: save and restore of a generated home beside `tar -I zstd -cf` / `-xf` of the
//! same tree, and an unchanged re-save (time and bytes sent), interleaved over several rounds.
//! Run through `scripts/bench-volumes` (release build).
//!
//! Usage: bench_volumes [--files N] [--mb MB] [--rounds R] [--work DIR]

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use spaces_volumes::{NoProgress, SaveOptions, Volume};

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned().unwrap_or_else(|| default.to_string())
}

/// Deterministic, moderately compressible contents (words from a small vocabulary plus noise),
/// like source files, transcripts and caches in an agent home.
fn generate(home: &Path, files: usize, total: u64) {
    let words: Vec<String> = (0..512).map(|i| format!("w{}{}", i * 7919 % 1000, ["fn", "let", "the", "json", "turn"][i % 5])).collect();
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let avg = total / files as u64;
    for i in 0..files {
        let dir = home.join(format!("d{:02}/s{:02}", i % 50, (i / 50) % 20));
        std::fs::create_dir_all(&dir).unwrap();
        // Sizes spread evenly between avg/8 and 15/8 avg (mean avg).
        let size = (avg / 8 + next() % (avg * 7 / 4)) as usize;
        let mut buf = Vec::with_capacity(size + 16);
        while buf.len() < size {
            let r = next();
            if r % 11 == 0 {
                buf.extend_from_slice(&r.to_le_bytes());
            } else {
                buf.extend_from_slice(words[(r % 512) as usize].as_bytes());
                buf.push(if r % 13 == 0 { b'\n' } else { b' ' });
            }
        }
        buf.truncate(size);
        std::fs::write(dir.join(format!("f{i}.txt")), &buf).unwrap();
    }
}

fn du(p: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        let md = e.metadata().unwrap();
        n += if md.is_dir() { du(&e.path()) } else { md.len() };
    }
    n
}

fn run(cmd: &mut Command) -> Duration {
    let t = Instant::now();
    let st = cmd.status().unwrap();
    assert!(st.success(), "{cmd:?}");
    t.elapsed()
}

fn stats(v: &mut [f64]) -> (f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[0], v[v.len() / 2])
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let files: usize = arg(&args, "--files", "10000").parse().unwrap();
    let mb: u64 = arg(&args, "--mb", "200").parse().unwrap();
    let rounds: usize = arg(&args, "--rounds", "3").parse().unwrap();
    let work = PathBuf::from(arg(&args, "--work", "/tmp/spaces-bench-volumes"));
    let _ = spaces_volumes::remove_tree(&work);
    std::fs::create_dir_all(&work).unwrap();
    let home = work.join("home");
    let t = Instant::now();
    generate(&home, files, mb * 1_000_000);
    println!("generated {files} files, {} bytes in {:.1} s", du(&home), t.elapsed().as_secs_f64());
    // Let the generated files age past the stat-cache's racy window, as a home does between turns.
    std::thread::sleep(Duration::from_millis(200));

    let env = HashMap::new();
    let mut m: HashMap<&str, Vec<f64>> = HashMap::new();
    let mut sizes = (0u64, 0u64, 0u64);
    for round in 0..rounds {
        let r = work.join(format!("round{round}"));
        std::fs::create_dir_all(&r).unwrap();
        // tar -I zstd -cf
        let archive = r.join("home.tar.zst");
        let d = run(Command::new("tar").arg("-I").arg("zstd").arg("-cf").arg(&archive).arg("-C").arg(&home).arg("."));
        m.entry("tar_cf").or_default().push(d.as_secs_f64());
        sizes.0 = std::fs::metadata(&archive).unwrap().len();
        // our save (a first, full save into an empty volume)
        let vol = Volume::open(r.join("volume").to_str().unwrap(), &env, &r.join("cache"), "bench").unwrap();
        let lease = vol.acquire("bench", "bench/1", Duration::from_secs(600)).await.unwrap();
        let t = Instant::now();
        let rep = vol.save(&lease, &home, &SaveOptions::default(), &NoProgress).await.unwrap();
        m.entry("save").or_default().push(t.elapsed().as_secs_f64());
        sizes.1 = rep.uploaded_bytes;
        // unchanged re-saves (time and bytes sent)
        let resaves: usize = std::env::var("BENCH_RESAVES").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
        for _ in 0..resaves {
            let t = Instant::now();
            let again = vol.save(&lease, &home, &SaveOptions::default(), &NoProgress).await.unwrap();
            m.entry("resave").or_default().push(t.elapsed().as_secs_f64());
            assert!(again.unchanged);
            sizes.2 = sizes.2.max(again.uploaded_bytes);
        }
        if std::env::var_os("BENCH_ONLY_SAVE").is_some() {
            continue;
        }
        // tar -I zstd -xf
        let x = r.join("tar-x");
        std::fs::create_dir_all(&x).unwrap();
        let d = run(Command::new("tar").arg("-I").arg("zstd").arg("-xf").arg(&archive).arg("-C").arg(&x));
        m.entry("tar_xf").or_default().push(d.as_secs_f64());
        // our restore
        let t = Instant::now();
        vol.restore("bench", None, &r.join("restored"), &NoProgress).await.unwrap();
        m.entry("restore").or_default().push(t.elapsed().as_secs_f64());
        spaces_volumes::remove_tree(&r).unwrap();
    }
    println!("rounds: {rounds}; tar.zst {} bytes; our layer+manifest {} bytes", sizes.0, sizes.1);
    println!("{:<28} {:>10} {:>10} {:>14}", "step", "min s", "median s", "median/tar");
    let (_, tar_c) = stats(m.get_mut("tar_cf").unwrap());
    let tar_x = m.get_mut("tar_xf").map_or(f64::NAN, |v| stats(v).1);
    for (key, label, base) in [
        ("tar_cf", "tar -I zstd -cf", tar_c),
        ("save", "save (full, first)", tar_c),
        ("tar_xf", "tar -I zstd -xf", tar_x),
        ("restore", "restore", tar_x),
        ("resave", "unchanged re-save", tar_c),
    ] {
        let Some(v) = m.get_mut(key) else { continue };
        let (min, med) = stats(v);
        println!("{label:<28} {min:>10.3} {med:>10.3} {:>14.2}", med / base);
    }
    println!("unchanged re-save sent {} bytes (max over all re-saves)", sizes.2);
    let _ = spaces_volumes::remove_tree(&work);
}
