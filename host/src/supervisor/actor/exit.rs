//! The actor's side of its process: batches of output, a closed stdout, the deadlines of the
//! stall rule, a closed output and a stop, and the end of the process (what it means is the
//! machine's exit plan).

use std::time::Duration;

use spaces_harnesses::{EventDraft, ExitInfo};
use spaces_os::process::kill_tree;
use spaces_sdk::{EventKind, Phase, Status, StopReason};
use spaces_store::JournalPos;
use tokio::time::Instant;

use super::super::launcher::ProcEnd;
use super::super::marker::run_marker;
use super::super::persist;
use super::super::proc::{self, ProcEvent};
use super::state::{exit_reason, AfterExit, Fired, Timer, OUTPUT_CLOSED, OUTPUT_CLOSED_GRACE, STDIN_CLOSED_GRACE};
use super::{Actor, STOP_GRACE};

impl Actor {
    /// Handle `first` and every journal record already waiting behind it (one batch from the
    /// launcher): their events are stored in one transaction with the journal position they
    /// reach, then an exit that followed them is handled.
    pub(super) async fn on_proc_events(&mut self, first: ProcEvent) {
        let batch = self.launcher.batch(first, self.run.turns, &self.redactor, &mut self.norm).await;
        let session = batch.drafts.iter().any(|d| d.kind == EventKind::Session);
        self.machine.output(batch.saw_output, session, Instant::now());
        self.append_batch(batch.drafts, batch.pos).await;
        self.requeue_refused_steers();
        if batch.end.is_none() {
            // What a conversation normalizer answers to these lines (its process still runs).
            self.send_outgoing().await;
        }
        if let Some(why) = batch.fault {
            self.disk_full.get_or_insert(why);
        }
        if self.machine.process().is_none() {
            return;
        }
        if batch.stdout_closed && batch.end.is_none() {
            // Its exit usually follows at once; if it does not, the agent is ended (R42).
            if let Some(p) = self.machine.process_mut() {
                p.out_closed = true;
            }
            self.machine.stdout_closed(Instant::now());
        }
        match batch.end {
            Some(ProcEnd::Exited { code, signal, pos }) => self.finish_process((code, signal), Some(pos)).await,
            Some(ProcEnd::Gone) => {
                self.launcher.note_in_stderr_tail(
                    "the shim holding the agent process is gone (killed, or the host restarted); its output ends here".to_owned(),
                );
                self.finish_process((None, None), None).await;
            }
            None => {}
        }
    }

