//! Per harness (issue 31): how long a run waits for its agent, through `spacesd` beside the same
//! CLI driven directly, on the real pinned CLIs against the test kit's scripted endpoints.
//!
//! Two figures per harness and path (through the daemon with the run's own `spaces` MCP server,
//! the default; through the daemon without it, `space_tools: false`; directly):
//! - `start`: `agent_start` sent -> the agent's first own event (its `session` event: the CLI
//!   is up and named its session). Directly: the CLI spawned -> the same event from the same
//!   normalizer, with nothing between (no daemon, no shim, no sandbox).
//! - `follow-up`: the second message sent (turn 1 settled) -> the first piece of its answer
//!   (`message_delta`, or the whole `message` where the wire streams none: `openai-codex-exec`).
//!   Directly: the next turn written on the live process's stdin (or, for a per-turn CLI, its
//!   next process spawned to resume the session) -> the same piece.
//!
//! The direct path is the harness crate's own launch plan and conversation hooks
//! (`Harness::launch`, `Normalizer::launched|take_outgoing|turn_input`), as the daemon uses
//! them, so the difference is what the daemon adds. Runs are interleaved: each round measures
//! every harness through the daemon and then directly. `SPACES_BENCH_ROUNDS` rounds (default 3)
//! idle, then as many with one core spinning (a shell busy loop). It prints each round's
//! figures, then per harness and condition the min and median of each figure, the daemon's
//! median as a ratio of the direct one, and Codex's follow-up on `codex app-server`
//! (`openai-codex`) as a ratio of the same on `codex exec` (`openai-codex-exec`), both through the
//! daemon in the same rounds. Nothing is asserted.
//!
//! Run: `cargo bench -p spaces-e2e --bench harness_latency` (or `scripts/bench harnesses`); the
//! daemon is `SPACESD_BIN` (default: `target/release/spacesd`, else `target/debug/spacesd`), the
//! CLIs those `spacesd tools install` put in `SPACES_TOOLS_DIR` (default `.tools`).
//! `SPACES_BENCH_HARNESSES=claude-code,opencode` measures only those.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use spaces_harnesses::{Harness, LaunchContext, ProcessModel, StdinMode};
use spaces_sdk::client::{Client, Endpoint};
use spaces_sdk::follow::Until;
use spaces_sdk::{EventKind, SpaceAddRequest, SpaceAgentOptions};
use spaces_testkit::{Reply, Script, ScriptedServer, Wire};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// A harness under measure: its id, model wire, tools dir and binary (as the e2e suite's).
struct Target {
    id: &'static str,
    wire: Wire,
    tools: &'static str,
    binary: &'static str,
}

const CODEX_BIN: &str = "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";

const TARGETS: [Target; 5] = [
    Target {
        id: "claude-code",
        wire: Wire::AnthropicMessages,
        tools: "claude-code",
        binary: "node_modules/@anthropic-ai/claude-code-linux-x64/claude",
    },
    Target { id: "openai-codex", wire: Wire::OpenAiResponses, tools: "openai-codex", binary: CODEX_BIN },
    Target { id: "openai-codex-exec", wire: Wire::OpenAiResponses, tools: "openai-codex", binary: CODEX_BIN },
    Target { id: "opencode", wire: Wire::OpenAiChatCompletions, tools: "opencode", binary: "node_modules/opencode-linux-x64/bin/opencode" },
    Target {
        id: "gemini-cli",
        wire: Wire::GeminiStreamGenerateContent,
        tools: "gemini-cli",
        binary: "node_modules/@google/gemini-cli/bundle/gemini.js",
    },
];

const WAIT: Duration = Duration::from_secs(120);

/// Turn 1 answers at once; turn 2 streams in pieces.
fn script() -> Script {
    Script::new([]).with_fallback(Reply::SlowText { text: "an answer that streams in six pieces".into(), chunks: 6, delay_ms: 20 })
}

/// One measurement: start -> first own event, follow-up -> first piece.
#[derive(Clone, Copy)]
struct Figures {
    start: Duration,
    follow_up: Duration,
}

fn tools_dir() -> PathBuf {
    std::env::var_os("SPACES_TOOLS_DIR").map(PathBuf::from).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.tools"))
}

fn spacesd_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("SPACESD_BIN") {
        return PathBuf::from(p);
    }
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let release = target.join("release/spacesd");
    if release.is_file() {
        release
    } else {
        target.join("debug/spacesd")
    }
}

