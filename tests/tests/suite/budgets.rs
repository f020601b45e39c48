//! Issue 33: runs as a budgeted resource, on the real CLIs against the scripted model.
//!
//! - The usage ledger adds up each harness's figures over two turns and a `kill -9` of the
//!   daemon, the same through HTTP, the CLI, MCP and the Rust client.
//! - A budget of $0.001 ends the turn `budget_reached`: Claude Code by its own
//!   `--max-budget-usd` (the native path), Codex by the daemon's interrupt (its
//!   `thread/tokenUsage/updated` priced by the operator's table); the run then refuses turns
//!   (`BUDGET_REACHED`) until `agent_budget` raises it, and the next turn runs.

use std::time::Duration;

use serde_json::{json, Value};
use spaces_sdk::{AgentStartRequest, AgentUsageRequest, Budget, ErrorCode, SpaceAgentOptions, Status, StopReason, UsageReport};
use spaces_testkit::{Reply, Script, ScriptedServer, Wire};

use super::harness::{CLAUDE, CODEX, CODEX_APP_SERVER, GEMINI, H, OPENCODE};
use crate::support::mcp::{Mcp, StdioMcp};
use crate::support::{describe, require_cli, settled, TestDaemon};

const TURN: Duration = Duration::from_secs(120);

/// The model name Codex runs are started with, and its price in the daemon's table: dollars per
/// million tokens, large enough that a few hundred scripted tokens cross $0.001.
const MODEL: &str = "spaces-scripted";
const PRICES: &str = r#"{"prices": {"spaces-scripted": {"input": 10.0, "output": 40.0}}}"#;

/// A daemon whose `config.json` prices [`MODEL`], and a Space `s`.
async fn daemon() -> (TestDaemon, std::path::PathBuf) {
    let mut d = TestDaemon::start().await;
    std::fs::write(d.state_dir().join("config.json"), PRICES).unwrap();
    d.restart().await;
    let root = d.space("s").await;
    (d, root)
}

fn options(h: H, server: &ScriptedServer, budget: Option<Budget>) -> SpaceAgentOptions {
    let model = (h.wire != Wire::AnthropicMessages).then(|| MODEL.to_owned());
    SpaceAgentOptions { base_url: Some(server.base_url()), model, budget, ..Default::default() }
}

async fn start(d: &TestDaemon, h: H, server: &ScriptedServer, prompt: &str, budget: Option<Budget>) -> String {
    let req = AgentStartRequest {
        space: "s".into(),
        agent: h.id.into(),
        prompt: prompt.into(),
        show: None,
        options: Some(options(h, server, budget)),
        request_id: None,
        traceparent: None,
    };
    d.client.agent_start(&req).await.unwrap().run_id
}

async fn usage(d: &TestDaemon, run: &str) -> UsageReport {
    let req = AgentUsageRequest { space: "s".into(), run_id: Some(run.into()), since_ms: None, turns: Some(true) };
    d.client.agent_usage(&req).await.unwrap()
}

/// The input tokens the scripted model reported over all its calls so far: Claude's wire reports
/// 12 a call; the others 100 + 10 per item of the request's history (Responses `input`, Chat
/// `messages`, Gemini `contents`).
fn tokens_served(h: H, server: &ScriptedServer) -> u64 {
    let items = |c: &spaces_testkit::RecordedRequest, key: &str| c.json.as_ref().and_then(|j| j[key].as_array()).map_or(0, Vec::len) as u64;
    server
        .model_calls()
        .iter()
        .map(|c| match h.wire {
            Wire::AnthropicMessages => 12,
            Wire::OpenAiResponses => 100 + 10 * items(c, "input"),
            Wire::OpenAiChatCompletions => 100 + 10 * items(c, "messages"),
            Wire::GeminiStreamGenerateContent => 100 + 10 * items(c, "contents"),
        })
        .sum()
}

