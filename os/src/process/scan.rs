//! Finding and ending every process of a tree: by process group and by environment marker.

use std::time::Duration;

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

/// What [`kill_tree`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KillReport {
    /// Pids that were signalled.
    pub signalled: Vec<i32>,
    /// Pids still alive after SIGKILL (should be empty; a non-empty list is reported to callers
    /// as a failed stop, never as success).
    pub survivors: Vec<i32>,
}

/// Every live (non-zombie) process other than this one that has the variable `name` in its
/// environment, as `(pid, value)`, sorted by pid. One pass over `/proc`; processes whose
/// environment cannot be read are skipped.
pub fn alive_with_env(name: &str) -> Vec<(i32, String)> {
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    let prefix = format!("{name}=");
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me || is_zombie_or_gone(pid) {
            continue;
        }
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else { continue };
        if let Some(value) = env.split(|b| *b == 0).find_map(|kv| kv.strip_prefix(prefix.as_bytes())) {
            out.push((pid, String::from_utf8_lossy(value).into_owned()));
        }
    }
    out.sort_unstable();
    out
}

/// Pids of live (non-zombie) processes whose environment contains `marker` (`NAME=value`)
/// exactly as one entry.
pub fn alive_with_marker(marker: &str) -> Vec<i32> {
    let Some((name, value)) = marker.split_once('=') else { return Vec::new() };
    alive_with_env(name).into_iter().filter(|(_, v)| v == value).map(|(pid, _)| pid).collect()
}

/// True when `pid` no longer exists or is a zombie (exited, not yet reaped).
pub fn is_zombie_or_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // Field 3 (state) follows the parenthesised command name, which may contain spaces.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .map(|state| state == "Z" || state == "X")
            .unwrap_or(true),
        Err(_) => true,
    }
}

/// End a process tree: SIGTERM to process group `pgid` (if any) and to every process carrying
/// `marker` in its environment, wait up to `grace` for them to go, then SIGKILL whatever is left
/// (looking again, since tools may have forked meanwhile), and report survivors.
pub async fn kill_tree(pgid: Option<i32>, marker: &str, grace: Duration) -> KillReport {
    let mut report = KillReport::default();
    let signal_all = |sig: Signal, marked: Vec<i32>, report: &mut KillReport| {
        if let Some(g) = pgid.filter(|g| *g > 1) {
            let _ = killpg(Pid::from_raw(g), sig);
        }
        for pid in marked {
            let _ = kill(Pid::from_raw(pid), sig);
            if !report.signalled.contains(&pid) {
                report.signalled.push(pid);
            }
        }
    };
    signal_all(Signal::SIGTERM, marked(marker).await, &mut report);
    let deadline = tokio::time::Instant::now() + grace;
    while tokio::time::Instant::now() < deadline {
        if group_gone(pgid) && marked(marker).await.is_empty() {
            return report;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    for _ in 0..20 {
        signal_all(Signal::SIGKILL, marked(marker).await, &mut report);
        tokio::time::sleep(Duration::from_millis(25)).await;
        if group_gone(pgid) && marked(marker).await.is_empty() {
            return report;
        }
    }
    report.survivors = marked(marker).await;
    report
}

/// [`alive_with_marker`] on a blocking thread: the scan reads every process's environment,
/// which on a busy host takes long enough to stall an async worker.
async fn marked(marker: &str) -> Vec<i32> {
    let m = marker.to_owned();
    match tokio::task::spawn_blocking(move || alive_with_marker(&m)).await {
        Ok(pids) => pids,
        Err(_) => alive_with_marker(marker),
    }
}

fn group_gone(pgid: Option<i32>) -> bool {
    match pgid.filter(|g| *g > 1) {
        // Signal 0 to a group fails with ESRCH once no member is left (zombies still count as
        // members until reaped, which the owner of the child does).
        Some(g) => killpg(Pid::from_raw(g), None).is_err() || is_zombie_or_gone(g),
        None => true,
    }
}
