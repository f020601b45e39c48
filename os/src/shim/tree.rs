//! The processes a shim holds: every live descendant of the shim itself. The shim is a child
//! subreaper (`PR_SET_CHILD_SUBREAPER`), so a process that leaves the agent's session, drops
//! its environment markers or double-forks is reparented to the shim, never to PID 1: following
//! parent links from the shim finds all of them, whatever they did.

use std::collections::HashMap;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Live (non-zombie) descendants of `root` ([`descendants_of`]).
pub fn descendants(root: i32) -> Vec<i32> {
    descendants_of(&[root])
}

/// Live (non-zombie) descendants of any of `roots` (the roots themselves not included unless
/// one descends from another), sorted. Read down from the roots through each task's
/// `/proc/<pid>/task/<tid>/children` (proc(5)), so the cost is the trees' size, not the
/// host's: a thousand shims stopping at once each walked every process of the host (issue
/// 30). On a kernel without those files, one pass over `/proc/*/stat`.
pub fn descendants_of(roots: &[i32]) -> Vec<i32> {
    let mut out = if children_files() { walk_down(roots) } else { scan_all(roots) };
    out.sort_unstable();
    out.dedup();
    out
}

/// Whether this kernel has `/proc/<pid>/task/<tid>/children` (`CONFIG_PROC_CHILDREN`).
fn children_files() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        let me = std::process::id();
        std::path::Path::new(&format!("/proc/{me}/task/{me}/children")).exists()
    })
}

/// The descendants of `roots` by their tasks' `children` files, zombies left out.
fn walk_down(roots: &[i32]) -> Vec<i32> {
    let mut out = Vec::new();
    let mut todo = roots.to_vec();
    while let Some(pid) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        for task in tasks.flatten() {
            let Ok(list) = std::fs::read_to_string(task.path().join("children")) else { continue };
            for child in list.split_whitespace().filter_map(|c| c.parse::<i32>().ok()) {
                if !crate::process::is_zombie_or_gone(child) {
                    out.push(child);
                }
                todo.push(child);
            }
        }
    }
    out
}

/// The descendants of `roots` by one pass over every process's `/proc/<pid>/stat`.
fn scan_all(roots: &[i32]) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // Fields after the parenthesised command name (which may hold spaces): state, ppid, ...
        let Some((_, rest)) = stat.rsplit_once(')') else { continue };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("X");
        let Some(ppid) = fields.next().and_then(|p| p.parse::<i32>().ok()) else { continue };
        if state != "Z" && state != "X" {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut todo = roots.to_vec();
    while let Some(p) = todo.pop() {
        if let Some(kids) = children.get(&p) {
            out.extend(kids);
            todo.extend(kids);
        }
    }
    out
}

/// Send `signal` to every live descendant of `root`; returns the pids signalled.
pub fn signal_all(root: i32, signal: Signal) -> Vec<i32> {
    let pids = descendants(root);
    for pid in &pids {
        let _ = kill(Pid::from_raw(*pid), signal);
    }
    pids
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The walk down the `children` files finds what the pass over all of `/proc` finds: a
    /// shell's two background children and their own children, and nothing else of the host.
    #[test]
    fn the_walk_down_finds_the_same_tree_as_the_pass_over_all_processes() {
        assert!(children_files(), "this kernel has /proc/<pid>/task/<tid>/children");
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "sh -c 'sleep 30' & sh -c 'sleep 30' & echo ready; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(sh.stdout.take().unwrap()), &mut ready).unwrap();
        let root = sh.id() as i32;
        // The inner shells may still be exec'ing their `sleep`: the same tree both ways once settled.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let (mut walked, mut scanned);
        loop {
            walked = walk_down(&[root]);
            scanned = scan_all(&[root]);
            walked.sort_unstable();
            scanned.sort_unstable();
            if (walked == scanned && walked.len() >= 2) || std::time::Instant::now() > deadline {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = signal_all(root, Signal::SIGKILL);
        let _ = sh.kill();
        let _ = sh.wait();
        assert_eq!(walked, scanned);
        assert!((2..=4).contains(&walked.len()), "two shells and at most their two sleeps: {walked:?}");
    }
}
