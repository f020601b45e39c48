//! Every shell example of the README (the 5-minute tour, the web page's login, the CodeSpace tools) and the `sh`
//! blocks of docs/codespace.md and docs/operations.md, run as written: each command is read out
//! of the Markdown, given to `sh -c`, and must succeed and print what the text says it does.
//!
//! The daemon is real (`TestDaemon` is the tour's `spacesd serve &` on `$SPACES_HOME`), the
//! agent is the real Claude Code CLI, and the model is the scripted server on 127.0.0.1 — the
//! one change a reader without a provider key makes, named in the tour itself: `--base-url`.
//! Placeholders are filled the way a reader fills them: `RUN_ID` with the run just started,
//! `proc-...` with the process just started, `NAME` with the home, `SNAPSHOT` with its first
//! snapshot, `DIR` with an empty directory, `[--at SNAPSHOT]` used as given. `~` is a temp home
//! holding `my-project`. Between commands the test waits for the turn in flight to end, as a
//! reader watching the run would; `agent attach` runs in a real terminal (tmux) and leaves with
//! `/detach`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use spaces_testkit::{Reply, Script, ScriptedServer};

use super::harness::CLAUDE;

use crate::support::tmux::Tmux;
use crate::support::{require_cli, settled, spacesd_bin, TestDaemon};

const TURN: Duration = Duration::from_secs(90);
const ANSWER: &str = "scripted answer for the reader";

/// The repository's root (README.md, docs/).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The ```sh blocks of `markdown`, after the line `after` when given.
fn sh_blocks(markdown: &str, after: Option<&str>) -> Vec<String> {
    let text = match after {
        Some(heading) => markdown.split_once(heading).unwrap_or_else(|| panic!("no {heading:?}")).1,
        None => markdown,
    };
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.trim_start().starts_with("```")) {
            (None, true) if line.trim() == "```sh" => current = Some(String::new()),
            (Some(block), true) => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), false) => {
                block.push_str(line);
                block.push('\n');
            }
            _ => {}
        }
    }
    blocks
}

/// The commands of a block: a line that starts a command (not indented, not a comment), with
/// the lines that continue it (indented: a `\` continuation, a quoted argument's rest, or a
/// comment under it). Comments stay: `sh` skips them.
fn commands(block: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in block.lines() {
        let starts = !line.is_empty() && !line.starts_with(char::is_whitespace) && !line.starts_with('#');
        if starts {
            out.push(line.to_owned());
        } else if let Some(last) = out.last_mut().filter(|_| !line.trim().is_empty() && !line.starts_with('#')) {
            last.push('\n');
            last.push_str(line);
        }
    }
    out
}

