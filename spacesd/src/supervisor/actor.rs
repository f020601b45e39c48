//! The run actor: one task per live run that owns its agent process and state machine.
//!
//! Every state transition of a run happens here, in order: commands (message, interrupt, stop)
//! arrive on a channel, process output arrives on another, and the actor appends normalized
//! events and updates the stored run. At most one turn is in flight; messages sent mid-turn wait
//! in the actor's queue and start when the turn ends (for per-turn CLIs: when its process exits).
//!
//! How a process is launched and how its output becomes events is the [`Launcher`]'s; the actor
//! decides when to launch, which phase the run is in, and what a process end means.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use spaces_harnesses::{EventDraft, ExitInfo, Harness, InterruptRecipe, Normalizer, ProcessModel};
use spaces_os::process::kill_tree;
use spaces_os::redact::Redactor;
use spaces_sdk::{ActionReport, ApiError, ErrorCode, EventKind, Phase, Status, StopReason};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::keys::{Keyed, Queued};
use super::launcher::{Binary, Launcher, ProcEnd};
use super::marker::run_marker;
use super::proc::{self, LiveProc, ProcEvent};
use super::secrets::RunSecrets;
use super::{persist, prepare, start, Inner};
use crate::store::runs::RunRow;
use crate::store::JournalPos;

/// The reason of a run whose agent process is starting.
const STARTING: &str = "the agent process is starting";

/// Grace between SIGTERM and SIGKILL when stopping a run.
const STOP_GRACE: Duration = Duration::from_secs(3);
/// How long a stopped process's exit may take to reach the journal before the stop is
/// considered done without it.
const EXIT_AFTER_STOP: Duration = Duration::from_secs(5);
/// How long an agent may run on after closing its stdout before its process is ended (case
/// R42): an agent that exits closes its output first, and its exit follows within moments.
const OUTPUT_CLOSED_GRACE: Duration = Duration::from_secs(5);
/// Why an agent that closed its stdout and ran on was ended (the turn's error names it).
const OUTPUT_CLOSED: &str = "the agent closed its output (stdout) but kept running, so it could report nothing more";
/// Status reason of an `exit_when_idle` run whose agent exited after answering.
const DONE_REASON: &str = "the prompt was answered and the agent exited (exit_when_idle); a follow-up resumes the session";

/// A request to the actor.
pub enum Cmd {
    /// A follow-up; `key`, its `message_id` (see [`super::keys`]).
    Message {
        text: String,
        force: bool,
        key: Option<Keyed>,
        reply: Reply,
    },
    Interrupt {
        reply: Reply,
    },
    Stop {
        reply: Reply,
    },
}

/// Where a command's answer goes: a report, or a typed refusal.
pub type Reply = oneshot::Sender<Result<ActionReport, ApiError>>;

/// Most follow-ups one run holds queued behind its running turn; one more is refused with
/// `RESOURCE_QUEUE_FULL` (memory stays bounded whatever a caller sends).
pub const MAX_QUEUED_MESSAGES: usize = 64;

/// The actor's state.
pub struct Actor {
    inner: Arc<Inner>,
    run: RunRow,
    harness: &'static dyn Harness,
    norm: Box<dyn Normalizer>,
    /// Shared with the bulk lane when a large batch goes there.
    redactor: Arc<Redactor>,
    launcher: Launcher,
    proc: Option<LiveProc>,
    queue: VecDeque<Queued>,
    stop_requested: bool,
    stop_replies: Vec<Reply>,
    /// Set when stdin was closed on purpose (`exit_when_idle`): the exit that follows is `done`.
    closing: bool,
    drain_deadline: Option<Instant>,
    last_output: Instant,
    stall_noticed: bool,
    /// An interrupt was sent to the current turn: a non-zero exit that follows is its effect
    /// (Codex exits 1 on SIGINT), not a failure.
    interrupted: bool,
    /// Consecutive turns whose process failed at once (for back-off, case P7).
    fast_failures: u32,
    /// A rule of the daemon ended the current process (the stall limit, a closed output): its
    /// end is an `error` (not a crash) for the reason held here.
    ended_by: Option<String>,
    /// The current process closed its stdout at this moment plus [`OUTPUT_CLOSED_GRACE`] and
    /// has not exited: when it passes, the process is ended (case R42).
    output_closed_deadline: Option<Instant>,
    /// When the last stall notice was given.
    last_notice: Instant,
    /// The live process was started to resume this session and has neither opened it (no
    /// `session` event) nor finished a turn: if it fails now, the session cannot be resumed
    /// (case V25).
    resuming: Option<String>,
    /// The text of the turn in flight, for a fresh-session retry.
    turn_text: String,
    /// The session given up by [`Self::reset_session`] (never resumed again by this actor).
    dropped_session: Option<String>,
}

