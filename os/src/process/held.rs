//! The process trees this host holds: each shim (or directly spawned command) registered as the
//! root of a tree with its tag, so the daemon can find the shims of a run or command when it
//! ends leftovers ([`roots_of`]).
//!
//! Each tree is registered by its root: a shim's pid (it is a child subreaper, so orphans and
//! processes that called `setsid` or dropped their environment stay under it) or, without shims,
//! a directly spawned command's pid; with the root's start time (`/proc/PID/stat` field 22), so
//! a pid reused after the root exited never counts, and the tag of what it holds
//! (`agent/<run>/turn-<n>`, `exec/<process_id>`).
//!
//! This is never used to decide who a caller of the daemon is (issue 28): a run's processes are
//! in a sandbox and reach the daemon only through their run's own socket.
//!
//! Roots are registered before the tree's program starts ([`crate::shim::ShimClient::launch`]
//! registers the shim before it hands over the spec), and again whenever a restarted daemon
//! reconnects to a shim ([`crate::shim::ShimClient::connect`]). Entries of roots that are gone
//! are dropped as new ones come (now and then: when the registry has doubled since).
//!
//! The registry is per OS process (a pid is a fact of the host, not of one daemon).

use std::collections::HashMap;
use std::sync::Mutex;

/// Root pid -> (its start time, the tag of what it holds).
type Roots = HashMap<i32, (u64, String)>;

/// The held roots, and how many were left at the last pruning.
static HELD: Mutex<Option<(Roots, usize)>> = Mutex::new(None);

/// Entries are pruned (those of roots that are gone) once the map holds at least this many
/// and twice as many as after the last pruning: each registration costs O(1) reads of `/proc`
/// on average. Pruning at every registration read the `stat` of every held root each time, so
/// a thousand runs starting or stopping cost a million reads (issue 30: the top of the daemon's
/// profile of a stop-all).
const PRUNE_FROM: usize = 64;

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
    let (map, after_pruning) = held.get_or_insert_with(|| (HashMap::new(), 0));
    if map.len() >= PRUNE_FROM.max(2 * *after_pruning) {
        map.retain(|p, (s, _)| stat(*p).is_some_and(|(_, now)| now == *s));
        *after_pruning = map.len();
    }
    map.insert(pid, (start, tag.to_owned()));
}

/// The live roots registered as holding `tag` (a shim re-adopted by a restarted daemon is
/// registered by [`crate::shim::ShimClient::connect`], from its socket's peer).
pub fn roots_of(tag: &str) -> Vec<i32> {
    let held = HELD.lock().unwrap_or_else(|p| p.into_inner());
    let Some((map, _)) = held.as_ref() else { return Vec::new() };
    map.iter().filter(|(pid, (start, t))| t == tag && stat(**pid).is_some_and(|(_, now)| now == *start)).map(|(pid, _)| *pid).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_is_found_by_its_tag_while_its_root_lives() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let root = child.id() as i32;
        hold(root, "exec/test-root");
        assert_eq!(roots_of("exec/test-root"), vec![root]);
        assert_eq!(roots_of("exec/other"), Vec::<i32>::new());
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(roots_of("exec/test-root"), Vec::<i32>::new(), "a root that is gone holds nothing");
    }
}
