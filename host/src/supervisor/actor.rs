//! The run actor: one task per live run that owns its agent process and state machine.
//!
//! Every state transition of a run happens here, in order: commands (message, interrupt, stop)
//! arrive on a channel, process output arrives on another, and the actor appends normalized
//! events and updates the stored run. At most one turn is in flight; messages sent mid-turn wait
//! in the actor's queue and start when the turn ends (for per-turn CLIs: when its process exits).
//!
//! The decisions are the pure [`state::Machine`]'s (states `Absent`, `Live`, `Stopping`,
//! `Stopped`; what a message, an interrupt, a stop, output, an exit, a turn's end or a passed
//! deadline means); this file and its parts do the I/O they call for: `turns.rs` starts turns
//! and stores what they change, `exit.rs` takes the process's output and its end. How a process
//! is launched and how its output becomes events is the [`Launcher`]'s.

mod checkpoint;
mod disk;
mod exit;
mod queue;
mod quota;
mod rewind;
mod slots;
mod spend;
pub mod state;
mod talk;
mod trace;
pub use rewind::{clear_rewind_point, points_in, rewind_point, set_rewind_point, TurnPoint};
pub use trace::TRACEPARENT_FILE;
mod turns;
mod unstored;

use std::sync::Arc;
use std::time::Duration;

use spaces_harnesses::{EventDraft, Harness, Normalizer};
use spaces_os::process::kill_tree;
use spaces_os::redact::Redactor;
use spaces_sdk::{ActionReport, ApiError, ErrorCode, EventKind, Phase, Status};
use spaces_store::runs::RunRow;
use spaces_store::JournalPos;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::folder::{folder_present, SpaceFolder};
use super::keys::{Keyed, Queued};
use super::launcher::Launcher;
use super::ledger::Ledger;
use super::mailbox::{Cmd, Reply};
use super::marker::run_marker;
use super::proc::LiveProc;
use super::secrets::RunSecrets;
use super::shared::Inner;
use state::{Admit, Advance, Machine, Setup, StopEnd, OUTPUT_CLOSED};

/// Grace between SIGTERM and SIGKILL when stopping a run.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Lets a dormant actor go ([`Actor::run`]): true when it was removed from the actor map (no
/// command waits for it), given the failures in a row it leaves behind (case P7's back-off
/// outlives the actor).
pub type Retire = Box<dyn FnMut(&mut mpsc::UnboundedReceiver<Cmd>, u32) -> bool + Send>;

/// The actor: the run's machine, and what it needs for I/O.
pub struct Actor {
    inner: Arc<Inner>,
    run: RunRow,
    harness: &'static dyn Harness,
    norm: Box<dyn Normalizer>,
    /// Shared with the bulk lane when a large batch goes there.
    redactor: Arc<Redactor>,
    launcher: Launcher,
    machine: Machine<LiveProc>,
    stop_replies: Vec<Reply>,
    /// A write of the run found the disk full: why, naming the disk, until the loop ends the
    /// process for it (`disk.rs`).
    disk_full: Option<String>,
    /// Batches a full disk kept out of the store, in order (`unstored.rs`).
    unstored: unstored::Unstored,
    /// What the run spent (`spend.rs`).
    ledger: Ledger,
    /// Why the daemon interrupted the turn in flight for the run's budget, until it ends.
    budget_interrupt: Option<String>,
    /// The next turn waits for a slot (`slots.rs`): status `queued`.
    waiting_slot: bool,
    /// Changes whenever a slot frees.
    freed: tokio::sync::watch::Receiver<u64>,
    /// When a provider's limit resets and the session continues (`quota.rs`).
    quota_resume_at: Option<Instant>,
    /// The turn in flight (or the last) was the daemon's "continue" after a limit reset.
    quota_continued: bool,
    /// The run's trace when traces are on (`trace.rs`), and what its spans need of the turn.
    trace: Option<crate::traces::RunTrace>,
    turn_trace: trace::TurnTrace,
    /// The run's folder checkpoints (`checkpoint.rs`), opened at first use.
    checkpoints: checkpoint::Cps,
}

