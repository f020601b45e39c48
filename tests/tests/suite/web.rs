//! The web page of runs in a real browser: headless Chromium (Debian's `chromium` package)
//! driven by playwright-core (`tests/web/`, pinned, `npm ci` by scripts/test; it never downloads
//! a browser). A daemon with a TCP listener, the real Claude Code CLI against the scripted model,
//! `spacesd ui` for the login link; the script `tests/web/run-page.mjs` logs in (a second use of
//! the link is refused), watches the run appear in the list and its first turn complete live
//! (a tool call on one line that its updates replace, then the answer growing in one live line
//! before the turn ends, which the whole message replaces),
//! sends a follow-up and sees it answered, interrupts a slow turn, stops the run, and checks that
//! a request without the cookie, with a foreign Origin or without the CSRF token is refused
//! (the run is started with `show`, whose notes give its page's URL). Its
//! screenshots go to the test's temp dir; with `SPACES_UPDATE_DOCS=1` the run page's is copied
//! to docs/img/ui-run.png (the README shows it).
//!
//! Issue 32 ("a newcomer's first hour"): `tests/web/console-page.mjs` opens a finished run whose
//! answer is Markdown and checks that it reads as an agent console: the Markdown rendered (and
//! HTML in it left as text), the header's label, prompt, harness, model, usage and duration, a
//! folded tool call, no raw event kind in the text, the icon. Its screenshots go to
//! docs/img/web-run.png and docs/img/web-markdown.png with `SPACES_UPDATE_DOCS=1`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use spaces_sdk::{AgentStartRequest, EventKind, SpaceAgentOptions, Status, StopReason};
use spaces_testkit::{Reply, Script, ScriptedServer};

use super::harness::CLAUDE;
use crate::support::{describe, require_cli, scaled, wait_until, TestDaemon};

/// How long the browser script may take (about half a minute).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(300);
const TURN: Duration = Duration::from_secs(120);
const CHROMIUM: &str = "/usr/bin/chromium";

/// The scripted answer of the Markdown test: what agents write, plus HTML that must stay text.
const MARKDOWN_ANSWER: &str = "# Summary\n\nI wrote `hello.txt` with **bold words** and *emphasis*. Run `cargo test` next.\n\n\
- first item\n- second item\n- third item\n\n1. one\n2. two\n\n\
```rust\nfn main() {\n    println!(\"hello <world>\");\n}\n```\n\n\
See [the docs](https://example.com/docs) or [this](javascript:alert(1)).\n\n\
<script>window.pwned = 1</script> <img src=x onerror=\"window.pwned = 2\">\n";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `tests/web/run-page.mjs`, once `npm ci` has installed playwright-core, and Chromium.
fn browser_script() -> PathBuf {
    web_script("run-page.mjs")
}

