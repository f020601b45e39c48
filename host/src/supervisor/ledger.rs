//! One run's usage ledger in memory (issue 33): what the turn in flight has done so far, what
//! the ended turns spent, and the running totals the CLI last reported, so each turn's row keeps
//! its own share ([`spaces_harnesses::UsageTally`]). The rows themselves live in the store
//! (`spaces_store::usage`); a restarted daemon loads them back ([`Ledger::load`]).
//!
//! Pure: no I/O. The actor feeds it the events it stores and asks it for the row of each ended
//! turn and for what the run spent, ended turns plus the turn in flight, to check its budget.

use spaces_harnesses::{EventDraft, Tally, UsageTally};
use spaces_sdk::{Budget, EventKind, StopReason, TurnUsage, Usage, UsageTotals};
use spaces_store::usage::LedgerRow;

use crate::prices::{Billed, PriceTable};

/// The ledger of one run.
#[derive(Debug, Clone)]
pub struct Ledger {
    tally: UsageTally,
    /// What ended turns spent.
    spent: UsageTotals,
    /// The CLI's running totals as last reported (for [`Tally::Thread`] and
    /// [`Tally::Process`] figures).
    base: Usage,
    /// The turn in flight: its tool calls and its last `usage` event.
    tool_calls: u64,
    last_usage: Option<Usage>,
}

/// One turn's own share of the CLI's figures.
#[derive(Debug, Clone, Default, PartialEq)]
struct Share {
    input: u64,
    cached: u64,
    output: u64,
    cost: Option<f64>,
    estimated: bool,
}

impl Ledger {
    /// The ledger of a run whose ended turns are `rows` (oldest first), for a CLI counting as
    /// `tally`.
    pub fn load(tally: UsageTally, rows: &[LedgerRow]) -> Ledger {
        let mut spent = UsageTotals::default();
        let mut base = Usage::default();
        for row in rows {
            spent.add(&row.usage);
            keep_running(&mut base, &row.reported);
        }
        Ledger { tally, spent, base, tool_calls: 0, last_usage: None }
    }

    /// A new agent process started: running totals over the process start again from zero.
    pub fn process_started(&mut self) {
        if self.tally.cost == Some(Tally::Process) {
            self.base.total_cost_usd = None;
        }
        if self.tally.tokens == Tally::Process {
            self.base = Usage { total_cost_usd: self.base.total_cost_usd, ..Usage::default() };
        }
    }

    /// A turn started: nothing of it is counted yet.
    pub fn turn_started(&mut self) {
        self.tool_calls = 0;
        self.last_usage = None;
    }

    /// Stored events of the turn in flight: tool calls are counted, the last `usage` kept.
    pub fn saw(&mut self, drafts: &[EventDraft]) {
        for d in drafts {
            match d.kind {
                EventKind::ToolCall => self.tool_calls += 1,
                EventKind::Usage => self.last_usage = d.usage.clone().or(self.last_usage.take()),
                _ => {}
            }
        }
    }

    /// The row of turn `turn` that just ended `stop_reason`, priced at `model` where the CLI
    /// gave no cost. Its `ended_ms` and `duration_ms` are filled in as it is stored
    /// (`Store::turn_end_counted`); [`Self::count`] then adds it to what the run spent.
    pub fn close(&mut self, run_id: &str, turn: u32, stop_reason: StopReason, model: Option<&str>, prices: &PriceTable) -> LedgerRow {
        let reported = self.last_usage.take().unwrap_or_default();
        let share = self.share(&reported, model, prices);
        keep_running(&mut self.base, &reported);
        let usage = TurnUsage {
            run_id: run_id.to_owned(),
            turn,
            ended_ms: spaces_store::now_ms(),
            stop_reason: stop_reason.as_str().to_owned(),
            model: model.filter(|_| share.estimated).map(str::to_owned),
            input_tokens: share.input,
            cached_input_tokens: share.cached,
            output_tokens: share.output,
            cost_usd: share.cost,
            cost_estimated: share.estimated,
            duration_ms: 0,
            tool_calls: std::mem::take(&mut self.tool_calls),
        };
        LedgerRow { usage, reported }
    }

