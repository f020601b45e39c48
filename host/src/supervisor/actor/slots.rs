//! The actor's side of admission (issue 33, `super::super::admission`): a turn starts only with
//! a slot; without one the run waits `queued`, its turn's text kept first in its stored queue,
//! and looks again whenever a slot frees.

use spaces_harnesses::EventDraft;
use spaces_sdk::{ApiError, ErrorCode, EventKind, Phase, Status};

use super::super::admission::Take;
use super::super::keys::Queued;
use super::Actor;

impl Actor {
    /// A slot for the turn of `message`: `Some(message)` to start it now; `None` when the run
    /// waits (`message` kept first in its queue, status `queued` with its place). Every turn
    /// reaching here was accepted; a full queue refuses only at the door
    /// ([`Self::queue_full_refusal`], `Supervisor::agent_start`).
    pub(super) fn take_slot(&mut self, message: Queued) -> Option<Queued> {
        let (run_id, space) = (self.run.run_id.clone(), self.run.space.clone());
        match self.inner.admission.try_take(&self.inner.store, &run_id, &space) {
            Take::Taken => {
                self.waiting_slot = false;
                Some(message)
            }
            Take::Wait { place, waiting, why } => {
                // The reason names the place only: runs queued later do not change it.
                let first_wait = self.run.status != Status::Queued;
                self.waiting_slot = true;
                if message.n.is_some() {
                    // Its stored row stays; it goes when the turn starts.
                    self.machine.queue.push_front(message);
                } else {
                    self.keep_queued(message, true);
                }
                let reason = format!("queued: place {place} waiting for a turn slot ({why}); the turn starts when one frees");
                if first_wait {
                    self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice)
                        .summary(format!("queued for a turn slot: place {place} of {waiting} ({why})"))]);
                }
                if first_wait || reason != self.run.reason {
                    self.set_state(Status::Queued, Phase::Waiting, &reason);
                }
                None
            }
        }
    }

    /// The refusal of a message that would have to wait while the queue is full.
    pub(super) fn queue_full_refusal(&self) -> Option<ApiError> {
        let waiting = self.inner.admission.full_for(&self.run.run_id, &self.run.space)?;
        Some(ApiError::new(
            ErrorCode::ResourceQueueFull,
            format!("{waiting} runs already wait for a turn slot (the host's limit, admission_queue_max); send again once turns ended"),
        ))
    }

    /// The run's status changed to `status`: a run no longer running gives its slot back, one
    /// no longer queued leaves the queue.
    pub(super) fn slot_follows(&mut self, status: Status) {
        if status != Status::Running {
            self.inner.admission.release(&self.run.run_id);
        }
        if status != Status::Queued {
            self.waiting_slot = false;
            self.inner.admission.leave(&self.inner.store, &self.run.run_id);
        }
    }
}
