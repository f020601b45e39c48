//! `spacesd agent ...`: the agent operations of the API from the command line.

use clap::Subcommand;
use spaces_sdk::client::Client;
use spaces_sdk::{SpaceAgentOptions, Status};

use super::env_args::agent_env;
use super::follow::{follow_events, follow_with, last_cursor, list_events, turn_outcome, Until};
use super::print::View;
use super::SpaceArg;

// Parsed once per process: the size of `agent start`'s options costs nothing worth boxing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum AgentCmd {
    /// Start AGENT (claude-code, openai-codex, opencode, gemini-cli, ...) with PROMPT as a detached
    /// run; prints the report.
    Start {
        /// The harness: `claude-code`, `openai-codex` (Codex on `codex app-server`), `openai-codex-exec`
        /// (Codex on `exec --json`, one process per turn), `opencode` or `gemini-cli` (`spacesd
        /// capabilities` lists them and their readiness).
        agent: String,
        /// The first turn's text; `-` reads it from stdin, `@FILE` from FILE (or use
        /// --prompt-file).
        #[arg(required_unless_present = "prompt_file")]
        prompt: Option<String>,
        /// Read the prompt from this file.
        #[arg(long, conflicts_with = "prompt")]
        prompt_file: Option<std::path::PathBuf>,
        #[command(flatten)]
        space: SpaceArg,
        /// Model name passed to the CLI.
        #[arg(long)]
        model: Option<String>,
        /// Custom model endpoint, in the wire its harness speaks (`spacesd capabilities`
        /// `endpoint_wires`): Anthropic Messages for claude-code, OpenAI Responses for
        /// openai-codex(-exec), OpenAI Chat Completions for opencode, Gemini for gemini-cli.
        #[arg(long)]
        base_url: Option<String>,
        /// Working directory relative to the Space root.
        #[arg(long)]
        cwd: Option<String>,
        /// Extra environment for the agent: NAME=VALUE, or NAME alone to take the value from
        /// this shell's environment, so no secret is in the command line (values of 8+ chars
        /// are redacted). Repeatable; wins over --env-file.
        #[arg(long = "env", value_name = "NAME[=VALUE]")]
        env: Vec<String>,
        /// Read extra environment for the agent from FILE: one NAME=VALUE a line (`export `
        /// before it, quotes around the value, blank lines and `#` comments allowed).
        /// Repeatable; later files win.
        #[arg(long = "env-file", value_name = "FILE")]
        env_file: Vec<std::path::PathBuf>,
        /// Copy this variable from the host's environment (must be on the forwardable list).
        #[arg(long = "env-from-host", value_name = "NAME")]
        env_from_host: Vec<String>,
        /// Stop (resumably) once the prompt is answered.
        #[arg(long)]
        exit_when_idle: bool,
        /// Run as this persistent agent: its home (the CLI's config, sessions, memory) is
        /// restored from the volume first and saved after every turn (`spacesd home --help`).
        #[arg(long, value_name = "NAME")]
        home: Option<String>,
        /// Clone this repository (a URL or path git understands) before the first turn, into a
        /// new folder of the working directory named after it; the agent works in the clone.
        #[arg(long)]
        repo: Option<String>,
        /// Check out this branch before the first turn (of --repo, or of the working directory's
        /// repository).
        #[arg(long)]
        branch: Option<String>,
        /// Expose the run to be watched live: the report's notes give the attach command and
        /// its web URL.
        #[arg(long)]
        show: bool,
        /// A name for people, shown by `agent list` and `agent status` (one line, at most 80
        /// characters).
        #[arg(long, value_name = "TEXT")]
        label: Option<String>,
        /// Attach this file (at most 8 MiB; repeat for more): it is copied into the run's
        /// directory and the first prompt names its path there.
        #[arg(long = "file", value_name = "PATH")]
        files: Vec<std::path::PathBuf>,
        /// The run's budget: --budget-usd, --budget-tokens, --budget-turns (see `agent budget`).
        #[command(flatten)]
        budget: super::usage::BudgetArgs,
        /// Then follow the events until the turn ends.
        #[arg(long)]
        follow: bool,
        /// Print the start report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// A run's status: status, phase, reason, turns, last answer, output tail (--json: the record).
    /// RUN_ID alone finds its Space; --space is needed only when names are ambiguous.
    Status {
        /// The run's id (`run-...`, as `agent start` and `agent list` print it).
        run_id: String,
        #[command(flatten)]
        space: SpaceArg,
        /// Lines of output tail (default 40).
        #[arg(long)]
        tail: Option<u32>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// A run's events after CURSOR; --follow keeps reading until the run stops running.
    Events {
        /// The run's id (`run-...`, as `agent start` and `agent list` print it).
        run_id: String,
        #[command(flatten)]
        space: SpaceArg,
        /// Start after this event (its seq); 0 reads from the first event.
        #[arg(long, default_value_t = 0)]
        cursor: u64,
        /// Print at most this many events, then say on stderr where to go on (`--cursor`).
        /// Default: every event up to now.
        #[arg(long)]
        max: Option<u64>,
        /// Keep reading as new events arrive, until the run is no longer running.
        #[arg(long)]
        follow: bool,
        /// Print the raw JSON pages instead of one line per event.
        #[arg(long)]
        json: bool,
        /// Include each event's original harness line (with --json).
        #[arg(long)]
        raw: bool,
        /// Prefix each line with its time (UTC).
        #[arg(long)]
        timestamps: bool,
        /// Also show hidden control events (the CLI's own bookkeeping lines).
        #[arg(long, short)]
        verbose: bool,
        /// With --follow: `turn` (default) ends when the run stops running (its turn ended);
        /// `stopped` follows across turns until the run is stopped or done, like `docker logs -f`.
        #[arg(long, value_enum, default_value = "turn")]
        until: Until,
    },
    /// Watch a run live in this terminal: its transcript, then new events as they land. A typed
    /// line is sent as a follow-up; Ctrl-C interrupts the turn in flight; a second Ctrl-C or
    /// `/detach` leaves and the run goes on (`/interrupt`, `/stop` too).
    Attach {
        /// The run's id (`run-...`, as `agent start` and `agent list` print it).
        run_id: String,
        #[command(flatten)]
        space: SpaceArg,
    },
    /// Send a follow-up message (next turn; queued if a turn is running).
    Send {
        /// The run's id (`run-...`, as `agent start` and `agent list` print it).
        run_id: String,
        /// The follow-up's text; `-` reads it from stdin, `@FILE` from FILE (or use
        /// --prompt-file).
        #[arg(required_unless_present = "prompt_file")]
        text: Option<String>,
        /// Read the text from this file.
        #[arg(long, conflicts_with = "text")]
        prompt_file: Option<std::path::PathBuf>,
        #[command(flatten)]
        space: SpaceArg,
        /// Interrupt the running turn first.
        #[arg(long)]
        force: bool,
        /// Then follow the events until the turn ends.
        #[arg(long)]
        follow: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Cancel the turn in flight (the session stays open).
    Interrupt {
        /// The run's id (`run-...`, as `agent start` and `agent list` print it).
        run_id: String,
        #[command(flatten)]
        space: SpaceArg,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop the run: every process of it ends. With --all, every live (running or idle) run,
    /// many at once: of --space when given, else of every Space.
    Stop {
        /// The run's id (`run-...`, as `agent start` and `agent list` print it).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        run_id: Option<String>,
        #[command(flatten)]
        space: SpaceArg,
        /// Stop every live run (of --space, or of every Space) instead of one; exits 1 when one
        /// did not stop.
        #[arg(long)]
        all: bool,
        /// Print the report as JSON (with --all, the list of reports).
        #[arg(long)]
        json: bool,
    },
    /// Delete a run that is not live (stop it first): its row, events and run directory.
    Rm {
        /// The run's id (`run-...`, as `agent start` and `agent list` print it).
        run_id: String,
        #[command(flatten)]
        space: SpaceArg,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Delete the runs that are not live and are older than --older-than (e.g. 7d, 12h, 30m), in
    /// the Space or in every Space (--all). The daemon can do this itself: `run_retention_days`.
    Prune {
        /// Delete runs older than this age: a number with `d`, `h`, `m` or `s` (`7d`, `12h`, `30m`).
        #[arg(long, value_name = "AGE", value_parser = parse_age)]
        older_than: u64,
        #[command(flatten)]
        space: SpaceArg,
        /// In every Space, not only the one of --space.
        #[arg(long)]
        all: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// What a run's turns changed in its working folder, from the daemon's checkpoints: the
    /// unified diff of the last turn, of --turn N, or of checkpoints --from N to --to M (0 is
    /// the folder before the first turn). Binary files are named, not dumped.
    Diff {
        /// The run (`run-...`).
        run_id: String,
        #[command(flatten)]
        space: SpaceArg,
        /// One turn (1-based): what it changed.
        #[arg(long, conflicts_with_all = ["from", "to"])]
        turn: Option<u32>,
        /// The checkpoint the range starts at (default: the checkpoint --to started from: the one before, or the one a rewind restored).
        #[arg(long)]
        from: Option<u32>,
        /// The checkpoint the range ends at (default: the last).
        #[arg(long)]
        to: Option<u32>,
        /// Only the changed files with their +/- lines, no diff.
        #[arg(long)]
        stat: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Take an idle run back to the end of a turn: its folder from the checkpoint (byte for
    /// byte; files made later removed; excluded paths such as .git, node_modules, target left
    /// alone; files over 64 MiB or holding a secret are not restored, and are removed if made
    /// later) and its conversation (natively where the CLI can, else a fresh session). Refused
    /// while a turn runs or waits, or the run is stopping: interrupt first.
    Rewind {
        /// The run (`run-...`).
        run_id: String,
        #[command(flatten)]
        space: SpaceArg,
        /// The turn whose end to go back to (0: before the first turn).
        #[arg(long, value_name = "N")]
        to_turn: u32,
        /// What to take back.
        #[arg(long, value_enum, default_value = "both")]
        what: RewindArg,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Fork a run at a turn into a new idle run: its own worktree (a git worktree, or a copy,
    /// under the Space's `.spaces-worktrees/`) holding that turn's checkpoint (without excluded
    /// folders such as node_modules, target, .venv, and without files over 64 MiB or holding a
    /// secret), and its session forked there where the CLI can. Send the fork a message to run
    /// its first turn.
    Fork {
        /// The run to fork (`run-...`).
        run_id: String,
        #[command(flatten)]
        space: SpaceArg,
        /// The turn whose end the fork starts from (0: before the first turn).
        #[arg(long, value_name = "N")]
        at_turn: u32,
        /// The fork's label.
        #[arg(long)]
        label: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Merge a fork's changes into its parent's folder (three-way, per file, against the fork
    /// point). Both runs must be idle (else AGENT_BUSY); the fork is left as it is. With any
    /// conflict nothing is written and each conflicting file is listed; the exit status is then
    /// 1.
    Merge {
        /// The fork (`run-...`).
        run_id: String,
        #[command(flatten)]
        space: SpaceArg,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// What runs spent (the daemon's usage ledger): tokens in, cached and out, cost in US
    /// dollars (the CLI's own figure, or `~` estimated from the price table), tool calls and
    /// time; totals, a line per run, and each turn with --turns.
    Usage {
        /// Only this run (`run-...`); every run of the Space without it.
        run_id: Option<String>,
        #[command(flatten)]
        space: SpaceArg,
        /// Only turns that ended within this age (7d, 12h, 30m, 90s).
        #[arg(long, value_name = "AGE", value_parser = parse_age)]
        since: Option<u64>,
        /// Also list each turn.
        #[arg(long)]
        turns: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Set or raise a run's budget; a run at its budget takes turns again once it is raised.
    /// Fields not given keep their value.
    Budget {
        /// The run's id (`run-...`, as `agent start` and `agent list` print it).
        run_id: String,
        #[command(flatten)]
        space: SpaceArg,
        #[command(flatten)]
        budget: super::usage::BudgetArgs,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Every run of the Space (or of all with --all), newest first, as a table.
    List {
        #[command(flatten)]
        space: SpaceArg,
        /// Every run of every Space.
        #[arg(long)]
        all: bool,
        /// The run records as JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// Run one agent subcommand against the daemon.
pub async fn run(client: &Client, cmd: AgentCmd) -> anyhow::Result<()> {
    match cmd {
        AgentCmd::Start {
            agent,
            prompt,
            prompt_file,
            space,
            model,
            base_url,
            cwd,
            env,
            env_file,
            env_from_host,
            exit_when_idle,
            home,
            repo,
            branch,
            show,
            label,
            files,
            budget,
            follow,
            json,
        } => {
            let prompt = prompt_text(prompt.as_deref(), prompt_file.as_deref(), "the prompt")?;
            let env_map = agent_env(&env, &env_file, |name| std::env::var_os(name))?;
            let space = resolve_space(client, space).await?;
            let options = SpaceAgentOptions {
                env_from_host,
                env: env_map,
                cwd,
                model,
                base_url,
                exit_when_idle: exit_when_idle.then_some(true),
                home,
                repo,
                branch,
                label,
                files: files.iter().map(|p| attachment(p)).collect::<anyhow::Result<_>>()?,
                budget: budget.budget(),
                ..SpaceAgentOptions::default()
            };
            let report = client.space(&space).agent_start(&agent, &prompt, show.then_some(true), Some(options)).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!("{} started: {} in Space {}", report.run_id, report.agent, report.space);
                for note in &report.notes {
                    println!("  note: {note}");
                }
                if !follow {
                    println!("  follow it: spacesd agent events {} --follow", report.run_id);
                }
            }
            if follow {
                let ended = follow_events(client, &space, &report.run_id, 0).await?;
                turn_outcome(ended)?;
            }
        }
        AgentCmd::Status { run_id, space, tail, json } => {
            let space = resolve_run(client, space, &run_id).await?;
            let st = client.space(&space).agent_status(&run_id, tail).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&st)?);
            } else {
                print_status(&st);
            }
        }
        AgentCmd::Events { run_id, space, cursor, max, follow, json, raw, timestamps, verbose, until } => {
            let space = resolve_run(client, space, &run_id).await?;
            let view = View { timestamps, verbose };
            if follow && !json && max.is_none() {
                follow_with(client, &space, &run_id, cursor, view, until).await?;
            } else {
                list_events(client, &space, &run_id, cursor, max, follow, json, raw, view).await?;
            }
        }
        AgentCmd::Attach { run_id, space } => {
            let space = resolve_run(client, space, &run_id).await?;
            super::attach::attach(client, &space, &run_id).await?;
        }
        AgentCmd::Send { run_id, text, prompt_file, space, force, follow, json } => {
            let text = prompt_text(text.as_deref(), prompt_file.as_deref(), "the message")?;
            let space = resolve_run(client, space, &run_id).await?;
            // Only a follow needs the cursor; reading it pages through the whole log.
            let before = if follow { Some(last_cursor(client, &space, &run_id).await?) } else { None };
            let report = client.space(&space).agent_message(&run_id, &text, force.then_some(true)).await?;
            print_report(&report, json)?;
            if !report.ok {
                anyhow::bail!("message not delivered: {}", report.reason);
            }
            if let Some(before) = before {
                let ended = follow_events(client, &space, &run_id, before).await?;
                turn_outcome(ended)?;
            }
        }
        AgentCmd::Interrupt { run_id, space, json } => {
            let space = resolve_run(client, space, &run_id).await?;
            let report = client.space(&space).agent_interrupt(&run_id).await?;
            print_report(&report, json)?;
            if !report.ok {
                anyhow::bail!("nothing interrupted: {}", report.reason);
            }
        }
        AgentCmd::Stop { run_id: None, space, json, .. } => stop_all(client, space, json).await?,
        AgentCmd::Stop { run_id: Some(run_id), space, json, .. } => {
            let space = resolve_run(client, space, &run_id).await?;
            let report = client.space(&space).agent_stop(&run_id).await?;
            print_report(&report, json)?;
            if !report.ok {
                anyhow::bail!("stop did not complete: {}", report.reason);
            }
        }
        AgentCmd::Rm { run_id, space, json } => {
            let space = resolve_run(client, space, &run_id).await?;
            let r = client.agent_remove(&spaces_sdk::AgentRunRequest { space, run_id }).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                println!("removed {} from Space {}", r.removed.join(", "), r.space);
            }
        }
        AgentCmd::Prune { older_than, space, all, json } => {
            let spaces = spaces_of(client, space, all).await?;
            let mut reports = Vec::new();
            for space in spaces {
                reports.push(client.agent_prune(&spaces_sdk::AgentPruneRequest { space, older_than_ms: older_than }).await?);
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&reports)?);
            } else {
                for r in reports {
                    println!(
                        "Space {}: {} run(s) removed{}",
                        r.space,
                        r.removed.len(),
                        if r.removed.is_empty() { String::new() } else { format!(" ({})", r.removed.join(", ")) }
                    );
                }
            }
        }
        AgentCmd::Usage { run_id, space, since, turns, json } => {
            let space = match &run_id {
                Some(run_id) => resolve_run(client, space, run_id).await?,
                None => resolve_space(client, space).await?,
            };
            let since_ms = since.map(|age| spaces_store::now_ms().saturating_sub(age));
            let req = spaces_sdk::AgentUsageRequest { space, run_id, since_ms, turns: turns.then_some(true) };
            super::usage::usage(client, req, json).await?;
        }
        AgentCmd::Diff { run_id, space, turn, from, to, stat, json } => {
            let space = resolve_run(client, space, &run_id).await?;
            let req = spaces_sdk::AgentDiffRequest { space, run_id, turn, from_turn: from, to_turn: to };
            let report = client.agent_diff(&req).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", super::print::diff_report(&report, stat));
            }
        }
        AgentCmd::Rewind { run_id, space, to_turn, what, json } => {
            let space = resolve_run(client, space, &run_id).await?;
            let what = match what {
                RewindArg::Files => spaces_sdk::RewindWhat::Files,
                RewindArg::Conversation => spaces_sdk::RewindWhat::Conversation,
                RewindArg::Both => spaces_sdk::RewindWhat::Both,
            };
            let report = client.agent_rewind(&spaces_sdk::AgentRewindRequest { space, run_id, to_turn, what: Some(what) }).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!("run {}: {}", report.run_id, report.reason);
            }
        }
        AgentCmd::Fork { run_id, space, at_turn, label, json } => {
            let space = resolve_run(client, space, &run_id).await?;
            let report = client.agent_fork(&spaces_sdk::AgentForkRequest { space, run_id, at_turn, label }).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!(
                    "{}: forked from {} at turn {} in {} ({} worktree, {} session); send it a message to go on",
                    report.run_id, report.parent_run_id, report.at_turn, report.cwd, report.worktree, report.conversation
                );
            }
        }
        AgentCmd::Merge { run_id, space, json } => {
            let space = resolve_run(client, space, &run_id).await?;
            let report = client.agent_merge(&spaces_sdk::AgentMergeRequest { space, run_id }).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else if report.merged {
                println!("merged {} into {}: {} file(s) written or removed", report.run_id, report.parent_run_id, report.applied.len());
                for path in &report.applied {
                    println!("  {path}");
                }
            } else {
                println!("not merged: {} conflicting file(s); nothing was written", report.conflicts.len());
                for c in &report.conflicts {
                    println!("  {}: {}", c.path, c.why);
                }
            }
            if !report.merged {
                std::process::exit(1);
            }
        }
        AgentCmd::Budget { run_id, space, budget, json } => {
            let space = resolve_run(client, space, &run_id).await?;
            super::usage::budget(client, space, run_id, &budget, json).await?;
        }
        AgentCmd::List { space, all, json } => {
            let spaces = spaces_of(client, space, all).await?;
            let mut runs = Vec::new();
            for space in &spaces {
                runs.extend(client.space(space).agent_list().await?);
            }
            runs.sort_by_key(|r| std::cmp::Reverse(r.created_ms));
            if json {
                println!("{}", serde_json::to_string_pretty(&runs)?);
            } else if runs.is_empty() {
                let whose = if all { "any Space".to_owned() } else { format!("Space {}", spaces.join(", ")) };
                println!("no runs in {whose}; start one with `spacesd agent start AGENT PROMPT`");
            } else {
                list_table(&runs, spaces.len() > 1);
            }
        }
    }
    Ok(())
}

/// An action report: one line (`ok` or `not done`) and its reason, or the JSON record.
fn print_report(report: &spaces_sdk::ActionReport, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        println!("{}: {}", report.run_id, report.reason);
    }
    Ok(())
}

/// `--file PATH` as an attachment: its file name and its bytes in base64. Errors: the file
/// cannot be read, is larger than [`spaces_sdk::Attachment::MAX_BYTES`] (checked before
/// reading it) or has no file name.
fn attachment(path: &std::path::Path) -> anyhow::Result<spaces_sdk::Attachment> {
    use base64::Engine as _;
    let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| anyhow::anyhow!("--file {}: no file name", path.display()))?;
    let len = std::fs::metadata(path).map_err(|e| anyhow::anyhow!("--file {}: {e}", path.display()))?.len();
    if len > spaces_sdk::Attachment::MAX_BYTES as u64 {
        anyhow::bail!(
            "--file {}: {len} bytes is larger than the limit of {} bytes (8 MiB) per file",
            path.display(),
            spaces_sdk::Attachment::MAX_BYTES
        );
    }
    let bytes = std::fs::read(path).map_err(|e| anyhow::anyhow!("--file {}: {e}", path.display()))?;
    Ok(spaces_sdk::Attachment { name: name.to_owned(), content_base64: base64::engine::general_purpose::STANDARD.encode(bytes) })
}

/// Widest `LABEL` cell of `agent list`'s table, in characters.
const LABEL_CELL_MAX: usize = 12;

/// `agent list`'s table (cut to the terminal's width): run, Space (when several are listed), agent, status,
/// turns, cost (`~` estimated; once a run has a known one), age, label (when a run has one), then as much of the prompt as fits.
fn list_table(runs: &[spaces_sdk::RunStatus], with_space: bool) {
    let with_label = runs.iter().any(|r| r.label.is_some());
    let mut header = vec!["RUN"];
    if with_space {
        header.push("SPACE");
    }
    // A COST column once a run has a known cost (a daemon's runs without one keep the width).
    let with_cost = runs.iter().any(|r| r.usage.turns > r.usage.cost_unknown_turns);
    header.extend(["AGENT", "STATUS", "TURNS"]);
    if with_cost {
        header.push("COST");
    }
    header.push("AGE");
    if with_label {
        header.push("LABEL");
    }
    header.push("PROMPT");
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            let mut row = vec![r.run_id.clone()];
            if with_space {
                row.push(r.space.clone());
            }
            row.extend([r.agent.clone().unwrap_or_default(), r.status.as_str().to_owned(), r.turns.to_string()]);
            if with_cost {
                row.push(super::usage::cost_cell(&r.usage));
            }
            row.push(super::print::age(r.created_ms));
            if with_label {
                row.push(super::print::excerpt(r.label.as_deref().unwrap_or("-"), LABEL_CELL_MAX));
            }
            row.push(r.prompt_excerpt.clone().unwrap_or_else(|| "-".into()));
            row
        })
        .collect();
    super::print::table(&header, &rows);
}

/// A run's status for a person.
///
/// Labelled lines, each cut to the terminal's width ([`super::print::width`]); `--json` has the
/// whole record.
fn print_status(st: &spaces_sdk::RunStatus) {
    use super::print::{excerpt, excerpt_line, width};
    let max = width();
    let line = |label: &str, value: String| println!("{}", excerpt_line(&format!("{label:<10}{value}"), max));
    line("run", st.run_id.clone());
    if let Some(label) = &st.label {
        line("label", label.clone());
    }
    line("agent", format!("{} in Space {}", st.agent.as_deref().unwrap_or("?"), st.space));
    line("status", format!("{} ({}): {}", st.status.as_str(), st.phase.as_str(), excerpt(&st.reason, max)));
    line("turns", format!("{}   started {} ago   a message sent now: {}", st.turns, super::print::age(st.created_ms), message_wording(st)));
    if let Some(prompt) = &st.prompt_excerpt {
        line("prompt", prompt.clone());
    }
    if st.usage.turns > 0 {
        line("usage", super::usage::spent_words(&st.usage));
    }
    if let Some(budget) = &st.budget {
        line("budget", super::usage::budget_words(budget));
    }
    if let Some(session) = &st.session_id {
        line("session", session.clone());
    }
    if let Some(text) = &st.result_text {
        line("answer", excerpt(text, 200));
    }
    if let Some(tail) = st.output_tail.as_deref().filter(|t| !t.is_empty()) {
        println!("output tail:");
        for l in tail.lines() {
            println!("  {}", excerpt(l, max.saturating_sub(2)));
        }
    }
}

/// The text of a prompt argument (`-`, `@FILE` or the text) or of `--prompt-file`.
/// What a follow-up sent now does, in words: mid-turn it is not refused but queued (issue 32:
/// "accepts a message: no" read as a refusal).
fn message_wording(st: &spaces_sdk::RunStatus) -> &'static str {
    match (st.accepts_message, st.status) {
        (true, spaces_sdk::Status::QuotaWaiting) => "starts the next turn now, instead of the automatic continue",
        (true, _) => "starts the next turn",
        (false, spaces_sdk::Status::Running) => "waits until this turn ends (--force interrupts it)",
        (false, spaces_sdk::Status::Queued) => "waits behind the turn queued for a slot",
        (false, _) => "is refused (the reason above says why)",
    }
}

fn prompt_text(given: Option<&str>, file: Option<&std::path::Path>, what: &str) -> anyhow::Result<String> {
    match (given, file) {
        (Some(given), _) => super::text_from(given, what),
        (None, Some(path)) => super::text_file(path, what),
        (None, None) => anyhow::bail!("give {what} as an argument, `-` for stdin, `@FILE`, or --prompt-file FILE"),
    }
}

/// The Space of run `run_id`: `--space` when given, else the only registered Space, else the
/// one Space whose runs include it (a run id names its Space; --space only disambiguates names).
/// Errors: no Space has the run (`RUN_NOT_FOUND`-style message).
pub async fn resolve_run(client: &Client, arg: SpaceArg, run_id: &str) -> anyhow::Result<String> {
    if let Some(s) = arg.space {
        return Ok(s);
    }
    let spaces = client.space_list(&spaces_sdk::Empty {}).await?;
    if let [one] = spaces.as_slice() {
        return Ok(one.name.clone());
    }
    for space in &spaces {
        if client.space(&space.name).agent_list().await?.iter().any(|r| r.run_id == run_id) {
            return Ok(space.name.clone());
        }
    }
    anyhow::bail!("RUN_NOT_FOUND: no Space of this host has a run {run_id:?} (`spacesd agent list --all` lists them)")
}

/// Every Space's name with `all`, else the one [`resolve_space`] picks.
/// How many stops `agent stop --all` has in flight at once.
const STOPS_AT_ONCE: usize = 64;

/// `agent stop --all`: every live run of `space` (else of every Space), [`STOPS_AT_ONCE`] at a
/// time; one line per run that did not stop, then a summary. Errors when one did not stop.
async fn stop_all(client: &Client, space: SpaceArg, json: bool) -> anyhow::Result<()> {
    use futures_util::StreamExt;
    let spaces = match space.space {
        Some(s) => vec![s],
        None => spaces_of(client, space, true).await?,
    };
    let mut live = Vec::new();
    for space in &spaces {
        let runs = client.space(space).agent_list().await?;
        live.extend(
            runs.into_iter()
                .filter(|r| matches!(r.status, Status::Running | Status::Queued | Status::QuotaWaiting | Status::Idle))
                .map(|r| (space.clone(), r.run_id)),
        );
    }
    let started = std::time::Instant::now();
    let reports: Vec<(String, Result<spaces_sdk::ActionReport, spaces_sdk::client::ClientError>)> =
        futures_util::stream::iter(live.into_iter().map(|(space, run_id)| async move {
            let report = client.space(&space).agent_stop(&run_id).await;
            (run_id, report)
        }))
        .buffer_unordered(STOPS_AT_ONCE)
        .collect()
        .await;
    let took = started.elapsed();
    let mut failed = 0;
    let mut done = Vec::new();
    for (run_id, report) in reports {
        match report {
            Ok(r) if r.ok => done.push(r),
            Ok(r) => {
                failed += 1;
                eprintln!("{run_id}: not stopped: {}", r.reason);
                done.push(r);
            }
            Err(e) => {
                failed += 1;
                eprintln!("{run_id}: not stopped: {e}");
            }
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&done)?);
    } else {
        println!("stopped {} live run(s) in {:.1} s", done.iter().filter(|r| r.ok).count(), took.as_secs_f64());
    }
    if failed > 0 {
        anyhow::bail!("{failed} run(s) did not stop (above)");
    }
    Ok(())
}

