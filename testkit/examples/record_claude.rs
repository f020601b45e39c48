//! Records real Claude Code output for the `claude-code` harness fixtures.
//!
//! Runs the pinned native `claude` binary, launched exactly as the harness plans it
//! (`spaces_harnesses::claude_code`: long-lived `-p --input-format stream-json --output-format
//! stream-json`, offline env), against a [`ScriptedServer`] speaking Anthropic Messages. Each
//! scenario gets a fresh home and workspace under `--work` (fixed paths, so fixtures do not
//! change with temp names), drives the process like the daemon would (turn messages and
//! interrupt requests on stdin, closing stdin at the end), and saves:
//!
//! - `<name>.stdout.jsonl`: stdout, byte for byte;
//! - `<name>.steps.json`: what the driver did and when, as `{"before_line": N, ...}` entries
//!   (`begin_turn` with its text, `interrupt`), and the final `exit` (code, signal, stderr tail),
//!   so tests can replay the run through the normalizer in the same order;
//! - `<name>.requests.json`: each request the CLI sent to the endpoint (method, path, whether it
//!   was a model call, model, stream flag, message count; never headers, which hold the key).
//!
//! It also feeds the live output through the normalizer and prints the event kinds, as a check
//! against the real CLI.
//!
//! Re-record (after bumping the pinned version, or to add a scenario):
//!
//! ```text
//! npm install --prefix /tmp/tools @anthropic-ai/claude-code@2.1.197   # once; keep optional deps
//! cargo run -p spaces-testkit --example record_claude -- \
//!     --tools /tmp/tools --out harnesses/tests/fixtures/claude_code [SCENARIO...]
//! INSTA_UPDATE=always cargo test -p spaces-harnesses    # then review the snapshot diff
//! ```
//!
//! Scenarios (all by default): `write_tool` (a Write call, then a text answer), `followup` (two
//! turns in one process), `bash_tool`, `interrupt_stream` (interrupt mid slow text, then a
//! follow-up turn), `interrupt_tool` (interrupt a running `sleep`), `http_error` (the endpoint
//! answers 500), `resume_missing` (`--resume` of an unknown session: the process fails),
//! `partial_text` (a Bash call, then an answer streamed in chunks: the `stream_event` lines of
//! `--include-partial-messages`, text and tool input deltas).
//! The model server is always started before the CLI.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde_json::{json, Value};
use spaces_harnesses::claude_code::ClaudeCode;
use spaces_harnesses::{ExitInfo, Harness, InterruptRecipe, LaunchContext, Normalizer};
use spaces_testkit::{Reply, Script, ScriptedServer, Wire};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const ALL: [&str; 8] =
    ["write_tool", "followup", "bash_tool", "interrupt_stream", "interrupt_tool", "http_error", "resume_missing", "partial_text"];

/// Longest wait for any one step.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Parser)]
#[command(about = "Record real Claude Code stream-json output against a scripted model")]
struct Args {
    /// Tools directory holding `node_modules/@anthropic-ai/claude-code-linux-x64/claude`.
    #[arg(long, default_value = "/tmp/tools")]
    tools: PathBuf,
    /// Where the fixtures go.
    #[arg(long, default_value = "harnesses/tests/fixtures/claude_code")]
    out: PathBuf,
    /// Scratch directory for homes and workspaces (wiped per scenario).
    #[arg(long, default_value = "/tmp/spaces-record-claude")]
    work: PathBuf,
    /// Scenarios to record (default: all).
    names: Vec<String>,
}

