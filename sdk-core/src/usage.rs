//! Usage and budgets of runs (issue 33): what a run spent, per turn and in total, and the limit
//! it may spend (`options.budget`, `agent_budget`, `agent_usage`).
//!
//! Figures come from the usage ledger the daemon keeps: one row per ended turn, made from the
//! `usage` events of the agent's CLI. Where a CLI reports figures that add up over a process or a
//! thread (Claude Code's `total_cost_usd`, Codex's token counts), the ledger keeps the turn's own
//! share. Where a CLI gives no cost, the daemon's price table by model gives one, marked
//! `cost_estimated`.

use serde::{Deserialize, Serialize};

/// The limit of what a run may spend (`options.budget` of `agent_start`, or `agent_budget`).
/// Every field is optional; a run at or past any one of them is at its budget: the turn that
/// crosses it ends `budget_reached` (the CLI's own limit where it has one, Claude Code's
/// `--max-budget-usd`; otherwise the daemon interrupts the turn), and no new turn starts
/// (`BUDGET_REACHED`) until the budget is raised with `agent_budget`.
///
/// Refused with `INVALID_ARGUMENT` naming the field: a negative, zero or non-finite `usd`, a
/// zero `tokens` or `turns`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Budget {
    /// Most US dollars the run may spend: the CLI's own cost figure, or the daemon's estimate
    /// from its price table by model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
    /// Most tokens the run may use: input (cached and cache writes included) plus output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Most turns the run may run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turns: Option<u32>,
}

// `usd` is never NaN: `Budget::check` refuses it before a budget is stored.
impl Eq for Budget {}

impl Budget {
    /// True when no limit is set.
    pub fn is_empty(&self) -> bool {
        self.usd.is_none() && self.tokens.is_none() && self.turns.is_none()
    }

    /// The first bad field, named as the caller wrote it under `at` (`options.budget`), with why.
    pub fn check(&self, at: &str) -> Result<(), String> {
        if let Some(usd) = self.usd {
            if !usd.is_finite() || usd <= 0.0 {
                return Err(format!("{at}.usd must be a positive number of US dollars, not {usd}"));
            }
        }
        if self.tokens == Some(0) {
            return Err(format!("{at}.tokens must be at least 1"));
        }
        if self.turns == Some(0) {
            return Err(format!("{at}.turns must be at least 1"));
        }
        Ok(())
    }

    /// This budget with every field `raise` sets replaced by it.
    pub fn merged(&self, raise: &Budget) -> Budget {
        Budget { usd: raise.usd.or(self.usd), tokens: raise.tokens.or(self.tokens), turns: raise.turns.or(self.turns) }
    }

    /// Why `spent` is at or past this budget, naming the limit and the figure; `None` while
    /// it is under every limit. `turns` counts the turns that ended.
    pub fn reached(&self, spent: &UsageTotals) -> Option<String> {
        if let Some(usd) = self.usd.filter(|usd| spent.cost_usd >= *usd) {
            let estimated = if spent.cost_estimated { " (estimated)" } else { "" };
            return Some(format!("spent ${:.4}{estimated} of its ${usd} budget", spent.cost_usd));
        }
        if let Some(tokens) = self.tokens.filter(|t| spent.tokens() >= *t) {
            return Some(format!("used {} tokens of its {tokens}-token budget", spent.tokens()));
        }
        if let Some(turns) = self.turns.filter(|t| spent.turns >= *t) {
            return Some(format!("ran {} turns of its {turns}-turn budget", spent.turns));
        }
        None
    }
}

/// What runs spent: sums over ended turns (`agent_usage`, and `usage` of `agent_status` and
/// `agent_list`). Tokens are counts; `cost_usd` is US dollars; `duration_ms` is the turns' wall
/// time in ms, from start to end as the daemon saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UsageTotals {
    /// Turns counted (ended turns).
    pub turns: u32,
    /// Input tokens, cached ones and cache writes included.
    pub input_tokens: u64,
    /// Of `input_tokens`, those read from the provider's prompt cache.
    pub cached_input_tokens: u64,
    /// Output tokens (reasoning included).
    pub output_tokens: u64,
    /// US dollars: the CLI's own figure where it reports one, else the daemon's price table.
    pub cost_usd: f64,
    /// True when any part of `cost_usd` came from the daemon's price table, not the CLI.
    pub cost_estimated: bool,
    /// Turns whose cost is unknown: no CLI figure and no price for the model (not in `cost_usd`).
    pub cost_unknown_turns: u32,
    /// Wall time of the turns, ms.
    pub duration_ms: u64,
    /// Tool calls the agent made.
    pub tool_calls: u64,
}

// `cost_usd` is a sum of finite figures: never NaN.
impl Eq for UsageTotals {}