async fn spaces_of(client: &Client, arg: SpaceArg, all: bool) -> anyhow::Result<Vec<String>> {
    if all {
        return Ok(client.space_list(&spaces_sdk::Empty {}).await?.into_iter().map(|s| s.name).collect());
    }
    Ok(vec![resolve_space(client, arg).await?])
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

/// `7d`, `12h`, `30m`, `90s` or plain ms, as ms.
fn parse_age(s: &str) -> Result<u64, String> {
    let (num, unit) = s.trim().split_at(s.trim().find(|c: char| !c.is_ascii_digit()).unwrap_or(s.trim().len()));
    let n: u64 = num.parse().map_err(|_| format!("{s:?}: give an age such as 7d, 12h, 30m or 90s"))?;
    let factor = match unit {
        "d" => 86_400_000,
        "h" => 3_600_000,
        "m" => 60_000,
        "s" => 1000,
        "" | "ms" => 1,
        _ => return Err(format!("{s:?}: the unit must be d, h, m, s or ms, as in 7d, 12h, 30m")),
    };
    n.checked_mul(factor).ok_or_else(|| format!("{s:?} is too long"))
}

/// `agent rewind --what`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum RewindArg {
    /// The folder only.
    Files,
    /// The conversation only.
    Conversation,
    /// Both.
    Both,
}