/// What the driver does, in order.
enum Step {
    /// Start a turn with this text (first one goes in the launch plan's `initial_stdin`).
    Turn(&'static str),
    /// Wait until this many `result` lines have been printed.
    Results(usize),
    /// Wait until this many model calls reached the server.
    ModelCalls(usize),
    /// Wait until a stdout line contains this.
    LineContains(&'static str),
    /// Let the stream make progress (only ever after a wait on a real signal).
    Pause(u64),
    /// Write the harness's interrupt request.
    Interrupt,
}

struct Scenario {
    script: Script,
    steps: Vec<Step>,
    resume: Option<&'static str>,
}

fn scenario(name: &str, ws: &Path) -> Option<Scenario> {
    let file = ws.join("hello.txt").display().to_string();
    let text = |s: &str| Reply::Text(s.to_owned());
    let sc = match name {
        "write_tool" => Scenario {
            script: Script::new([
                Reply::ToolCall { name: "Write".into(), input: json!({ "file_path": file, "content": "hello\n" }) },
                text("I wrote hello.txt."),
            ]),
            steps: vec![Step::Turn("Write hello.txt containing hello."), Step::Results(1)],
            resume: None,
        },
        "followup" => Scenario {
            script: Script::new([text("The answer is 4."), text("Doubled, that is 8.")]),
            steps: vec![Step::Turn("What is 2 + 2?"), Step::Results(1), Step::Turn("Double it."), Step::Results(2)],
            resume: None,
        },
        "bash_tool" => Scenario {
            script: Script::new([
                Reply::ToolCall { name: "Bash".into(), input: json!({ "command": "ls", "description": "List files" }) },
                Reply::ToolCall {
                    name: "Bash".into(),
                    input: json!({ "command": "cat missing.txt", "description": "Show a missing file" }),
                },
                text("The directory has one file; missing.txt does not exist."),
            ]),
            steps: vec![Step::Turn("List the files, then show missing.txt."), Step::Results(1)],
            resume: None,
        },
        "interrupt_stream" => Scenario {
            script: Script::new([
                Reply::SlowText {
                    text: "Counting slowly: one two three four five six seven eight nine ten.".into(),
                    chunks: 20,
                    delay_ms: 250,
                },
                text("Picking up again: done."),
            ]),
            steps: vec![
                Step::Turn("Count to ten slowly."),
                Step::ModelCalls(1),
                Step::Pause(800),
                Step::Interrupt,
                Step::Results(1),
                Step::Turn("Never mind, just say done."),
                Step::Results(2),
            ],
            resume: None,
        },
        "interrupt_tool" => Scenario {
            script: Script::new([
                Reply::ToolCall { name: "Bash".into(), input: json!({ "command": "sleep 30", "description": "Wait a while" }) },
                text("Not expected: the sleep was interrupted."),
            ]),
            steps: vec![
                Step::Turn("Run sleep 30."),
                Step::LineContains("\"tool_use\""),
                Step::Pause(500),
                Step::Interrupt,
                Step::Results(1),
            ],
            resume: None,
        },
        "http_error" => Scenario {
            script: Script::new([]).with_fallback(Reply::HttpError {
                status: 500,
                body: json!({"type": "error", "error": {"type": "api_error", "message": "scripted failure"}}).to_string(),
            }),
            steps: vec![Step::Turn("Say hello."), Step::Results(1)],
            resume: None,
        },
        "resume_missing" => Scenario {
            script: Script::new([text("unused")]),
            steps: vec![Step::Turn("Continue.")],
            resume: Some("00000000-0000-4000-8000-000000000000"),
        },
        "partial_text" => Scenario {
            script: Script::new([
                Reply::ToolCall { name: "Bash".into(), input: json!({ "command": "echo hi", "description": "Say hi" }) },
                Reply::SlowText { text: "The command printed hi, as asked.".into(), chunks: 4, delay_ms: 50 },
            ]),
            steps: vec![Step::Turn("Run echo hi, then tell me what it printed."), Step::Results(1)],
            resume: None,
        },
        _ => return None,
    };
    Some(sc)
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let binary = args.tools.join(ClaudeCode.install_spec().binary);
    if !binary.exists() {
        bail!("no claude binary at {} (see the install line at the top)", binary.display());
    }
    std::fs::create_dir_all(&args.out)?;
    let names: Vec<String> = if args.names.is_empty() { ALL.iter().map(|s| s.to_string()).collect() } else { args.names };
    for name in &names {
        record(name, &binary, &args.out, &args.work).await.with_context(|| format!("scenario {name}"))?;
    }
    Ok(())
}

async fn record(name: &str, binary: &Path, out: &Path, work: &Path) -> Result<()> {
    let dir = work.join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    let (home, ws) = (dir.join("home"), dir.join("ws"));
    std::fs::create_dir_all(&home)?;
    std::fs::create_dir_all(&ws)?;
    let Some(sc) = scenario(name, &ws) else { bail!("unknown scenario (known: {ALL:?})") };

    let server = ScriptedServer::start(Wire::AnthropicMessages, sc.script).await?;
    let base_url = server.base_url();
    let env = BTreeMap::new();
    let Some(Step::Turn(first)) = sc.steps.first() else { bail!("a scenario starts with a turn") };
    let ctx = LaunchContext {
        run_id: name,
        turn: 1,
        prompt: first,
        session_id: sc.resume,
        binary,
        cwd: &ws,
        home: &home,
        run_dir: &dir,
        model: None,
        base_url: Some(&base_url),
        env: &env,
        mcp_servers: &[],
        max_budget_usd: None,
        resume_at: None,
    };
    let plan = ClaudeCode.launch(&ctx);
    let mut cmd = tokio::process::Command::new(&plan.argv[0]);
    cmd.args(&plan.argv[1..])
        .current_dir(&ws)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()))
        .env("LANG", "C.UTF-8")
        .envs(&plan.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().context("spawning claude")?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let stdout = child.stdout.take().context("stdout")?;
    let mut stderr = child.stderr.take().context("stderr")?;

    // stdout lines (with their terminators) as they arrive.
    let lines: Arc<Mutex<Vec<String>>> = Arc::default();
    let reader = {
        let lines = lines.clone();
        tokio::spawn(async move {
            let mut r = BufReader::new(stdout);
            loop {
                let mut buf = Vec::new();
                match r.read_until(b'\n', &mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if let Ok(mut l) = lines.lock() {
                            l.push(String::from_utf8_lossy(&buf).into_owned());
                        }
                    }
                }
            }
        })
    };
    let err_reader = tokio::spawn(async move {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s).await;
        s
    });

    let count = |lines: &Arc<Mutex<Vec<String>>>| lines.lock().map(|l| l.len()).unwrap_or(0);
    let mut steps_log = Vec::new();
    let mut first_turn = true;
    for step in &sc.steps {
        match step {
            Step::Turn(text) => {
                steps_log.push(json!({ "before_line": count(&lines), "begin_turn": text }));
                let bytes = if first_turn { plan.initial_stdin.clone().unwrap_or_default() } else { ClaudeCode.user_message(text) };
                first_turn = false;
                send(&mut stdin, &bytes).await;
            }
            Step::Interrupt => {
                steps_log.push(json!({ "before_line": count(&lines), "interrupt": true }));
                let InterruptRecipe::Stdin(bytes) = ClaudeCode.interrupt() else {
                    bail!("claude-code interrupts over stdin");
                };
                send(&mut stdin, &bytes).await;
            }
            Step::Pause(ms) => tokio::time::sleep(Duration::from_millis(*ms)).await,
            Step::Results(n) => wait(|| results(&lines) >= *n || reader.is_finished(), "result lines").await?,
            Step::ModelCalls(n) => wait(|| server.model_calls().len() >= *n, "model calls").await?,
            Step::LineContains(s) => {
                wait(|| lines.lock().map(|l| l.iter().any(|x| x.contains(s))).unwrap_or(false), "a matching line").await?
            }
        }
    }
    drop(stdin); // the CLI exits once stdin closes and the turn is done
    let status = tokio::time::timeout(STEP_TIMEOUT, child.wait()).await.context("claude did not exit")??;
    let _ = reader.await;
    let stderr_text = err_reader.await.unwrap_or_default();
    let stdout_lines = lines.lock().map(|l| l.clone()).unwrap_or_default();

    let tail: Vec<&str> = stderr_text.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect();
    let exit = ExitInfo {
        code: status.code(),
        signal: std::os::unix::process::ExitStatusExt::signal(&status),
        stderr_tail: tail.join("\n"),
        stop_requested: false,
    };
    steps_log.push(json!({
        "before_line": stdout_lines.len(),
        "exit": { "code": exit.code, "signal": exit.signal, "stderr_tail": exit.stderr_tail },
    }));

    let requests: Vec<Value> = server
        .requests()
        .iter()
        .map(|r| {
            let body = r.json.as_ref();
            json!({
                "method": r.method,
                "path": r.path,
                "model_call": r.model_call,
                "model": body.and_then(|b| b.get("model")),
                "stream": body.and_then(|b| b.get("stream")),
                "max_tokens": body.and_then(|b| b.get("max_tokens")),
                "messages": body.and_then(|b| b.get("messages")).and_then(Value::as_array).map(Vec::len),
                "tools": body.and_then(|b| b.get("tools")).and_then(Value::as_array).map(Vec::len),
            })
        })
        .collect();

    std::fs::write(out.join(format!("{name}.stdout.jsonl")), stdout_lines.concat())?;
    std::fs::write(out.join(format!("{name}.steps.json")), serde_json::to_string_pretty(&steps_log)? + "\n")?;
    std::fs::write(out.join(format!("{name}.requests.json")), serde_json::to_string_pretty(&requests)? + "\n")?;

    // Check: the live output through the normalizer, in the order the driver saw it.
    let kinds = replay(&steps_log, &stdout_lines, &exit);
    println!("== {name}: exit {:?} signal {:?}, {} stdout lines", exit.code, exit.signal, stdout_lines.len());
    for r in &requests {
        println!("   request {} {} model_call={}", r["method"], r["path"], r["model_call"]);
    }
    println!("   events: {}", kinds.join(" "));
    if !stderr_text.trim().is_empty() {
        println!("   stderr: {}", stderr_text.trim());
    }
    Ok(())
}

