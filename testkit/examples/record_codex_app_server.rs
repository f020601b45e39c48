//! Records real `codex app-server` output for the `openai-codex` app-server normalizer fixtures.
//!
//! Runs the pinned native `codex` binary as `spaces_harnesses::openai_codex::app_server::launch`
//! plans it, against a [`ScriptedServer`] speaking OpenAI Responses on 127.0.0.1, in a temporary
//! home and workspace, and drives it with what the normalizer under test says: the plan's
//! `initialize` on stdin, then every line of `take_outgoing`, `turn_input` and `interrupt_input`,
//! exactly as the daemon will. So the recording also proves the conversation logic works against
//! the real server.
//!
//! Re-record (after bumping the pinned version, or to add a scenario):
//!
//! ```text
//! cargo run -p spaces-testkit --example record_codex_app_server -- \
//!     --tools .tools/openai-codex --out harnesses/tests/fixtures/openai_codex_app_server [SCENARIO...]
//! INSTA_UPDATE=always cargo test -p spaces-harnesses --test all openai_codex_app_server
//! ```
//!
//! Scenarios (all by default): `text` (an answer, then a follow-up turn in the same process),
//! `exec_command` (a shell call writes a file, then an answer), `interrupt` (a slow stream
//! interrupted with `turn/interrupt`, then a follow-up in the same process), `resume` (turn 1,
//! the process ends, turn 2 in a new process via `thread/resume`), `http_error` (the endpoint
//! answers 500). For each it writes `<name>.jsonl` (the server's stdout, byte for byte),
//! `<name>.stderr.txt`, and `<name>.driver.jsonl`: one line per call the recorder made, in order
//! (`launched`, `begin`, `stdout` with how many lines were fed, `interrupt`, `turn_input`,
//! `sent` with each line written, `exit` with the code), which the replay test follows and
//! checks its own `sent` lines against.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use spaces_harnesses::openai_codex::app_server::{self, AppServerNormalizer};
use spaces_harnesses::openai_codex::BINARY;
use spaces_harnesses::{EventDraft, ExitInfo, LaunchContext, Normalizer};
use spaces_testkit::{Reply, Script, ScriptedServer, Wire};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const ALL: [&str; 5] = ["text", "exec_command", "interrupt", "resume", "http_error"];

#[tokio::main]
async fn main() -> Result<()> {
    let mut tools = PathBuf::from(".tools/openai-codex");
    let mut out = PathBuf::from("harnesses/tests/fixtures/openai_codex_app_server");
    let mut names = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--tools" => tools = PathBuf::from(args.next().context("--tools DIR")?),
            "--out" => out = PathBuf::from(args.next().context("--out DIR")?),
            other => names.push(other.to_owned()),
        }
    }
    if names.is_empty() {
        names = ALL.iter().map(|s| s.to_string()).collect();
    }
    let binary = std::fs::canonicalize(tools.join(BINARY)).with_context(|| format!("no codex binary under {}", tools.display()))?;
    std::fs::create_dir_all(&out)?;
    for name in &names {
        println!("== {name}");
        record(name, &binary, &out).await.with_context(|| format!("scenario {name}"))?;
    }
    Ok(())
}

/// One turn of a process: its text, and whether to interrupt it this long after its first
/// model call arrived.
struct TurnPlan {
    text: &'static str,
    interrupt_after: Option<Duration>,
}

fn turn(text: &'static str) -> TurnPlan {
    TurnPlan { text, interrupt_after: None }
}