/// `tests/web/<name>`, once `npm ci` has installed playwright-core, and Chromium.
fn web_script(name: &str) -> PathBuf {
    let dir = repo().join("tests/web");
    let pw = dir.join("node_modules/playwright-core/package.json");
    assert!(
        pw.is_file(),
        "playwright-core is not installed at {}: run scripts/test, which runs `npm ci` in {}",
        pw.display(),
        dir.display()
    );
    assert!(Path::new(CHROMIUM).is_file(), "{CHROMIUM} is missing: apt-get install -y chromium (.ci/run installs it)");
    dir.join(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_page_logs_in_once_follows_a_run_live_and_steers_it() {
    let script = browser_script();
    require_cli(CLAUDE.id, CLAUDE.binary);
    let model = ScriptedServer::start(CLAUDE.wire, Script::new([])).await.unwrap();
    let d = TestDaemon::start_with(vec![], vec!["--tcp".into(), "127.0.0.1:0".into()]).await;
    let root = d.space("s").await;
    // Turn 1: a tool call, then a slow answer; turn 2: a quick one; turn 3: one slow enough to
    // interrupt.
    for reply in [
        CLAUDE.create_file(&root, "hello.txt", "hello from the agent\n"),
        Reply::SlowText { text: "First answer, streamed slowly.".into(), chunks: 30, delay_ms: 400 },
        Reply::Text("Answer to the follow-up.".into()),
        Reply::SlowText { text: "a very long answer that will be cut".into(), chunks: 60, delay_ms: 500 },
    ] {
        model.push(reply);
    }
    let (ok, link) = d.cli(&["ui"]);
    assert!(ok, "spacesd ui: {link}");
    let link = link.lines().next().unwrap_or_default().trim().to_owned();
    let addr = std::fs::read_to_string(d.state_dir().join("tcp.addr")).unwrap();
    assert!(link.starts_with(&format!("http://{}/ui/login?ticket=", addr.trim())), "{link}");

    let work = d.dir.path();
    let shots = work.join("shots");
    std::fs::create_dir_all(&shots).unwrap();
    let (list_open, interrupt_now) = (work.join("list-open"), work.join("interrupt-now"));
    let (out_path, err_path) = (work.join("browser.stdout"), work.join("browser.stderr"));
    let mut child = tokio::process::Command::new("node")
        .arg(&script)
        .args(["--link", &link, "--space", "s", "--chromium", CHROMIUM])
        .args(["--wait-ms", &scaled(TURN).as_millis().to_string()])
        .arg("--shots")
        .arg(&shots)
        .arg("--list-open")
        .arg(&list_open)
        .arg("--interrupt-now")
        .arg(&interrupt_now)
        .current_dir(work)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .expect("node");
    let pgid = nix::unistd::Pid::from_raw(child.id().expect("pid") as i32);
    let output = || {
        format!(
            "--- browser stdout:\n{}--- browser stderr:\n{}--- end",
            std::fs::read_to_string(&out_path).unwrap_or_default(),
            std::fs::read_to_string(&err_path).unwrap_or_default()
        )
    };

    // The test's side: start the run once the list is open (so the page sees it arrive and its
    // first turn finish), and say when the third turn's slow answer is streaming.
    let run = std::sync::Mutex::new(None::<String>);
    let coordinate = async {
        wait_until("the browser to open the list of runs", TURN, || list_open.exists()).await;
        let req = AgentStartRequest {
            space: "s".into(),
            agent: CLAUDE.id.into(),
            prompt: "Say hello, slowly.".into(),
            show: Some(true),
            options: Some(SpaceAgentOptions { base_url: Some(model.base_url()), ..Default::default() }),
            request_id: None,
            traceparent: None,
        };
        let report = d.client.agent_start(&req).await.unwrap();
        let id = report.run_id.clone();
        let page = format!("its page on the web: http://{}/ui/spaces/s/runs/{id} ", addr.trim());
        assert!(report.notes.iter().any(|n| n.starts_with(&page)), "`show` notes the run's page: {:?}", report.notes);
        *run.lock().unwrap() = Some(id.clone());
        d.wait_turn_end("s", &id, 2, TURN).await;
        let before = model.frames_sent();
        d.wait_for_event("s", &id, TURN, |e| e.turn == 3 && e.kind == EventKind::UserMessage).await;
        wait_until("the slow answer to stream", TURN, || model.frames_sent() >= before + 6).await;
        std::fs::write(&interrupt_now, "now\n").unwrap();
    };
    let t0 = Instant::now();
    let limit = scaled(SCRIPT_TIMEOUT);
    let status = tokio::time::timeout(limit, async {
        tokio::pin!(coordinate);
        tokio::select! {
            st = child.wait() => st,
            () = &mut coordinate => child.wait().await,
        }
    })
    .await;
    let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
    let _ = child.wait().await;
    match status {
        Err(_) => panic!("the browser script did not finish within {limit:?}\n{}", output()),
        Ok(Err(e)) => panic!("waiting for the browser script: {e}\n{}", output()),
        Ok(Ok(st)) => {
            let out = std::fs::read_to_string(&out_path).unwrap_or_default();
            assert!(st.success() && out.contains("PASS"), "the browser script failed ({st}):\n{}", output());
        }
    }
    println!("browser script passed in {:.1} s\n{}", t0.elapsed().as_secs_f64(), output());

    // What the page did, as the API sees it.
    let run = run.lock().unwrap().clone().expect("the run was started");
    let events = d.events("s", &run).await;
    let ends: Vec<_> = events.iter().filter(|e| e.kind == EventKind::TurnEnded).map(|e| (e.turn, e.stop_reason)).collect();
    assert_eq!(
        ends.get(..3),
        Some(&[(1, Some(StopReason::EndTurn)), (2, Some(StopReason::EndTurn)), (3, Some(StopReason::Interrupted))][..]),
        "{}",
        describe(&events)
    );
    let said = |turn: u32, text: &str| {
        events.iter().any(|e| e.turn == turn && e.kind == EventKind::UserMessage && e.text.as_deref() == Some(text))
    };
    assert!(said(2, "What comes next?") && said(3, "Now answer very slowly."), "{}", describe(&events));
    let st = d.client.space("s").agent_status(&run, Some(0)).await.unwrap();
    assert_eq!(st.status, Status::Stopped, "{st:#?}");
    assert_eq!(std::fs::read_to_string(root.join("hello.txt")).unwrap(), "hello from the agent\n");

    let shot = shots.join("ui-run.png");
    assert!(std::fs::metadata(&shot).map(|m| m.len() > 10_000).unwrap_or(false), "a screenshot of the run page at {}", shot.display());
    if std::env::var_os("SPACES_UPDATE_DOCS").is_some() {
        let img = repo().join("docs/img");
        std::fs::create_dir_all(&img).unwrap();
        for name in ["ui-run.png", "ui-runs.png"] {
            std::fs::copy(shots.join(name), img.join(name)).unwrap();
        }
    }
}

/// Issue 32: a finished run whose answer is Markdown, seen as a newcomer sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_page_renders_markdown_safely_and_names_everything_for_people() {
    let script = web_script("console-page.mjs");
    require_cli(CLAUDE.id, CLAUDE.binary);
    let model = ScriptedServer::start(CLAUDE.wire, Script::new([])).await.unwrap();
    let d = TestDaemon::start_with(vec![], vec!["--tcp".into(), "127.0.0.1:0".into()]).await;
    let root = d.space("s").await;
    model.push(CLAUDE.create_file(&root, "hello.txt", "hello from the agent\n"));
    model.push(Reply::Text(MARKDOWN_ANSWER.into()));
    let (label, prompt) = ("Markdown demo", "Write hello.txt, then sum up what you did in Markdown.");
    let req = AgentStartRequest {
        space: "s".into(),
        agent: CLAUDE.id.into(),
        prompt: prompt.into(),
        show: None,
        options: Some(SpaceAgentOptions { base_url: Some(model.base_url()), label: Some(label.into()), ..Default::default() }),
        request_id: None,
        traceparent: None,
    };
    let run = d.client.agent_start(&req).await.unwrap().run_id;
    let end = d.wait_turn_end("s", &run, 1, scaled(TURN)).await;
    assert_eq!(end.stop_reason, Some(StopReason::EndTurn), "{}", describe(&d.events("s", &run).await));

    // What the page must say the run spent: the ledger's totals, as the API gives them.
    let u = d.wait_status("s", &run, scaled(TURN), |s| s.usage.turns == 1).await.usage;
    assert!(u.input_tokens > 0 && u.tool_calls == 1, "{u:?}");
    let cached = if u.cached_input_tokens > 0 { format!(" ({} cached)", thousands(u.cached_input_tokens)) } else { String::new() };
    let usage = format!(
        "{} tokens in{cached} · {} out · {}${:.4} · 1 tool call",
        thousands(u.input_tokens),
        thousands(u.output_tokens),
        if u.cost_estimated { "~" } else { "" },
        u.cost_usd
    );
    let (ok, link) = d.cli(&["ui"]);
    assert!(ok, "spacesd ui: {link}");
    let link = link.lines().next().unwrap_or_default().trim().to_owned();
    let addr = std::fs::read_to_string(d.state_dir().join("tcp.addr")).unwrap();
    let work = d.dir.path();
    let shots = work.join("shots");
    std::fs::create_dir_all(&shots).unwrap();
    let (out_path, err_path) = (work.join("browser.stdout"), work.join("browser.stderr"));
    let mut child = tokio::process::Command::new("node")
        .arg(&script)
        .args(["--link", &link, "--chromium", CHROMIUM, "--label", label, "--prompt", &prompt[..30], "--usage", &usage])
        .args(["--run", &format!("http://{}/ui/spaces/s/runs/{run}", addr.trim())])
        .args(["--wait-ms", &scaled(TURN).as_millis().to_string()])
        .arg("--shots")
        .arg(&shots)
        .current_dir(work)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .expect("node");
    let pgid = nix::unistd::Pid::from_raw(child.id().expect("pid") as i32);
    let limit = scaled(SCRIPT_TIMEOUT);
    let status = tokio::time::timeout(limit, child.wait()).await;
    let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
    let _ = child.wait().await;
    let output = format!(
        "--- browser stdout:\n{}--- browser stderr:\n{}--- end",
        std::fs::read_to_string(&out_path).unwrap_or_default(),
        std::fs::read_to_string(&err_path).unwrap_or_default()
    );
    match status {
        Err(_) => panic!("the browser script did not finish within {limit:?}\n{output}"),
        Ok(Err(e)) => panic!("waiting for the browser script: {e}\n{output}"),
        Ok(Ok(st)) => assert!(st.success() && output.contains("PASS"), "the browser script failed ({st}):\n{output}"),
    }
    println!("{output}");
    for name in ["web-run.png", "web-markdown.png"] {
        let shot = shots.join(name);
        assert!(std::fs::metadata(&shot).map(|m| m.len() > 5_000).unwrap_or(false), "a screenshot at {}", shot.display());
    }
    if std::env::var_os("SPACES_UPDATE_DOCS").is_some() {
        let img = repo().join("docs/img");
        std::fs::create_dir_all(&img).unwrap();
        for name in ["web-run.png", "web-markdown.png"] {
            std::fs::copy(shots.join(name), img.join(name)).unwrap();
        }
    }
}

/// `n` with commas between thousands, as the page's `toLocaleString("en")` writes it.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
