//! Records real Codex CLI output for the `openai-codex` harness fixtures.
//!
//! Runs the pinned native `codex` binary (launched exactly as the harness plans it:
//! `spaces_harnesses::openai_codex`) against a [`ScriptedServer`] speaking OpenAI Responses, in a
//! temporary home and workspace, and saves what it printed.
//!
//! Re-record (after bumping the pinned version, or to add a scenario):
//!
//! ```text
//! npm install --prefix /tmp/tools @openai/codex@0.171.0     # once; keep optional deps
//! cargo run -p spaces-testkit --example record_codex -- \
//!     --tools /tmp/tools --out harnesses/tests/fixtures/openai_codex [SCENARIO...]
//! cargo insta test -p spaces-harnesses --review            # or INSTA_UPDATE=always cargo test
//! ```
//!
//! Scenarios (all by default): `exec_command` (a shell call creates a file, then text),
//! `exec_failed` (a command exits 2), `apply_patch` (a freeform patch adds a file), `resume` (two
//! turns, the second via `exec resume`), `interrupt` (SIGINT to the process group mid slow
//! stream, then a resume), `http_error` (the endpoint answers 500) (and `path_probe`, not a fixture: what a shell command finds on `PATH`; set
//! `TMPDIR` outside `/tmp` to see Codex's helper aliases). For each turn it writes `<name>.jsonl` (stdout, byte for byte),
//! `<name>.stderr.txt`, and `<name>.run.json` (the exit code, every request path, and a summary
//! of each model call Codex made: model, input items, tool names), and prints them. The model server is always
//! started before the CLI (with connection refused Codex retries forever).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use spaces_harnesses::openai_codex::{OpenAiCodex, BINARY};
use spaces_harnesses::{ExitInfo, Harness, LaunchContext};
use spaces_testkit::{Reply, Script, ScriptedServer, Wire};

const ALL: [&str; 6] = ["exec_command", "exec_failed", "apply_patch", "resume", "interrupt", "http_error"];

#[tokio::main]
async fn main() -> Result<()> {
    let mut tools = PathBuf::from("/tmp/tools");
    let mut out = PathBuf::from("harnesses/tests/fixtures/openai_codex");
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
    let binary = tools.join(BINARY);
    if !binary.exists() {
        bail!("no codex binary at {}", binary.display());
    }
    std::fs::create_dir_all(&out)?;
    for name in &names {
        println!("== {name}");
        record(name, &binary, &out).await.with_context(|| format!("scenario {name}"))?;
    }
    Ok(())
}

/// One run directory: a home and a workspace under a temp dir.
struct Dirs {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    cwd: PathBuf,
}

fn dirs() -> Result<Dirs> {
    let tmp = tempfile::tempdir()?;
    let home = tmp.path().join("home");
    let cwd = tmp.path().join("work");
    std::fs::create_dir_all(&home)?;
    std::fs::create_dir_all(&cwd)?;
    Ok(Dirs { _tmp: tmp, home, cwd })
}

/// What one codex process printed and how it ended.
struct Turn {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    status: std::process::ExitStatus,
}

impl Turn {
    fn thread_id(&self) -> Option<String> {
        let text = String::from_utf8_lossy(&self.stdout);
        let line = text.lines().next()?;
        let v: Value = serde_json::from_str(line).ok()?;
        v.get("thread_id").and_then(Value::as_str).map(str::to_owned)
    }
}