/// The first token of `text` that starts with `prefix` and continues with `[0-9a-z-]`.
fn id_in(text: &str, prefix: &str) -> Option<String> {
    let at = text.find(prefix)?;
    Some(text[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect())
}

/// What the reader has: the daemon, the model, a home with `my-project`, and what earlier
/// commands printed.
struct Reader {
    d: TestDaemon,
    server: ScriptedServer,
    home: tempfile::TempDir,
    run: Option<String>,
    process: Option<String>,
    ran: Vec<String>,
}

impl Reader {
    async fn new() -> Reader {
        require_cli(CLAUDE.id, CLAUDE.binary);
        let server = ScriptedServer::start(CLAUDE.wire, Script::new([]).with_fallback(Reply::Text(ANSWER.into()))).await.unwrap();
        // The tour's `--env-from-host ANTHROPIC_API_KEY` copies the key from the daemon's own
        // environment.
        let key = ("ANTHROPIC_API_KEY".to_owned(), "sk-ant-reader-key-0123456789".to_owned());
        let d = TestDaemon::start_with(vec![key], vec!["--tcp".into(), "127.0.0.1:0".into()]).await;
        let home = tempfile::Builder::new().prefix("spaces-reader-").tempdir().unwrap();
        let project = home.path().join("my-project");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(project.join("README.md"), "# my project\nread by the tour\n").unwrap();
        std::fs::write(project.join("hello.txt"), "hello from the Space\n").unwrap();
        Reader { d, server, home, run: None, process: None, ran: Vec::new() }
    }

    /// `command` as the reader types it, placeholders filled; `None` for the steps the test
    /// environment already is (building, putting `spacesd` on `PATH`, exporting `SPACES_HOME`,
    /// serving).
    fn fill(&self, command: &str) -> Option<String> {
        let first = command.lines().next().unwrap_or_default();
        if first.starts_with("cargo build -p spacesd") || first.starts_with("export SPACES_HOME=") || first.starts_with("export PATH=") {
            return None;
        }
        if first.contains("spacesd serve &") || first.contains("spacesd serve --tcp ") {
            // The daemon of this state dir already serves, with a TCP listener.
            return None;
        }
        let bin = spacesd_bin().display().to_string();
        let mut c = command.to_owned();
        if let Some(rest) = c.strip_prefix("target/debug/spacesd ") {
            c = format!("{bin} {rest}");
        } else if let Some(rest) = c.strip_prefix("spacesd ") {
            c = format!("{bin} {rest}");
        }
        if let Some(run) = &self.run {
            c = c.replace("RUN_ID", run);
        }
        if let Some(process) = &self.process {
            c = c.replace("proc-...", process);
        }
        // Only a reader with a provider key runs the agent against Anthropic; the tour names the
        // flag for any other Anthropic-Messages endpoint.
        if first.contains(" agent start ") {
            let (head, comment) = match c.find(" #") {
                Some(at) if !c[..at].contains('\n') => c.split_at(at),
                _ => (c.as_str(), ""),
            };
            let head = head.trim_end();
            c = format!("{head} --base-url {}{comment}", self.server.base_url());
        }
        Some(c)
    }

    /// Run `command` with `sh -c` in `cwd`: (success, stdout + stderr).
    fn sh(&self, command: &str, cwd: &Path) -> (bool, String) {
        let out = crate::support::hermetic(&mut Command::new("sh"))
            .arg("-c")
            .arg(command)
            .current_dir(cwd)
            .env("HOME", self.home.path())
            .env("SPACES_HOME", self.d.state_dir())
            .stdin(Stdio::null())
            .output()
            .expect("sh");
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
    }

    /// Wait until no run of Space `demo` is mid-turn.
    async fn quiet(&self) {
        let runs = self.d.client.space("demo").agent_list().await.unwrap_or_default();
        for run in runs {
            self.d.wait_status("demo", &run.run_id, TURN, |st| settled(st) || st.status == spaces_sdk::Status::Idle).await;
        }
    }

    /// Run one command of the docs; returns what it printed.
    async fn run(&mut self, command: &str, cwd: &Path) -> String {
        let Some(filled) = self.fill(command) else {
            return String::new();
        };
        if command.contains(" agent interrupt ") {
            self.turn_in_flight().await;
        }
        let out = if command.contains(" attach RUN_ID") {
            self.attach(&filled).await
        } else {
            let (ok, out) = self.sh(&filled, cwd);
            assert!(ok, "the example failed:\n{command}\n--- it printed:\n{out}");
            out
        };
        if command.contains(" agent start ") {
            self.run = Some(id_in(&out, "run-").unwrap_or_else(|| panic!("no run id in:\n{out}")));
        }
        if command.contains("tool exec_command") {
            self.process = Some(id_in(&out, "proc-").unwrap_or_else(|| panic!("no process id in:\n{out}")));
        }
        self.quiet().await;
        self.ran.push(command.lines().next().unwrap_or_default().to_owned());
        out
    }

    /// A turn of the current run in flight (a follow-up answered slowly), for `agent interrupt`
    /// to cancel as the reader would.
    async fn turn_in_flight(&self) {
        let run = self.run.clone().expect("a run before `agent interrupt`");
        self.server.push(Reply::SlowText { text: "a long answer the reader cuts short".into(), chunks: 60, delay_ms: 500 });
        let space = self.d.client.space("demo");
        space.agent_message(&run, "Take your time", None).await.unwrap();
        self.d.wait_status("demo", &run, TURN, |st| st.status == spaces_sdk::Status::Running).await;
        let frames = self.server.frames_sent();
        crate::support::wait_until("the slow answer to stream", TURN, || self.server.frames_sent() > frames).await;
    }

    /// `agent attach` in a real terminal: the answer so far shows, `/detach` leaves.
    async fn attach(&self, command: &str) -> String {
        let line = command.lines().next().unwrap();
        let line = line.split(" #").next().unwrap().trim_end();
        let full = format!(
            "cd {} && HOME={} SPACES_HOME={} exec {line}",
            self.home.path().display(),
            self.home.path().display(),
            self.d.state_dir().display()
        );
        let tmux = Tmux::start(self.run.as_deref().unwrap_or("attach"), 100, 30, &full);
        let screen = tmux.wait_screen(TURN, "the attached run's answer", |s| s.contains(ANSWER)).await;
        tmux.keys(&["/detach", "Enter"]);
        crate::support::wait_until("attach to leave", TURN, || !tmux.alive()).await;
        screen
    }
}

/// Every command of README.md's tour and CodeSpace tools blocks, then the `sh` blocks of
/// docs/codespace.md and docs/operations.md, as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shell_example_of_the_readme_and_docs_runs_as_written() {
    let mut r = Reader::new().await;
    let cwd = r.home.path().to_path_buf();
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let blocks = sh_blocks(&readme, Some("## A 5-minute tour"));
    let block = |first: &str| blocks.iter().find(|b| b.contains(first)).unwrap_or_else(|| panic!("a README block with {first:?}")).clone();
    let (tour, web, tools) = (block("agent start claude-code"), block("spacesd ui"), block("tool exec_command"));
    assert!(
        blocks.iter().all(|b| [&tour, &web, &tools].contains(&b) || b.contains("npm install --foreground-scripts ./bindings/node")),
        "a README block this test does not run: {blocks:#?}"
    );

    // The tour.
    let mut printed = Vec::new();
    for command in commands(&tour) {
        let out = r.run(&command, &cwd).await;
        printed.push((command, out));
    }
    let said = |what: &str, needle: &str| {
        let (_, out) = printed.iter().find(|(c, _)| c.contains(what)).unwrap_or_else(|| panic!("the tour has `{what}`"));
        assert!(out.contains(needle), "`{what}` prints {needle:?}:\n{out}");
    };
    said("space add demo", "demo");
    said("capabilities", "claude-code");
    said("agent list", "RUN");
    said("agent status RUN_ID", "status");
    said("agent events RUN_ID --follow", ANSWER);
    said("attach RUN_ID", ANSWER);
    said("agent send RUN_ID", ANSWER);
    said("home list", "ops");
    let model_calls = r.server.model_calls();
    for prompt in
        ["Add a README section about tests", "Now run the tests", "Remember: deploys go out on Tuesdays", "When do deploys go out?"]
    {
        assert!(
            model_calls.iter().any(|c| c.json.as_ref().is_some_and(|j| j.to_string().contains(prompt))),
            "the model was asked {prompt:?}"
        );
    }

    // The web page's login link: it works once and sets an HttpOnly cookie.
    for command in commands(&web) {
        let out = r.run(&command, &cwd).await;
        if command.contains("spacesd ui") {
            let link = out.split_whitespace().find(|w| w.contains("/ui/login?ticket=")).unwrap_or_else(|| panic!("a login link:\n{out}"));
            let (ok, headers) = r.sh(&format!("curl -s -o /dev/null -D - '{link}'"), &cwd);
            assert!(
                ok && headers.to_ascii_lowercase().contains("set-cookie:") && headers.contains("HttpOnly"),
                "the link logs in:\n{headers}"
            );
            let (_, again) = r.sh(&format!("curl -s -o /dev/null -w '%{{http_code}}' '{link}'"), &cwd);
            assert!(again.starts_with('4'), "a second use is refused: {again}");
        }
    }

    // The CodeSpace tools.
    for command in commands(&tools) {
        let out = r.run(&command, &cwd).await;
        if command.contains("tool read '") {
            assert!(out.contains("read by the tour"), "{out}");
        }
        if command.contains("tool read_process") {
            // A cursor read returns what is there when it wakes: on a busy host `ls` may not have
            // printed everything yet. Read on from the cursor, as the docs say, until the end.
            let mut all = out.clone();
            let mut page: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
            while page["eof"] == false && !(all.contains("README.md") && all.contains("hello.txt")) {
                let next = format!(
                    "target/debug/spacesd tool read_process '{{\"process_id\": \"proc-...\", \"cursor\": {}, \"wait_ms\": 5000}}'",
                    page["cursor"]
                );
                let more = r.run(&next, &cwd).await;
                page = serde_json::from_str(&more).unwrap_or_else(|e| panic!("{e}: {more}"));
                all.push_str(&more);
            }
            assert!(all.contains("README.md") && all.contains("hello.txt"), "`ls -la` of my-project:\n{all}");
        }
    }

    // docs/codespace.md: curl over the socket and the CLI.
    let codespace = std::fs::read_to_string(repo().join("docs/codespace.md")).unwrap();
    for command in sh_blocks(&codespace, None).iter().flat_map(|b| commands(b)) {
        let out = r.run(&command, &cwd).await;
        if command.contains("hello.txt") {
            assert!(out.contains("hello from the Space"), "{command}:\n{out}");
        }
    }

    // docs/operations.md: the operator's home commands, once the runs have released the home.
    for run in r.d.client.space("demo").agent_list().await.unwrap() {
        let _ = r.d.client.space("demo").agent_stop(&run.run_id).await;
        r.d.wait_status("demo", &run.run_id, TURN, settled).await;
    }
    let operations = std::fs::read_to_string(repo().join("docs/operations.md")).unwrap();
    let snapshot = {
        let (ok, out) = r.sh(&format!("{} home snapshots ops --json", spacesd_bin().display()), &cwd);
        assert!(ok, "{out}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        let first = v.as_array().and_then(|a| a.first()).cloned().unwrap_or_else(|| panic!("a snapshot of ops: {out}"));
        first["id"].as_str().unwrap_or_else(|| panic!("a snapshot id: {first}")).to_owned()
    };
    let restored = cwd.join("restored-home");
    let mut home_commands = 0;
    for block in sh_blocks(&operations, None) {
        for command in commands(&block).into_iter().filter(|c| c.starts_with("spacesd home ")) {
            let command = command
                .replace(" NAME", " ops")
                .replace("[--at SNAPSHOT]", "--at SNAPSHOT")
                .replace("SNAPSHOT", &snapshot)
                .replace(" DIR", &format!(" {}", restored.display()));
            r.run(&command, &cwd).await;
            home_commands += 1;
        }
    }
    assert!(home_commands >= 5, "docs/operations.md's home commands ran: {home_commands}");
    assert!(
        restored.join(".claude").exists() || std::fs::read_dir(&restored).map(|d| d.count() > 0).unwrap_or(false),
        "`home restore --to DIR` filled {}",
        restored.display()
    );
    let (ok, out) = r.sh(&format!("{} home list --json", spacesd_bin().display()), &cwd);
    assert!(ok && !out.contains("\"ops\""), "`home delete ops` removed it: {out}");
    assert!(r.ran.len() >= 20, "every example ran: {:#?}", r.ran);
}

/// The README's MCP line, run as written with the real Claude Code CLI: with `spacesd` on
/// `PATH` as the tour puts it, `claude mcp add spaces -- spacesd mcp` adds the server and
/// `claude mcp list` connects to it (issue 32: the line failed with "Failed to connect" when
/// the README never put `spacesd` on `PATH`).
#[tokio::test]
async fn the_readmes_mcp_line_connects_with_the_real_claude_code() {
    require_cli(CLAUDE.id, CLAUDE.binary);
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let line = "claude mcp add spaces -- spacesd mcp";
    assert!(readme.contains(&format!("`{line}`")), "the README no longer gives `{line}`");
    assert!(readme.contains("export PATH=\"$PWD/target/debug:$PATH\""), "the tour no longer puts spacesd on PATH");
    let d = TestDaemon::start().await;
    let home = tempfile::Builder::new().prefix("spaces-reader-").tempdir().unwrap();
    let claude_dir = crate::support::tools_dir().join(CLAUDE.id).join(CLAUDE.binary).parent().unwrap().to_owned();
    let path =
        format!("{}:{}:{}", spacesd_bin().parent().unwrap().display(), claude_dir.display(), std::env::var("PATH").unwrap_or_default());
    let sh = |command: &str| {
        let out = crate::support::hermetic(&mut Command::new("sh"))
            .arg("-c")
            .arg(command)
            .current_dir(home.path())
            .env("HOME", home.path())
            .env("PATH", &path)
            .env("SPACES_HOME", d.state_dir())
            .stdin(Stdio::null())
            .output()
            .expect("sh");
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
    };
    let (ok, out) = sh(line);
    assert!(ok, "{line}:\n{out}");
    let (ok, out) = sh("claude mcp list");
    assert!(ok && out.contains("spaces: spacesd mcp") && out.contains("Connected"), "claude mcp list:\n{out}");
}
