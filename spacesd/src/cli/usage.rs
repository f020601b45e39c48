//! `spacesd agent usage` and `spacesd agent budget`, and the usage lines of `agent status` and
//! `agent list` (issue 33): what runs spent, from the daemon's usage ledger.

use clap::Args;
use spaces_sdk::client::Client;
use spaces_sdk::{AgentBudgetRequest, AgentUsageRequest, Budget, BudgetReport, UsageReport, UsageTotals};

/// A budget on the command line: `--budget-usd`, `--budget-tokens`, `--budget-turns`.
#[derive(Debug, Clone, Default, Args)]
pub struct BudgetArgs {
    /// Most US dollars the run may spend (the CLI's own cost, or the daemon's price table).
    #[arg(long = "budget-usd", value_name = "USD")]
    pub usd: Option<f64>,
    /// Most tokens (input, cached included, plus output) the run may use.
    #[arg(long = "budget-tokens", value_name = "N")]
    pub tokens: Option<u64>,
    /// Most turns the run may run.
    #[arg(long = "budget-turns", value_name = "N")]
    pub turns: Option<u32>,
}

impl BudgetArgs {
    /// The budget given, if any field was.
    pub fn budget(&self) -> Option<Budget> {
        let b = Budget { usd: self.usd, tokens: self.tokens, turns: self.turns };
        (!b.is_empty()).then_some(b)
    }
}

/// `agent budget RUN --budget-usd ...`: set or raise the run's budget and print where it stands.
pub async fn budget(client: &Client, space: String, run_id: String, args: &BudgetArgs, json: bool) -> anyhow::Result<()> {
    let Some(budget) = args.budget() else {
        anyhow::bail!("give the new limit: --budget-usd USD, --budget-tokens N and/or --budget-turns N");
    };
    let report = client.agent_budget(&AgentBudgetRequest { space, run_id, budget }).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_budget_report(&report);
    }
    Ok(())
}

fn print_budget_report(r: &BudgetReport) {
    println!("{}: budget {}", r.run_id, budget_words(&r.budget));
    println!("  spent {}", spent_words(&r.usage));
    match &r.reached {
        Some(why) => println!("  still at its budget: it {why}; raise the limit it names"),
        None => println!("  under its budget: the run takes turns"),
    }
}

/// `agent usage`: totals, a line per run, and each turn with `--turns`.
pub async fn usage(client: &Client, req: AgentUsageRequest, json: bool) -> anyhow::Result<()> {
    let report = client.agent_usage(&req).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_usage(&req.space, &report);
    }
    Ok(())
}

fn print_usage(space: &str, r: &UsageReport) {
    if r.runs.is_empty() {
        println!("no turn has ended in Space {space} (in the time asked); usage counts ended turns");
        return;
    }
    println!("Space {space}: {}", spent_words(&r.totals));
    let header = ["RUN", "AGENT", "TURNS", "TOKENS IN", "CACHED", "OUT", "COST", "TOOLS", "BUDGET"];
    let rows: Vec<Vec<String>> = r
        .runs
        .iter()
        .map(|run| {
            let u = &run.usage;
            vec![
                run.run_id.clone(),
                run.agent.clone(),
                u.turns.to_string(),
                u.input_tokens.to_string(),
                u.cached_input_tokens.to_string(),
                u.output_tokens.to_string(),
                cost_cell(u),
                u.tool_calls.to_string(),
                run.budget.as_ref().map_or_else(|| "-".to_owned(), budget_words),
            ]
        })
        .collect();
    super::print::table(&header, &rows);
    if !r.turns.is_empty() {
        println!();
        let header = ["RUN", "TURN", "ENDED", "IN", "CACHED", "OUT", "COST", "TOOLS", "TIME"];
        let rows: Vec<Vec<String>> = r
            .turns
            .iter()
            .map(|t| {
                vec![
                    t.run_id.clone(),
                    t.turn.to_string(),
                    t.stop_reason.clone(),
                    t.input_tokens.to_string(),
                    t.cached_input_tokens.to_string(),
                    t.output_tokens.to_string(),
                    match t.cost_usd {
                        Some(c) if t.cost_estimated => format!("~${c:.4}"),
                        Some(c) => format!("${c:.4}"),
                        None => "?".to_owned(),
                    },
                    t.tool_calls.to_string(),
                    format!("{:.1}s", t.duration_ms as f64 / 1000.0),
                ]
            })
            .collect();
        super::print::table(&header, &rows);
    }
}

/// A run's cost for a table cell: `$0.0123`, `~$0.0123` when estimated, `-` with no turn.
pub fn cost_cell(u: &UsageTotals) -> String {
    if u.turns == 0 {
        return "-".to_owned();
    }
    let unknown = if u.cost_unknown_turns > 0 { "+?" } else { "" };
    let approx = if u.cost_estimated { "~" } else { "" };
    format!("{approx}${:.4}{unknown}", u.cost_usd)
}

/// What runs spent, in words: `1200 tokens in (300 cached), 45 out; $0.0123; 3 tool calls; 2
/// turns in 4.2s`.
pub fn spent_words(u: &UsageTotals) -> String {
    let unknown = if u.cost_unknown_turns > 0 { format!(" ({} turn(s) of unknown cost)", u.cost_unknown_turns) } else { String::new() };
    let estimated = if u.cost_estimated { " (estimated from the price table)" } else { "" };
    format!(
        "{} tokens in ({} cached), {} out; ${:.4}{estimated}{unknown}; {} tool call(s); {} turn(s) in {:.1}s",
        u.input_tokens,
        u.cached_input_tokens,
        u.output_tokens,
        u.cost_usd,
        u.tool_calls,
        u.turns,
        u.duration_ms as f64 / 1000.0
    )
}

/// A budget in words: `$0.5, 100000 tokens, 10 turns`.
pub fn budget_words(b: &Budget) -> String {
    let mut parts = Vec::new();
    if let Some(usd) = b.usd {
        parts.push(format!("${usd}"));
    }
    if let Some(t) = b.tokens {
        parts.push(format!("{t} tokens"));
    }
    if let Some(t) = b.turns {
        parts.push(format!("{t} turns"));
    }
    if parts.is_empty() {
        "none".to_owned()
    } else {
        parts.join(", ")
    }
}
