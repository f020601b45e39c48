//! A full disk as a state of the run (docs/operations.md, "A full disk"): a write of the run
//! (its shim's journal, its `output.log`, the event store) found no room, and the turn ends with
//! a reason naming the disk instead of the run staying `running` with nothing recorded.

use spaces_harnesses::EventDraft;
use spaces_sdk::EventKind;

use super::{Actor, STOP_GRACE};

/// How a full disk is named in every reason it ends a turn with (as the OS says `ENOSPC`).
pub const NAMED: &str = "no space left on device";

impl Actor {
    /// A write of the run found the disk full (`why` names it). The state dir's reserve is given
    /// up ([`spaces_store::reserve`]), so the turn's end can be stored; the agent's output can no
    /// longer be recorded, so its process is ended by a rule of the daemon: the turn in flight
    /// ends `error` for `why` and the run waits (`failed`). A follow-up starts a new process
    /// that resumes the session once space is freed. With no process, or one already ending,
    /// only the reserve is given up.
    pub(super) async fn on_disk_full(&mut self, why: String) {
        // Every reason names the disk the same way, whichever write found it full.
        let why = if why.to_lowercase().contains(NAMED) { why } else { format!("{NAMED}: {why}") };
        self.inner.store.release_reserve();
        tracing::warn!("run {}: {why}", self.run.run_id);
        let ending = self.machine.live().is_none_or(|live| live.ended_by.is_some()) || self.machine.stop_requested();
        if ending {
            return;
        }
        self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice).summary(format!("{why}; ending the agent's process"))]);
        self.machine.end_by_rule(why.clone());
        self.launcher.note_in_stderr_tail(why);
        // Its exit reaches the journal in the room the journal keeps for its last records.
        let _ = self.end_processes(STOP_GRACE).await;
    }
}