async fn record(name: &str, binary: &Path, out: &Path) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let (home, cwd) = (tmp.path().join("home"), tmp.path().join("work"));
    std::fs::create_dir_all(&home)?;
    std::fs::create_dir_all(&cwd)?;
    let (script, processes): (Script, Vec<Vec<TurnPlan>>) = match name {
        "text" => (
            Script::new([Reply::Text("The answer is 42.".into()), Reply::Text("You asked about the answer; it was 42.".into())]),
            vec![vec![turn("What is the answer?"), turn("What did I ask?")]],
        ),
        "exec_command" => (
            Script::new([
                Reply::ToolCall { name: "exec_command".into(), input: json!({"cmd": "printf 'hello\\n' > hello.txt && ls"}) },
                Reply::Text("Created hello.txt with one line.".into()),
            ]),
            vec![vec![turn("Create hello.txt")]],
        ),
        "interrupt" => (
            Script::new([
                Reply::SlowText {
                    text: "Counting slowly: one two three four five six seven eight nine ten.".into(),
                    chunks: 30,
                    delay_ms: 200,
                },
                Reply::Text("Resumed after the interrupt.".into()),
            ]),
            vec![vec![TurnPlan { text: "Count to ten", interrupt_after: Some(Duration::from_millis(800)) }, turn("Go on")]],
        ),
        "resume" => (
            Script::new([Reply::Text("The answer is 42.".into()), Reply::Text("You asked about the answer; it was 42.".into())]),
            vec![vec![turn("What is the answer?")], vec![turn("What did I ask?")]],
        ),
        "http_error" => {
            let err = Reply::HttpError {
                status: 500,
                body: json!({"error": {"message": "scripted failure", "type": "server_error"}}).to_string(),
            };
            (Script::new([]).with_fallback(err), vec![vec![turn("Say hi")]])
        }
        other => bail!("unknown scenario {other}; known: {ALL:?}"),
    };
    let server = ScriptedServer::start(Wire::OpenAiResponses, script).await?;
    let mut rec = Recording::default();
    let mut n = AppServerNormalizer::default();
    let mut turn_no = 0;
    for turns in &processes {
        run_process(binary, &home, &cwd, &server, &mut n, &mut turn_no, turns, &mut rec).await?;
    }
    if name == "exec_command" {
        let text = std::fs::read_to_string(cwd.join("hello.txt")).context("the tool call did not create hello.txt")?;
        println!("   hello.txt = {text:?}");
    }
    std::fs::write(out.join(format!("{name}.jsonl")), rec.stdout.join(""))?;
    std::fs::write(out.join(format!("{name}.stderr.txt")), rec.stderr.join(""))?;
    let driver: String = rec.driver.iter().map(|v| format!("{v}\n")).collect();
    std::fs::write(out.join(format!("{name}.driver.jsonl")), driver)?;
    let kinds: Vec<String> =
        rec.events.iter().filter(|e| serde_json::to_value(e).is_ok_and(|v| v["category"] != "hidden")).map(describe).collect();
    println!("   events: {}", kinds.join(", "));
    println!("   model calls: {}", server.model_calls().len());
    Ok(())
}

/// What was seen and done, across the scenario's processes.
#[derive(Default)]
struct Recording {
    stdout: Vec<String>,
    stderr: Vec<String>,
    driver: Vec<Value>,
    events: Vec<EventDraft>,
    /// Stdout lines fed since the last driver entry that was not `stdout`.
    fed: usize,
}

impl Recording {
    fn op(&mut self, v: Value) {
        if self.fed > 0 {
            self.driver.push(json!({"op": "stdout", "lines": self.fed}));
            self.fed = 0;
        }
        self.driver.push(v);
    }
}

fn describe(e: &EventDraft) -> String {
    match (e.tool_status, e.stop_reason) {
        (Some(s), _) => format!("{}({s:?})", e.kind.as_str()),
        (_, Some(r)) => format!("{}({})", e.kind.as_str(), r.as_str()),
        _ => e.kind.as_str().to_owned(),
    }
}