async fn record(name: &str, binary: &Path, out: &Path) -> Result<()> {
    let d = dirs()?;
    match name {
        "exec_command" => {
            let script = Script::new([
                Reply::ToolCall { name: "exec_command".into(), input: json!({"cmd": "printf 'hello\\n' > hello.txt && ls -la"}) },
                Reply::Text("Created hello.txt with one line.".into()),
            ]);
            let server = ScriptedServer::start(Wire::OpenAiResponses, script).await?;
            let t = run(binary, &d, &server, 1, "Create hello.txt", None, None).await?;
            save(out, name, &t, &server)?;
            check_file(&d.cwd.join("hello.txt"))?;
        }
        "exec_failed" => {
            let script = Script::new([
                Reply::ToolCall { name: "exec_command".into(), input: json!({"cmd": "ls missing-dir"}) },
                Reply::Text("The directory does not exist.".into()),
            ]);
            let server = ScriptedServer::start(Wire::OpenAiResponses, script).await?;
            let t = run(binary, &d, &server, 1, "List missing-dir", None, None).await?;
            save(out, name, &t, &server)?;
        }
        "apply_patch" => {
            let patch = "*** Begin Patch\n*** Add File: notes.md\n+# Notes\n+first line\n*** End Patch\n";
            let script = Script::new([
                Reply::CustomToolCall { name: "apply_patch".into(), input: patch.into() },
                Reply::Text("Added notes.md.".into()),
            ]);
            let server = ScriptedServer::start(Wire::OpenAiResponses, script).await?;
            let t = run(binary, &d, &server, 1, "Write notes.md", None, None).await?;
            save(out, name, &t, &server)?;
            check_file(&d.cwd.join("notes.md"))?;
        }
        "resume" => {
            let script =
                Script::new([Reply::Text("The answer is 42.".into()), Reply::Text("You asked about the answer; it was 42.".into())]);
            let server = ScriptedServer::start(Wire::OpenAiResponses, script).await?;
            let t1 = run(binary, &d, &server, 1, "What is the answer?", None, None).await?;
            let thread = t1.thread_id().context("no thread id in turn 1")?;
            save(out, "resume.turn1", &t1, &server)?;
            let t2 = run(binary, &d, &server, 2, "What did I ask?", Some(&thread), None).await?;
            save(out, "resume.turn2", &t2, &server)?;
        }
        "interrupt" => {
            let script = Script::new([
                Reply::SlowText {
                    text: "Counting slowly: one two three four five six seven eight nine ten.".into(),
                    chunks: 30,
                    delay_ms: 200,
                },
                Reply::Text("Resumed after the interrupt.".into()),
            ]);
            let server = ScriptedServer::start(Wire::OpenAiResponses, script).await?;
            let t1 = run(binary, &d, &server, 1, "Count to ten", None, Some(Duration::from_millis(800))).await?;
            let thread = t1.thread_id().context("no thread id in turn 1")?;
            save(out, "interrupt.turn1", &t1, &server)?;
            let t2 = run(binary, &d, &server, 2, "Go on", Some(&thread), None).await?;
            save(out, "interrupt.turn2", &t2, &server)?;
        }
        "http_error" => {
            let err = Reply::HttpError {
                status: 500,
                body: json!({"error": {"message": "scripted failure", "type": "server_error"}}).to_string(),
            };
            let server = ScriptedServer::start(Wire::OpenAiResponses, Script::new([]).with_fallback(err)).await?;
            let t = run(binary, &d, &server, 1, "Say hi", None, None).await?;
            save(out, name, &t, &server)?;
        }
        "path_probe" => {
            // Not a fixture: shows which helper tools a shell command finds on PATH.
            let script = Script::new([
                Reply::ToolCall { name: "exec_command".into(), input: json!({"cmd": "command -v rg; command -v apply_patch; echo $PATH"}) },
                Reply::Text("ok".into()),
            ]);
            let server = ScriptedServer::start(Wire::OpenAiResponses, script).await?;
            let t = run(binary, &d, &server, 1, "Probe PATH", None, None).await?;
            save(out, name, &t, &server)?;
        }
        other => bail!("unknown scenario {other}; known: {ALL:?}"),
    }
    Ok(())
}

fn check_file(path: &Path) -> Result<()> {
    let text = std::fs::read_to_string(path).with_context(|| format!("the tool call did not create {}", path.display()))?;
    println!("   {} = {text:?}", path.display());
    Ok(())
}

