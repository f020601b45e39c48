//! Records real ACP agent output (opencode, Gemini CLI) for the harness fixtures, driven by the
//! harness's own normalizer: every line the normalizer wants to write (`initialize` from the
//! launch plan, then `take_outgoing`, `turn_input`, `interrupt_input`) goes to the agent's stdin,
//! every stdout line is saved and fed back. The model is a [`ScriptedServer`] on 127.0.0.1.
//!
//! ```text
//! npm install --ignore-scripts --prefix /tmp/tools opencode-ai@1.18.33 @google/gemini-cli@0.61.0
//! cargo run -p spaces-testkit --example record_acp -- --tools /tmp/tools \
//!     --out harnesses/tests/fixtures/acp HARNESS [SCENARIO...]
//! ```
//!
//! HARNESS is `opencode` or `gemini-cli`. Scenarios (all by default): `text` (one answer),
//! `tool` (a shell command, then an answer), `two_turns` (a follow-up in the same session),
//! `interrupt` (a slow answer cancelled mid-stream), `resume` (turn 2 in a second process given
//! the session id: `session/load`, or a fresh session), `http_error` (the endpoint answers 500).
//! A second process's output goes to `<harness>_<scenario>.2.jsonl` (and `.2.sent.jsonl`, ...).
//! Each writes `<harness>_<scenario>.jsonl` (stdout, line for line), `.stderr.txt`, and
//! `.sent.jsonl` (what Spaces wrote on stdin). A scenario gets 120 s, then the agent is killed.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::json;
use spaces_harnesses::{ExitInfo, Harness, LaunchContext};
use spaces_testkit::{Reply, Script, ScriptedServer, Wire};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const ALL: [&str; 6] = ["text", "tool", "two_turns", "interrupt", "resume", "http_error"];

#[tokio::main]
async fn main() -> Result<()> {
    let mut tools = PathBuf::from("/tmp/tools");
    let mut out = PathBuf::from("harnesses/tests/fixtures/acp");
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
        bail!("name a harness: opencode or gemini-cli");
    }
    let id = names.remove(0);
    let Some(harness) = spaces_harnesses::acp_harnesses().into_iter().find(|h| h.id() == id) else {
        bail!("no ACP harness {id}");
    };
    if names.is_empty() {
        names = ALL.iter().map(|s| s.to_string()).collect();
    }
    let binary = tools.join(harness.install_spec().binary);
    if !binary.exists() {
        bail!("no binary at {}", binary.display());
    }
    std::fs::create_dir_all(&out)?;
    for name in &names {
        println!("== {id} {name}");
        record(harness, name, &binary, &out).await.with_context(|| format!("scenario {name}"))?;
    }
    Ok(())
}

/// The script, the prompts and whether to interrupt, for a scenario.
fn scenario(harness: &str, name: &str) -> Result<(Script, Vec<&'static str>, bool)> {
    let shell = if harness == "opencode" { "bash" } else { "run_shell_command" };
    let command = json!({"command": "echo hi > made.txt && cat made.txt", "description": "make a file"});
    Ok(match name {
        "text" => (Script::new([Reply::Text("Hello from the scripted model.".into())]), vec!["Say hello."], false),
        "tool" => (
            Script::new([Reply::ToolCall { name: shell.into(), input: command }, Reply::Text("The file says hi.".into())]),
            vec!["Make a file."],
            false,
        ),
        "two_turns" | "resume" => {
            (Script::new([Reply::Text("First answer.".into()), Reply::Text("Second answer.".into())]), vec!["One.", "Two."], false)
        }
        "interrupt" => {
            let slow =
                Reply::SlowText { text: "This answer streams slowly and is cut off by the caller. ".repeat(4), chunks: 40, delay_ms: 250 };
            (Script::new([slow]).with_fallback(Reply::Text("after".into())), vec!["Talk slowly."], true)
        }
        "http_error" => (
            Script::new([]).with_fallback(Reply::HttpError { status: 500, body: "{\"error\":{\"message\":\"scripted failure\"}}".into() }),
            vec!["Fail."],
            false,
        ),
        other => bail!("unknown scenario {other}"),
    })
}

