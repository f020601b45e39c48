//! The actor's quota waits (issue 33): a turn the provider refused for a rate or usage limit
//! (`quota_waiting`, recognized by the harness's normalizer and `spaces_harnesses::quota`)
//! leaves the run waiting until the limit resets (the time the CLI gave, else the daemon's
//! bounded backoff, `quota_backoff_ms`); then the daemon continues the session itself with one
//! "continue" turn, and says so. A message sent meanwhile runs at once instead. The time is
//! stored with the run, so a restarted daemon keeps the appointment.

use std::time::Duration;

use spaces_harnesses::EventDraft;
use spaces_sdk::{EventKind, Phase, Status};
use tokio::time::Instant;

use super::super::keys::Queued;
use super::Actor;

/// The text of the turn the daemon sends when a provider's limit has reset.
pub const CONTINUE_TEXT: &str = "Continue where you left off: the provider's usage limit has reset.";

impl Actor {
    /// A turn ended `quota_waiting` with `why` (the CLI's words): when to continue, the run's
    /// reason, and a notice. (A turn the daemon sent to continue after an earlier wait that hits
    /// the limit again ends `error` instead: [`Self::quota_hit_again`].)
    pub(super) fn on_quota_wait(&mut self, why: Option<&str>) -> (Status, String) {
        let now = spaces_store::now_ms();
        let said = why.and_then(|w| spaces_harnesses::quota::reset_at_ms(w, now)).or(self.norm.quota_resets_at_ms());
        let at = said.filter(|at| *at > now).unwrap_or(now + self.inner.cfg.quota_backoff_ms);
        let from = if said.is_some() { "the provider's reset" } else { "no reset time was given: the daemon's backoff" };
        self.run.resets_at_ms = Some(at);
        self.quota_resume_at = Some(Instant::now() + Duration::from_millis(at - now));
        let secs = (at - now).div_ceil(1000);
        let reason = format!("waiting for the provider's limit to reset (in {secs} s, {from}); the session then continues by itself");
        self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice).summary(format!("quota waiting: {reason}"))]);
        (Status::QuotaWaiting, reason)
    }

    /// After a restart: a run stored `quota_waiting` waits for its stored time.
    pub(super) fn load_quota_wait(&mut self) {
        if let (Status::QuotaWaiting, Some(at)) = (self.run.status, self.run.resets_at_ms) {
            let left = at.saturating_sub(spaces_store::now_ms());
            self.quota_resume_at = Some(Instant::now() + Duration::from_millis(left));
        }
    }

    /// Before stored events: the daemon's "continue" turn hit the limit again. It ends `error`
    /// (the run fails, saying so) rather than wait and continue once more: no loop against a
    /// limit that does not reset.
    pub(super) fn quota_hit_again(&mut self, drafts: &mut [EventDraft]) {
        if !self.quota_continued {
            return;
        }
        for d in drafts.iter_mut().filter(|d| d.kind == EventKind::TurnEnded) {
            if d.stop_reason == Some(spaces_sdk::StopReason::QuotaWaiting) {
                d.stop_reason = Some(spaces_sdk::StopReason::Error);
                d.text = Some("the provider's limit was hit again by the turn sent after it reset; send a message to try again".into());
            }
            self.quota_continued = false;
        }
    }

    /// The limit has reset: continue the session with one turn, saying so (not when the run
    /// is at its budget: it then waits for it to be raised).
    pub(super) async fn quota_reset(&mut self) {
        self.quota_resume_at = None;
        if self.run.status != Status::QuotaWaiting {
            return;
        }
        if let Some(why) = self.budget_reached() {
            self.run.resets_at_ms = None;
            let reason = format!("the provider's limit has reset, but the run is at its budget: it {why}; raise it with agent_budget");
            self.set_state(Status::Idle, Phase::Waiting, &reason);
            return;
        }
        self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice)
            .summary("the provider's limit has reset: continuing the session with a \"continue\" turn")]);
        self.quota_continued = true;
        self.run.resets_at_ms = None;
        self.set_state(Status::Idle, Phase::Waiting, "continuing after the provider's limit reset");
        self.start_turn(Queued { text: CONTINUE_TEXT.to_owned(), key: None, n: None }).await;
    }

    /// A turn started by a caller, or one that ended otherwise: no wait is pending.
    pub(super) fn quota_wait_over(&mut self) {
        self.quota_resume_at = None;
        self.run.resets_at_ms = None;
    }
}