    /// Add a closed turn's figures (see [`Self::close`]) to what the run spent.
    pub fn count(&mut self, usage: &TurnUsage) {
        self.spent.add(usage);
    }

    /// What the ended turns spent.
    pub fn spent(&self) -> &UsageTotals {
        &self.spent
    }

    /// What the run spent with the turn in flight so far: the ended turns plus `so_far`, the
    /// CLI's figures reported mid-turn ([`spaces_harnesses::Normalizer::usage_so_far`]).
    pub fn spent_with(&self, so_far: &Usage, model: Option<&str>, prices: &PriceTable) -> UsageTotals {
        let share = self.share(so_far, model, prices);
        let mut spent = self.spent.clone();
        spent.add(&TurnUsage {
            input_tokens: share.input,
            cached_input_tokens: share.cached,
            output_tokens: share.output,
            cost_usd: share.cost,
            cost_estimated: share.estimated,
            tool_calls: self.tool_calls,
            ..TurnUsage::default()
        });
        spent
    }

    /// What `budget` leaves to spend in dollars (at least 0), when it has a `usd` limit.
    pub fn usd_left(&self, budget: &Budget) -> Option<f64> {
        budget.usd.map(|usd| (usd - self.spent.cost_usd).max(0.0))
    }

    fn share(&self, reported: &Usage, model: Option<&str>, prices: &PriceTable) -> Share {
        let t = self.tally.tokens;
        let input = part(reported.input_tokens, self.base.input_tokens, t);
        let cached = part(reported.cached_input_tokens, self.base.cached_input_tokens, t);
        let writes = part(reported.cache_creation_input_tokens, self.base.cache_creation_input_tokens, t);
        let output = part(reported.output_tokens, self.base.output_tokens, t);
        let billed = if self.tally.input_includes_cached {
            Billed { input: input.saturating_sub(cached), cached_input: cached, cache_write: 0, output }
        } else {
            Billed { input, cached_input: cached, cache_write: writes, output }
        };
        let total_input = billed.input + billed.cached_input + billed.cache_write;
        let (cost, estimated) = match reported.total_cost_usd {
            Some(cost) => (Some(since_base(cost, self.base.total_cost_usd, self.tally.cost.unwrap_or(Tally::Turn))), false),
            None if total_input + output == 0 => (Some(0.0), false),
            None => match model.and_then(|m| prices.cost(m, billed)) {
                Some(cost) => (Some(cost), true),
                None => (None, false),
            },
        };
        Share { input: total_input, cached, output, cost, estimated }
    }
}

/// A turn's share of a figure the CLI counts over `tally`: the figure itself, or its growth
/// since `base`; a running total smaller than its base started again (a new thread or
/// process), and counts whole.
fn part(cur: Option<u64>, base: Option<u64>, tally: Tally) -> u64 {
    since_base(cur.unwrap_or(0), base, tally)
}

/// [`part`] for any figure (tokens, dollars).
fn since_base<T: Copy + PartialOrd + std::ops::Sub<Output = T>>(cur: T, base: Option<T>, tally: Tally) -> T {
    match (tally, base) {
        (Tally::Turn, _) | (_, None) => cur,
        (_, Some(base)) if cur >= base => cur - base,
        _ => cur,
    }
}

