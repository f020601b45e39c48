//! The process trees this host holds, so that the daemon can tell a request from inside one of
//! them (an agent, its tools, a command) from its operator's.
//!
//! Each tree is registered by its root: a shim's pid (it is a child subreaper, so orphans and
//! processes that called `setsid` or dropped their environment stay under it) or, without shims,
//! a directly spawned command's pid; with the root's start time (`/proc/PID/stat` field 22), so
//! a pid reused after the root exited never counts, and the tag of what it holds
//! (`agent/<run>/turn-<n>`, `exec/<process_id>`). A process belongs to the tree of the nearest
//! registered root on its parent chain ([`holder_of`]).
//!
//! Roots are registered before the tree's program starts ([`crate::shim::ShimClient::launch`]
//! registers the shim before it hands over the spec), and again whenever a restarted daemon
//! reconnects to a shim ([`crate::shim::ShimClient::connect`]). Entries of roots that are gone
//! are dropped as new ones come.
//!
//! The registry is per OS process (a pid is a fact of the host, not of one daemon).

use std::collections::HashMap;
use std::sync::Mutex;

/// Root pid -> (its start time, the tag of what it holds).
static HELD: Mutex<Option<HashMap<i32, (u64, String)>>> = Mutex::new(None);

/// Longest parent chain followed (a loop guard; real chains are a few links).
const MAX_DEPTH: usize = 256;

/// `(ppid, start time)` of `pid`, from `/proc/PID/stat`; `None` when it is gone.
fn stat(pid: i32) -> Option<(i32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name (which may hold spaces and parentheses).
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): ppid is field 4, starttime field 22.
    let ppid = fields.get(1)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((ppid, start))
}

/// Register `pid` (alive now) as the root of a tree holding `tag`. A pid that is already gone
/// is not registered.
pub fn hold(pid: i32, tag: &str) {
    let Some((_, start)) = stat(pid) else { return };
    let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
    let map = held.get_or_insert_with(HashMap::new);
    map.retain(|p, (s, _)| stat(*p).is_some_and(|(_, now)| now == *s));
    map.insert(pid, (start, tag.to_owned()));
}

/// Who holds a process ([`holder_of`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// The tree with this tag.
    Tree(String),
    /// No tree of this host (e.g. the operator's shell).
    Nobody,
    /// The process is gone (or its parent chain could not be read): nothing can be said.
    Unknown,
}

/// Who holds `pid`: the tree of the nearest registered root on its parent chain (`pid` itself
/// included). A chain that breaks while it is read (an ancestor exited and the process was
/// reparented) is read again.
pub fn holder_of(pid: i32) -> Holder {
    let held = HELD.lock().unwrap_or_else(|p| p.into_inner());
    let empty = HashMap::new();
    let map = held.as_ref().unwrap_or(&empty);
    'walk: for _ in 0..3 {
        let mut at = pid;
        for _ in 0..MAX_DEPTH {
            if at <= 1 {
                return Holder::Nobody;
            }
            let Some((ppid, start)) = stat(at) else { continue 'walk };
            if let Some((s, tag)) = map.get(&at) {
                if *s == start {
                    return Holder::Tree(tag.clone());
                }
            }
            at = ppid;
        }
        return Holder::Nobody;
    }
    Holder::Unknown
}

/// The live roots registered as holding `tag` (a shim re-adopted by a restarted daemon is
/// registered by [`crate::shim::ShimClient::connect`], from its socket's peer).
pub fn roots_of(tag: &str) -> Vec<i32> {
    let held = HELD.lock().unwrap_or_else(|p| p.into_inner());
    let Some(map) = held.as_ref() else { return Vec::new() };
    map.iter()
        .filter(|(pid, (start, t))| t == tag && stat(**pid).is_some_and(|(_, now)| now == *start))
        .map(|(pid, _)| *pid)
        .collect()
}

/// Whether any tree is registered (if none, nobody is held: no need to look further).
pub fn any() -> bool {
    HELD.lock().unwrap_or_else(|p| p.into_inner()).as_ref().is_some_and(|m| !m.is_empty())
}

/// Who holds the process that has the socket `inode` open (`/proc/PID/fd/N` ->
/// `socket:[inode]`): only the processes of registered trees are looked at, so a socket held
/// by none of them is [`Holder::Nobody`]. For telling who is at the other end of a loopback TCP
/// connection (the kernel's `/proc/net/tcp` names the inode).
pub fn socket_holder(inode: u64) -> Holder {
    let roots: Vec<i32> = {
        let held = HELD.lock().unwrap_or_else(|p| p.into_inner());
        held.as_ref().map(|m| m.keys().copied().collect()).unwrap_or_default()
    };
    if roots.is_empty() {
        return Holder::Nobody;
    }
    let wanted = format!("socket:[{inode}]");
    let mut pids = roots.clone();
    for root in roots {
        pids.extend(crate::shim::tree::descendants(root));
    }
    for pid in pids {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { continue };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == wanted.as_str()) {
                return holder_of(pid);
            }
        }
    }
    Holder::Nobody
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_descendant_belongs_to_the_nearest_registered_root() {
        // sh (root) -> sh -> sleep: the grandchild is found through its parent chain.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sh -c 'sleep 30' & wait"])
            .spawn()
            .unwrap();
        let root = child.id() as i32;
        hold(root, "exec/test-root");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let grandchild = loop {
            let kids = crate::shim::tree::descendants(root);
            if kids.len() >= 2 {
                break *kids.iter().max().unwrap();
            }
            assert!(std::time::Instant::now() < deadline, "no grandchild");
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert_eq!(holder_of(grandchild), Holder::Tree("exec/test-root".into()));
        assert_eq!(holder_of(root), Holder::Tree("exec/test-root".into()));
        assert_eq!(holder_of(std::process::id() as i32), Holder::Nobody, "the test itself is held by nobody");
        for pid in crate::shim::tree::descendants(root) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(holder_of(root), Holder::Unknown, "a root that is gone holds nothing");
    }
}