impl Actor {
    /// An actor for `run` (fresh, or re-adopted after a daemon restart with no live process).
    pub fn new(inner: Arc<Inner>, run: RunRow, harness: &'static dyn Harness, secrets: RunSecrets) -> Self {
        let redactor = Arc::new(secrets.redactor());
        let fast_failures = inner.fast_failures(&run.run_id);
        Self {
            launcher: Launcher::new(inner.clone(), &run.run_id, harness, secrets),
            inner,
            norm: harness.normalizer(),
            harness,
            redactor,
            run,
            proc: None,
            queue: VecDeque::new(),
            stop_requested: false,
            stop_replies: Vec::new(),
            closing: false,
            drain_deadline: None,
            last_output: Instant::now(),
            stall_noticed: false,
            interrupted: false,
            fast_failures,
            ended_by: None,
            output_closed_deadline: None,
            last_notice: Instant::now(),
            resuming: None,
            turn_text: String::new(),
            dropped_session: None,
        }
    }

    /// Re-adopt the run's agent process after a daemon restart, its events stored up to `pos`
    /// (see [`Launcher::adopt`]), then [`Self::run`]. Errors: the journal cannot be read.
    pub async fn adopt(mut self, pos: JournalPos) -> Result<Self, String> {
        self.proc = self.launcher.adopt(pos.gen, pos.offset, &self.redactor, self.norm.as_mut()).await?;
        self.last_output = Instant::now();
        if let Some(p) = &self.proc {
            if p.out_closed {
                self.output_closed_deadline = Some(Instant::now() + OUTPUT_CLOSED_GRACE);
            }
            if self.run.pgid.is_none() {
                // Adopted before the previous daemon stored that its process had started.
                self.run.pgid = Some(p.pid);
                if self.run.status == Status::Running {
                    self.set_state(Status::Running, Phase::Working, "a turn is running");
                } else {
                    self.save();
                }
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
        drop(self.norm.begin_turn(turn, ""));
        self.turn_text = text.clone();
        self.last_output = Instant::now();
        self.spawn_for_turn(turn, &text).await;
        self
    }

    /// Run the actor: start `first` (the first prompt, or a follow-up that revived the run), then
    /// serve commands and process events until the run is stopped or ends with nothing left to do.
    pub async fn run(mut self, first: Option<String>, mut cmds: mpsc::UnboundedReceiver<Cmd>) {
        if let Some(text) = first {
            self.start_turn(text.into()).await;
        }
        loop {
            let stall = self.stall_deadline();
            let drain = self.drain_deadline;
            tokio::select! {
                cmd = cmds.recv() => match cmd {
                    Some(cmd) => self.on_cmd(cmd).await,
                    None => break,
                },
                Some(ev) = self.launcher.next_event() => self.on_proc_events(ev).await,
                _ = sleep_until(stall) => self.on_stall().await,
                _ = sleep_until(self.output_closed_deadline) => self.on_output_closed().await,
                _ = sleep_until(drain) => {
                    // A stopped process whose exit never reached the journal: it is gone all the
                    // same (the stop verified that), how it ended is not known.
                    self.drain_deadline = None;
                    self.finish_process((None, None), None).await;
                }
            }
            self.advance().await;
            if self.is_dormant() {
                // No process, no turn, nothing queued: the actor may go; a later command revives it
                // (with the count of failures in a row, so P7's back-off survives the retirement).
                self.inner.set_fast_failures(&self.run.run_id, self.fast_failures);
                if self.inner.actors.retire(&self.run.run_id, &mut cmds) {
                    break;
                }
            }
        }
    }

    fn is_dormant(&self) -> bool {
        self.proc.is_none() && !self.norm.turn_in_flight() && self.queue.is_empty()
    }

    // ----- commands -----

    async fn on_cmd(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Message { text, force, key, reply } => {
                let answer = self.on_message(text, force, key).await;
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
        }
    }

    fn report(&self, ok: bool, reason: impl Into<String>) -> ActionReport {
        ActionReport { run_id: self.run.run_id.clone(), ok, reason: reason.into() }
    }

    /// A follow-up. Errors: `AGENT_BUSY` while a stop is ending the run's processes (the run
    /// will be stopped: start a new run), `RESOURCE_QUEUE_FULL` when
    /// [`MAX_QUEUED_MESSAGES`] already wait behind the running turn.
    /// With `key`: a repeat of a message delivered or queued before answers its first report
    /// (`OPERATION_KEY_CONFLICT` when the key came with another text or `force`).
    async fn on_message(&mut self, text: String, force: bool, key: Option<Keyed>) -> Result<ActionReport, ApiError> {
        if let Some(key) = &key {
            if let Some(first) = key.replay(&self.inner.store).map_err(|e| e.to_api())? {
                return Ok(first);
            }
            for queued in &self.queue {
                if let Some((other, report)) = &queued.key {
                    if key.repeats(other)? {
                        return Ok(report.clone());
                    }
                }
            }
        }
        if self.run.status == Status::Stopped {
            return Ok(self.report(false, "the run is stopped; start a new run to continue"));
        }
        if self.stop_requested {
            return Err(ApiError::new(
                ErrorCode::AgentBusy,
                "the run is being stopped (its processes are ending); it will not take follow-ups: start a new run",
            ));
        }
        if self.proc.is_none() || self.harness.process_model() == ProcessModel::PerTurn {
            // A new process starts in the run's folder for this message (nothing of the run is
            // running, or a per-turn CLI, whose last process may not have exited yet): R34.
            start::folder_present(&self.folder()).map_err(|e| e.to_api())?;
        }
        if self.norm.turn_in_flight() || self.proc_busy_between_turns() {
            if self.queue.len() >= MAX_QUEUED_MESSAGES {
                return Err(ApiError::new(
                    ErrorCode::ResourceQueueFull,
                    format!(
                        "{} follow-ups already wait behind the running turn (the limit); wait for the turn to end \
                         (agent_events) or interrupt it, then send again",
                        self.queue.len()
                    ),
                ));
            }
            if force && self.norm.turn_in_flight() {
                let report = self.report(true, "the running turn is being interrupted; this message runs next");
                self.queue.push_front(Queued { text, key: key.map(|k| (k, report.clone())) });
                let _ = self.on_interrupt().await;
                return Ok(report);
            }
            let pos = self.queue.len() + 1;
            let report = self.report(true, format!("queued at position {pos}: a turn is running; it starts when that turn ends"));
            self.queue.push_back(Queued { text, key: key.map(|k| (k, report.clone())) });
            self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice)
                .summary(format!("message queued (position {pos}); it starts when the running turn ends"))]);
            return Ok(report);
        }
        let turn = self.run.turns + 1;
        let report = self.report(true, format!("delivered: turn {turn} started"));
        self.start_turn(Queued { text, key: key.map(|k| (k, report.clone())) }).await;
        Ok(report)
    }

    /// A per-turn process that already ended its turn but has not exited yet.
    fn proc_busy_between_turns(&self) -> bool {
        self.harness.process_model() == ProcessModel::PerTurn && self.proc.is_some()
    }

    async fn on_interrupt(&mut self) -> ActionReport {
        if !self.norm.turn_in_flight() {
            return self.report(false, "no turn in flight; nothing to interrupt (nothing is remembered for later turns)");
        }
        let drafts = self.norm.interrupt_requested();
        self.append(drafts);
        self.interrupted = true;
        let shim = self.proc.as_ref().and_then(|p| p.shim.clone());
        let known = self.proc.as_ref().is_some_and(|p| p.out_closed);
        if output_closed(known, shim.as_deref()).await {
            // It could neither take the interrupt nor say it did (case R42): it is ended.
            self.ended_by = Some(format!("{OUTPUT_CLOSED}; it was ended by the interrupt"));
            self.launcher.note_in_stderr_tail(format!("{OUTPUT_CLOSED}; it was ended by the interrupt"));
            let survivors = self.end_processes(STOP_GRACE).await;
            if !survivors.is_empty() {
                return self.report(false, format!("{OUTPUT_CLOSED}; ending it failed: processes {survivors:?} are still alive"));
            }
            return self.report(
                true,
                format!("{OUTPUT_CLOSED}: its process was ended instead of interrupted; turn {} ends interrupted", self.run.turns),
            );
        }
        match (self.harness.interrupt(), shim) {
            (InterruptRecipe::Stdin(bytes), Some(shim)) => {
                if shim.stdin(String::from_utf8_lossy(&bytes).into_owned(), None).await.is_err() {
                    return self.report(false, "the agent process is not accepting input; use stop");
                }
            }
            (InterruptRecipe::SignalGroup(sig), Some(shim)) => {
                if shim.signal(sig).await.is_err() {
                    return self.report(false, "the agent process is not taking signals; use stop");
                }
            }
            (_, None) => return self.report(false, "the agent process is not running; try again or use stop"),
        }
        self.report(true, format!("interrupt sent to turn {}", self.run.turns))
    }

    async fn on_stop(&mut self) {
        self.stop_requested = true;
        self.drop_queue("the run was stopped");
        let survivors = self.end_processes(STOP_GRACE).await;
        if !survivors.is_empty() {
            let reason = format!("stop failed: processes {survivors:?} are still alive");
            self.answer_stops(false, &reason);
            return;
        }
        if self.proc.is_none() {
            self.finish_stopped();
        } else {
            // The exit reaches the journal shortly; bound the wait for it.
            self.drain_deadline = Some(Instant::now() + EXIT_AFTER_STOP);
        }
    }

    /// End every process of the run: the shim's whole tree (every descendant, whatever it did
    /// with its session or environment), or, with no live shim, whatever carries the run
    /// marker. Returns the survivors (empty when everything is gone).
    async fn end_processes(&mut self, grace: Duration) -> Vec<i32> {
        if let Some(shim) = self.proc.as_ref().and_then(|p| p.shim.clone()) {
            match shim.stop(grace).await {
                Ok(survivors) => return survivors,
                Err(e) => tracing::warn!("run {}: the shim did not answer a stop ({e}); ending by marker", self.run.run_id),
            }
        }
        // No process: nothing of the run is left to end. Its last shim ended the whole tree
        // when the agent exited, or, gone itself, left it to the marker sweep in
        // `finish_process`. Scanning every process's environment here would make each stop cost
        // more the busier the host is.
        let Some(pgid) = self.proc.as_ref().map(|p| p.pid) else { return Vec::new() };
        kill_tree(Some(pgid), &run_marker(&self.run.run_id), grace).await.survivors
    }

    fn finish_stopped(&mut self) {
        if self.norm.turn_in_flight() {
            let exit = ExitInfo { stop_requested: true, ..ExitInfo::default() };
            let drafts = self.norm.process_exited(&exit);
            self.append(drafts);
        }
        self.set_state(Status::Stopped, Phase::Exited, "stopped by request; no process of the run is left");
        self.answer_stops(true, "stopped; no process of the run is left");
    }

    fn answer_stops(&mut self, ok: bool, reason: &str) {
        for reply in self.stop_replies.drain(..) {
            let _ = reply.send(Ok(ActionReport { run_id: self.run.run_id.clone(), ok, reason: reason.to_owned() }));
        }
    }

    // ----- turns -----

    /// Start the next turn with `message`; its key, if any, is stored in the turn's first
    /// commit (with the report its caller got), before the text goes to the agent.
    async fn start_turn(&mut self, message: Queued) {
        let Queued { text, key } = message;
        // From the turn's commit until its text reached the agent (see `Inner::turn_starts`).
        let inner = self.inner.clone();
        let _starting = inner.turn_starts.read().await;
        let turn = self.run.turns + 1;
        self.run.turns = turn;
        // The agent gets the caller's text as is; what is stored is redacted (output lines are
        // redacted as they arrive, reasons in `set_state`).
        let stored = self.redactor.apply(&text);
        self.turn_text = text.clone();
        let drafts = self.norm.begin_turn(turn, &stored);
        self.interrupted = false;
        self.last_output = Instant::now();
        self.stall_noticed = false;
        // The turn's row, its first events and the run's new state: one commit, before the
        // message goes to the agent (a follow-up waits for one commit, not three). A turn that
        // starts a process says so at once (one commit less before the process starts).
        let live_shim = self.proc.as_ref().filter(|p| p.stdin_open).and_then(|p| p.shim.clone());
        let delivered = matches!(self.harness.process_model(), ProcessModel::LongLived) && live_shim.is_some();
        self.run.status = Status::Running;
        (self.run.phase, self.run.reason) =
            if delivered { (Phase::Working, "a turn is running".to_owned()) } else { (Phase::Starting, STARTING.to_owned()) };
        let (run_id, row) = (self.run.run_id.clone(), self.run.clone());
        let ended = turns_ended(&drafts);
        let key_row = key.and_then(|(k, report)| k.row(&run_id, &report).ok());
        let stored_turn = self.inner.log.append_with(&self.run.run_id, drafts, None, move |conn| {
            crate::store::runs::turn_start_in(conn, &run_id, turn, &stored)?;
            if let Some(key) = &key_row {
                crate::store::keys::key_keep_in(conn, key)?;
            }
            crate::store::runs::run_update_in(conn, &row)
        });
        if let Err(e) = stored_turn {
            tracing::error!("run {}: cannot record turn {turn}: {e}", self.run.run_id);
        }
        self.after_append(ended);
        match (self.harness.process_model(), live_shim) {
            (ProcessModel::LongLived, Some(shim)) => {
                let message = String::from_utf8_lossy(&self.harness.user_message(&text)).into_owned();
                if let Err(e) = shim.stdin(message, Some(turn)).await {
                    self.launcher.note_in_stderr_tail(format!("the message could not reach the agent: {e}"));
                    tracing::warn!("run {}: turn {turn} not delivered: {e}", self.run.run_id);
                }
            }
            _ => self.spawn_for_turn(turn, &text).await,
        }
    }

    /// The folder the run's agent works in.
    fn folder(&self) -> start::SpaceFolder<'_> {
        start::SpaceFolder { space: Some(&self.run.space), path: std::path::Path::new(&self.run.cwd) }
    }

    async fn spawn_for_turn(&mut self, turn: u32, text: &str) {
        if prepare::pending(&self.inner, &self.run) {
            self.set_state(Status::Running, Phase::Preparing, "cloning or checking out the repository");
            if let Err(why) = prepare::prepare(&self.inner, &self.run, turn).await {
                self.fail_turn_before_start(&why);
                return;
            }
        }
        if let Err(e) = start::folder_present(&self.folder()) {
            self.fail_turn_before_start(&e.to_api().message);
            return;
        }
        if self.fast_failures > 0 {
            let backoff = Duration::from_millis(500u64 << self.fast_failures.min(5));
            tokio::time::sleep(backoff).await;
        }
        let binary = match self.launcher.binary().await {
            Ok(Binary::Ready(path)) => Ok(path),
            Ok(Binary::Install(lock)) => {
                self.set_state(Status::Running, Phase::Installing, "installing the agent CLI");
                self.launcher.install(&self.run.run_id, lock).await
            }
            Err(why) => Err(why),
        };
        let binary = match binary {
            Ok(binary) => binary,
            Err(why) => {
                self.fail_turn_before_start(&why);
                return;
            }
        };
        if self.run.options.home.is_some() {
            self.set_state(Status::Running, Phase::Starting, "restoring the persistent agent's home");
            match persist::prepare(&self.inner, &mut self.run, self.harness).await {
                Ok(notices) => self.append(notices),
                Err(why) => {
                    self.fail_turn_before_start(&why);
                    return;
                }
            }
        }
        let launch = match self.launcher.plan(&self.run, turn, text, &binary) {
            Ok(launch) => launch,
            Err(why) => {
                self.fail_turn_before_start(&why);
                return;
            }
        };
        if self.run.phase != Phase::Starting || self.run.reason != STARTING {
            self.set_state(Status::Running, Phase::Starting, STARTING);
        }
        let resuming = self.run.session_id.clone();
        match self.launcher.spawn(launch).await {
            Ok(live) => {
                self.resuming = resuming;
                self.run.pgid = Some(live.pid);
                self.proc = Some(live);
                self.closing = false;
                self.set_state(Status::Running, Phase::Working, "a turn is running");
            }
            Err(why) => self.fail_turn_before_start(&why),
        }
    }

    fn fail_turn_before_start(&mut self, why: &str) {
        let drafts = self.norm.process_exited(&ExitInfo { stderr_tail: why.to_owned(), ..ExitInfo::default() });
        self.append(drafts);
        self.drop_queue("the agent could not start");
        self.set_state(Status::Failed, Phase::Failed, &format!("the agent could not start: {why}"));
    }

    /// Discard queued messages, saying so in a `notice` (never silently).
    fn drop_queue(&mut self, why: &str) {
        let n = self.queue.len();
        if n > 0 {
            self.queue.clear();
            self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice).summary(format!("{n} queued message(s) dropped: {why}"))]);
        }
    }

    // ----- process events -----

    /// Handle `first` and every journal record already waiting behind it (one batch from the
    /// launcher): their events are stored in one transaction with the journal position they
    /// reach, then an exit that followed them is handled.
    async fn on_proc_events(&mut self, first: ProcEvent) {
        let batch = self.launcher.batch(first, self.run.turns, &self.redactor, &mut self.norm).await;
        if batch.saw_output {
            self.last_output = Instant::now();
            self.stall_noticed = false;
        }
        if batch.drafts.iter().any(|d| d.kind == EventKind::Session) {
            // The CLI opened the session it was asked to resume: a failure from here on is the
            // agent's own (case P7), not a session that cannot be resumed (V25).
            self.resuming = None;
        }
        self.append_batch(batch.drafts, batch.pos).await;
        if self.proc.is_none() {
            return;
        }
        if batch.stdout_closed && batch.end.is_none() {
            // Its exit usually follows at once; if it does not, the agent is ended (R42).
            if let Some(p) = self.proc.as_mut() {
                p.out_closed = true;
            }
            self.output_closed_deadline.get_or_insert(Instant::now() + OUTPUT_CLOSED_GRACE);
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

    /// The process exited (its output drained by the shim, what it left behind ended), or its
    /// shim is gone (`pos` is `None`). The events of the exit are stored with the exit record's
    /// journal position `pos`, in one transaction.
    async fn finish_process(&mut self, (code, signal): (Option<i32>, Option<i32>), pos: Option<JournalPos>) {
        let Some(p) = self.proc.take() else { return };
        self.drain_deadline = None;
        self.output_closed_deadline = None;
        self.run.pgid = None;
        if pos.is_none() {
            // No shim ended the tree: its cgroup (where the host has them) holds all of it;
            // whatever of the run escaped to PID 1 is also ended by marker.
            let trees = format!("agent/{}/", self.run.run_id);
            let _ = tokio::task::spawn_blocking(move || spaces_os::process::cgroup::end_all(&trees)).await;
            let _ = kill_tree(None, &run_marker(&self.run.run_id), Duration::from_millis(500)).await;
        }
        let was_in_turn = self.norm.turn_in_flight();
        // A process a rule of the daemon ended did not crash: without a signal its turn ends
        // `error`, for the rule's reason.
        let ended_by = self.ended_by.take();
        let signal = if ended_by.is_some() { None } else { signal };
        let exit = ExitInfo { code, signal, stderr_tail: self.launcher.stderr_tail(), stop_requested: self.stop_requested };
        let mut drafts = self.norm.process_exited(&exit);
        if let Some(why) = &ended_by {
            // The turn's error names the rule, whatever the harness made of the exit.
            for d in drafts.iter_mut().filter(|d| d.kind == EventKind::TurnEnded && d.stop_reason == Some(StopReason::Error)) {
                let text = d.text.take().unwrap_or_default();
                d.text = Some(if text.contains(why.as_str()) { text } else { format!("{why}: {text}") });
            }
        }
        self.append_batch(drafts, pos).await;
        proc::retire(proc::shim_dir(&self.inner.cfg.run_dir(&self.run.run_id), p.gen));
        if let Some(session) = self.resuming.take() {
            let first_reset = self.dropped_session.is_none();
            if first_reset && code != Some(0) && !self.stop_requested && !self.interrupted && !self.closing {
                self.reset_session(&session, &exit.stderr_tail);
                return;
            }
        }
        if self.run.options.home.is_some() && !self.stop_requested && !self.closing {
            // What the CLI wrote after its turn's last line (Codex's session file) is saved too;
            // an unchanged home uploads nothing.
            persist::save(&self.inner, &self.run, self.harness);
        }
        if self.stop_requested {
            self.finish_stopped();
            return;
        }
        if self.closing {
            self.closing = false;
            self.set_state(Status::Done, Phase::Exited, DONE_REASON);
            return;
        }
        if std::mem::take(&mut self.interrupted) {
            // The interrupt ended the process (Codex exits 1 on SIGINT) or it exited right
            // after: not a failure. The session stays resumable; a message queued behind the
            // interrupt (`force`) starts next (advance), else the run waits for a follow-up.
            if self.queue.is_empty() {
                self.set_state(Status::Idle, Phase::Waiting, "the turn was interrupted; waiting for a follow-up");
            }
            return;
        }
        let clean = code == Some(0);
        if was_in_turn || !clean {
            self.fast_failures = self.fast_failures.saturating_add(1);
        }
        if !clean {
            // Case P7: an agent that fails is never respawned for messages queued behind it (a
            // CLI that exits at once would loop); they are dropped, saying why, and the run ends
            // `failed` with the stderr tail. A new follow-up retries, after a back-off.
            self.drop_queue("the agent process failed; send the message again once the cause is fixed");
        }
        if !self.queue.is_empty() {
            // advance() starts the next queued turn.
            return;
        }
        if clean && !was_in_turn && self.run.options.exit_when_idle == Some(true) {
            self.set_state(Status::Done, Phase::Exited, DONE_REASON);
            return;
        }
        if clean && !was_in_turn {
            // A per-turn CLI finished its turn, or a long-lived one exited while idle.
            if self.run.status == Status::Running {
                self.set_state(Status::Idle, Phase::Waiting, "waiting for a follow-up");
            }
            return;
        }
        if matches!(self.run.status, Status::Failed | Status::Idle) && !was_in_turn {
            return;
        }
        let lines: Vec<&str> = exit.stderr_tail.lines().collect();
        let tail = lines[lines.len().saturating_sub(5)..].join(" | ");
        let why = match (code, signal) {
            (Some(c), _) if tail.is_empty() => format!("the agent exited with code {c}"),
            (Some(c), _) => format!("the agent exited with code {c}: {tail}"),
            (None, Some(s)) => format!("the agent was killed by signal {s}"),
            _ => ended_by.unwrap_or_else(|| "the agent process ended".to_owned()),
        };
        let (status, phase) = if signal.is_some() { (Status::Crashed, Phase::Crashed) } else { (Status::Failed, Phase::Failed) };
        self.set_state(status, phase, &format!("{why}; a follow-up restarts it and resumes the session"));
    }

    /// Case V25: a process started to resume `session` failed before finishing a turn (its
    /// transcript is gone or unreadable, e.g. a restored home without it). The session is reset:
    /// the turn's text runs once more, as the next turn of a fresh session with clean arguments,
    /// and a `notice` says so. Only once: the retry resumes nothing.
    fn reset_session(&mut self, session: &str, stderr_tail: &str) {
        let last = stderr_tail.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output");
        self.run.session_id = None;
        self.dropped_session = Some(session.to_owned());
        self.save();
        let why = format!("the session {session} could not be resumed ({})", self.redactor.apply(last));
        self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice)
            .summary("the session was reset: it could not be resumed; the message runs again in a fresh session")
            .text(why)]);
        let text = std::mem::take(&mut self.turn_text);
        self.queue.push_front(text.into());
    }

    /// The stall rule (`SPACES_STALL_MS`, docs/operations.md): a turn silent for the stall limit
    /// gets a `notice`; silent for twice the limit with no tool call running, it is ended (`error`,
    /// the reason naming the limit). A silent turn whose tool call is running (a long build or
    /// test run) only ever gets notices, one per stall limit of silence.
    async fn on_stall(&mut self) {
        let silent = self.last_output.elapsed();
        let limit = Duration::from_millis(self.inner.cfg.stall_ms);
        let tool = self.norm.tool_running();
        if !self.stall_noticed || tool {
            self.stall_noticed = true;
            self.last_notice = Instant::now();
            let why = if tool { "; a tool call is running, so the turn goes on" } else { "" };
            self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice)
                .summary(format!("the agent has been silent for {} s{why}", silent.as_secs()))]);
        } else if silent >= limit * 2 {
            self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice)
                .summary(format!("the agent has been silent for {} s; ending the turn", silent.as_secs()))]);
            let why = format!("no output for {} s (stall limit)", silent.as_secs());
            self.ended_by = Some(why.clone());
            let _ = self.end_processes(STOP_GRACE).await;
            self.launcher.note_in_stderr_tail(why);
            self.last_output = Instant::now();
        }
    }

    /// Case R42: the agent closed its stdout [`OUTPUT_CLOSED_GRACE`] ago and has not exited. It
    /// can never report anything again (its answer, its tool calls, the end of its turn), so it
    /// is ended, saying why: the turn in flight ends `error` naming the closed output, and a
    /// follow-up starts a new process that resumes the session.
    async fn on_output_closed(&mut self) {
        self.output_closed_deadline = None;
        if self.proc.is_none() {
            return;
        }
        self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice)
            .summary(format!("{OUTPUT_CLOSED} ({} s after closing it); ending its process", OUTPUT_CLOSED_GRACE.as_secs()))]);
        self.ended_by = Some(OUTPUT_CLOSED.to_owned());
        self.launcher.note_in_stderr_tail(OUTPUT_CLOSED.to_owned());
        let _ = self.end_processes(STOP_GRACE).await;
    }

    fn stall_deadline(&self) -> Option<Instant> {
        if !self.norm.turn_in_flight() || self.proc.is_none() {
            return None;
        }
        let limit = Duration::from_millis(self.inner.cfg.stall_ms);
        Some(match (self.stall_noticed, self.norm.tool_running()) {
            (false, _) => self.last_output + limit,
            (true, true) => self.last_notice + limit,
            (true, false) => self.last_output + limit * 2,
        })
    }

    // ----- bookkeeping -----

    /// Store events and react to the ones that change the run's state. Everything in `drafts`
    /// is already redacted: output lines on arrival, the caller's text in `start_turn`. Blocks
    /// until committed: for the actor's rare events (notices, turn starts); output, with its
    /// journal position, goes through [`Self::append_batch`].
    fn append(&mut self, drafts: Vec<EventDraft>) {
        if drafts.is_empty() {
            return;
        }
        let ended = turns_ended(&drafts);
        if let Err(e) = self.inner.log.append_at(&self.run.run_id, drafts, None) {
            tracing::error!("run {}: events not stored: {e}", self.run.run_id);
        }
        self.after_append(ended);
    }

    /// [`Self::append`] for a batch of output, with the journal position `pos` it reaches: it joins the event writer's next group commit
    /// while the actor awaits it (no runtime thread blocks on the disk).
    async fn append_batch(&mut self, drafts: Vec<EventDraft>, pos: Option<JournalPos>) {
        if drafts.is_empty() && pos.is_none() {
            return;
        }
        let ended = turns_ended(&drafts);
        // A turn's end reaches readers only once the run's state says how it ended: a caller
        // that sees `turn_ended` and then asks for the status gets `idle` (or `failed`), never
        // the `running` of the turn that just ended. Other batches wake readers at the commit.
        let hold = !ended.is_empty();
        let stored = if hold {
            self.inner.log.append_async_unpublished(&self.run.run_id, drafts, pos).await
        } else {
            self.inner.log.append_async(&self.run.run_id, drafts, pos).await
        };
        if let Err(e) = &stored {
            tracing::error!("run {}: events not stored: {e}", self.run.run_id);
        }
        self.after_append(ended);
        if let (true, Ok(events)) = (hold, &stored) {
            self.inner.log.publish(&self.run.run_id, events);
        }
    }

    /// What stored events change: the session id, and turns that ended.
    fn after_append(&mut self, ended: Vec<(u32, StopReason, Option<String>)>) {
        if let Some(sid) = self.norm.session_id().filter(|sid| self.dropped_session.as_ref() != Some(sid)) {
            if self.run.session_id.as_deref() != Some(sid.as_str()) {
                self.run.session_id = Some(sid);
                self.save();
            }
        }
        for (turn, reason, text) in ended {
            self.on_turn_ended(turn, reason, text);
        }
    }

    fn on_turn_ended(&mut self, turn: u32, reason: StopReason, text: Option<String>) {
        if let Err(e) = self.inner.store.turn_end(&self.run.run_id, turn, reason.as_str()) {
            tracing::error!("run {}: cannot record end of turn {turn}: {e}", self.run.run_id);
        }
        if self.run.options.home.is_some() && !self.stop_requested {
            persist::save(&self.inner, &self.run, self.harness);
        }
        if self.stop_requested {
            return;
        }
        match reason {
            StopReason::EndTurn => {
                self.fast_failures = 0;
                self.resuming = None;
                self.run.result_text = text;
                self.set_state(Status::Idle, Phase::Waiting, "waiting for a follow-up");
            }
            StopReason::Interrupted => self.set_state(Status::Idle, Phase::Waiting, "the turn was interrupted; waiting for a follow-up"),
            StopReason::MaxTurns => self.set_state(Status::Idle, Phase::Waiting, "the turn hit its step limit; waiting for a follow-up"),
            StopReason::Stopped => {}
            StopReason::Error | StopReason::Crashed => {
                let why = text.unwrap_or_else(|| "the turn failed".to_owned());
                self.set_state(
                    Status::Failed,
                    if self.proc.is_some() { Phase::Waiting } else { Phase::Failed },
                    &format!("the last turn failed: {why}; a follow-up retries in the same session"),
                );
            }
        }
    }

    /// Start the next queued turn when the run can take it, or close an idle long-lived process
    /// of an `exit_when_idle` run. Called after every command and process event.
    async fn advance(&mut self) {
        if self.stop_requested || self.norm.turn_in_flight() {
            return;
        }
        // A long-lived process takes the next turn on its stdin (or a new one starts); a per-turn
        // one must be gone first.
        let long_lived = self.harness.process_model() == ProcessModel::LongLived;
        if long_lived || self.proc.is_none() {
            if let Some(next) = self.queue.pop_front() {
                self.start_turn(next).await;
                return;
            }
        }
        if long_lived
            && self.proc.is_some()
            && !self.closing
            && self.queue.is_empty()
            && self.run.options.exit_when_idle == Some(true)
            && self.run.turns > 0
        {
            self.closing = true;
            if let Some(p) = self.proc.as_mut() {
                p.stdin_open = false;
                if let Some(shim) = p.shim.clone() {
                    let _ = shim.close_stdin().await;
                }
            }
        }
    }

    fn set_state(&mut self, status: Status, phase: Phase, reason: &str) {
        let ending = matches!(status, Status::Stopped | Status::Done) && self.run.status != status;
        if ending {
            // Nothing of the run may call the daemon any more.
            self.inner.api.close(&self.run.run_id, &self.inner.cfg.run_dir(&self.run.run_id));
        }
        if ending && self.run.options.home.is_some() {
            // A persistent agent's run that stopped or finished: its home is saved one last
            // time and its lease released, so another host may take the agent.
            persist::finish(&self.inner, &self.run, self.harness);
        }
        self.run.status = status;
        self.run.phase = phase;
        self.run.reason = self.redactor.apply(reason);
        self.save();
    }

    fn save(&self) {
        if let Err(e) = self.inner.store.run_update(&self.run) {
            tracing::error!("run {}: state not saved: {e}", self.run.run_id);
        }
    }
}

/// The turns `drafts` end, with how and the final text.
fn turns_ended(drafts: &[EventDraft]) -> Vec<(u32, StopReason, Option<String>)> {
    drafts
        .iter()
        .filter(|d| d.kind == EventKind::TurnEnded)
        .map(|d| (d.turn, d.stop_reason.unwrap_or(StopReason::Error), d.text.clone()))
        .collect()
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
