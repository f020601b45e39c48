//! Lowering a process tree once it proves CPU-hungry.
//!
//! A shim starts its agent (or command) at the daemon's priority and watches the tree below it:
//! every [`WINDOW`] it sums, over each process of the tree, the time the process ran or waited
//! to run (`/proc/<pid>/schedstat`: a process that always wants a CPU scores its whole window
//! however many others share the cores; one waiting on the network or for input scores almost
//! nothing). Once that sum reached [`HOT_SHARE`] of the window in [`HOT_WINDOWS`] windows in a
//! row, the tree is lowered to `nice` for good ([`super::priority::agent_nice`]): the root first
//! (the shim, whose work of journaling the tree's output grows with it), then every process
//! of the tree, every thread of each, and each one's session autogroup (`/proc/<pid>/autogroup`);
//! its later children inherit the value, and a process found above it in a later window is
//! lowered too.
//!
//! So an agent that mostly waits (for the model, for a follow-up) keeps the daemon's priority
//! and answers at once, while a busy agent, a noisy printer or a build is lowered within about a
//! second and leaves the cores to the daemon and to the quiet runs. A tree that barely ran for
//! [`QUIET_WINDOWS`] windows (an agent waiting for a follow-up) is not looked at again until
//! the shim [`wakes`](Demoter::wake) the demoter (its journal grew: output, a turn), so an idle
//! run's shim sleeps (issue 30). A tree that turns busy while printing nothing and being sent
//! nothing after such a pause is not seen until it prints. Its shim goes with it: a
//! shim leads a session of its own, so at the daemon's priority it weighs as much as the whole
//! daemon with the kernel's autogroup scheduling, and 20 noisy agents' shims outweighed the
//! daemon's every thread (docs/benchmarks.md). The tree is walked through
//! `/proc/<pid>/task/<tid>/children` from the shim (a subreaper: orphans come back to it), so
//! the cost follows the tree's size, never the host's. Raising a nice value needs no privilege;
//! failures leave a process as it was. Measured in docs/benchmarks.md ("The hot path under
//! load").

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How often the tree is looked at.
pub const WINDOW: Duration = Duration::from_millis(500);
/// Share of a window (ran + waited to run, summed over the tree) that counts as hungry.
pub const HOT_SHARE: f64 = 0.5;
/// Hungry windows in a row after which the tree is lowered.
pub const HOT_WINDOWS: u32 = 2;
/// Share of a window under which the tree counts as quiet (an agent waiting for input).
pub const QUIET_SHARE: f64 = 0.01;
/// Quiet windows in a row after which the tree is not looked at until [`Demoter::wake`].
pub const QUIET_WINDOWS: u32 = 2;

/// Watches the processes below one root (the shim) and lowers them once they are hungry.
pub struct Demoter {
    root: i32,
    nice: i32,
    /// Each process's ran + waited nanoseconds at the last look.
    last: HashMap<i32, u64>,
    at: Option<Instant>,
    hot_windows: u32,
    /// Windows in a row in which the tree barely ran ([`QUIET_SHARE`]).
    quiet_windows: u32,
    lowered: bool,
}

impl Demoter {
    /// Watch the descendants of `root` (their demand only, not `root`'s); lower `root` and
    /// them to `nice` (1..=19) once hungry. `nice` 0 never lowers anything.
    pub fn new(root: i32, nice: i32) -> Self {
        Self { root, nice: nice.clamp(0, 19), last: HashMap::new(), at: None, hot_windows: 0, quiet_windows: 0, lowered: false }
    }

    /// Something happened in the tree (output, input): look again, from a fresh window. False
    /// when this demoter never lowers anything (`nice` 0), so there is nothing to look at.
    pub fn wake(&mut self) -> bool {
        if self.nice == 0 {
            return false;
        }
        self.at = None;
        self.quiet_windows = 0;
        true
    }

    /// Whether the next look is worth a wake-up: false once the tree was quiet for
    /// [`QUIET_WINDOWS`] windows in a row (or `nice` is 0), until [`Self::wake`].
    pub fn watching(&self) -> bool {
        self.nice != 0 && self.quiet_windows < QUIET_WINDOWS
    }

    /// Whether the tree was lowered.
    pub fn lowered(&self) -> bool {
        self.lowered
    }

    /// Look at the tree once (call every [`WINDOW`]); [`Self::lowered`] tells the outcome.
    pub fn look(&mut self) {
        if self.nice == 0 {
            return;
        }
        let pids = super::children::below(self.root);
        if self.lowered {
            // Once lowered, for good: catch what escaped (a fork between two looks, a new session).
            for &pid in &pids {
                lower(pid, self.nice);
            }
        }
        let now = Instant::now();
        let mut busy_ns = 0u64;
        let mut seen = HashMap::with_capacity(pids.len());
        for &pid in &pids {
            let Some(ns) = demand_ns(pid) else { continue };
            if let Some(before) = self.last.get(&pid) {
                busy_ns += ns.saturating_sub(*before);
            }
            seen.insert(pid, ns);
        }
        self.last = seen;
        let Some(since) = self.at.replace(now) else { return };
        let window_ns = now.duration_since(since).as_nanos().max(1) as f64;
        if (busy_ns as f64) < QUIET_SHARE * window_ns {
            self.quiet_windows += 1;
        } else {
            self.quiet_windows = 0;
        }
        if self.lowered {
            return;
        }
        if busy_ns as f64 >= HOT_SHARE * window_ns {
            self.hot_windows += 1;
        } else {
            self.hot_windows = 0;
        }
        if self.hot_windows < HOT_WINDOWS {
            return;
        }
        // The root first: once a process of the tree sees itself lowered, its shim is too.
        lower(self.root, self.nice);
        for &pid in &pids {
            lower(pid, self.nice);
        }
        self.lowered = true;
    }
}