impl Actor {
    /// An actor for `run` (fresh, or re-adopted after a daemon restart with no live process),
    /// `fast_failures` of its processes failed in a row so far.
    pub fn new(inner: Arc<Inner>, run: RunRow, harness: &'static dyn Harness, secrets: RunSecrets, fast_failures: u32) -> Self {
        let redactor = Arc::new(secrets.redactor());
        let inner_admission_rx = inner.admission.subscribe();
        let setup = Setup {
            model: harness.process_model(),
            exit_when_idle: run.options.exit_when_idle == Some(true),
            persistent: run.options.home.is_some(),
            stall_limit: Duration::from_millis(inner.cfg.stall_ms),
            resumes: harness.supports().resume,
        };
        let mut actor = Self {
            launcher: Launcher::new(inner.clone(), &run.run_id, harness, secrets),
            inner,
            norm: harness.normalizer(),
            harness,
            redactor,
            run,
            machine: Machine::new(setup, fast_failures, Instant::now()),
            stop_replies: Vec::new(),
            disk_full: None,
            unstored: unstored::Unstored::default(),
            ledger: Ledger::load(harness.usage_tally(), &[]),
            budget_interrupt: None,
            waiting_slot: false,
            freed: inner_admission_rx,
            quota_resume_at: None,
            quota_continued: false,
            trace: None,
            turn_trace: trace::TurnTrace::default(),
            checkpoints: checkpoint::Cps::Unopened,
        };
        actor.load_queue();
        actor.load_ledger();
        actor.load_quota_wait();
        actor.load_trace();
        actor
    }

    /// Re-adopt the run's agent process after a daemon restart, its events stored up to `pos`
    /// (see [`Launcher::adopt`]), then [`Self::run`]. Errors: the journal cannot be read.
    pub async fn adopt(mut self, pos: JournalPos) -> super::error::Result<Self> {
        let Some(p) = self.launcher.adopt(pos.gen, pos.offset, &self.redactor, self.norm.as_mut()).await? else {
            self.machine.stall.last_output = Instant::now();
            return Ok(self);
        };
        let (pid, out_closed) = (p.pid, p.out_closed);
        self.machine.adopted(p, out_closed, Instant::now());
        if self.run.pgid.is_none() {
            // Adopted before the previous daemon stored that its process had started.
            self.run.pgid = Some(pid);
            if self.run.status == Status::Running {
                self.set_state(Status::Running, Phase::Working, "a turn is running");
            } else {
                self.save();
            }
        }
        Ok(self)
    }

    /// After a daemon restart: turn `run.turns` was recorded as started, but the previous daemon
    /// died before any process of it started (no shim directory of it is left). The turn starts
    /// its process now with `text` (its events so far are stored: the normalizer learns of the
    /// turn without storing them again), then [`Self::run`].
    pub async fn restart_turn(mut self, text: String) -> Self {
        let turn = self.run.turns;
        // The text too: a conversation normalizer sends it once its process is ready.
        drop(self.norm.begin_turn(turn, &text));
        self.machine.turn_started(text.clone(), Instant::now());
        self.spawn_for_turn(turn, &text).await;
        self
    }

    /// Run the actor: start `first` (the first prompt, or a follow-up that revived the run), then
    /// serve commands and process events until the run ends with nothing left to do and
    /// `retire` lets it go, or the daemon stops (`Supervisor::stop_actors`).
    pub async fn run(mut self, first: Option<String>, mut cmds: mpsc::UnboundedReceiver<Cmd>, mut retire: Retire) {
        if let Some(text) = first {
            Box::pin(self.start_turn(text.into())).await;
        }
        if !self.machine.queue.is_empty() {
            // Messages queued before a restart start once nothing runs ahead of them.
            Box::pin(self.advance()).await;
        }
        let stopping = self.inner.actors.stopping();
        // The daemon stops: the actor leaves at its next wait (the agent goes on under its
        // shim, the next start adopts it). Not `biased`: a flood of events must not starve a
        // timer (a stop's drain); a branch that was ready with it runs once, then the loop ends.
        while !stopping.is_cancelled() {
            let deadline = self.machine.deadline(self.norm.turn_in_flight(), self.norm.tool_running());
            tokio::select! {
                _ = stopping.cancelled() => break,
                cmd = cmds.recv() => match cmd {
                    Some(cmd) => Box::pin(self.on_cmd(cmd)).await,
                    None => break,
                },
                Some(ev) = self.launcher.next_event() => {
                    Box::pin(self.on_proc_events(ev)).await;
                    Box::pin(self.check_budget_mid_turn()).await;
                }
                _ = sleep_until(deadline.map(|(at, _)| at)) => {
                    if let Some((_, timer)) = deadline {
                        Box::pin(self.on_deadline(timer)).await;
                    }
                }
                _ = tokio::time::sleep(unstored::RETRY), if !self.unstored.is_empty() => {}
                _ = sleep_until(self.quota_resume_at), if self.quota_resume_at.is_some() => Box::pin(self.quota_reset()).await,
                // A slot freed: the waiting turn looks again (`advance`).
                _ = self.freed.changed(), if self.waiting_slot => self.waiting_slot = false,
            }
            if let Some(why) = self.disk_full.take() {
                Box::pin(self.on_disk_full(why)).await;
            }
            if !self.unstored.is_empty() {
                Box::pin(self.store_unstored()).await;
            }
            if stopping.is_cancelled() {
                // No turn starts now (a queued message stays stored for the next daemon).
                break;
            }
            Box::pin(self.advance()).await;
            // No process, no turn, nothing queued: the actor may go; a later command revives it.
            if self.machine.is_dormant(self.norm.turn_in_flight())
                && self.unstored.is_empty()
                && self.quota_resume_at.is_none()
                && retire(&mut cmds, self.machine.fast_failures)
            {
                break;
            }
        }
    }

