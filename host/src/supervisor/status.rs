//! What a caller reads about a run: its [`RunStatus`] (the stored row plus, on request, the tail
//! of its output journal) and the contract's rule for `accepts_message`.

use spaces_sdk::{RunStatus, Status, UsageTotals};
use spaces_store::runs::RunRow;

use super::journal;
use crate::config::Config;

/// The contract's rule for `accepts_message`: idle, done, crashed, failed or waiting for a
/// provider's limit (the message runs at once); never mid-turn, queued or stopped.
pub fn accepts_message(status: Status) -> bool {
    matches!(status, Status::Idle | Status::Done | Status::Crashed | Status::Failed | Status::QuotaWaiting)
}

/// The status of `run`, with the last `tail` lines of its output when asked, and `usage`, what
/// it spent (the usage ledger). A run at its budget accepts no message.
pub(super) fn status_of(cfg: &Config, run: &RunRow, tail: Option<u32>, usage: UsageTotals) -> RunStatus {
    let at_budget = run.options.budget.as_ref().is_some_and(|b| b.reached(&usage).is_some());
    RunStatus {
        run_id: run.run_id.clone(),
        agent: Some(run.agent.clone()),
        space: run.space.clone(),
        status: run.status,
        reason: run.reason.clone(),
        phase: run.phase,
        result_text: run.result_text.clone(),
        accepts_message: accepts_message(run.status) && !at_budget,
        output_tail: tail.and_then(|n| journal::tail(&cfg.run_dir(&run.run_id), n)),
        turns: run.turns,
        session_id: run.session_id.clone(),
        created_ms: run.created_ms,
        label: run.options.label.clone(),
        prompt_excerpt: run.prompt_excerpt.clone(),
        usage,
        budget: run.options.budget.clone(),
        resets_at_ms: run.resets_at_ms.filter(|_| run.status == Status::QuotaWaiting),
    }
}
