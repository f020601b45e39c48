//! The processes a shim holds: every live descendant of the shim itself. The shim is a child
//! subreaper (`PR_SET_CHILD_SUBREAPER`), so a process that leaves the agent's session, drops
//! its environment markers or double-forks is reparented to the shim, never to PID 1: following
//! parent links from the shim finds all of them, whatever they did.

use std::collections::HashMap;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Live (non-zombie) descendants of `root`, by one pass over `/proc/*/stat`.
pub fn descendants(root: i32) -> Vec<i32> {
    descendants_of(&[root])
}

/// Live (non-zombie) descendants of any of `roots` (the roots themselves not included unless
/// one descends from another), sorted, by one pass over `/proc/*/stat` whatever their number.
pub fn descendants_of(roots: &[i32]) -> Vec<i32> {
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
    out.sort_unstable();
    out.dedup();
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