    /// A deadline of the machine passed.
    pub(super) async fn on_deadline(&mut self, timer: Timer) {
        match self.machine.fire(timer, Instant::now(), self.norm.tool_running()) {
            Fired::Nothing => {}
            Fired::StallNotice { silent, tool } => {
                let why = if tool { "; a tool call is running, so the turn goes on" } else { "" };
                self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice)
                    .summary(format!("the agent has been silent for {} s{why}", silent.as_secs()))]);
            }
            Fired::EndStalled { silent, why } => {
                self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice)
                    .summary(format!("the agent has been silent for {} s; ending the turn", silent.as_secs()))]);
                let _ = self.end_processes(STOP_GRACE).await;
                self.launcher.note_in_stderr_tail(why);
                self.machine.stall.last_output = Instant::now();
            }
            Fired::EndOutputClosed => {
                // R42: it can never report anything again (its answer, its tool calls, the end of
                // its turn): the turn in flight ends `error` naming the closed output, and a
                // follow-up starts a new process that resumes the session.
                self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice)
                    .summary(format!("{OUTPUT_CLOSED} ({} s after closing it); ending its process", OUTPUT_CLOSED_GRACE.as_secs()))]);
                self.launcher.note_in_stderr_tail(OUTPUT_CLOSED.to_owned());
                let _ = self.end_processes(STOP_GRACE).await;
            }
            Fired::EndStdinClosed => {
                self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice).summary(format!(
                    "the agent did not exit within {} s of its input closing (exit_when_idle); ending its process",
                    STDIN_CLOSED_GRACE.as_secs()
                ))]);
                let _ = self.end_processes(STOP_GRACE).await;
            }
            // A stopped process whose exit never reached the journal: it is gone all the same
            // (the stop verified that), how it ended is not known.
            Fired::DrainExpired => self.finish_process((None, None), None).await,
        }
    }

    /// The process exited (its output drained by the shim, what it left behind ended), or its
    /// shim is gone (`pos` is `None`). The events of the exit are stored with the exit record's
    /// journal position `pos`, in one transaction.
    async fn finish_process(&mut self, (code, signal): (Option<i32>, Option<i32>), pos: Option<JournalPos>) {
        let Some(ended) = self.machine.process_ended() else { return };
        self.run.pgid = None;
        if pos.is_none() {
            // No shim ended the tree: its cgroup (where the host has them) holds all of it;
            // whatever of the run escaped to PID 1 is also ended by marker.
            let trees = format!("agent/{}/", self.run.run_id);
            let _ = tokio::task::spawn_blocking(move || spaces_os::process::cgroup::end_all(&trees)).await;
            let _ = kill_tree(None, &run_marker(&self.run.run_id), Duration::from_millis(500)).await;
        }
        let was_in_turn = self.norm.turn_in_flight();
        let stderr_tail = self.launcher.stderr_tail();
        let exit = ExitInfo { code, signal: ended.signal(signal), stderr_tail: stderr_tail.clone(), stop_requested: ended.stop_requested };
        let mut drafts = self.norm.process_exited(&exit);
        // Nothing is written to a process that ended; a new one starts its own dialogue.
        drop(self.norm.take_outgoing());
        if let Some(why) = &ended.live.ended_by {
            // The turn's error names the rule, whatever the harness made of the exit.
            for d in drafts.iter_mut().filter(|d| d.kind == EventKind::TurnEnded && d.stop_reason == Some(StopReason::Error)) {
                let text = d.text.take().unwrap_or_default();
                d.text = Some(if text.contains(why.as_str()) { text } else { format!("{why}: {text}") });
            }
        }
        self.append_batch(drafts, pos).await;
        proc::retire(proc::shim_dir(&self.inner.cfg.run_dir(&self.run.run_id), ended.live.handle.gen));
        let plan = self.machine.exit_plan(&ended, code, signal, was_in_turn, self.run.status);
        if let AfterExit::ResetSession { session } = &plan.then {
            self.session_reset(session, &stderr_tail);
            return;
        }
        if plan.save_home {
            // What the CLI wrote after its turn's last line (Codex's session file) is saved too;
            // an unchanged home uploads nothing.
            persist::save(&self.inner, &self.run, self.harness);
        }
        self.queue_dropped(plan.dropped, "the agent process failed; send the message again once the cause is fixed");
        match plan.then {
            AfterExit::ResetSession { .. } => {}
            AfterExit::Stopped => self.finish_stopped(),
            AfterExit::Set(None) => {}
            AfterExit::Set(Some(change)) => self.set_state(change.status, change.phase, &change.reason),
            AfterExit::Failed { crashed } => {
                let why = exit_reason(code, ended.signal(signal), &stderr_tail, ended.live.ended_by.as_deref());
                let (status, phase) = if crashed { (Status::Crashed, Phase::Crashed) } else { (Status::Failed, Phase::Failed) };
                self.set_state(status, phase, &why);
            }
        }
    }

    /// Case V25: a process started to resume `session` failed before finishing a turn (its
    /// transcript is gone or unreadable, e.g. a restored home without it). The session is reset
    /// (the machine queued the turn's text first, to run in a fresh session with clean
    /// arguments), and a `notice` says so.
    fn session_reset(&mut self, session: &str, stderr_tail: &str) {
        let last = stderr_tail.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output");
        self.run.session_id = None;
        self.save();
        let why = format!("the session {session} could not be resumed ({})", self.redactor.apply(last));
        self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice)
            .summary("the session was reset: it could not be resumed; the message runs again in a fresh session")
            .text(why)]);
    }
}
