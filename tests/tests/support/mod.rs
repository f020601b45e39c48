//! Test support: a real `spacesd` on a temp state dir ([`TestDaemon`]), Spaces in temp dirs, and
//! waits that long-poll the event log instead of sleeping.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod mcp;
pub mod s3;
pub mod tmpfs;
pub mod tmux;

/// One test per harness from `async fn name(h: Harness)` functions of the invoking module:
/// `per_harness!(a, b)` makes `claude_code::a`, `openai_codex::a`, ... calling `super::a` with
/// the module's `CLAUDE` and `CODEX`.
macro_rules! per_harness {
    ($($name:ident),*) => {
        mod claude_code {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $name() { super::$name(super::CLAUDE).await } )*
        }
        mod openai_codex {
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $name() { super::$name(super::CODEX).await } )*
        }
    };
}
pub(crate) use per_harness;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use spaces_sdk::client::{Client, Endpoint};
use spaces_sdk::{AgentEventsRequest, AgentStartRequest, Event, RunStatus, SpaceAddRequest, Status};

/// The one knob for wall-clock limits: `SPACES_TEST_TIME_SCALE` (a positive number, default 1)
/// multiplies every timeout the waits below are given, so a slow or shared machine can run the
/// suite with `SPACES_TEST_TIME_SCALE=3` instead of editing limits. Limits only: a test never
/// waits longer than it must, whatever the scale.
pub fn time_scale() -> f64 {
    std::env::var("SPACES_TEST_TIME_SCALE").ok().and_then(|s| s.parse::<f64>().ok()).filter(|f| f.is_finite() && *f > 0.0).unwrap_or(1.0)
}

/// `limit` times [`time_scale`].
pub fn scaled(limit: Duration) -> Duration {
    limit.mul_f64(time_scale())
}

/// The plain `agent_start` of `agent` in `space` with `prompt`: no options, no key, not shown.
pub fn start_request(space: &str, agent: &str, prompt: &str) -> AgentStartRequest {
    AgentStartRequest {
        space: space.into(),
        agent: agent.into(),
        prompt: prompt.into(),
        show: None,
        options: None,
        request_id: None,
        traceparent: None,
    }
}

/// Polls `done` every 50 ms until it holds, or panics naming `what` after `timeout` (scaled).
pub async fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let timeout = scaled(timeout);
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The `spacesd` binary: `$SPACESD_BIN`, else `target/<profile>/spacesd` beside this test binary.
pub fn spacesd_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("SPACESD_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let bin = dir.join("spacesd");
    assert!(bin.is_file(), "spacesd binary not found at {}: build it first (`cargo build -p spacesd`) or set SPACESD_BIN", bin.display());
    bin
}

/// The shared tools dir holding the pinned CLIs: `$SPACES_TOOLS_DIR`, else `<repo>/.tools`.
/// Tests never install: a missing CLI fails loudly with the command that installs it.
pub fn tools_dir() -> PathBuf {
    std::env::var_os("SPACES_TOOLS_DIR").map(PathBuf::from).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.tools"))
}

/// Panics unless the pinned CLI of `harness` is installed in [`tools_dir`].
pub fn require_cli(harness: &str, binary_rel: &str) {
    let p = tools_dir().join(harness).join(binary_rel);
    assert!(
        p.is_file(),
        "the {harness} CLI is not installed at {}: run `SPACES_TOOLS_DIR={} spacesd tools install` (scripts/test does)",
        p.display(),
        tools_dir().display()
    );
}

/// Variables of the test's own environment that a `spacesd` started by the tests gets: what the
/// daemon passes on to npm for a first-use install ([`spaces_host::supervisor::npm_passes`]: where
/// programs are, the user and home, locale and temp dir, proxies, CA certificates,
/// `npm_config_*`), and Rust's logging and backtraces. Nothing else: a stray
/// `SPACES_HARNESS_BIN_*`, `SPACES_STALL_MS`, config path or API key in the developer's shell
/// must not change what a test runs.
fn daemon_gets(name: &str) -> bool {
    spaces_host::supervisor::npm_passes(name) || ["RUST_LOG", "RUST_BACKTRACE"].contains(&name)
}

