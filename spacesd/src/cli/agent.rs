//! `spacesd agent ...`: the agent operations of the API from the command line.

use std::collections::BTreeMap;

use clap::Subcommand;
use spaces_sdk::client::Client;
use spaces_sdk::{AgentEventsRequest, SpaceAgentOptions, Status};

use super::print::event_line;
use super::SpaceArg;

/// Long-poll wait of `--follow`, in ms.
const FOLLOW_WAIT_MS: u64 = 20_000;

#[derive(Debug, Subcommand)]
pub enum AgentCmd {
    /// Start AGENT (claude-code, openai-codex) with PROMPT as a detached run; prints the report.
    Start {
        agent: String,
        prompt: String,
        #[command(flatten)]
        space: SpaceArg,
        /// Model name passed to the CLI.
        #[arg(long)]
        model: Option<String>,
        /// Custom model endpoint (Anthropic Messages for claude-code, OpenAI Responses for codex).
        #[arg(long)]
        base_url: Option<String>,
        /// Working directory relative to the Space root.
        #[arg(long)]
        cwd: Option<String>,
        /// Extra environment for the agent, NAME=VALUE (values of 8+ chars are redacted).
        #[arg(long = "env", value_name = "NAME=VALUE")]
        env: Vec<String>,
        /// Copy this variable from the host's environment (must be on the forwardable list).
        #[arg(long = "env-from-host", value_name = "NAME")]
        env_from_host: Vec<String>,
        /// Stop (resumably) once the prompt is answered.
        #[arg(long)]
        exit_when_idle: bool,
        /// Then follow the events until the turn ends.
        #[arg(long)]
        follow: bool,
    },
    /// A run's status (JSON).
    Status {
        run_id: String,
        #[command(flatten)]
        space: SpaceArg,
        /// Lines of output tail (default 40).
        #[arg(long)]
        tail: Option<u32>,
    },
    /// A run's events after CURSOR; --follow keeps reading until the run stops running.
    Events {
        run_id: String,
        #[command(flatten)]
        space: SpaceArg,
        #[arg(long, default_value_t = 0)]
        cursor: u64,
        #[arg(long)]
        max: Option<u32>,
        #[arg(long)]
        follow: bool,
        /// Print the raw JSON pages instead of one line per event.
        #[arg(long)]
        json: bool,
        /// Include each event's original harness line (with --json).
        #[arg(long)]
        raw: bool,
    },
    /// Send a follow-up message (next turn; queued if a turn is running).
    Send {
        run_id: String,
        text: String,
        #[command(flatten)]
        space: SpaceArg,
        /// Interrupt the running turn first.
        #[arg(long)]
        force: bool,
        /// Then follow the events until the turn ends.
        #[arg(long)]
        follow: bool,
    },
    /// Cancel the turn in flight (the session stays open).
    Interrupt {
        run_id: String,
        #[command(flatten)]
        space: SpaceArg,
    },
    /// Stop the run: every process of it ends.
    Stop {
        run_id: String,
        #[command(flatten)]
        space: SpaceArg,
    },
    /// Every run of the Space, newest first.
    List {
        #[command(flatten)]
        space: SpaceArg,
    },
}

