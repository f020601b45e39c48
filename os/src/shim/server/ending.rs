//! The end of a tree: reaping what exits (the program and, as a subreaper, its orphans),
//! following the drain after the program's exit, and ending what is left (process group,
//! cgroup, then a walk of `/proc` for what left both).

use super::*;

impl Shim {
    /// Reap every child that has exited (the agent, and orphans reparented to this subreaper).
    pub(super) fn reap(&mut self) {
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                // Bubblewrap reports a program killed by signal N as exit 128 + N.
                Ok(WaitStatus::Exited(pid, code)) if pid.as_raw() == self.pid => {
                    self.exit = match crate::sandbox::signal_of_exit(code).filter(|_| self.sandboxed) {
                        Some(sig) => Some((None, Some(sig))),
                        None => Some((Some(code), None)),
                    }
                }
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid.as_raw() == self.pid => self.exit = Some((None, Some(sig as i32))),
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(_) => {}
            }
        }
        // Raw mode: the exit is journaled the moment the process is reaped, even while a
        // descendant still holds the output open (as `exec_command` reports it).
        if let (true, false, Some((code, signal))) = (self.raw_mode, self.exit_written, self.exit) {
            self.record(&Record::Exit { code, signal });
            self.exit_written = true;
            let _ = self.journal.sync();
            self.exited_tx.send_replace(true);
        }
    }

    /// After the agent exited: its output drained (or the drain timed out), write the exit;
    /// then end what is left of the tree and write that everything is gone.
    pub(super) async fn progress(&mut self) {
        if self.raw_mode {
            // Exit and output are journaled; the tree is not ended but waited for.
            if self.exit_written && self.eofs >= 2 && !self.done && self.tree_gone() {
                self.record(&Record::Done { killed: Vec::new(), dropped_lines: 0 });
                let _ = self.journal.sync();
                self.done = true;
            }
            return;
        }
        let Some((code, signal)) = self.exit else { return };
        if self.exit_written {
            return;
        }
        if self.eofs < 2 {
            match self.drain_deadline {
                None => {
                    self.drain_deadline = Some(Instant::now() + Duration::from_millis(self.spec.drain_ms));
                    return;
                }
                Some(d) if Instant::now() < d => return,
                Some(_) => {}
            }
        }
        self.drain_deadline = None;
        // Lines already read belong before the exit.
        while let Ok(out) = self.output_rx.try_recv() {
            self.on_output(out);
        }
        self.record(&Record::Exit { code, signal });
        self.exit_written = true;
        let _ = self.journal.sync();
        let killed = self.end_tree(LEFTOVER_GRACE).await;
        self.record(&Record::Done { killed, dropped_lines: self.dropped_lines });
        let _ = self.journal.sync();
        self.done = true;
    }

    /// No process of the tree is left: the shim has no child (as a subreaper, every live
    /// descendant has a live ancestor among them; a zombie counts until [`Self::reap`]ed), and
    /// nothing is in its cgroup. No walk of `/proc`: its cost would be the host's, and a
    /// thousand shims stopping together each walked it every 20 ms (issue 30).
    pub(super) fn tree_gone(&self) -> bool {
        let no_child =
            matches!(waitid(Id::All, WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT), Err(nix::errno::Errno::ECHILD));
        no_child && self.cgroup.as_ref().is_none_or(|c| c.pids().is_empty())
    }

    /// SIGTERM to the agent's group and everything in the cgroup, then to every descendant
    /// found in one walk of `/proc` (what left the group, with no cgroup to hold it) once the
    /// group is gone and the tree is not, or the tree has not gone [`SCAN_AFTER`] later (at
    /// once when the agent exited: leftovers, listed). A tree that goes with its group costs no
    /// walk: a thousand stops at once each walked a `/proc` of thousands of processes (issue
    /// 30). Then `grace`, then SIGKILL until none is left (looking again each round: tools may
    /// fork meanwhile). Returns every pid signalled by name; reaps as it goes.
    pub(super) async fn end_tree(&mut self, grace: Duration) -> Vec<i32> {
        let me = std::process::id() as i32;
        self.reap();
        if self.tree_gone() {
            return Vec::new();
        }
        let _ = killpg(Pid::from_raw(self.pid), Signal::SIGTERM);
        let mut signalled = Vec::new();
        if let Some(cgroup) = &self.cgroup {
            signalled.extend(cgroup.signal(Signal::SIGTERM));
        }
        let start = Instant::now();
        let scan_at = if self.exit.is_some() { start } else { start + SCAN_AFTER };
        let (deadline, mut scanned) = (start + grace, false);
        loop {
            self.reap();
            if self.tree_gone() || Instant::now() >= deadline {
                break;
            }
            // Signal 0 to a group fails once no member is left (its zombies count until reaped).
            let group_gone = killpg(Pid::from_raw(self.pid), None).is_err();
            if !scanned && (group_gone || Instant::now() >= scan_at) {
                signalled.extend(tree::signal_all(me, Signal::SIGTERM));
                scanned = true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for _ in 0..50 {
            if self.tree_gone() {
                break;
            }
            let _ = killpg(Pid::from_raw(self.pid), Signal::SIGKILL);
            let mut killed = tree::signal_all(me, Signal::SIGKILL);
            if let Some(cgroup) = &self.cgroup {
                killed.extend(cgroup.kill());
            }
            for pid in killed {
                if !signalled.contains(&pid) {
                    signalled.push(pid);
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            self.reap();
        }
        self.reap();
        signalled.sort_unstable();
        signalled.dedup();
        signalled
    }

    /// A stop: end the whole tree now; the exit and `Done` follow through [`Self::progress`].
    pub(super) async fn stop(&mut self, grace: Duration) -> Vec<i32> {
        self.stdin = None;
        self.raw = None;
        self.end_tree(grace).await;
        if self.tree_gone() {
            return Vec::new();
        }
        let mut left = tree::descendants(std::process::id() as i32);
        left.extend(self.cgroup.as_ref().map(Cgroup::pids).unwrap_or_default());
        left.sort_unstable();
        left.dedup();
        left
    }
}