impl UsageTotals {
    /// Input plus output tokens: what a `tokens` budget counts.
    pub fn tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// Add one turn's figures.
    pub fn add(&mut self, turn: &TurnUsage) {
        self.turns += 1;
        self.input_tokens = self.input_tokens.saturating_add(turn.input_tokens);
        self.cached_input_tokens = self.cached_input_tokens.saturating_add(turn.cached_input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(turn.output_tokens);
        match turn.cost_usd {
            Some(cost) => self.cost_usd += cost,
            None => self.cost_unknown_turns += 1,
        }
        self.cost_estimated |= turn.cost_estimated;
        self.duration_ms = self.duration_ms.saturating_add(turn.duration_ms);
        self.tool_calls = self.tool_calls.saturating_add(turn.tool_calls);
    }
}

/// One ended turn in the usage ledger.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TurnUsage {
    /// The run.
    pub run_id: String,
    /// The turn (1-based).
    pub turn: u32,
    /// When the turn ended: Unix time, ms.
    pub ended_ms: u64,
    /// How the turn ended (`StopReason` spelling).
    pub stop_reason: String,
    /// The model the cost was priced at, when the daemon priced it (`cost_estimated`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Input tokens of this turn, cached ones and cache writes included.
    pub input_tokens: u64,
    /// Of `input_tokens`, those read from the prompt cache.
    pub cached_input_tokens: u64,
    /// Output tokens of this turn.
    pub output_tokens: u64,
    /// US dollars this turn cost; absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// True when `cost_usd` came from the daemon's price table.
    pub cost_estimated: bool,
    /// Wall time of the turn, ms.
    pub duration_ms: u64,
    /// Tool calls of this turn.
    pub tool_calls: u64,
}

impl Eq for TurnUsage {}

/// `agent_usage`: what one run, or every run of a Space, spent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentUsageRequest {
    /// The Space.
    pub space: String,
    /// Only this run (`run-` + hex); every run of the Space without it.
    #[serde(default)]
    pub run_id: Option<String>,
    /// Only turns that ended at or after this Unix time, ms.
    #[serde(default)]
    pub since_ms: Option<u64>,
    /// Also list each turn (`turns` of the answer); default false.
    #[serde(default)]
    pub turns: Option<bool>,
}

/// One run's figures in an [`UsageReport`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunUsage {
    /// The run.
    pub run_id: String,
    /// Its harness id.
    pub agent: String,
    /// What it spent (within `since_ms`).
    pub usage: UsageTotals,
    /// Its budget, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
}

/// The `agent_usage` answer: totals, then each run with any turn counted (newest run first),
/// then each turn when asked (oldest first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UsageReport {
    /// The sum over `runs`.
    pub totals: UsageTotals,
    /// Each run's figures.
    pub runs: Vec<RunUsage>,
    /// Each turn's row (only with `turns: true`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<TurnUsage>,
}

/// `agent_budget`: set or raise a run's budget. Fields given replace the run's; fields left out
/// keep theirs. A run at its budget takes turns again once the new budget is above what it spent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentBudgetRequest {
    /// The Space the run belongs to.
    pub space: String,
    /// The run (`run-` + hex).
    pub run_id: String,
    /// The new limit, as `options.budget`.
    pub budget: Budget,
}

/// The `agent_budget` answer: the run's budget now, what it spent, and whether it is at it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BudgetReport {
    /// The run.
    pub run_id: String,
    /// The budget now in force.
    pub budget: Budget,
    /// What the run spent so far.
    pub usage: UsageTotals,
    /// Why the run is still at its budget (it takes no turn), or absent when it is under it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reached: Option<String>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_budget_is_reached_by_the_first_limit_crossed() {
        let spent = UsageTotals { turns: 2, input_tokens: 900, output_tokens: 200, cost_usd: 0.002, ..UsageTotals::default() };
        assert_eq!(Budget { usd: Some(0.01), tokens: Some(2000), turns: Some(3) }.reached(&spent), None);
        assert!(Budget { usd: Some(0.001), ..Budget::default() }.reached(&spent).unwrap().contains("$0.0020 of its $0.001"));
        assert!(Budget { tokens: Some(1100), ..Budget::default() }.reached(&spent).unwrap().contains("1100 tokens"));
        assert!(Budget { turns: Some(2), ..Budget::default() }.reached(&spent).unwrap().contains("2 turns"));
    }

    #[test]
    fn bad_budgets_are_named() {
        assert!(Budget { usd: Some(-1.0), ..Budget::default() }.check("options.budget").unwrap_err().contains("options.budget.usd"));
        assert!(Budget { usd: Some(f64::NAN), ..Budget::default() }.check("b").is_err());
        assert!(Budget { turns: Some(0), ..Budget::default() }.check("b").unwrap_err().contains("b.turns"));
        assert!(Budget { usd: Some(0.5), tokens: Some(1), turns: Some(1) }.check("b").is_ok());
    }

    #[test]
    fn raising_keeps_what_is_not_given() {
        let b = Budget { usd: Some(1.0), turns: Some(2), ..Budget::default() };
        assert_eq!(b.merged(&Budget { usd: Some(5.0), ..Budget::default() }), Budget { usd: Some(5.0), turns: Some(2), tokens: None });
    }

    #[test]
    fn totals_count_unknown_costs_apart() {
        let mut t = UsageTotals::default();
        t.add(&TurnUsage { input_tokens: 10, output_tokens: 2, cost_usd: Some(0.5), tool_calls: 1, ..TurnUsage::default() });
        t.add(&TurnUsage { input_tokens: 5, cost_usd: None, ..TurnUsage::default() });
        assert_eq!((t.turns, t.tokens(), t.cost_usd, t.cost_unknown_turns, t.tool_calls), (2, 17, 0.5, 1, 1));
    }
}
