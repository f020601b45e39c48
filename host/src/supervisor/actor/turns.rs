//! The actor's turns: starting one (its commit, then its text to the agent or a new process),
//! and storing events with what they change (the session, turns that ended, the run's state).

use spaces_harnesses::{EventDraft, ExitInfo, ProcessModel};
use spaces_sdk::{EventKind, Phase, Status, StopReason};
use spaces_store::JournalPos;
use tokio::time::Instant;

use super::super::folder::folder_present;
use super::super::keys::Queued;
use super::super::launcher::Binary;
use super::super::{persist, prepare};
use super::Actor;

/// The reason of a run whose agent process is starting.
const STARTING: &str = "the agent process is starting";

impl Actor {
    /// Start the next turn with `message`; its key, if any, is stored in the turn's first
    /// commit (with the report its caller got), before the text goes to the agent.
    pub(super) async fn start_turn(&mut self, message: Queued) {
        let Some(message) = self.take_slot(message) else { return };
        let Queued { text, key, n } = message;
        // From the turn's commit until its text reached the agent (see `Inner::turn_starts`).
        let inner = self.inner.clone();
        let _starting = inner.turn_starts.read().await;
        let turn = self.run.turns + 1;
        self.run.turns = turn;
        // The agent gets the caller's text as is; what is stored is redacted (output lines are
        // redacted as they arrive, reasons in `set_state`). The normalizer gets the caller's
        // text too: a conversation harness sends it to the agent from there (`turn/start` once
        // its new process is ready); the events it makes of it are redacted here.
        let stored = self.redactor.apply(&text);
        // A run whose first turn this is with no prompt excerpt yet (a fork made at turn 0)
        // takes this one's.
        let excerpt = (turn == 1 && self.run.prompt_excerpt.is_none())
            .then(|| spaces_sdk::run::excerpt(&stored, spaces_sdk::RunStatus::PROMPT_EXCERPT_MAX));
        if excerpt.is_some() {
            self.run.prompt_excerpt.clone_from(&excerpt);
        }
        let drafts: Vec<EventDraft> = self.norm.begin_turn(turn, &text).into_iter().map(|d| redacted(d, &self.redactor)).collect();
        self.machine.turn_started(text.clone(), Instant::now());
        self.ledger.turn_started();
        // The turn's row, its first events and the run's new state: one commit, before the
        // message goes to the agent (a follow-up waits for one commit, not three). A turn that
        // starts a process says so at once (one commit less before the process starts).
        let live_shim = self.machine.process().filter(|p| p.stdin_open).and_then(|p| p.shim.clone());
        let delivered = matches!(self.harness.process_model(), ProcessModel::LongLived) && live_shim.is_some();
        self.run.status = Status::Running;
        (self.run.phase, self.run.reason) =
            if delivered { (Phase::Working, "a turn is running".to_owned()) } else { (Phase::Starting, STARTING.to_owned()) };
        let (run_id, row) = (self.run.run_id.clone(), self.run.clone());
        let ended = turns_ended(&drafts);
        let key_row = key.and_then(|(k, report)| k.row(&run_id, &report).ok());
        let stored_turn = self.inner.log.append_with(&self.run.run_id, drafts, None, move |conn| {
            spaces_store::runs::turn_start_in(conn, &run_id, turn, &stored)?;
            if let Some(excerpt) = &excerpt {
                spaces_store::runs::prompt_excerpt_in(conn, &run_id, excerpt)?;
            }
            if let Some(key) = &key_row {
                spaces_store::keys::key_keep_in(conn, key)?;
            }
            if let Some(n) = n {
                spaces_store::queued::queued_delete_in(conn, &run_id, n)?;
            }
            spaces_store::runs::run_update_in(conn, &row)
        });
        if let Err(e) = stored_turn {
            tracing::error!("run {}: cannot record turn {turn}: {e}", self.run.run_id);
        }
        self.after_append(ended);
        match (self.harness.process_model(), live_shim) {
            (ProcessModel::LongLived, Some(shim)) => self.send_turn(&shim, turn, &text).await,
            _ => self.spawn_for_turn(turn, &text).await,
        }
    }

