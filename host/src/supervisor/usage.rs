//! `agent_usage` (issue 33): the usage ledger's rows summed per run and in total, for one run or
//! every run of a Space, and the totals `agent_status` and `agent_list` carry.

use std::collections::HashMap;

use spaces_sdk::{AgentUsageRequest, RunUsage, UsageReport, UsageTotals};
use spaces_store::usage::LedgerRow;
use spaces_store::Store;

use super::registry;
use crate::error::Result;

/// The sum of `rows`.
pub(super) fn totals(rows: &[LedgerRow]) -> UsageTotals {
    let mut t = UsageTotals::default();
    rows.iter().for_each(|r| t.add(&r.usage));
    t
}

/// The sums of `rows` by run id.
pub(super) fn totals_by_run(rows: &[LedgerRow]) -> HashMap<String, UsageTotals> {
    let mut by_run: HashMap<String, UsageTotals> = HashMap::new();
    for r in rows {
        by_run.entry(r.usage.run_id.clone()).or_default().add(&r.usage);
    }
    by_run
}

/// `agent_usage`: `req.run_id`'s turns, or every run of `req.space`'s, that ended at or after
/// `since_ms`; runs newest first, turns (with `turns: true`) oldest first. Errors:
/// `WORKSPACE_NOT_FOUND`, `RUN_NOT_FOUND` (a run of another Space too).
pub(super) fn report(store: &Store, req: &AgentUsageRequest) -> Result<UsageReport> {
    let since = req.since_ms.unwrap_or(0);
    let runs = match &req.run_id {
        Some(run_id) => vec![registry::run_in_space(store, &req.space, run_id)?],
        None => {
            registry::space(store, &req.space)?;
            store.run_list(&req.space)?
        }
    };
    let rows: Vec<LedgerRow> = match &req.run_id {
        Some(run_id) => store.usage_of_run(run_id)?.into_iter().filter(|r| r.usage.ended_ms >= since).collect(),
        None => store.usage_of_space(&req.space, since)?,
    };
    let mut by_run = totals_by_run(&rows);
    let mut report = UsageReport { totals: totals(&rows), runs: Vec::new(), turns: Vec::new() };
    for run in runs {
        if let Some(usage) = by_run.remove(&run.run_id) {
            report.runs.push(RunUsage { run_id: run.run_id, agent: run.agent, usage, budget: run.options.budget });
        }
    }
    if req.turns == Some(true) {
        report.turns = rows.into_iter().map(|r| r.usage).collect();
    }
    Ok(report)
}