async fn record(harness: &dyn Harness, name: &str, binary: &Path, out: &Path) -> Result<()> {
    let (script, prompts, interrupt) = scenario(harness.id(), name)?;
    let wire = if harness.id() == "opencode" { Wire::OpenAiChatCompletions } else { Wire::GeminiStreamGenerateContent };
    let server = ScriptedServer::start(wire, script).await?;
    let tmp = tempfile::tempdir()?;
    let (home, cwd, run_dir) = (tmp.path().join("home"), tmp.path().join("work"), tmp.path().join("run"));
    for d in [&home, &cwd, &run_dir] {
        std::fs::create_dir_all(d)?;
    }
    let env = Default::default();
    let base = server.base_url();
    let model = if harness.id() == "opencode" { "gpt-5.5" } else { "gemini-2.5-flash" };
    let mut n = harness.normalizer();
    let mut turn = 1usize;
    let mut interrupted = false;
    let restart = name == "resume";
    for process in 1.. {
        let session = if process == 1 { None } else { n.session_id() };
        let ctx = LaunchContext {
            run_id: "rec",
            turn: turn as u32,
            prompt: prompts[turn - 1],
            session_id: session.as_deref(),
            binary,
            cwd: &cwd,
            home: &home,
            run_dir: &run_dir,
            model: Some(model),
            base_url: Some(&base),
            env: &env,
            mcp_servers: &[],
            max_budget_usd: None,
            resume_at: None,
        };
        let plan = harness.launch(&ctx);
        for (path, content) in &plan.files {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(path, content)?;
        }
        let mut cmd = tokio::process::Command::new(&plan.argv[0]);
        cmd.args(&plan.argv[1..]).env_clear().env("PATH", std::env::var("PATH").unwrap_or_default()).env("LANG", "C.UTF-8");
        cmd.envs(&plan.env).current_dir(&cwd).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        let mut child = cmd.spawn().with_context(|| format!("spawning {:?}", plan.argv))?;
        let mut stdin = child.stdin.take().context("stdin")?;
        let mut lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
        let mut stderr = child.stderr.take().context("stderr")?;
        let err_task = tokio::spawn(async move {
            let mut s = String::new();
            let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut s).await;
            s
        });
        n.launched(&ctx);
        let mut sent = vec![String::from_utf8_lossy(plan.initial_stdin.as_deref().unwrap_or_default()).trim_end().to_owned()];
        stdin.write_all(plan.initial_stdin.as_deref().unwrap_or_default()).await?;
        n.begin_turn(turn as u32, prompts[turn - 1]);
        let mut recorded = Vec::new();
        let mut more = false;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            for line in n.take_outgoing() {
                stdin.write_all(format!("{line}\n").as_bytes()).await?;
                sent.push(line);
            }
            let next = tokio::time::timeout_at(deadline, lines.next_line()).await;
            let Ok(Ok(Some(line))) = next else {
                println!("   (stdout ended or timed out)");
                break;
            };
            recorded.push(line.clone());
            let events = n.stdout_line(&line);
            for e in &events {
                println!(
                    "   {} {:?} {}",
                    e.kind.as_str(),
                    e.category,
                    e.summary.as_deref().or(e.text.as_deref()).unwrap_or("").chars().take(100).collect::<String>()
                );
            }
            if interrupt && !interrupted && events.iter().any(|e| e.kind.as_str() == "message_delta") {
                interrupted = true;
                if let Some(cancel) = n.interrupt_input() {
                    stdin.write_all(format!("{cancel}\n").as_bytes()).await?;
                    sent.push(cancel);
                }
                n.interrupt_requested();
            }
            if events.iter().any(|e| e.kind.as_str() == "turn_ended") {
                if turn < prompts.len() && restart {
                    // The next turn in a new process that resumes the session.
                    turn += 1;
                    more = true;
                    break;
                } else if turn < prompts.len() {
                    turn += 1;
                    let text = prompts[turn - 1];
                    n.begin_turn(turn as u32, text);
                    if let Some(line) = n.turn_input(text) {
                        stdin.write_all(format!("{line}\n").as_bytes()).await?;
                        sent.push(line);
                    }
                } else {
                    break;
                }
            }
        }
        drop(stdin);
        let status = match tokio::time::timeout(Duration::from_secs(10), child.wait()).await {
            Ok(s) => s?,
            Err(_) => {
                child.kill().await?;
                child.wait().await?
            }
        };
        let err = err_task.await.unwrap_or_default();
        let exit = ExitInfo { code: status.code(), signal: std::os::unix::process::ExitStatusExt::signal(&status), ..ExitInfo::default() };
        for e in n.process_exited(&exit) {
            println!("   {} {}", e.kind.as_str(), e.summary.as_deref().unwrap_or(""));
        }
        let stem = if process == 1 {
            format!("{}_{name}", harness.id().replace('-', "_"))
        } else {
            format!("{}_{name}.{process}", harness.id().replace('-', "_"))
        };
        std::fs::write(out.join(format!("{stem}.jsonl")), recorded.iter().map(|l| format!("{l}\n")).collect::<String>())?;
        std::fs::write(out.join(format!("{stem}.sent.jsonl")), sent.iter().map(|l| format!("{l}\n")).collect::<String>())?;
        std::fs::write(out.join(format!("{stem}.stderr.txt")), &err)?;
        let paths: Vec<String> = server.requests().iter().map(|r| format!("{} {} model_call={}", r.method, r.path, r.model_call)).collect();
        println!("   exit {status}; {} model calls; requests: {paths:?}", server.model_calls().len());
        if !more {
            break;
        }
    }
    Ok(())
}