/// The environment a test's `spacesd` starts from: what [`daemon_gets`] of `vars` (the test
/// process's environment), plus `SPACES_TOOLS_DIR` = [`tools_dir`].
pub fn daemon_env(
    vars: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let mut env: Vec<_> = vars.into_iter().filter(|(k, _)| k.to_str().is_some_and(daemon_gets)).collect();
    env.push(("SPACES_TOOLS_DIR".into(), tools_dir().into()));
    env
}

/// Starts `cmd` (a `spacesd` or a client that starts one) from a cleared environment plus
/// [`daemon_env`]; variables a test sets after this call come on top.
pub fn hermetic(cmd: &mut Command) -> &mut Command {
    cmd.env_clear().envs(daemon_env(std::env::vars_os()))
}

/// The unprivileged uid a root test run starts daemons as (`nobody`).
const NOBODY: u32 = 65534;

/// A real daemon on a temp state dir; killed on drop.
pub struct TestDaemon {
    pub dir: tempfile::TempDir,
    child: Option<Child>,
    pub client: Client,
    extra_env: Vec<(String, String)>,
    extra_args: Vec<String>,
    /// The binary to run instead of [`spacesd_bin`] (an upgrade test's second build).
    binary: Option<PathBuf>,
    /// The daemon's soft `RLIMIT_NOFILE` (set by `sh -c 'ulimit -n N; exec spacesd ...'`).
    nofile: Option<u64>,
    /// Start the daemon with fd 7 open and inherited (not close-on-exec), as a careless parent
    /// would leave it.
    leak_fd: bool,
    /// Run the daemon as this unprivileged uid (the tests run as root; see
    /// [`TestDaemon::start_unprivileged`]).
    user: Option<u32>,
    /// Where the daemon's stderr (its log) goes; `None`: the test's own stderr.
    log: Option<PathBuf>,
}

impl TestDaemon {
    /// Start a daemon and wait for its socket.
    pub async fn start() -> TestDaemon {
        Self::start_with_env(Vec::new()).await
    }

    /// Start a daemon with extra environment variables (e.g. `SPACES_HARNESS_BIN_...`).
    pub async fn start_with_env(extra_env: Vec<(String, String)>) -> TestDaemon {
        Self::start_with(extra_env, Vec::new()).await
    }

    /// Start a daemon with extra environment variables and extra `serve` arguments.
    pub async fn start_with(extra_env: Vec<(String, String)>, extra_args: Vec<String>) -> TestDaemon {
        Self::start_limited(extra_env, extra_args, None).await
    }

    /// [`TestDaemon::start_with`], the daemon's soft file-descriptor limit set to `nofile`.
    pub async fn start_limited(extra_env: Vec<(String, String)>, extra_args: Vec<String>, nofile: Option<u64>) -> TestDaemon {
        Self::start_full(extra_env, extra_args, nofile, false).await
    }

    /// [`TestDaemon::start_with`], the daemon started with an inherited fd 7 (not close-on-exec).
    pub async fn start_leaking_fd(extra_env: Vec<(String, String)>, extra_args: Vec<String>) -> TestDaemon {
        Self::start_full(extra_env, extra_args, None, true).await
    }

    async fn start_full(extra_env: Vec<(String, String)>, extra_args: Vec<String>, nofile: Option<u64>, leak_fd: bool) -> TestDaemon {
        let dir = tempfile::Builder::new().prefix("spaces-test-").tempdir().expect("tempdir");
        let state = dir.path().join("state");
        let client = Client::new(Endpoint::Unix(state.join("spacesd.sock")));
        let mut d = TestDaemon { dir, child: None, client, extra_env, extra_args, binary: None, nofile, leak_fd, user: None, log: None };
        d.spawn().await;
        d
    }