/// Keep the figures `reported` gives as the running totals to count the next turn from.
fn keep_running(base: &mut Usage, reported: &Usage) {
    let keep = |b: &mut Option<u64>, r: Option<u64>| {
        if r.is_some() {
            *b = r;
        }
    };
    keep(&mut base.input_tokens, reported.input_tokens);
    keep(&mut base.cached_input_tokens, reported.cached_input_tokens);
    keep(&mut base.cache_creation_input_tokens, reported.cache_creation_input_tokens);
    keep(&mut base.output_tokens, reported.output_tokens);
    if reported.total_cost_usd.is_some() {
        base.total_cost_usd = reported.total_cost_usd;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const CLAUDE: UsageTally =
        UsageTally { tokens: Tally::Turn, cost: Some(Tally::Process), input_includes_cached: false, usd_limit: true };
    const CODEX: UsageTally = UsageTally { tokens: Tally::Thread, cost: None, input_includes_cached: true, usd_limit: false };

    fn usage_event(u: Usage) -> EventDraft {
        let mut d = EventDraft::new(1, EventKind::Usage);
        d.usage = Some(u);
        d
    }

    fn turn(l: &mut Ledger, n: u32, u: Usage, prices: &PriceTable, model: Option<&str>) -> LedgerRow {
        l.turn_started();
        l.saw(&[EventDraft::new(n, EventKind::ToolCall), usage_event(u)]);
        let mut row = l.close("run-1", n, StopReason::EndTurn, model, prices);
        row.usage.duration_ms = 10;
        l.count(&row.usage);
        row
    }

    #[test]
    fn claude_cost_adds_up_over_its_process_and_starts_again_with_a_new_one() {
        let p = PriceTable::default();
        let mut l = Ledger::load(CLAUDE, &[]);
        let u = |i, c| Usage {
            input_tokens: Some(i),
            cached_input_tokens: Some(2),
            output_tokens: Some(3),
            total_cost_usd: Some(c),
            ..Usage::default()
        };
        let r1 = turn(&mut l, 1, u(10, 0.5), &p, None);
        let r2 = turn(&mut l, 2, u(20, 0.75), &p, None);
        assert_eq!((r1.usage.input_tokens, r1.usage.cost_usd), (12, Some(0.5)));
        assert_eq!((r2.usage.input_tokens, r2.usage.cost_usd), (22, Some(0.25)));
        // A restarted daemon loads the rows and goes on where they were (the same process).
        let mut again = Ledger::load(CLAUDE, &[r1.clone(), r2.clone()]);
        assert_eq!(turn(&mut again, 3, u(1, 1.0), &p, None).usage.cost_usd, Some(0.25));
        // A new process counts from zero.
        again.process_started();
        assert_eq!(turn(&mut again, 4, u(1, 0.125), &p, None).usage.cost_usd, Some(0.125));
        assert_eq!(again.spent().turns, 4);
        assert_eq!(again.spent().cost_usd, 1.125);
        assert_eq!(again.spent().tool_calls, 4);
    }

    #[test]
    fn codex_tokens_add_up_over_the_thread_and_are_priced_by_model() {
        let mut o = std::collections::BTreeMap::new();
        o.insert("m".to_owned(), crate::prices::Price { input: 1e6, output: 2e6, cached_input: Some(0.0), cache_write: None });
        let p = PriceTable::with(&o);
        let mut l = Ledger::load(CODEX, &[]);
        let u = |i, c, out| Usage { input_tokens: Some(i), cached_input_tokens: Some(c), output_tokens: Some(out), ..Usage::default() };
        let r1 = turn(&mut l, 1, u(100, 0, 10), &p, Some("m"));
        let r2 = turn(&mut l, 2, u(250, 100, 15), &p, Some("m"));
        assert_eq!((r1.usage.input_tokens, r1.usage.output_tokens, r1.usage.cost_usd), (100, 10, Some(120.0)));
        assert_eq!((r2.usage.input_tokens, r2.usage.cached_input_tokens, r2.usage.output_tokens), (150, 100, 5));
        assert_eq!(r2.usage.cost_usd, Some(50.0 + 10.0));
        assert!(r2.usage.cost_estimated && r2.usage.model.as_deref() == Some("m"));
        // Mid-turn figures count on top of the ended turns.
        let spent = l.spent_with(&u(300, 100, 20), Some("m"), &p);
        assert_eq!(spent.input_tokens, 300);
        // An unpriced model's cost is unknown, never zero.
        let r3 = turn(&mut l, 3, u(300, 100, 20), &p, Some("unknown"));
        assert_eq!(r3.usage.cost_usd, None);
        assert_eq!(l.spent().cost_unknown_turns, 1);
    }
}