/// Is this event the first piece of turn 2's answer?
fn is_piece(kind: EventKind, turn: u32) -> bool {
    turn == 2 && matches!(kind, EventKind::MessageDelta | EventKind::Message)
}

// ---- through the daemon ------------------------------------------------------------------------

struct Daemon {
    _dir: tempfile::TempDir,
    child: std::process::Child,
    client: Client,
    root: PathBuf,
}

impl Daemon {
    async fn start() -> Daemon {
        let dir = tempfile::Builder::new().prefix("spaces-bench-").tempdir().unwrap();
        let state = dir.path().join("state");
        let root = dir.path().join("space");
        std::fs::create_dir_all(&root).unwrap();
        let child = std::process::Command::new(spacesd_bin())
            .args(["serve", "--state-dir"])
            .arg(&state)
            .env("SPACES_TOOLS_DIR", tools_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn spacesd");
        let client = Client::new(Endpoint::Unix(state.join("spacesd.sock")));
        let deadline = Instant::now() + Duration::from_secs(30);
        while client.space_list(&spaces_sdk::Empty {}).await.is_err() {
            assert!(Instant::now() < deadline, "spacesd did not come up");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let req = SpaceAddRequest {
            name: "b".into(),
            root: root.display().to_string(),
            read_only: false,
            approvals: Default::default(),
            network: Default::default(),
            replace: false,
        };
        client.space_add(&req).await.unwrap();
        Daemon { _dir: dir, child, client, root }
    }

    /// One run of `t` through the daemon: both figures. `space_tools`: the run gets its own
    /// `spaces` MCP server (the default), which the CLI starts before its session is ready.
    async fn measure(&self, t: &Target, space_tools: bool) -> Figures {
        let server = ScriptedServer::start(t.wire, script()).await.unwrap();
        let space = self.client.space("b");
        let options = SpaceAgentOptions { base_url: Some(server.base_url()), space_tools: Some(space_tools), ..Default::default() };
        let t0 = Instant::now();
        let run = space.agent_start(t.id, "Say hello.", None, Some(options)).await.unwrap().run_id;
        let mut follow = self.client.follow("b", &run, 0, Until::Stopped);
        let mut start = None;
        let mut cursor = 0;
        while let Some(e) = tokio::time::timeout(WAIT, follow.next()).await.expect("turn 1 in time").unwrap() {
            cursor = e.seq;
            if e.kind == EventKind::Session && start.is_none() {
                start = Some(t0.elapsed());
            }
            if e.kind == EventKind::TurnEnded {
                break;
            }
        }
        // Settled: the run takes the next message at once (a per-turn CLI's process exited).
        let deadline = Instant::now() + WAIT;
        loop {
            let st = space.agent_status(&run, Some(0)).await.unwrap();
            if st.accepts_message && st.status != spaces_sdk::Status::Running {
                break;
            }
            assert!(Instant::now() < deadline, "{} never settled: {st:?}", t.id);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut follow = self.client.follow("b", &run, cursor, Until::Stopped);
        let t1 = Instant::now();
        space.agent_message(&run, "And now?", None).await.unwrap();
        let mut follow_up = None;
        while let Some(e) = tokio::time::timeout(WAIT, follow.next()).await.expect("turn 2 in time").unwrap() {
            if follow_up.is_none() && is_piece(e.kind, e.turn) {
                follow_up = Some(t1.elapsed());
            }
            if e.kind == EventKind::TurnEnded && e.turn == 2 {
                break;
            }
        }
        let _ = space.agent_stop(&run).await;
        Figures { start: start.expect("a session event"), follow_up: follow_up.expect("a piece of turn 2") }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = &self.root;
    }
}

// ---- directly ----------------------------------------------------------------------------------

/// A process of the CLI started from its launch plan.
struct Direct {
    child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

async fn spawn(h: &dyn Harness, ctx: &LaunchContext<'_>) -> Direct {
    let plan = h.launch(ctx);
    for (path, content) in &plan.files {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    let mut cmd = tokio::process::Command::new(&plan.argv[0]);
    cmd.args(&plan.argv[1..]).env_clear().env("PATH", std::env::var("PATH").unwrap_or_default()).env("LANG", "C.UTF-8");
    cmd.envs(&plan.env).current_dir(ctx.cwd).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take();
    if let (Some(pipe), Some(first)) = (stdin.as_mut(), plan.initial_stdin.as_deref()) {
        pipe.write_all(first).await.unwrap();
    }
    if plan.stdin == StdinMode::Once {
        stdin = None;
    }
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    Direct { child, stdin, lines }
}

impl Direct {
    async fn write(&mut self, lines: Vec<String>) {
        if let Some(pipe) = self.stdin.as_mut() {
            for line in lines {
                pipe.write_all(format!("{line}\n").as_bytes()).await.unwrap();
            }
        }
    }

    /// Feed lines to `n` (writing what it answers) until `stop` holds for an event; the time
    /// since `t0` when `first` first held, if it did.
    async fn until(
        &mut self,
        n: &mut Box<dyn spaces_harnesses::Normalizer>,
        t0: Instant,
        first: impl Fn(EventKind, u32) -> bool,
        stop: impl Fn(EventKind, u32) -> bool,
    ) -> Option<Duration> {
        let mut seen = None;
        loop {
            let out = n.take_outgoing();
            self.write(out).await;
            let line = tokio::time::timeout(WAIT, self.lines.next_line()).await.expect("the CLI in time").unwrap();
            let Some(line) = line else { return seen };
            for e in n.stdout_line(&line) {
                if seen.is_none() && first(e.kind, e.turn) {
                    seen = Some(t0.elapsed());
                }
                if stop(e.kind, e.turn) {
                    return seen;
                }
            }
        }
    }
}

/// One run of `t` driven directly: both figures.
async fn direct(t: &Target) -> Figures {
    let h = spaces_harnesses::by_id(t.id).unwrap();
    let server = ScriptedServer::start(t.wire, script()).await.unwrap();
    let base = server.base_url();
    let tmp = tempfile::Builder::new().prefix("spaces-bench-direct-").tempdir().unwrap();
    let (home, cwd, run_dir) = (tmp.path().join("home"), tmp.path().join("work"), tmp.path().join("run"));
    for d in [&home, &cwd, &run_dir] {
        std::fs::create_dir_all(d).unwrap();
    }
    let binary = tools_dir().join(t.tools).join(t.binary);
    let env = BTreeMap::new();
    let ctx = |turn: u32, prompt: &'static str, session: Option<&'static str>| LaunchContext {
        run_id: "bench",
        turn,
        prompt,
        session_id: session,
        binary: &binary,
        cwd: &cwd,
        home: &home,
        run_dir: &run_dir,
        model: None,
        base_url: Some(&base),
        env: &env,
        mcp_servers: &[],
        max_budget_usd: None,
        resume_at: None,
    };
    let mut n = h.normalizer();
    let t0 = Instant::now();
    let first = ctx(1, "Say hello.", None);
    let mut p = spawn(h, &first).await;
    n.launched(&first);
    n.begin_turn(1, "Say hello.");
    let start = p.until(&mut n, t0, |k, _| k == EventKind::Session, |k, _| k == EventKind::TurnEnded).await;
    let follow_up = match h.process_model() {
        ProcessModel::LongLived => {
            let t1 = Instant::now();
            n.begin_turn(2, "And now?");
            let mut lines = n.take_outgoing();
            match n.turn_input("And now?") {
                Some(line) => lines.push(line),
                None => lines.push(String::from_utf8_lossy(&h.user_message("And now?")).trim_end().to_owned()),
            }
            p.write(lines).await;
            p.until(&mut n, t1, is_piece, |k, turn| k == EventKind::TurnEnded && turn == 2).await
        }
        ProcessModel::PerTurn => {
            // Its process ends after the turn; the next one resumes the session.
            while let Ok(Some(_)) = p.lines.next_line().await {}
            let _ = p.child.wait().await;
            let session: &'static str = Box::leak(n.session_id().unwrap_or_default().into_boxed_str());
            let t1 = Instant::now();
            let next = ctx(2, "And now?", Some(session));
            let mut p2 = spawn(h, &next).await;
            n.launched(&next);
            n.begin_turn(2, "And now?");
            let seen = p2.until(&mut n, t1, is_piece, |k, turn| k == EventKind::TurnEnded && turn == 2).await;
            let _ = p2.child.kill().await;
            seen
        }
    };
    let _ = p.child.kill().await;
    Figures { start: start.expect("a session event directly"), follow_up: follow_up.expect("a piece of turn 2 directly") }
}

// ---- the report --------------------------------------------------------------------------------

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn min_median(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (v[0], v[v.len() / 2])
}

fn ratio(a: Duration, b: Duration) -> String {
    format!("{:.2}x", a.as_secs_f64() / b.as_secs_f64().max(1e-9))
}

async fn rounds(targets: &[&Target], n: usize, label: &str) {
    let daemon = Daemon::start().await;
    let mut through: BTreeMap<&str, Vec<Figures>> = BTreeMap::new();
    let mut bare: BTreeMap<&str, Vec<Figures>> = BTreeMap::new();
    let mut plain: BTreeMap<&str, Vec<Figures>> = BTreeMap::new();
    for round in 1..=n {
        for t in targets {
            let a = daemon.measure(t, true).await;
            let c = daemon.measure(t, false).await;
            let b = direct(t).await;
            println!(
                "{label} round {round} {:<18} start {:>7} (no space tools {:>7}, direct {:>7})  follow-up {:>7} ({:>7}, direct {:>7})",
                t.id,
                ms(a.start),
                ms(c.start),
                ms(b.start),
                ms(a.follow_up),
                ms(c.follow_up),
                ms(b.follow_up)
            );
            through.entry(t.id).or_default().push(a);
            bare.entry(t.id).or_default().push(c);
            plain.entry(t.id).or_default().push(b);
        }
    }
    for (what, daemon_figures) in [("daemon", &through), ("daemon, no space tools", &bare)] {
        report(label, what, n, targets, daemon_figures, &plain);
    }
    if let (Some(app), Some(exec)) = (through.get("openai-codex"), through.get("openai-codex-exec")) {
        let app = min_median(app.iter().map(|f| f.follow_up).collect()).1;
        let exec = min_median(exec.iter().map(|f| f.follow_up).collect()).1;
        println!(
            "{label} codex follow-up -> first piece through the daemon: app-server {} beside exec {} ({} of exec's)",
            ms(app),
            ms(exec),
            ratio(app, exec)
        );
    }
}

/// Min / median of each figure per harness, `what` beside the direct path.
fn report(
    label: &str,
    what: &str,
    n: usize,
    targets: &[&Target],
    through: &BTreeMap<&str, Vec<Figures>>,
    plain: &BTreeMap<&str, Vec<Figures>>,
) {
    println!("== {label}, {what}: min / median over {n} rounds; its median as a ratio of the direct one");
    for t in targets {
        let (a, b) = (&through[t.id], &plain[t.id]);
        let (sa, sb) = (min_median(a.iter().map(|f| f.start).collect()), min_median(b.iter().map(|f| f.start).collect()));
        let (fa, fb) = (min_median(a.iter().map(|f| f.follow_up).collect()), min_median(b.iter().map(|f| f.follow_up).collect()));
        println!(
            "{label} {:<18} start: daemon {} / {}, direct {} / {} ({})   follow-up: daemon {} / {}, direct {} / {} ({})",
            t.id,
            ms(sa.0),
            ms(sa.1),
            ms(sb.0),
            ms(sb.1),
            ratio(sa.1, sb.1),
            ms(fa.0),
            ms(fa.1),
            ms(fb.0),
            ms(fb.1),
            ratio(fa.1, fb.1)
        );
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let only = std::env::var("SPACES_BENCH_HARNESSES").ok();
    let targets: Vec<&Target> = TARGETS
        .iter()
        .filter(|t| only.as_deref().is_none_or(|o| o.split(',').any(|id| id == t.id)))
        .filter(|t| {
            let ok = tools_dir().join(t.tools).join(t.binary).is_file();
            if !ok {
                println!("== {}: not installed in {} (spacesd tools install); left out", t.id, tools_dir().display());
            }
            ok
        })
        .collect();
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: one short round then.
    let full = std::env::args().any(|a| a == "--bench");
    let n = if full { std::env::var("SPACES_BENCH_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3) } else { 1 };
    println!("== harness latency: {} cores, load average {}", std::thread::available_parallelism().map_or(0, |n| n.get()), {
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split(' ').take(3).collect::<Vec<_>>().join(" ")
    });
    println!("== daemon: {}", spacesd_bin().display());
    rounds(&targets, n, "idle").await;
    if full {
        let mut busy = std::process::Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap();
        rounds(&targets, n, "busy").await;
        let _ = busy.kill();
        let _ = busy.wait();
    }
}