    /// A daemon that is not root, as the default install is: when the tests run as root, it
    /// runs as `nobody` (uid 65534, no cgroups) under `prlimit --nproc` (so whatever it starts
    /// stays bounded however the sandbox fares); otherwise as the tests' own uid. Its temp dir
    /// (state, Spaces made by [`Self::space`]) belongs to that uid.
    pub async fn start_unprivileged(extra_env: Vec<(String, String)>, extra_args: Vec<String>) -> TestDaemon {
        let dir = tempfile::Builder::new().prefix("spaces-test-").tempdir().expect("tempdir");
        let user = nix::unistd::geteuid().is_root().then_some(NOBODY);
        if let Some(uid) = user {
            let owner = Some(nix::unistd::Uid::from_raw(uid));
            nix::unistd::chown(dir.path(), owner, Some(nix::unistd::Gid::from_raw(uid))).expect("chown the temp dir");
        }
        let state = dir.path().join("state");
        let client = Client::new(Endpoint::Unix(state.join("spacesd.sock")));
        let mut d =
            TestDaemon { dir, child: None, client, extra_env, extra_args, binary: None, nofile: None, leak_fd: false, user, log: None };
        d.spawn().await;
        d
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    async fn spawn(&mut self) {
        let bin = self.binary.clone().unwrap_or_else(spacesd_bin);
        let mut cmd = match (self.nofile, self.leak_fd) {
            (None, false) if self.user.is_some() => {
                let uid = self.user.unwrap_or(NOBODY).to_string();
                let mut cmd = Command::new("setpriv");
                cmd.args(["--reuid", &uid, "--regid", &uid, "--clear-groups", "--", "prlimit", "--nproc=2048", "--"]).arg(bin);
                cmd
            }
            (None, false) => Command::new(bin),
            (nofile, leak) => {
                // `exec` keeps the pid: killing the child kills the daemon.
                let limit = nofile.map(|n| format!("ulimit -n {n} && ")).unwrap_or_default();
                let fd = if leak { "exec 7</dev/null && " } else { "" };
                let mut sh = Command::new("sh");
                sh.arg("-c").arg(format!("{limit}{fd}exec \"$0\" \"$@\"")).arg(bin);
                sh
            }
        };
        hermetic(&mut cmd)
            .arg("serve")
            .arg("--state-dir")
            .arg(self.state_dir())
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(match &self.log {
                Some(path) => Stdio::from(std::fs::OpenOptions::new().create(true).append(true).open(path).expect("the daemon's log")),
                None => Stdio::inherit(),
            });
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        if self.user.is_some() {
            cmd.env("HOME", self.dir.path());
        }
        self.child = Some(cmd.spawn().expect("spawn spacesd"));
        let deadline = Instant::now() + scaled(Duration::from_secs(20));
        loop {
            if self.client.space_list(&spaces_sdk::Empty {}).await.is_ok() {
                return;
            }
            assert!(Instant::now() < deadline, "spacesd did not come up within {:?}", scaled(Duration::from_secs(20)));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Kill the daemon (SIGKILL: nothing graceful) and start a new one on the same state dir.
    pub async fn restart(&mut self) {
        self.kill();
        self.spawn().await;
    }

    /// SIGKILL the daemon and start `binary` in its place on the same state dir (an upgrade).
    pub async fn restart_with_binary(&mut self, binary: PathBuf) {
        self.kill();
        self.binary = Some(binary);
        self.spawn().await;
    }

    /// Start the daemon again after [`Self::kill`] or [`Self::terminate`].
    pub async fn start_again(&mut self) {
        self.spawn().await;
    }

    /// The daemon's pid, while it runs.
    pub fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    /// SIGTERM the daemon (a graceful shutdown) and wait for it to exit; its exit status
    /// (`None` when it was not running).
    pub fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        let mut c = self.child.take()?;
        let pid = nix::unistd::Pid::from_raw(c.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        c.wait().ok()
    }

    /// From the next start on ([`Self::start_again`], [`Self::restart`]), the daemon's stderr
    /// (its log) goes to `<temp dir>/spacesd.log`, read by [`Self::log_text`].
    pub fn keep_log(&mut self) {
        self.log = Some(self.dir.path().join("spacesd.log"));
    }

    /// SIGKILL the daemon.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Register a Space named `name` rooted in a fresh dir under the temp dir; returns the root.
    pub async fn space(&self, name: &str) -> PathBuf {
        let root = self.dir.path().join(format!("space-{name}"));
        std::fs::create_dir_all(&root).unwrap();
        if let Some(uid) = self.user {
            nix::unistd::chown(&root, Some(nix::unistd::Uid::from_raw(uid)), Some(nix::unistd::Gid::from_raw(uid))).unwrap();
        }
        let root = std::fs::canonicalize(root).unwrap();
        self.client
            .space_add(&SpaceAddRequest {
                name: name.into(),
                root: root.display().to_string(),
                read_only: false,
                approvals: Default::default(),
                network: Default::default(),
                replace: false,
            })
            .await
            .expect("space add");
        root
    }

    /// One raw HTTP/1.1 request over the daemon's Unix socket: (status, body). For tests of the
    /// HTTP adapter itself (status codes, query strings, envelopes).
    pub fn raw(&self, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
        use std::io::{Read, Write};
        let mut s = std::os::unix::net::UnixStream::connect(self.state_dir().join("spacesd.sock")).expect("connect");
        let body = body.unwrap_or("");
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        let status = out.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
        (status, body)
    }

    /// Run the `spacesd` CLI against this daemon; returns (status success, stdout).
    pub fn cli(&self, args: &[&str]) -> (bool, String) {
        let out = hermetic(&mut Command::new(spacesd_bin()))
            .arg("--state-dir")
            .arg(self.state_dir())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run spacesd cli");
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
    }

    /// Every event of the run so far (from cursor 0).
    pub async fn events(&self, space: &str, run: &str) -> Vec<Event> {
        let mut out = Vec::new();
        let mut cursor = 0;
        loop {
            let page = self
                .client
                .agent_events(&AgentEventsRequest {
                    space: space.into(),
                    run_id: run.to_string(),
                    cursor: Some(cursor),
                    max: Some(1000),
                    ..Default::default()
                })
                .await
                .expect("events");
            out.extend(page.events);
            cursor = page.cursor;
            if page.caught_up {
                return out;
            }
        }
    }

    /// Long-poll the run's events until one matches `pred` (returns it), or panic after
    /// `timeout` ([`scaled`]) with every event seen.
    pub async fn wait_for_event(&self, space: &str, run: &str, timeout: Duration, pred: impl Fn(&Event) -> bool) -> Event {
        let timeout = scaled(timeout);
        let deadline = Instant::now() + timeout;
        let mut cursor = 0;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no matching event within {timeout:?}; saw:\n{}", describe(&seen));
            let q = AgentEventsRequest {
                space: space.into(),
                run_id: run.into(),
                cursor: Some(cursor),
                max: Some(1000),
                wait_ms: Some(left.as_millis().min(5_000) as u64),
                raw: None,
            };
            let page = self.client.agent_events(&q).await.expect("events");
            for e in page.events {
                if pred(&e) {
                    return e;
                }
                seen.push(e);
            }
            cursor = page.cursor;
        }
    }

    /// Poll the run's status until `pred` holds, or panic after `timeout` ([`scaled`]).
    pub async fn wait_status(&self, space: &str, run: &str, timeout: Duration, pred: impl Fn(&RunStatus) -> bool) -> RunStatus {
        let timeout = scaled(timeout);
        let deadline = Instant::now() + timeout;
        loop {
            let st = self.client.space(space).agent_status(run, None).await.expect("status");
            if pred(&st) {
                return st;
            }
            if Instant::now() > deadline {
                let events = self.events(space, run).await;
                panic!("status condition not met within {timeout:?}; last: {st:#?}\nevents:\n{}", describe(&events));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Wait until the run is idle (or another non-running status) after turn `turn` ended.
    pub async fn wait_turn_end(&self, space: &str, run: &str, turn: u32, timeout: Duration) -> Event {
        self.wait_for_event(space, run, timeout, |e| e.kind == spaces_sdk::EventKind::TurnEnded && e.turn == turn).await
    }
}

impl Drop for TestDaemon {
    /// Kills the daemon, then every process it left that still names the temp dir (agents and
    /// their tools under their shims, shims kept ready, a run made ready ahead: by design they
    /// outlive a daemon), so none of them writes into the temp dir after it is removed: a
    /// passing suite leaves no `spaces-test-*` folder behind (issue 32).
    fn drop(&mut self) {
        self.kill();
        end_processes_under(self.dir.path());
        remove_cgroups_of(&self.state_dir());
    }
}

/// Directories under /sys/fs/cgroup whose name `matches` (a bounded walk; a match is not
/// walked into).
pub fn cgroup_dirs_where(matches: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![(PathBuf::from("/sys/fs/cgroup"), 0)];
    while let Some((dir, depth)) = todo.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if entry.file_name().to_str().is_some_and(&matches) {
                found.push(path);
            } else if depth < 8 {
                todo.push((path, depth + 1));
            }
        }
    }
    found
}

/// Ends what is left in the cgroups of the daemon whose state dir is `state_dir` and removes
/// them (`<host id>-*`, named by `spaces_host::workspaces::host_id`), trying for at most 5 s.
/// The daemon sweeps its own leftovers at its next start, but a test's daemon never starts
/// again: without this, the spares and trees [`end_processes_under`] killed (and a process of
/// theirs that names no temp dir) left their directories behind, a thousand in a few suite
/// runs, and a later test's daemon with a reused pid met a spare's name again.
pub fn remove_cgroups_of(state_dir: &Path) {
    let prefix = format!("{}-", spaces_host::workspaces::host_id(state_dir));
    let mut ours = cgroup_dirs_where(|n| n.starts_with(&prefix));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ours.is_empty() && Instant::now() < deadline {
        for dir in &ours {
            // cgroup v2 ends the whole cgroup at once (no pid read and then signalled late);
            // v1 has no cgroup.kill, so its pids are signalled.
            let _ = std::fs::write(dir.join("cgroup.kill"), "1");
            for pid in std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default().lines() {
                if let Ok(pid) = pid.trim().parse::<i32>() {
                    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
                }
            }
        }
        // EBUSY while a killed process has not left yet: tried again.
        ours.retain(|dir| std::fs::remove_dir(dir).is_err_and(|e| e.kind() != std::io::ErrorKind::NotFound));
        if !ours.is_empty() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// SIGKILLs every process (other than this one) whose environment or working directory names
/// `dir`, and waits (at most 5 s) until they are gone. `dir` is a unique temp path, so nothing
/// of another test matches.
pub fn end_processes_under(dir: &Path) {
    let needle = dir.as_os_str().as_encoded_bytes().to_vec();
    let me = std::process::id() as i32;
    let matching = || -> Vec<i32> {
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|&pid| pid != me)
            .filter(|&pid| {
                let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
                let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
                environ.windows(needle.len()).any(|w| w == needle.as_slice()) || cwd.starts_with(dir)
            })
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let pids = matching();
        if pids.is_empty() || Instant::now() > deadline {
            return;
        }
        for pid in pids {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Events as lines, for failure messages.
pub fn describe(events: &[Event]) -> String {
    events
        .iter()
        .map(|e| {
            format!(
                "  #{} t{} {:?} {:?} {:?} {:?}",
                e.seq,
                e.turn,
                e.kind,
                e.stop_reason,
                e.tool_status,
                e.summary.as_deref().or(e.text.as_deref())
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// True when the run is not mid-turn.
pub fn settled(st: &RunStatus) -> bool {
    st.status != Status::Running
}

/// Live processes carrying `SPACES_RUN_ID=<run>` in their environment: the daemon's run marker
/// (`host/src/supervisor/marker.rs`), written out here because it is a contract of the daemon,
/// not of the codespace process layer that only looks for it.
pub fn run_processes(run: &str) -> Vec<i32> {
    spaces_os::process::alive_with_marker(&spaces_os::process::env_marker("SPACES_RUN_ID", run))
}

/// The run's agent processes: processes of the run (see [`run_processes`]) whose parent is not
/// itself a process of the run, i.e. the roots of its process trees. Two at once means two agent
/// processes on one session (case P4).
///
/// An ancestor counts, not only the parent: a process whose parent is exiting (a zombie, whose
/// environment no longer reads, so it is not found as the run's) is still inside its tree.
///
/// A root counts when two looks 20 ms apart both find it: a process in `exec` or in its exit
/// reads an empty environment for a moment, which makes its child look like a root.
pub fn run_process_roots(run: &str) -> Vec<i32> {
    let first = roots_now(run);
    if first.is_empty() {
        return first;
    }
    std::thread::sleep(Duration::from_millis(20));
    let again = roots_now(run);
    first.into_iter().filter(|pid| again.contains(pid)).collect()
}

/// [`run_process_roots`] in one look.
fn roots_now(run: &str) -> Vec<i32> {
    let pids = run_processes(run);
    let inside = |pid: i32| {
        let mut at = parent_of(pid);
        for _ in 0..64 {
            match at {
                Some(p) if pids.contains(&p) => return true,
                Some(p) if p > 1 => at = parent_of(p),
                _ => return false,
            }
        }
        false
    };
    pids.iter().copied().filter(|&pid| parent_of(pid).is_some() && !inside(pid)).collect()
}

/// The parent pid from `/proc/<pid>/stat` (`None` once the process is gone).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name: state, ppid, ...
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// Samples [`run_process_roots`] of one run on a thread until stopped; keeps the largest sample,
/// each root described as it was seen (its command line and its parent's).
pub struct RootSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<(usize, Vec<String>)>>,
}

/// `pid` as seen now: its pid, command line, parent pid and the parent's command line.
fn describe_process(pid: i32) -> String {
    let cmdline = |pid: i32| String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default()).replace('\0', " ");
    let parent = parent_of(pid).unwrap_or(0);
    format!("{pid} `{}` (parent {parent} `{}`)", cmdline(pid).trim_end(), cmdline(parent).trim_end())
}

impl RootSampler {
    pub fn start(run: &str) -> RootSampler {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (flag, run) = (stop.clone(), run.to_owned());
        let thread = std::thread::spawn(move || {
            let (mut samples, mut worst) = (0, Vec::new());
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let roots = run_process_roots(&run);
                if roots.len() > worst.len() {
                    worst = roots.into_iter().map(describe_process).collect();
                }
                samples += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            (samples, worst)
        });
        RootSampler { stop, thread: Some(thread) }
    }

    /// Stop sampling: (how many samples were taken, the largest set of roots seen at once, each
    /// described as in [`describe_process`]).
    pub fn finish(mut self) -> (usize, Vec<String>) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().map(|t| t.join().expect("sampler")).unwrap_or_default()
    }
}

#[test]
fn the_daemon_environment_is_the_allow_list_only() {
    let vars = [
        ("PATH", "/usr/bin"),
        ("HOME", "/home/t"),
        ("RUST_BACKTRACE", "1"),
        ("npm_config_registry", "http://registry.local/"),
        ("SPACES_HARNESS_BIN_CLAUDE_CODE", "/tmp/stray"),
        ("SPACES_STALL_MS", "1"),
        ("SPACES_TOOLS_DIR", "/elsewhere"),
        ("ANTHROPIC_API_KEY", "secret"),
        ("OPENAI_API_KEY", "secret"),
    ]
    .map(|(k, v)| (k.into(), v.into()));
    let env: Vec<(String, String)> =
        daemon_env(vars).into_iter().map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap())).collect();
    let tools = tools_dir().display().to_string();
    assert_eq!(
        env,
        [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/t"),
            ("RUST_BACKTRACE", "1"),
            ("npm_config_registry", "http://registry.local/"),
            ("SPACES_TOOLS_DIR", tools.as_str())
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
    );
}