/// Run one agent subcommand against the daemon.
pub async fn run(client: &Client, cmd: AgentCmd) -> anyhow::Result<()> {
    match cmd {
        AgentCmd::Start { agent, prompt, space, model, base_url, cwd, env, env_from_host, exit_when_idle, follow } => {
            let space = resolve_space(client, space).await?;
            let mut env_map = BTreeMap::new();
            for kv in env {
                let (k, v) = kv.split_once('=').ok_or_else(|| anyhow::anyhow!("--env wants NAME=VALUE, got {kv:?}"))?;
                env_map.insert(k.to_owned(), v.to_owned());
            }
            let options = SpaceAgentOptions {
                env_from_host,
                env: env_map,
                cwd,
                model,
                base_url,
                exit_when_idle: exit_when_idle.then_some(true),
                ..SpaceAgentOptions::default()
            };
            let report = client.space(&space).agent_start(&agent, &prompt, None, Some(options)).await?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            if follow {
                follow_events(client, &space, &report.run_id, 0).await?;
            }
        }
        AgentCmd::Status { run_id, space, tail } => {
            let space = resolve_space(client, space).await?;
            println!("{}", serde_json::to_string_pretty(&client.space(&space).agent_status(&run_id, tail).await?)?);
        }
        AgentCmd::Events { run_id, space, cursor, max, follow, json, raw } => {
            let space = resolve_space(client, space).await?;
            if follow && !json {
                follow_events(client, &space, &run_id, cursor).await?;
            } else {
                let mut cursor = cursor;
                loop {
                    let q = events(&space, &run_id, cursor, max, follow.then_some(FOLLOW_WAIT_MS), Some(raw));
                    let page = client.agent_events(&q).await?;
                    if json {
                        println!("{}", serde_json::to_string(&page)?);
                    } else {
                        page.events.iter().for_each(|e| println!("{}", event_line(e)));
                    }
                    cursor = page.cursor;
                    if !follow || (page.caught_up && page.status != Status::Running) {
                        break;
                    }
                }
            }
        }
        AgentCmd::Send { run_id, text, space, force, follow } => {
            let space = resolve_space(client, space).await?;
            // Only a follow needs the cursor; reading it pages through the whole log.
            let before = if follow { Some(last_cursor(client, &space, &run_id).await?) } else { None };
            let report = client.space(&space).agent_message(&run_id, &text, force.then_some(true)).await?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            if !report.ok {
                anyhow::bail!("message not delivered: {}", report.reason);
            }
            if let Some(before) = before {
                follow_events(client, &space, &run_id, before).await?;
            }
        }
        AgentCmd::Interrupt { run_id, space } => {
            let space = resolve_space(client, space).await?;
            let report = client.space(&space).agent_interrupt(&run_id).await?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            if !report.ok {
                anyhow::bail!("nothing interrupted: {}", report.reason);
            }
        }
        AgentCmd::Stop { run_id, space } => {
            let space = resolve_space(client, space).await?;
            let report = client.space(&space).agent_stop(&run_id).await?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            if !report.ok {
                anyhow::bail!("stop did not complete: {}", report.reason);
            }
        }
        AgentCmd::List { space } => {
            let space = resolve_space(client, space).await?;
            for r in client.space(&space).agent_list().await? {
                println!(
                    "{}\t{}\t{}\t{}\t{}",
                    r.run_id,
                    r.agent.unwrap_or_default(),
                    r.status.as_str(),
                    r.phase.as_str(),
                    r.reason
                );
            }
        }
    }
    Ok(())
}

/// The seq of the run's last event now.
async fn last_cursor(client: &Client, space: &str, run_id: &str) -> anyhow::Result<u64> {
    let mut cursor = 0;
    loop {
        let page = client.agent_events(&events(space, run_id, cursor, Some(1000), None, None)).await?;
        cursor = page.cursor;
        if page.caught_up {
            return Ok(cursor);
        }
    }
}

/// Print events from `cursor` until the run is no longer running and the log is caught up;
/// returns the cursor reached.
pub async fn follow_events(client: &Client, space: &str, run_id: &str, mut cursor: u64) -> anyhow::Result<u64> {
    // The first read does not wait: a run that is already settled and caught up returns at once.
    let mut wait_ms = 0;
    loop {
        let q = events(space, run_id, cursor, Some(200), Some(wait_ms), None);
        wait_ms = FOLLOW_WAIT_MS;
        let page = client.agent_events(&q).await?;
        for e in &page.events {
            println!("{}", event_line(e));
        }
        cursor = page.cursor;
        if page.caught_up && page.status != Status::Running {
            let st = client.space(space).agent_status(run_id, Some(0)).await?;
            println!("-- status: {} ({}): {}", st.status.as_str(), st.phase.as_str(), st.reason);
            return Ok(cursor);
        }
    }
}

/// The `agent_events` request of `run_id` from `cursor`.
fn events(space: &str, run_id: &str, cursor: u64, max: Option<u32>, wait_ms: Option<u64>, raw: Option<bool>) -> AgentEventsRequest {
    AgentEventsRequest { space: space.to_owned(), run_id: run_id.to_owned(), cursor: Some(cursor), max, wait_ms, raw }
}

/// `--space`, else the only registered Space.
pub async fn resolve_space(client: &Client, arg: SpaceArg) -> anyhow::Result<String> {
    if let Some(s) = arg.space {
        return Ok(s);
    }
    let spaces = client.space_list(&spaces_sdk::Empty {}).await?;
    match spaces.as_slice() {
        [one] => Ok(one.name.clone()),
        [] => anyhow::bail!("no Space registered; run `spacesd space add NAME PATH` first"),
        _ => anyhow::bail!(
            "several Spaces are registered ({}); pick one with --space",
            spaces.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
        ),
    }
}