/// Run one codex process as the harness plans it; with `interrupt_after`, send SIGINT to its
/// process group that long after the first model call arrived.
async fn run(
    binary: &Path,
    d: &Dirs,
    server: &ScriptedServer,
    turn: u32,
    prompt: &str,
    session_id: Option<&str>,
    interrupt_after: Option<Duration>,
) -> Result<Turn> {
    let env = BTreeMap::new();
    let base_url = server.base_url();
    let ctx = LaunchContext {
        run_id: "run-record",
        turn,
        prompt,
        session_id,
        binary,
        cwd: &d.cwd,
        home: &d.home,
        run_dir: d.home.parent().unwrap_or(&d.home),
        model: None,
        base_url: Some(&base_url),
        env: &env,
        mcp_servers: &[],
        max_budget_usd: None,
        resume_at: None,
    };
    let plan = OpenAiCodex.launch(&ctx);
    for (path, content) in &plan.files {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, content)?;
    }
    println!("   argv: {:?}", plan.argv);
    let mut cmd = tokio::process::Command::new(&plan.argv[0]);
    cmd.args(&plan.argv[1..])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()))
        .env("LANG", "C.UTF-8")
        .envs(&plan.env)
        .current_dir(&d.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let calls_before = server.model_calls().len();
    let started = std::time::Instant::now();
    let child = cmd.spawn().context("spawn codex")?;
    let pid = child.id().context("no pid")?;
    if let Some(after) = interrupt_after {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while server.model_calls().len() == calls_before {
            if std::time::Instant::now() > deadline {
                bail!("codex never called the model");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(after).await;
        println!("   SIGINT to process group {pid} at {:?}", started.elapsed());
        let st = std::process::Command::new("kill").args(["-INT", "--", &format!("-{pid}")]).status()?;
        if !st.success() {
            bail!("kill failed");
        }
    }
    let output =
        tokio::time::timeout(Duration::from_secs(120), child.wait_with_output()).await.context("codex did not finish within 120 s")??;
    println!("   exit: {:?} after {:?}", output.status, started.elapsed());
    Ok(Turn { stdout: output.stdout, stderr: output.stderr, status: output.status })
}

/// Write the turn's stdout, stderr and a summary of the model calls so far.
fn save(out: &Path, name: &str, t: &Turn, server: &ScriptedServer) -> Result<()> {
    std::fs::write(out.join(format!("{name}.jsonl")), &t.stdout)?;
    std::fs::write(out.join(format!("{name}.stderr.txt")), &t.stderr)?;
    let calls: Vec<Value> = server.model_calls().iter().map(summarize).collect();
    let requests = json!({
        "exit_code": t.status.code(),
        "all_paths": server.requests().iter().map(|r| format!("{} {}", r.method, r.path)).collect::<Vec<_>>(),
        "model_calls": calls,
    });
    std::fs::write(out.join(format!("{name}.run.json")), serde_json::to_string_pretty(&requests)? + "\n")?;
    print!("{}", String::from_utf8_lossy(&t.stdout));
    // What the harness makes of it (a fresh normalizer per process, as a sanity check).
    let mut n = OpenAiCodex.normalizer();
    let mut events = n.begin_turn(1, "recorded");
    for line in String::from_utf8_lossy(&t.stdout).lines() {
        events.extend(n.stdout_line(line));
    }
    events.extend(n.process_exited(&ExitInfo {
        code: t.status.code(),
        signal: None,
        stderr_tail: String::from_utf8_lossy(&t.stderr).into_owned(),
        stop_requested: false,
    }));
    let kinds: Vec<String> = events
        .iter()
        .map(|e| match (e.tool_status, e.stop_reason) {
            (Some(s), _) => format!("{}({s:?})", e.kind.as_str()),
            (_, Some(r)) => format!("{}({})", e.kind.as_str(), r.as_str()),
            _ => e.kind.as_str().to_owned(),
        })
        .collect();
    println!("   events: {}", kinds.join(", "));
    Ok(())
}

/// The parts of a Responses request worth reading: model, flags, tool names, input items with
/// their text cut to 200 chars (the instructions and environment context are long).
fn summarize(r: &spaces_testkit::RecordedRequest) -> Value {
    let Some(body) = &r.json else {
        return json!({"path": r.path, "body": null});
    };
    let cut = |s: &str| -> String {
        if s.chars().count() > 200 {
            s.chars().take(200).collect::<String>() + "…"
        } else {
            s.to_owned()
        }
    };
    let input: Vec<Value> = body
        .get("input")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .map(|it| {
                    let mut o = serde_json::Map::new();
                    for k in ["type", "role", "name", "call_id"] {
                        if let Some(v) = it.get(k) {
                            o.insert(k.into(), v.clone());
                        }
                    }
                    let texts: Vec<String> = it
                        .get("content")
                        .and_then(Value::as_array)
                        .map(|c| c.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).map(cut).collect())
                        .unwrap_or_default();
                    if !texts.is_empty() {
                        o.insert("text".into(), json!(texts));
                    }
                    for k in ["arguments", "input", "output"] {
                        if let Some(v) = it.get(k) {
                            let s = v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string());
                            o.insert(k.into(), json!(cut(&s)));
                        }
                    }
                    Value::Object(o)
                })
                .collect()
        })
        .unwrap_or_default();
    let tools: Vec<Value> = body
        .get("tools")
        .and_then(Value::as_array)
        .map(|t| t.iter().map(|x| x.get("name").cloned().unwrap_or_else(|| x.get("type").cloned().unwrap_or(Value::Null))).collect())
        .unwrap_or_default();
    let auth = r.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("authorization")).map(|(_, v)| v.clone());
    json!({
        "path": r.path,
        "authorization": auth,
        "model": body.get("model"),
        "stream": body.get("stream"),
        "store": body.get("store"),
        "instructions_chars": body.get("instructions").and_then(Value::as_str).map(|s| s.chars().count()),
        "tools": tools,
        "input": input,
    })
}