/// The normalized event kinds (with tool status / stop reason) of this recording.
fn replay(steps: &[Value], lines: &[String], exit: &ExitInfo) -> Vec<String> {
    let mut n = ClaudeCode.normalizer();
    let mut events = Vec::new();
    let mut turn = 0;
    let mut do_steps = |at: usize, n: &mut Box<dyn Normalizer>, events: &mut Vec<_>| {
        for s in steps.iter().filter(|s| s["before_line"].as_u64() == Some(at as u64)) {
            if let Some(text) = s["begin_turn"].as_str() {
                turn += 1;
                events.extend(n.begin_turn(turn, text));
            }
            if s.get("interrupt").is_some() {
                events.extend(n.interrupt_requested());
            }
        }
    };
    for (i, line) in lines.iter().enumerate() {
        do_steps(i, &mut n, &mut events);
        events.extend(n.stdout_line(line.trim_end_matches('\n')));
    }
    do_steps(lines.len(), &mut n, &mut events);
    events.extend(n.process_exited(exit));
    events
        .iter()
        .map(|e| {
            let v = serde_json::to_value(e).unwrap_or_default();
            let kind = v["kind"].as_str().unwrap_or("?").to_owned();
            match (v["tool_status"].as_str(), v["stop_reason"].as_str()) {
                (Some(s), _) => format!("{kind}({s})"),
                (_, Some(r)) => format!("{kind}({r})"),
                _ => kind,
            }
        })
        .collect()
}

/// Write on the CLI's stdin; a CLI that already exited (broken pipe) is reported, not fatal.
async fn send(stdin: &mut tokio::process::ChildStdin, bytes: &[u8]) {
    if let Err(e) = async {
        stdin.write_all(bytes).await?;
        stdin.flush().await
    }
    .await
    {
        eprintln!("   (stdin write failed: {e})");
    }
}

fn results(lines: &Arc<Mutex<Vec<String>>>) -> usize {
    lines.lock().map(|l| l.iter().filter(|x| x.starts_with("{\"type\":\"result\"")).count()).unwrap_or(0)
}

/// Poll `done` until true (a recorder watching another process; tests never do this).
async fn wait(mut done: impl FnMut() -> bool, what: &str) -> Result<()> {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > STEP_TIMEOUT {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}