    pub(super) async fn spawn_for_turn(&mut self, turn: u32, text: &str) {
        if prepare::pending(&self.inner, &self.run) {
            self.set_state(Status::Running, Phase::Preparing, "cloning or checking out the repository");
            if let Err(why) = prepare::prepare(&self.inner, &self.run, turn).await {
                self.fail_turn_before_start(&why.to_string());
                return;
            }
        }
        if let Err(e) = folder_present(&self.folder()) {
            self.fail_turn_before_start(&e.to_api().message);
            return;
        }
        self.checkpoint_before(turn);
        if let Some(backoff) = self.machine.backoff() {
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
                self.fail_turn_before_start(&why.to_string());
                return;
            }
        };
        if self.run.options.home.is_some() {
            self.set_state(Status::Running, Phase::Starting, "restoring the persistent agent's home");
            match persist::prepare(&self.inner, &mut self.run, self.harness).await {
                Ok(notices) => self.append(notices),
                Err(why) => {
                    self.fail_turn_before_start(&why.to_string());
                    return;
                }
            }
        }
        let usd_left = self.usd_left_for_cli();
        let traceparent = self.traceparent_env(turn);
        let launch = match self.launcher.plan(&self.run, turn, text, &binary, self.norm.as_mut(), usd_left, traceparent.as_deref()) {
            Ok(launch) => launch,
            Err(why) => {
                self.fail_turn_before_start(&why.to_string());
                return;
            }
        };
        if self.run.phase != Phase::Starting || self.run.reason != STARTING {
            self.set_state(Status::Running, Phase::Starting, STARTING);
        }
        let resuming = self.run.session_id.clone();
        match self.launcher.spawn(launch).await {
            Ok(live) => {
                self.run.pgid = Some(live.pid);
                self.machine.spawned(live, resuming);
                self.ledger.process_started();
                self.set_state(Status::Running, Phase::Working, "a turn is running");
                // After the plan's first bytes (the shim writes them first).
                self.send_outgoing().await;
            }
            Err(why) => self.fail_turn_before_start(&why.to_string()),
        }
    }

    fn fail_turn_before_start(&mut self, why: &str) {
        let drafts = self.norm.process_exited(&ExitInfo { stderr_tail: why.to_owned(), ..ExitInfo::default() });
        self.append(drafts);
        let dropped = self.machine.drop_queue();
        self.queue_dropped(dropped, "the agent could not start");
        self.set_state(Status::Failed, Phase::Failed, &format!("the agent could not start: {why}"));
    }

    // ----- bookkeeping -----

    /// Store events and react to the ones that change the run's state. Everything in `drafts`
    /// is already redacted: output lines on arrival, the caller's text in `start_turn`. Blocks
    /// until committed: for the actor's rare events (notices, turn starts); output, with its
    /// journal position, goes through [`Self::append_batch`].
    pub(super) fn append(&mut self, mut drafts: Vec<EventDraft>) {
        if drafts.is_empty() {
            return;
        }
        self.note_checkpoints(&mut drafts);
        self.note_spending(&mut drafts);
        let ended = turns_ended(&drafts);
        if self.unstored.is_empty() {
            // Kept for a full disk (`unstored.rs`): the actor's own events are few and small.
            let kept = drafts.clone();
            if let Err(e) = self.inner.log.append_at(&self.run.run_id, drafts, None) {
                self.not_stored(e, kept, None);
            }
        } else {
            // After the ones a full disk holds; the loop stores them in order.
            self.unstored.hold(drafts, None);
        }
        self.after_append(ended);
    }

    /// [`Self::append`] for a batch of output, with the journal position `pos` it reaches: it joins the event writer's next group commit
    /// while the actor awaits it (no runtime thread blocks on the disk).
    pub(super) async fn append_batch(&mut self, mut drafts: Vec<EventDraft>, pos: Option<JournalPos>) {
        if drafts.is_empty() && pos.is_none() {
            return;
        }
        self.note_checkpoints(&mut drafts);
        self.note_spending(&mut drafts);
        let ended = turns_ended(&drafts);
        if !self.unstored.is_empty() {
            self.unstored.hold(drafts, pos);
            self.store_unstored().await;
            self.after_append(ended);
            return;
        }
        // A turn's end reaches readers only once the run's state says how it ended: a caller
        // that sees `turn_ended` and then asks for the status gets `idle` (or `failed`), never
        // the `running` of the turn that just ended. Other batches wake readers at the commit.
        let hold = !ended.is_empty();
        // Kept until committed, for a full disk (`unstored.rs`): a copy costs far less than
        // the batch's compression and commit.
        let kept = drafts.clone();
        let stored = if hold {
            self.inner.log.append_async_unpublished(&self.run.run_id, drafts, pos).await
        } else {
            self.inner.log.append_async(&self.run.run_id, drafts, pos).await
        };
        let stored = stored.map_err(|e| self.not_stored(e, kept, pos));
        self.after_append(ended);
        if let (true, Ok(events)) = (hold, &stored) {
            self.inner.log.publish(&self.run.run_id, events);
        }
    }

    /// What stored events change: the session id, and turns that ended.
    fn after_append(&mut self, ended: Vec<(u32, StopReason, Option<String>)>) {
        let dropped = &self.machine.dropped_session;
        if let Some(sid) = self.norm.session_id().filter(|sid| dropped.as_ref() != Some(sid)) {
            if self.run.session_id.as_deref() != Some(sid.as_str()) {
                self.run.session_id = Some(sid);
                self.save();
                // A rewind's or fork's launch named its new session: its point was used.
                super::clear_rewind_point(&self.inner.cfg.run_dir(&self.run.run_id));
            }
        }
        for (turn, reason, text) in ended {
            self.on_turn_ended(turn, reason, text);
        }
    }

    fn on_turn_ended(&mut self, turn: u32, reason: StopReason, text: Option<String>) {
        self.record_turn_end(turn, reason);
        let (save_home, change) = self.machine.turn_ended(reason, text.as_deref());
        if save_home {
            persist::save(&self.inner, &self.run, self.harness);
        }
        if let Some(change) = change {
            if reason == StopReason::EndTurn {
                self.run.result_text = text.clone();
            }
            if reason == StopReason::QuotaWaiting {
                let (status, why) = self.on_quota_wait(text.as_deref());
                self.set_state(status, change.phase, &why);
            } else {
                self.set_state(change.status, change.phase, &change.reason);
            }
        }
        self.after_turn_budget();
    }

    pub(super) fn set_state(&mut self, status: Status, phase: Phase, reason: &str) {
        let ending = matches!(status, Status::Stopped | Status::Done) && self.run.status != status;
        if ending {
            // Nothing of the run may call the daemon any more.
            self.inner.api.close(&self.run.run_id, &self.inner.cfg.run_dir(&self.run.run_id));
        }
        if ending {
            self.trace_run_end();
        }
        if ending && self.run.options.home.is_some() {
            // A persistent agent's run that stopped or finished: its home is saved one last
            // time and its lease released, so another host may take the agent.
            persist::finish(&self.inner, &self.run, self.harness);
        }
        self.slot_follows(status);
        if status != Status::QuotaWaiting {
            // No "continue" is pending for a run in any other state.
            self.quota_wait_over();
        }
        self.run.status = status;
        self.run.phase = phase;
        self.run.reason = self.redactor.apply(reason);
        self.save();
    }

    pub(super) fn save(&self) {
        if let Err(e) = self.inner.store.run_update(&self.run) {
            tracing::error!("run {}: state not saved: {e}", self.run.run_id);
        }
    }
}

/// `draft` with every text of it that may carry the caller's words redacted.
pub(super) fn redacted(mut draft: EventDraft, redactor: &spaces_os::redact::Redactor) -> EventDraft {
    for field in [&mut draft.text, &mut draft.summary, &mut draft.raw] {
        if let Some(value) = field.as_mut() {
            *value = redactor.apply(value);
        }
    }
    draft
}

/// The turns `drafts` end, with how and the final text.
fn turns_ended(drafts: &[EventDraft]) -> Vec<(u32, StopReason, Option<String>)> {
    drafts
        .iter()
        .filter(|d| d.kind == EventKind::TurnEnded)
        .map(|d| (d.turn, d.stop_reason.unwrap_or(StopReason::Error), d.text.clone()))
        .collect()
}