/// One `codex app-server` process serving `turns`, driven by `n`.
#[allow(clippy::too_many_arguments)]
async fn run_process(
    binary: &Path,
    home: &Path,
    cwd: &Path,
    server: &ScriptedServer,
    n: &mut AppServerNormalizer,
    turn_no: &mut u32,
    turns: &[TurnPlan],
    rec: &mut Recording,
) -> Result<()> {
    let env = BTreeMap::new();
    let base_url = server.base_url();
    let session = n.session_id();
    *turn_no += 1;
    let first = &turns[0];
    rec.events.extend(n.begin_turn(*turn_no, first.text));
    rec.op(json!({"op": "begin", "turn": *turn_no, "text": first.text}));
    let ctx = LaunchContext {
        run_id: "run-record",
        turn: *turn_no,
        prompt: first.text,
        session_id: session.as_deref(),
        binary,
        cwd,
        home,
        run_dir: home.parent().unwrap_or(home),
        model: None,
        base_url: Some(&base_url),
        env: &env,
        mcp_servers: &[],
        max_budget_usd: None,
        resume_at: None,
    };
    let plan = app_server::launch(&ctx);
    n.launched(&ctx);
    rec.op(json!({"op": "launched", "session": session, "cwd": cwd}));
    for (path, content) in &plan.files {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, content)?;
    }
    println!("   argv: {:?}", plan.argv);
    let mut child = tokio::process::Command::new(&plan.argv[0])
        .args(&plan.argv[1..])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()))
        .env("LANG", "C.UTF-8")
        .envs(&plan.env)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("spawn codex app-server")?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let mut lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
    let mut stderr = child.stderr.take().context("stderr")?;
    let stderr_task = tokio::spawn(async move {
        let mut buf = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut stderr, &mut buf).await.map(|_| buf)
    });
    stdin.write_all(plan.initial_stdin.as_deref().unwrap_or_default()).await?;
    let mut next = 1;
    let mut calls_at_turn_start = server.model_calls().len();
    let mut interrupt_at: Option<tokio::time::Instant> = None;
    let mut interrupted = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let mut current = first;
    loop {
        if !interrupted && interrupt_at.is_none() && current.interrupt_after.is_some() && server.model_calls().len() > calls_at_turn_start {
            interrupt_at = Some(tokio::time::Instant::now() + current.interrupt_after.unwrap_or_default());
        }
        let tick = tokio::time::sleep(Duration::from_millis(20));
        let line = tokio::select! {
            line = lines.next_line() => line?,
            () = tick => {
                if tokio::time::Instant::now() > deadline {
                    bail!("no end of the scenario within 90 s");
                }
                if interrupt_at.is_some_and(|at| tokio::time::Instant::now() >= at) {
                    interrupt_at = None;
                    interrupted = true;
                    rec.events.extend(n.interrupt_requested());
                    rec.op(json!({"op": "interrupt"}));
                    let line = n.interrupt_input();
                    rec.op(json!({"op": "interrupt_input", "line": line}));
                    let mut out: Vec<String> = line.into_iter().collect();
                    out.extend(n.take_outgoing());
                    send(&mut stdin, &out, rec).await?;
                }
                continue;
            }
        };
        let Some(line) = line else { break };
        rec.stdout.push(format!("{line}\n"));
        let events = n.stdout_line(&line);
        rec.fed += 1;
        let ended = events.iter().any(|e| e.kind.as_str() == "turn_ended");
        rec.events.extend(events);
        let out = n.take_outgoing();
        send(&mut stdin, &out, rec).await?;
        if ended {
            if next == turns.len() {
                break;
            }
            current = &turns[next];
            next += 1;
            interrupted = false;
            calls_at_turn_start = server.model_calls().len();
            *turn_no += 1;
            rec.events.extend(n.begin_turn(*turn_no, current.text));
            rec.op(json!({"op": "begin", "turn": *turn_no, "text": current.text}));
            let mut out = n.take_outgoing();
            let line = n.turn_input(current.text);
            rec.op(json!({"op": "turn_input", "text": current.text, "line": line}));
            out.extend(line);
            out.extend(n.take_outgoing());
            send(&mut stdin, &out, rec).await?;
        }
    }
    // The run is over: closing stdin ends the server.
    drop(stdin);
    while let Some(line) = tokio::time::timeout(Duration::from_secs(20), lines.next_line()).await.context("app-server did not exit")?? {
        rec.stdout.push(format!("{line}\n"));
        rec.events.extend(n.stdout_line(&line));
        rec.fed += 1;
    }
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait()).await.context("app-server did not exit")??;
    let err = String::from_utf8_lossy(&stderr_task.await??).into_owned();
    rec.stderr.push(err.clone());
    rec.events.extend(n.process_exited(&ExitInfo { code: status.code(), signal: None, stderr_tail: err, stop_requested: false }));
    rec.op(json!({"op": "exit", "code": status.code()}));
    println!("   exit: {status:?}");
    Ok(())
}

/// Write `lines` to the server and note each in the driver log.
async fn send(stdin: &mut tokio::process::ChildStdin, lines: &[String], rec: &mut Recording) -> Result<()> {
    for line in lines {
        println!("   >> {line}");
        rec.op(json!({"op": "sent", "line": line}));
        stdin.write_all(format!("{line}\n").as_bytes()).await?;
    }
    stdin.flush().await?;
    Ok(())
}