/// Turns 1 and 2, a kill -9 of the daemon, turn 3: the ledger has one row per turn, each its own
/// share (Codex reports thread totals), their sum is the run's total, and the total input is
/// what the model reported; HTTP, the CLI, MCP and the client agree on it.
async fn usage_adds_up_across_turns_and_a_restart(h: H) {
    require_cli(h.tools, h.binary);
    let script = Script::new(["one", "two", "three"].map(|t| Reply::Text(format!("answer {t}"))));
    let server = ScriptedServer::start(h.wire, script).await.unwrap();
    let (mut d, _root) = daemon().await;
    let run = start(&d, h, &server, "say one", None).await;
    d.wait_turn_end("s", &run, 1, TURN).await;
    d.wait_status("s", &run, TURN, settled).await;
    d.client.space("s").agent_message(&run, "say two", None).await.unwrap();
    d.wait_turn_end("s", &run, 2, TURN).await;
    d.wait_status("s", &run, TURN, settled).await;
    let two = usage(&d, &run).await;
    assert_eq!(two.turns.len(), 2, "{two:#?}");
    assert_eq!(two.totals.input_tokens, tokens_served(h, &server), "{two:#?}\n{}", describe(&d.events("s", &run).await));
    assert!(two.turns.iter().all(|t| t.input_tokens > 0 && t.output_tokens > 0), "each turn its own share: {two:#?}");
    assert!(two.totals.cost_usd > 0.0 && two.totals.cost_unknown_turns == 0, "{two:#?}");
    assert_eq!(
        two.totals.cost_estimated,
        h.wire != Wire::AnthropicMessages,
        "only Claude Code reports a cost; the others' is priced: {two:#?}"
    );

    d.restart().await;
    assert_eq!(usage(&d, &run).await, two, "the ledger is durable");
    d.client.space("s").agent_message(&run, "say three", None).await.unwrap();
    d.wait_turn_end("s", &run, 3, TURN).await;
    let st = d.wait_status("s", &run, TURN, settled).await;
    let three = usage(&d, &run).await;
    assert_eq!(three.turns.len(), 3, "{three:#?}");
    assert_eq!(three.totals.input_tokens, tokens_served(h, &server), "a restarted daemon counts on: {three:#?}");
    let mut sum = spaces_sdk::UsageTotals::default();
    three.turns.iter().for_each(|t| sum.add(t));
    assert_eq!(three.totals, sum, "the totals are the sum of the turns");
    assert_eq!(three.runs.len(), 1);
    assert_eq!(st.usage, three.totals, "agent_status carries the totals");

    // The same figures through every door.
    let totals = serde_json::to_value(&three.totals).unwrap();
    let (code, body) = d.raw("GET", &format!("/v1/spaces/s/usage?run_id={run}"), None);
    assert_eq!(code, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["totals"], totals, "HTTP");
    let (ok, out) = d.cli(&["agent", "usage", &run, "--space", "s", "--json"]);
    assert!(ok, "{out}");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["totals"], totals, "CLI agent usage");
    let (ok, out) = d.cli(&["agent", "status", &run, "--space", "s", "--json"]);
    assert!(ok, "{out}");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["usage"], totals, "CLI agent status");
    let (ok, out) = d.cli(&["agent", "list", "--space", "s", "--json"]);
    assert!(ok, "{out}");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()[0]["usage"], totals, "CLI agent list");
    let mut m = StdioMcp::start(&d.state_dir(), &[], &d.dir.path().join("mcp-stderr.log"));
    m.initialize();
    assert_eq!(m.ok("agent_usage", json!({"space": "s", "run_id": run}))["totals"], totals, "MCP");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_usage_adds_up_across_turns_and_a_restart() {
    usage_adds_up_across_turns_and_a_restart(CLAUDE).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_usage_adds_up_across_turns_and_a_restart() {
    usage_adds_up_across_turns_and_a_restart(CODEX_APP_SERVER).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_exec_usage_adds_up_across_turns_and_a_restart() {
    usage_adds_up_across_turns_and_a_restart(CODEX).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_usage_adds_up_across_turns_and_a_restart() {
    usage_adds_up_across_turns_and_a_restart(OPENCODE).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_usage_adds_up_across_turns_and_a_restart() {
    usage_adds_up_across_turns_and_a_restart(GEMINI).await
}

/// A shell command the model asks for again and again: a runaway loop only a budget ends.
fn busy_tool(h: H) -> Reply {
    match h.wire {
        Wire::AnthropicMessages => {
            Reply::ToolCall { name: "Bash".into(), input: json!({"command": "sleep 1; echo step", "description": "a step"}) }
        }
        _ => Reply::ToolCall { name: "exec_command".into(), input: json!({"cmd": "sleep 1; echo step", "yield_time_ms": 30000}) },
    }
}

/// $0.001: the looping turn ends `budget_reached` and says what was spent; the run refuses a
/// message (`BUDGET_REACHED`) until the budget is raised, then the next turn runs to its end.
async fn a_budget_ends_the_turn_and_raising_it_lets_the_next_run(h: H) {
    require_cli(h.tools, h.binary);
    // Enough steps to cross $0.001 at any price; what the first turn leaves, the second runs.
    let mut replies: Vec<Reply> = (0..40).map(|_| busy_tool(h)).collect();
    replies.push(Reply::Text("finished after the raise".into()));
    let server = ScriptedServer::start(h.wire, Script::new(replies)).await.unwrap();
    let (d, _root) = daemon().await;
    let budget = Budget { usd: Some(0.001), ..Budget::default() };
    let run = start(&d, h, &server, "loop until told", Some(budget)).await;
    let ended = d.wait_turn_end("s", &run, 1, TURN).await;
    let events = d.events("s", &run).await;
    assert_eq!(ended.stop_reason, Some(StopReason::BudgetReached), "{}", describe(&events));
    let st = d.wait_status("s", &run, TURN, |s| settled(s) && s.reason.contains("budget")).await;
    assert_eq!(st.status, Status::Idle, "{st:#?}");
    assert!(!st.accepts_message, "{st:#?}");
    assert!(st.usage.cost_usd >= 0.001, "{st:#?}");
    assert!(server.model_calls().len() < 41, "the budget ended the loop: {} calls", server.model_calls().len());

    let e = match d.client.space("s").agent_message(&run, "go on", None).await {
        Err(spaces_sdk::client::ClientError::Api(e)) => e,
        other => panic!("a run at its budget refuses a message: {other:?}"),
    };
    assert_eq!(e.code, ErrorCode::BudgetReached, "{e:?}");
    assert!(e.message.contains("agent_budget"), "the refusal names the fix: {e:?}");

    let raised =
        spaces_sdk::AgentBudgetRequest { space: "s".into(), run_id: run.clone(), budget: Budget { usd: Some(100.0), ..Budget::default() } };
    let report = d.client.agent_budget(&raised).await.unwrap();
    assert_eq!(report.reached, None, "{report:#?}");
    let st = d.wait_status("s", &run, TURN, |s| s.accepts_message).await;
    assert_eq!(st.budget.and_then(|b| b.usd), Some(100.0));
    d.client.space("s").agent_message(&run, "go on", None).await.unwrap();
    let ended = d.wait_turn_end("s", &run, 2, TURN).await;
    assert_eq!(ended.stop_reason, Some(StopReason::EndTurn), "{}", describe(&d.events("s", &run).await));
    let st = d.wait_status("s", &run, TURN, settled).await;
    assert_eq!(st.result_text.as_deref(), Some("finished after the raise"), "{st:#?}");
}

/// Claude Code's own limit: the run's budget is passed as `--max-budget-usd`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_budget_ends_the_turn_natively_and_raising_it_lets_the_next_run() {
    a_budget_ends_the_turn_and_raising_it_lets_the_next_run(CLAUDE).await
}

/// Codex has no dollar limit: the daemon prices its token updates and interrupts the turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_budget_interrupts_the_turn_and_raising_it_lets_the_next_run() {
    a_budget_ends_the_turn_and_raising_it_lets_the_next_run(CODEX_APP_SERVER).await
}

/// Bad limits are refused before anything starts, each naming its field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_budget_is_refused_naming_the_field() {
    let d = TestDaemon::start().await;
    d.space("s").await;
    for (budget, field) in [(json!({"usd": -1}), "options.budget.usd"), (json!({"turns": 0}), "options.budget.turns")] {
        let body = json!({"agent": "claude-code", "prompt": "hi", "options": {"budget": budget}}).to_string();
        let (code, out) = d.raw("POST", "/v1/spaces/s/agents", Some(&body));
        assert_eq!(code, 400, "{out}");
        assert!(out.contains("INVALID_ARGUMENT") && out.contains(field), "{out}");
    }
    let (code, out) = d.raw(
        "POST",
        "/v1/spaces/s/agents",
        Some(&json!({"agent": "claude-code", "prompt": "hi", "options": {"budget": {"dollars": 1}}}).to_string()),
    );
    assert_eq!(code, 400, "an unknown budget field: {out}");
    assert!(d.client.agent_usage(&AgentUsageRequest { space: "s".into(), ..Default::default() }).await.unwrap().runs.is_empty());
}