    // ----- commands -----

    async fn on_cmd(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Message { text, force, key, traceparent, reply } => {
                self.turn_trace.pending_link = traceparent;
                let answer = self.on_message(text, force, key).await;
                self.turn_trace.pending_link = None;
                let _ = reply.send(answer);
            }
            Cmd::Interrupt { reply } => {
                let report = self.on_interrupt().await;
                let _ = reply.send(Ok(report));
            }
            Cmd::Stop { reply } => {
                self.stop_replies.push(reply);
                self.on_stop().await;
            }
            Cmd::Budget { budget, reply } => {
                let _ = reply.send(self.on_budget(budget));
            }
            Cmd::Merge { theirs, at_turn, reply } => {
                let _ = reply.send(self.on_merge(&theirs, at_turn));
            }
            Cmd::Rewind { to_turn, what, reply } => {
                let _ = reply.send(self.on_rewind(to_turn, what));
            }
        }
    }

    fn report(&self, ok: bool, reason: impl Into<String>) -> ActionReport {
        ActionReport { run_id: self.run.run_id.clone(), ok, reason: reason.into() }
    }

    /// A follow-up. Errors: `AGENT_BUSY` while a stop is ending the run's processes (the run
    /// will be stopped: start a new run), `RESOURCE_QUEUE_FULL` when
    /// [`state::MAX_QUEUED_MESSAGES`] already wait behind the running turn.
    /// With `key`: a repeat of a message delivered or queued before answers its first report
    /// (`OPERATION_KEY_CONFLICT` when the key came with another text or `force`).
    async fn on_message(&mut self, text: String, force: bool, key: Option<Keyed>) -> Result<ActionReport, ApiError> {
        if let Some(key) = &key {
            if let Some(first) = key.replay(&self.inner.store).map_err(|e| e.to_api())? {
                return Ok(first);
            }
            for queued in &self.machine.queue {
                if let Some((other, report)) = &queued.key {
                    if key.repeats(other)? {
                        return Ok(report.clone());
                    }
                }
            }
        }
        if let Some(refusal) = self.budget_refusal() {
            return Err(refusal);
        }
        let admit = self.machine.admit(self.run.status, force, self.norm.turn_in_flight());
        match admit {
            Admit::Stopped => return Ok(self.report(false, "the run is stopped; start a new run to continue")),
            Admit::Stopping => {
                return Err(ApiError::new(
                    ErrorCode::AgentBusy,
                    "the run is being stopped (its processes are ending); it will not take follow-ups: start a new run",
                ))
            }
            _ => {}
        }
        if self.waiting_slot {
            // The run waits for a slot: this message runs after the waiting turn.
            let n = self.machine.queue.len();
            if n >= state::MAX_QUEUED_MESSAGES {
                return Err(ApiError::new(
                    ErrorCode::ResourceQueueFull,
                    format!("{n} messages already wait in this run for a turn slot (the limit); send again once its turns ran"),
                ));
            }
            let report = self.report(true, format!("queued at position {}: the run waits for a turn slot", n + 1));
            self.keep_queued(Queued { text, key: key.clone().map(|k| (k, report.clone())), n: None }, false);
            return Ok(report);
        }
        if self.machine.message_starts_process() {
            // R34: a new process starts in the run's folder for this message.
            folder_present(&self.folder()).map_err(|e| e.to_api())?;
        }
        if let (Admit::StartNow, Some(full)) = (&admit, self.queue_full_refusal()) {
            return Err(full);
        }
        let keyed = |report: &ActionReport| key.clone().map(|k| (k, report.clone()));
        match admit {
            Admit::QueueFull(n) => Err(ApiError::new(
                ErrorCode::ResourceQueueFull,
                format!(
                    "{n} follow-ups already wait behind the running turn (the limit); wait for the turn to end \
                     (agent_events) or interrupt it, then send again"
                ),
            )),
            Admit::InterruptFirst => {
                // A wire that can add input to the turn in flight (Codex `turn/steer`) takes it
                // there; the others are interrupted and run the message next.
                let turn = self.run.turns;
                let report = self.report(true, format!("steered into turn {turn}: the running turn takes the message (turn/steer)"));
                if self.steer(&text, keyed(&report)).await {
                    return Ok(report);
                }
                let report = self.report(true, "the running turn is being interrupted; this message runs next");
                self.keep_queued(Queued { text, key: keyed(&report), n: None }, true);
                let _ = self.on_interrupt().await;
                Ok(report)
            }
            Admit::Queue(pos) => {
                let report = self.report(true, format!("queued at position {pos}: a turn is running; it starts when that turn ends"));
                self.keep_queued(Queued { text, key: keyed(&report), n: None }, false);
                self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice)
                    .summary(format!("message queued (position {pos}); it starts when the running turn ends"))]);
                Ok(report)
            }
            Admit::AfterExit => {
                // A caller's message runs instead of the daemon's "continue" after a limit.
                self.quota_wait_over();
                self.quota_continued = false;
                // The Codex follow-up race (issue 31): the turn ended, its `exec` process is
                // still exiting (or an `exit_when_idle` agent's, ended at once now rather than
                // after the rest of its grace). The message is the next turn, not one waiting
                // behind a turn.
                self.machine.hurry_close(tokio::time::Instant::now());
                let (next, last) = (self.run.turns + 1, self.run.turns);
                let report = self.report(true, format!("delivered: turn {next} starts as soon as turn {last}'s process has exited"));
                self.keep_queued(Queued { text, key: keyed(&report), n: None }, false);
                self.set_state(Status::Running, Phase::Starting, "the next turn starts as soon as the last turn's process has exited");
                Ok(report)
            }
            Admit::StartNow | Admit::Stopped | Admit::Stopping => {
                self.turn_trace.link = self.turn_trace.pending_link.take();
                // A caller's message runs instead of the daemon's "continue" after a limit.
                self.quota_wait_over();
                self.quota_continued = false;
                let report = if self.inner.admission.would_take(&self.run.run_id, &self.run.space) {
                    self.report(true, format!("delivered: turn {} started", self.run.turns + 1))
                } else {
                    self.report(
                        true,
                        "accepted: the run waits for a turn slot (the operator's cap on running turns); the turn starts when one frees",
                    )
                };
                self.start_turn(Queued { text, key: keyed(&report), n: None }).await;
                Ok(report)
            }
        }
    }

    async fn on_interrupt(&mut self) -> ActionReport {
        let in_flight = self.norm.turn_in_flight();
        if !in_flight {
            return self.report(false, "no turn in flight; nothing to interrupt (nothing is remembered for later turns)");
        }
        let drafts = self.norm.interrupt_requested();
        self.append(drafts);
        self.send_outgoing().await;
        self.machine.interrupt(in_flight);
        let shim = self.machine.process().and_then(|p| p.shim.clone());
        let known = self.machine.process().is_some_and(|p| p.out_closed);
        if output_closed(known, shim.as_deref()).await {
            // It could neither take the interrupt nor say it did (case R42): it is ended.
            let why = format!("{OUTPUT_CLOSED}; it was ended by the interrupt");
            self.machine.end_by_rule(why.clone());
            self.launcher.note_in_stderr_tail(why);
            let survivors = self.end_processes(STOP_GRACE).await;
            if !survivors.is_empty() {
                return self.report(false, format!("{OUTPUT_CLOSED}; ending it failed: processes {survivors:?} are still alive"));
            }
            return self.report(
                true,
                format!("{OUTPUT_CLOSED}: its process was ended instead of interrupted; turn {} ends interrupted", self.run.turns),
            );
        }
        let Some(shim) = shim else { return self.report(false, "the agent process is not running; try again or use stop") };
        if let talk::Sent::Refused(why) = self.send_interrupt(&shim).await {
            return self.report(false, why);
        }
        self.report(true, format!("interrupt sent to turn {}", self.run.turns))
    }

    async fn on_stop(&mut self) {
        // No "continue" after a provider's limit: the run is being stopped.
        self.quota_wait_over();
        let dropped = self.machine.stop();
        self.queue_dropped(dropped, "the run was stopped");
        let survivors = self.end_processes(STOP_GRACE).await;
        match self.machine.stop_ended(survivors.is_empty(), Instant::now()) {
            StopEnd::Failed => self.answer_stops(false, &format!("stop failed: processes {survivors:?} are still alive")),
            StopEnd::Finish => self.finish_stopped(),
            // The exit reaches the journal shortly; the drain deadline bounds the wait for it.
            StopEnd::AwaitExit => {}
        }
    }

    /// End every process of the run: the shim's whole tree (every descendant, whatever it did
    /// with its session or environment), or, with no live shim, whatever carries the run
    /// marker. Returns the survivors (empty when everything is gone).
    async fn end_processes(&mut self, grace: Duration) -> Vec<i32> {
        if let Some(shim) = self.machine.process().and_then(|p| p.shim.clone()) {
            match shim.stop(grace).await {
                Ok(survivors) => return survivors,
                Err(e) => tracing::warn!("run {}: the shim did not answer a stop ({e}); ending by marker", self.run.run_id),
            }
        }
        // No process: nothing of the run is left to end. Its last shim ended the whole tree
        // when the agent exited, or, gone itself, left it to the marker sweep in
        // `finish_process`. Scanning every process's environment here would make each stop cost
        // more the busier the host is.
        let Some(pgid) = self.machine.process().map(|p| p.pid) else { return Vec::new() };
        kill_tree(Some(pgid), &run_marker(&self.run.run_id), grace).await.survivors
    }

    fn finish_stopped(&mut self) {
        if self.norm.turn_in_flight() {
            let exit = spaces_harnesses::ExitInfo { stop_requested: true, ..Default::default() };
            let drafts = self.norm.process_exited(&exit);
            self.append(drafts);
        }
        self.machine.stopped();
        self.set_state(Status::Stopped, Phase::Exited, "stopped by request; no process of the run is left");
        self.answer_stops(true, "stopped; no process of the run is left");
    }

    fn answer_stops(&mut self, ok: bool, reason: &str) {
        for reply in self.stop_replies.drain(..) {
            let _ = reply.send(Ok(ActionReport { run_id: self.run.run_id.clone(), ok, reason: reason.to_owned() }));
        }
    }

    /// Start the next queued turn when the run can take it, or close an idle long-lived process
    /// of an `exit_when_idle` run. Called after every command and process event.
    async fn advance(&mut self) {
        // A turn waits for a slot, or the provider's limit to reset: nothing queued starts
        // before it (`slots.rs`, `quota.rs`).
        if self.waiting_slot || self.run.status == Status::QuotaWaiting {
            return;
        }
        match self.machine.advance(self.norm.turn_in_flight(), self.run.turns) {
            Advance::Nothing => {}
            Advance::Start(next) => self.start_turn(next).await,
            Advance::CloseStdin => {
                if let Some(p) = self.machine.process_mut() {
                    p.stdin_open = false;
                    if let Some(shim) = p.shim.clone() {
                        let _ = shim.close_stdin().await;
                    }
                }
                self.machine.stdin_closed(tokio::time::Instant::now());
            }
        }
    }

    /// The folder the run's agent works in.
    fn folder(&self) -> SpaceFolder<'_> {
        SpaceFolder { space: Some(&self.run.space), path: std::path::Path::new(&self.run.cwd) }
    }

    /// Say in a `notice` that `n` queued messages were dropped, and why (never silently).
    fn queue_dropped(&mut self, n: usize, why: &str) {
        if n > 0 {
            self.forget_queue();
            self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice).summary(format!("{n} queued message(s) dropped: {why}"))]);
        }
    }
}

/// Whether a process's stdout is closed: `known` from its journal, else asked of its `shim`
/// (which saw the EOF before the record reached the actor). Free of the actor, whose
/// normalizer is not `Sync`, so it is not borrowed across the await.
async fn output_closed(known: bool, shim: Option<&spaces_os::shim::ShimClient>) -> bool {
    if known {
        return true;
    }
    match shim {
        Some(shim) => shim.status().await.is_ok_and(|r| r.out_closed && r.exit.is_none()),
        None => false,
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending::<()>().await,
    }
}
