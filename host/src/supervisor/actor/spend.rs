//! The actor's usage and budget (issue 33): each ended turn's row in the usage ledger, the
//! budget check mid-turn (the daemon interrupts the turn that crosses it where the CLI has no
//! limit of its own) and before a turn starts (`BUDGET_REACHED`), and `agent_budget`.

use spaces_harnesses::EventDraft;
use spaces_sdk::{ApiError, Budget, BudgetReport, ErrorCode, EventKind, Phase, Status, StopReason};

use super::super::ledger::Ledger;
use super::Actor;

impl Actor {
    /// The run's ledger, loaded from the store.
    pub(super) fn load_ledger(&mut self) {
        let rows = self.inner.store.usage_of_run(&self.run.run_id).unwrap_or_else(|e| {
            tracing::error!("run {}: usage ledger not read: {e}", self.run.run_id);
            Vec::new()
        });
        self.ledger = Ledger::load(self.harness.usage_tally(), &rows);
    }

    /// What the run's budget leaves in dollars, for a CLI that keeps the limit itself.
    pub(super) fn usd_left_for_cli(&self) -> Option<f64> {
        if !self.harness.usage_tally().usd_limit {
            return None;
        }
        self.run.options.budget.as_ref().and_then(|b| self.ledger.usd_left(b))
    }

    /// Why the run is at its budget (no turn may start), if it is.
    pub(super) fn budget_reached(&self) -> Option<String> {
        self.run.options.budget.as_ref().and_then(|b| b.reached(self.ledger.spent()))
    }

    /// The refusal of a turn while the run is at its budget.
    pub(super) fn budget_refusal(&self) -> Option<ApiError> {
        self.budget_reached().map(|why| {
            ApiError::new(
                ErrorCode::BudgetReached,
                format!("the run is at its budget: it {why}; raise it (agent_budget, `spacesd agent budget`) to run another turn"),
            )
        })
    }

    /// Before stored events: a turn the daemon interrupted for the budget ends `budget_reached`;
    /// then the ledger sees them.
    pub(super) fn note_spending(&mut self, drafts: &mut [EventDraft]) {
        self.quota_hit_again(drafts);
        if let Some(why) = &self.budget_interrupt {
            for d in drafts.iter_mut().filter(|d| d.kind == EventKind::TurnEnded && d.stop_reason == Some(StopReason::Interrupted)) {
                d.stop_reason = Some(StopReason::BudgetReached);
                d.text = Some(format!("the run reached its budget: it {why}; the daemon interrupted the turn"));
            }
        }
        self.ledger.saw(drafts);
        self.trace_events(drafts);
    }

    /// Turn `turn` ended `reason`: its end and its ledger row are stored in one write (the
    /// store's one writer is what a follow-up waits behind under load), and it counts toward
    /// the budget.
    pub(super) fn record_turn_end(&mut self, turn: u32, reason: StopReason) {
        self.budget_interrupt = None;
        let row = self.ledger.close(&self.run.run_id, turn, reason, self.run.options.model.as_deref(), &self.inner.cfg.prices);
        let row = self.inner.store.turn_end_counted(row.clone()).unwrap_or_else(|e| {
            tracing::error!("run {}: end and usage of turn {turn} not recorded: {e}", self.run.run_id);
            row
        });
        self.ledger.count(&row.usage);
        self.trace_turn(&row.usage, row.usage.duration_ms);
    }

    /// After a turn's end changed the run's state: a run now at its budget says so, and drops
    /// what was queued (it could not run).
    pub(super) fn after_turn_budget(&mut self) {
        let Some(why) = self.budget_reached() else { return };
        let n = self.machine.drop_queue();
        self.queue_dropped(n, "the run reached its budget");
        self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice)
            .summary(format!("budget reached: the run {why}; it takes no turn until the budget is raised (agent_budget)"))]);
        if self.run.status == Status::Idle {
            let reason = format!("at its budget: the run {why}; raise it with agent_budget to run another turn");
            self.set_state(Status::Idle, self.run.phase, &reason);
        }
    }

    /// Mid-turn: when the CLI's figures so far put the run at its budget and the CLI keeps no
    /// limit of its own for it, interrupt the turn (once).
    pub(super) async fn check_budget_mid_turn(&mut self) {
        let Some(budget) = self.run.options.budget.clone() else { return };
        if self.budget_interrupt.is_some() || !self.norm.turn_in_flight() {
            return;
        }
        let Some(so_far) = self.norm.usage_so_far() else { return };
        let spent = self.ledger.spent_with(&so_far, self.run.options.model.as_deref(), &self.inner.cfg.prices);
        let Some(why) = (Budget { turns: None, ..budget }).reached(&spent) else { return };
        self.budget_interrupt = Some(why.clone());
        self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice)
            .summary(format!("budget reached mid-turn: the run {why}; interrupting the turn"))]);
        let report = self.on_interrupt().await;
        if !report.ok {
            tracing::warn!("run {}: budget interrupt not sent: {}", self.run.run_id, report.reason);
        }
    }

    /// `agent_budget`: the run's budget with the fields of `raise` replaced. Errors:
    /// `INVALID_ARGUMENT` naming the bad field.
    pub(super) fn on_budget(&mut self, raise: Budget) -> Result<BudgetReport, ApiError> {
        raise.check("budget").map_err(|why| ApiError::new(ErrorCode::InvalidArgument, why).with_field("budget"))?;
        let was = self.budget_reached();
        let budget = self.run.options.budget.clone().unwrap_or_default().merged(&raise);
        self.run.options.budget = Some(budget.clone());
        if let Err(e) = self.inner.store.run_set_options(&self.run.run_id, &self.run.options) {
            return Err(ApiError::new(ErrorCode::Internal, format!("the budget was not stored: {e}")));
        }
        if self.harness.usage_tally().usd_limit {
            // Its live process keeps the limit it was started with: the next turn starts a new
            // one (resuming the session) with the new one.
            self.machine.renew_process();
        }
        let reached = self.budget_reached();
        if was.is_some() && reached.is_none() && self.run.status == Status::Idle {
            self.append(vec![EventDraft::new(self.run.turns, EventKind::Notice).summary("budget raised: the run takes turns again")]);
            self.set_state(Status::Idle, Phase::Waiting, "waiting for a message (the budget was raised)");
        }
        Ok(BudgetReport { run_id: self.run.run_id.clone(), budget, usage: self.ledger.spent().clone(), reached })
    }
}