/// Time `pid`'s main thread ran plus waited to run, in ns (`/proc/<pid>/schedstat`).
fn demand_ns(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    let ran = fields.next()??;
    let waited = fields.next()??;
    Some(ran + waited)
}

/// Lower every thread of `pid` to `nice` (or keep one where it is, when lower) and its
/// session's autogroup. A thread's nice value is its own (`setpriority` on a thread id), so a
/// multi-threaded agent (Node, a build's workers) is lowered thread by thread
/// (`/proc/<pid>/task`); threads it starts later inherit the value of the thread starting them.
fn lower(pid: i32, nice: i32) {
    let tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_else(|_| vec![pid]);
    for tid in tids {
        super::priority::lower_thread(tid, nice);
    }
    // A process in the caller's own session shares the caller's autogroup: that one goes only
    // with the caller itself (the shim, the root). Without this, a tree that did not lead its
    // own session would lower whatever started the caller (a shell running the tests lowered
    // every later command of that shell, benches included).
    if pid != std::process::id() as i32 && nix::unistd::getsid(Some(nix::unistd::Pid::from_raw(pid))).ok() == nix::unistd::getsid(None).ok()
    {
        return;
    }
    let path = format!("/proc/{pid}/autogroup");
    let lower_group = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| t.rsplit_once("nice ").and_then(|(_, n)| n.trim().parse::<i32>().ok()))
        .is_some_and(|n| n < nice);
    if lower_group {
        let _ = std::fs::write(&path, nice.to_string());
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn nice_of(pid: i32) -> i32 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        stat.rsplit(')').next().unwrap().split_whitespace().nth(16).unwrap().parse().unwrap()
    }

    fn ours() -> i32 {
        nice_of(std::process::id() as i32)
    }

    /// A child of this test process in a tree of its own: `sh -c SCRIPT`, with the test as root.
    /// It leads a session of its own, as a shim does: lowering its autogroup must never lower
    /// the session (and so the shell) that runs the tests.
    fn child(script: &str) -> std::process::Child {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script).stdin(Stdio::null()).stdout(Stdio::null());
        // SAFETY: `setsid` is async-signal-safe and touches no memory.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || nix::unistd::setsid().map(|_| ()).map_err(std::io::Error::from));
        }
        cmd.spawn().unwrap()
    }

    fn kill_tree(root: &mut std::process::Child) {
        for pid in crate::process::children::below(root.id() as i32) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
        let _ = root.kill();
        let _ = root.wait();
    }

    /// A demoter of the tree below `root` (to nice 10), looking every window until it lowered
    /// the tree or 20 s passed.
    fn watched_until_lowered(root: i32) -> Demoter {
        let mut d = Demoter::new(root, 10);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !d.lowered() && Instant::now() < deadline {
            d.look();
            std::thread::sleep(WINDOW);
        }
        d
    }

    #[test]
    fn a_tree_that_keeps_a_cpu_busy_is_lowered_whole_with_its_root() {
        let target = ours().max(10);
        // The root stands for the shim: a busy loop and a sleeper below it.
        let mut root = child("sh -c 'while :; do :; done' & sleep 30 & wait");
        let d = watched_until_lowered(root.id() as i32);
        let pids = crate::process::children::below(root.id() as i32);
        let nices: Vec<i32> = pids.iter().map(|p| nice_of(*p)).collect();
        let root_nice = nice_of(root.id() as i32);
        kill_tree(&mut root);
        assert!(d.lowered(), "a busy loop keeps a CPU busy: the tree is lowered");
        assert_eq!(pids.len(), 2, "{pids:?}");
        assert!(nices.iter().all(|n| *n == target), "every process of the tree, the sleeper too: {nices:?}");
        assert_eq!(root_nice, target, "the root (the shim) goes with its tree");
    }

    /// This process's autogroup nice value.
    fn our_group() -> Option<i32> {
        let text = std::fs::read_to_string("/proc/self/autogroup").ok()?;
        text.rsplit_once("nice ")?.1.trim().parse().ok()
    }

    #[test]
    fn a_tree_in_the_callers_session_leaves_the_callers_autogroup_alone() {
        let before = our_group();
        // Not a session of its own: the tree shares this process's session and autogroup.
        let mut root = Command::new("sh").arg("-c").arg("sh -c 'while :; do :; done' & wait").stdin(Stdio::null()).spawn().unwrap();
        let d = watched_until_lowered(root.id() as i32);
        let pids = crate::process::children::below(root.id() as i32);
        let nices: Vec<i32> = pids.iter().map(|p| nice_of(*p)).collect();
        kill_tree(&mut root);
        assert!(d.lowered(), "a busy loop keeps a CPU busy: the tree is lowered");
        assert!(nices.iter().all(|n| *n >= 10), "the tree's processes are lowered: {nices:?}");
        assert_eq!(our_group(), before, "the caller's session autogroup is the caller's, not the tree's");
    }

    #[test]
    fn a_sleeping_tree_keeps_its_priority() {
        let mut root = child("sleep 30 & wait");
        let mut d = Demoter::new(root.id() as i32, 10);
        for _ in 0..(HOT_WINDOWS + 3) {
            d.look();
            std::thread::sleep(Duration::from_millis(100));
        }
        let pids = crate::process::children::below(root.id() as i32);
        let nices: Vec<i32> = pids.iter().map(|p| nice_of(*p)).collect();
        kill_tree(&mut root);
        assert!(!d.lowered());
        assert_eq!(pids.len(), 1, "{pids:?}");
        assert_eq!(nices, vec![ours()]);
    }
}
