//! Issue 15, resource ceilings: every process a command or a run starts is held (a cgroup per
//! command and run where the host allows one, else the shim's subreaper), so what it leaves in
//! the background (`&`, `env -i`, a `setsid` double fork) ends at the command's time limit and
//! at `terminate_process`; the process limit stops a fork loop; storage stays bounded however
//! much a command or an agent prints.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{cgroup_dirs_where, scaled, wait_until, TestDaemon};

async fn tool(d: &TestDaemon, name: &str, args: Value) -> Value {
    match d.client.call_named(name, args.clone()).await {
        Ok(v) => v,
        Err(e) => panic!("{name} {args} failed: {e}"),
    }
}

/// A `sleep` duration unique to this call (`600.<digits>`), so that `/proc` finds exactly the
/// sleeps one test started, whoever else runs on the host.
fn marker() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("600.{:09}{}", nanos, std::process::id() % 1000)
}

/// Live processes whose command line holds `needle` (zombies have none).
fn with_argv(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
        if cmdline.split(|b| *b == 0).any(|arg| arg == needle.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

/// Whether this host lets the daemon make cgroups: root, with a v1 `pids` hierarchy or a v2
/// hierarchy offering `pids`.
fn host_has_cgroups() -> bool {
    let v2 = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").is_ok_and(|c| c.split_whitespace().any(|c| c == "pids"));
    nix::unistd::geteuid().is_root() && (v2 || Path::new("/sys/fs/cgroup/pids/cgroup.procs").exists())
}

/// Directories whose name ends with `-<name>` under /sys/fs/cgroup (a bounded walk): a tree's
/// cgroups are `<host id>-<tree>`. For a name unique on the host (a run's, a command's id).
fn cgroup_dirs(name: &str) -> Vec<PathBuf> {
    let suffix = format!("-{name}");
    cgroup_dirs_where(|n| n.ends_with(&suffix))
}

/// Starts `script` with `sh -c` in Space `space`; returns its process id.
async fn exec(d: &TestDaemon, space: &str, script: &str) -> String {
    let started = tool(d, "exec_command", json!({"workspace_id": space, "command": ["sh", "-c", script]})).await;
    started["process_id"].as_str().unwrap().to_owned()
}

/// The status of command `id` once it exited (within 30 s).
async fn wait_exited(d: &TestDaemon, id: &str) -> Value {
    let deadline = Instant::now() + scaled(Duration::from_secs(30));
    loop {
        let s = tool(d, "process_status", json!({"process_id": id})).await;
        if s["state"] == "exited" {
            return s;
        }
        assert!(Instant::now() < deadline, "the command did not exit: {s}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The three ways out of a process group: a plain background job, one with a cleared
/// environment (no tag marker), and a `setsid` double fork (a new session, reparented).
fn escapes(m: &str) -> String {
    format!("sleep {m}1 & env -i sleep {m}2 & setsid sh -c 'sleep {m}3 & exit 0' & sleep 0.2; echo started; exit 0")
}

fn escaped(m: &str) -> Vec<i32> {
    [1, 2, 3].iter().flat_map(|k| with_argv(&format!("{m}{k}"))).collect()
}

/// What `workspace_info` says holds a command's processes, checked against what this host
/// allows.
async fn containment(d: &TestDaemon, space: &str, cgroups_on: bool) -> Value {
    let info = tool(d, "workspace_info", json!({"workspace_id": space})).await;
    let held = info["execution"]["isolation"]["process_containment"].clone();
    let mode = held["mode"].as_str().unwrap_or_default().to_owned();
    if cgroups_on && host_has_cgroups() {
        assert!(mode == "cgroup_v1" || mode == "cgroup_v2", "this host allows cgroups, yet: {held}");
    } else {
        assert_eq!(mode, "subreaper", "{held}");
        assert_eq!(held, json!({"mode": "subreaper"}), "no limits without a cgroup");
    }
    let caps = d.client.agent_capabilities(&spaces_sdk::Empty {}).await.unwrap();
    assert_eq!(serde_json::to_value(&caps.process_containment).unwrap(), held, "runs are held as commands are");
    held
}

/// The command exits at once, leaving three sleeps behind; they are alive until the time limit
/// (4 s) and gone right after it; the command's own exit is kept.
async fn leftovers_end_at_the_time_limit(cgroups: &str) {
    let limit = Duration::from_secs(4);
    let env = vec![("SPACES_EXEC_TIMEOUT_MS".to_owned(), limit.as_millis().to_string()), ("SPACES_CGROUPS".to_owned(), cgroups.to_owned())];
    let d = TestDaemon::start_with_env(env).await;
    d.space("s").await;
    containment(&d, "s", cgroups == "1").await;
    let m = marker();
    let started = Instant::now();
    let id = exec(&d, "s", &escapes(&m)).await;
    wait_until("the three background sleeps", Duration::from_secs(10), || escaped(&m).len() == 3).await;
    let status = wait_exited(&d, &id).await;
    assert_eq!((status["state"].as_str(), status["exit_code"].as_i64()), (Some("exited"), Some(0)), "{status}");
    // Before the limit they live (nothing else ends them)...
    tokio::time::sleep(limit.saturating_sub(started.elapsed() + Duration::from_millis(1500))).await;
    assert_eq!(escaped(&m).len(), 3, "the leftovers ended before the time limit");
    // ...and after it (plus the 2 s grace) they are gone.
    wait_until("the leftovers to end at the time limit", Duration::from_secs(15), || escaped(&m).is_empty()).await;
    let status = tool(&d, "process_status", json!({"process_id": id})).await;
    assert_eq!((status["termination"].as_str(), status["exit_code"].as_i64()), (Some("exited"), Some(0)), "the exit is kept: {status}");
}

#[tokio::test]
async fn what_a_command_leaves_in_the_background_ends_at_its_time_limit() {
    leftovers_end_at_the_time_limit("1").await;
}

#[tokio::test]
async fn without_cgroups_the_subreaper_still_ends_the_leftovers_at_the_time_limit() {
    leftovers_end_at_the_time_limit("0").await;
}

/// `terminate_process` on a command that already exited ends what it left behind, long before
/// any time limit, and the command's cgroup directory is removed.
#[tokio::test]
async fn terminate_process_ends_what_a_command_left_in_the_background() {
    let d = TestDaemon::start().await;
    d.space("s").await;
    let held = containment(&d, "s", true).await;
    let m = marker();
    let id = exec(&d, "s", &escapes(&m)).await;
    wait_until("the three background sleeps", Duration::from_secs(10), || escaped(&m).len() == 3).await;
    let cgroup = format!("exec-{id}");
    let dirs = cgroup_dirs(&cgroup);
    if held["mode"] != "subreaper" {
        assert!(!dirs.is_empty(), "no cgroup directory {cgroup} under /sys/fs/cgroup");
        for dir in &dirs {
            let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap();
            let inside: Vec<i32> = procs.lines().map(|l| l.parse().unwrap()).collect();
            for pid in escaped(&m) {
                assert!(inside.contains(&pid), "sleep {pid} is not in {}: {inside:?}", dir.display());
            }
        }
    }
    let asked = Instant::now();
    tool(&d, "terminate_process", json!({"process_id": id})).await;
    wait_until("the leftovers to end", Duration::from_secs(10), || escaped(&m).is_empty()).await;
    assert!(asked.elapsed() < scaled(Duration::from_secs(10)));
    wait_until("the cgroup directories to go", Duration::from_secs(10), || dirs.iter().all(|d| !d.exists())).await;
}

/// With a process limit of 20, a loop that starts 50 background sleeps stops where `fork`
/// fails: at most 19 sleeps (the shell is the 20th task), the shell says it cannot fork, and
/// everything goes at `terminate_process`, its cgroup with it.
#[tokio::test]
async fn the_process_limit_stops_a_fork_loop() {
    let d = TestDaemon::start_with_env(vec![("SPACES_PIDS_MAX".into(), "20".into())]).await;
    d.space("s").await;
    let held = containment(&d, "s", true).await;
    // A process limit needs a cgroup: on a host that cannot make one this fails loudly rather
    // than passing with nothing tested (the suite's rule: no silent skips).
    assert_ne!(held["mode"], "subreaper", "this test needs a host that can make cgroups (root, or a delegated cgroup)");
    assert_eq!(held["pids_max"], json!(20), "{held}");
    let m = marker();
    let id = exec(&d, "s", &format!("i=0; while [ $i -lt 50 ]; do sleep {m} & i=$((i+1)); done; echo all 50 started")).await;
    let status = wait_exited(&d, &id).await;
    let out = tool(&d, "read_process", json!({"process_id": id, "cursor": 0, "wait_ms": 3000})).await;
    let chunk = out["chunk"].as_str().unwrap();
    assert!(chunk.to_lowercase().contains("fork"), "the shell did not say it could not fork: {chunk:?}");
    assert!(!chunk.contains("all 50 started"), "{chunk:?}");
    assert_ne!(status["exit_code"], json!(0), "{status}");
    let sleeps = with_argv(&m);
    assert!(!sleeps.is_empty() && sleeps.len() < 20, "{} sleeps under a limit of 20", sleeps.len());
    let dirs = cgroup_dirs(&format!("exec-{id}"));
    assert!(!dirs.is_empty(), "no cgroup for {id}");
    tool(&d, "terminate_process", json!({"process_id": id})).await;
    wait_until("the sleeps to end", Duration::from_secs(10), || with_argv(&m).is_empty()).await;
    wait_until("the cgroup directories to go", Duration::from_secs(10), || dirs.iter().all(|d| !d.exists())).await;
}

/// A Codex fake's whole turn (thread, turn, an answer, the end).
const CODEX_TURN: &str = r#"echo '{"type":"thread.started","thread_id":"fake-thread"}'
echo '{"type":"turn.started"}'
echo '{"type":"item.completed","item":{"id":"m","type":"agent_message","text":"done"}}'
echo '{"type":"turn.completed","usage":{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1}}'"#;

/// Start a Codex run saying hello in Space `s`; returns its id once its turn settled.
async fn start_codex(d: &TestDaemon) -> String {
    let req = spaces_sdk::AgentStartRequest {
        space: "s".into(),
        agent: "openai-codex-exec".into(),
        prompt: "hello".into(),
        show: None,
        options: Some(spaces_sdk::SpaceAgentOptions::default()),
        request_id: None,
        traceparent: None,
    };
    let run = d.client.agent_start(&req).await.unwrap().run_id;
    d.wait_status("s", &run, Duration::from_secs(60), crate::support::settled).await;
    run
}

async fn run_fake(env: Vec<(String, String)>, script: &str) -> (TestDaemon, String, tempfile::TempDir) {
    let bin_dir = tempfile::tempdir().unwrap();
    let bin = super::fake_agents::fake(bin_dir.path(), "fake-codex", script);
    let mut env = env;
    env.push(("SPACES_HARNESS_BIN_OPENAI_CODEX".into(), bin.display().to_string()));
    let d = TestDaemon::start_with_env(env).await;
    d.space("s").await;
    let run = start_codex(&d).await;
    (d, run, bin_dir)
}

/// An agent run is held like a command: its agent runs in the run's cgroup (where the host has
/// cgroups), and what it leaves behind (`setsid`, `env -i`) ends with its turn, the cgroup
/// directory with it.
#[tokio::test]
async fn an_agents_leftovers_end_with_its_turn_and_its_cgroup_goes() {
    let m = marker();
    let script = format!("echo \"cgroups: $(tr '\\n' ' ' </proc/self/cgroup)\" >&2\n{}\n{CODEX_TURN}", escapes(&m).replace("; exit 0", ""));
    let (d, run, _bin) = run_fake(Vec::new(), &script).await;
    let held = containment(&d, "s", true).await;
    wait_until("the agent's leftovers to end", Duration::from_secs(15), || escaped(&m).is_empty()).await;
    let st = d.client.space("s").agent_status(&run, Some(200)).await.unwrap();
    let tail = st.output_tail.unwrap_or_default();
    let leaf = format!("agent-{run}-turn-1-gen-1");
    if held["mode"] != "subreaper" {
        assert!(tail.contains(&format!("-{leaf} ")), "the agent was not in its run's cgroup {leaf}: {tail}");
    }
    wait_until("the run's cgroup to go", Duration::from_secs(15), || cgroup_dirs(&leaf).is_empty()).await;
}

/// The live children of `parent` (from `/proc/*/stat`).
fn children_of(parent: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // `pid (comm) state ppid ...`: the comm may hold spaces, the fields after `)` do not.
        let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
        let mut fields = after.split_whitespace();
        let (state, ppid) = (fields.next(), fields.next().and_then(|p| p.parse::<i32>().ok()));
        if ppid == Some(parent) && state != Some("Z") {
            out.push(pid);
        }
    }
    out
}

/// Whether `pid` is a live process (not a zombie).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
}

/// The daemon's spare shims: its children started with `SPACES_SHIM_SPARE` in their environment.
fn spares_of(daemon: i32) -> Vec<i32> {
    children_of(daemon)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|e| e.split(|b| *b == 0).any(|v| v.starts_with(b"SPACES_SHIM_SPARE=")))
        })
        .collect()
}

/// A spare shim waits ready with its program's child already in the spare's cgroup: the next
/// run's sandbox (bubblewrap, running the agent) is that very child, in the cgroup named after
/// the run's turn (the spare's, renamed); another spare replaces it; when the daemon stops, the
/// spare exits and its cgroup goes.
#[tokio::test]
async fn a_spare_shim_starts_the_next_run_in_the_runs_cgroup_and_goes_with_the_daemon() {
    // The agent waits for `release` in its Space, so its sandbox can be seen from the host.
    let script = format!(
        "echo \"agent pid: $$ cgroups: $(tr '\\n' ' ' </proc/self/cgroup)\" >&2\nwhile [ ! -e release ]; do sleep 0.05; done\n{CODEX_TURN}"
    );
    let bin_dir = tempfile::tempdir().unwrap();
    let bin = super::fake_agents::fake(bin_dir.path(), "fake-codex", &script);
    let mut d = TestDaemon::start_with_env(vec![("SPACES_HARNESS_BIN_OPENAI_CODEX".into(), bin.display().to_string())]).await;
    let root = d.space("s").await;
    let held = containment(&d, "s", true).await;
    let daemon = d.pid().unwrap();
    let mut spare = 0;
    let mut waiting = 0;
    let contained = held["mode"] != "subreaper";
    let joined = |c: i32| !contained || std::fs::read_to_string(format!("/proc/{c}/cgroup")).is_ok_and(|t| t.contains("-spare-"));
    wait_until("a spare shim with its waiting child (in the spare's cgroup)", Duration::from_secs(20), || {
        let found = spares_of(daemon);
        let child = found.first().map(|s| children_of(*s)).unwrap_or_default();
        match (found.first(), child.first()) {
            (Some(s), Some(c)) if joined(*c) => {
                (spare, waiting) = (*s, *c);
                true
            }
            _ => false,
        }
    })
    .await;
    let req = spaces_sdk::AgentStartRequest {
        space: "s".into(),
        agent: "openai-codex-exec".into(),
        prompt: "hello".into(),
        show: None,
        options: Some(spaces_sdk::SpaceAgentOptions::default()),
        request_id: None,
        traceparent: None,
    };
    let run = d.client.agent_start(&req).await.unwrap().run_id;
    // The waiting child execs bubblewrap (the agent's sandbox), whose sandbox runs the agent as
    // the first program of its pid namespace (pid 2, after bubblewrap's init).
    wait_until("the spare's waiting child to run the agent's sandbox", Duration::from_secs(30), || {
        std::fs::read(format!("/proc/{waiting}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).split('\0').next().is_some_and(|p| p.ends_with("/bwrap")))
    })
    .await;
    std::fs::write(root.join("release"), "").unwrap();
    d.wait_status("s", &run, Duration::from_secs(60), crate::support::settled).await;
    let st = d.client.space("s").agent_status(&run, Some(200)).await.unwrap();
    let tail = st.output_tail.unwrap_or_default();
    assert!(tail.contains("agent pid: 2 "), "the agent did not start as its sandbox's first program: {tail}");
    if held["mode"] != "subreaper" {
        let leaf = format!("agent-{run}-turn-1-gen-1");
        assert!(tail.contains(&format!("-{leaf} ")), "the agent was not in its run's cgroup {leaf}: {tail}");
        assert!(!tail.contains("-spare-"), "the agent still sits in a spare's cgroup: {tail}");
    }
    // The spare taken for the run keeps `SPACES_SHIM_SPARE` in its environment (it is read at
    // exec): it is now the run's shim, which outlives the daemon by design when its turn is
    // still going (a busy host), so it is not among the spares that must go. The new spare's
    // child joins its cgroup on its own time: wait for that too, as for the first spare.
    let new_spares = || spares_of(daemon).into_iter().filter(|s| *s != spare).collect::<Vec<i32>>();
    wait_until("another spare shim with its waiting child (in the spare's cgroup)", Duration::from_secs(20), || {
        new_spares().iter().any(|s| children_of(*s).iter().any(|c| joined(*c)))
    })
    .await;
    let next = new_spares();
    let next_child = next.iter().flat_map(|s| children_of(*s)).collect::<Vec<_>>();
    let next_cgroups: Vec<PathBuf> = next_child
        .iter()
        .filter_map(|c| std::fs::read_to_string(format!("/proc/{c}/cgroup")).ok())
        .flat_map(|text| text.lines().filter_map(|l| l.split(':').nth(2).map(str::to_owned)).collect::<Vec<_>>())
        .filter(|path| path.contains("-spare-"))
        // The whole name, host id included: `spare-<daemon pid>-<n>` alone is not unique on a
        // host whose pids wrap (another test's daemon had this pid once).
        .filter_map(|path| path.rsplit('/').next().map(str::to_owned))
        .flat_map(|leaf| cgroup_dirs_where(|n| n == leaf))
        .collect();
    assert!(held["mode"] == "subreaper" || !next_cgroups.is_empty(), "the new spare's cgroup was not found");
    d.terminate();
    wait_until("the spare shims to exit", Duration::from_secs(20), || next.iter().chain(&next_child).all(|p| !alive(*p))).await;
    wait_until("the spare's cgroup to go", Duration::from_secs(20), || next_cgroups.iter().all(|d| !d.exists())).await;
}

/// A spare shim killed while it waits never fails a start: the next run gets a fresh shim (and
/// a new spare is started after it).
#[tokio::test]
async fn a_spare_that_died_never_fails_a_start() {
    let script = format!("echo \"agent pid: $$ shim pid: $PPID \" >&2\n{CODEX_TURN}");
    let bin_dir = tempfile::tempdir().unwrap();
    let bin = super::fake_agents::fake(bin_dir.path(), "fake-codex", &script);
    let d = TestDaemon::start_with_env(vec![("SPACES_HARNESS_BIN_OPENAI_CODEX".into(), bin.display().to_string())]).await;
    d.space("s").await;
    let daemon = d.pid().unwrap();
    let mut spare = 0;
    wait_until("a spare shim", Duration::from_secs(20), || {
        spare = spares_of(daemon).first().copied().unwrap_or(0);
        spare > 0
    })
    .await;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(spare), nix::sys::signal::Signal::SIGKILL).unwrap();
    wait_until("the killed spare to be gone", Duration::from_secs(10), || !alive(spare)).await;
    let run = start_codex(&d).await;
    let st = d.client.space("s").agent_status(&run, Some(200)).await.unwrap();
    assert_eq!(st.status, spaces_sdk::Status::Idle, "the run's turn ended well: {:?} {}", st.status, st.reason);
    let tail = st.output_tail.unwrap_or_default();
    let run_shim: i32 = tail
        .split("shim pid: ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("the agent ran and named its shim: {tail}"));
    assert_ne!(run_shim, spare, "the run's shim is not the spare that was killed");
    // The run's shim may be a spare taken for it (its environment still says spare): only a
    // shim that is neither counts as the replacement.
    wait_until("another spare shim", Duration::from_secs(20), || spares_of(daemon).iter().any(|s| *s != spare && *s != run_shim)).await;
}

/// `spare_shims` off (`SPACES_SPARE_SHIMS=0`): no shim waits ahead of need, and a run starts
/// its shim when it starts, its agent still in the run's cgroup.
#[tokio::test]
async fn with_spare_shims_off_no_shim_waits_and_a_run_starts_its_own() {
    let script = format!("echo \"cgroups: $(tr '\\n' ' ' </proc/self/cgroup)\" >&2\n{CODEX_TURN}");
    let (d, run, _bin) = run_fake(vec![("SPACES_SPARE_SHIMS".into(), "0".into())], &script).await;
    let held = containment(&d, "s", true).await;
    let daemon = d.pid().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(spares_of(daemon), Vec::<i32>::new(), "a spare shim waits although spare_shims is off");
    if held["mode"] != "subreaper" {
        let st = d.client.space("s").agent_status(&run, Some(200)).await.unwrap();
        let tail = st.output_tail.unwrap_or_default();
        let leaf = format!("agent-{run}-turn-1-gen-1");
        assert!(tail.contains(&format!("-{leaf} ")), "the agent was not in its run's cgroup {leaf}: {tail}");
    }
}

/// Sum of the sizes of the files under `dir` (recursively).
fn du(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() { du(&entry.path()) } else { meta.len() };
    }
    total
}

/// A command printing 300 MB leaves at most its three output segments (about 800 KiB with
/// the default 256 KiB window) in the state dir; its last bytes are still readable.
#[tokio::test]
async fn a_command_printing_300_mb_leaves_bounded_files() {
    let d = TestDaemon::start().await;
    d.space("s").await;
    let id = exec(&d, "s", "head -c 300000000 /dev/zero | tr '\\0' x; echo; echo the-end").await;
    let status = {
        let deadline = Instant::now() + scaled(Duration::from_secs(300));
        loop {
            let s = tool(&d, "process_status", json!({"process_id": id})).await;
            if s["state"] == "exited" && s["eof"] == json!(true) {
                break s;
            }
            assert!(Instant::now() < deadline, "300 MB did not pass within 300 s: {s}");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    assert_eq!(status["exit_code"], json!(0), "{status}");
    assert_eq!(status["output_total"], json!(300_000_000u64 + 9), "{status}");
    let dir = d.state_dir().join("exec").join(&id);
    let stored = du(&dir);
    assert!(stored < 1024 * 1024, "{stored} bytes under {}", dir.display());
    let tail = tool(&d, "read_process", json!({"process_id": id, "cursor": 300_000_000u64 - 10})).await;
    assert!(tail["chunk"].as_str().unwrap().ends_with("xxxx\nthe-end\n"), "{tail}");
    assert_eq!(tail["output_lost"], json!(true));
    let total = du(&d.state_dir());
    assert!(total < 64 * 1024 * 1024, "the whole state dir holds {total} bytes");
}

/// An agent printing about 2 MB with `output_log_max_bytes` at 64 KiB keeps `output.log` and
/// one rotated `output.log.1`, both at most the bound (plus one line), and its last line.
#[tokio::test]
async fn an_agent_printing_a_lot_keeps_a_bounded_output_log() {
    let bound = 64 * 1024;
    let line = "y".repeat(1000);
    let script = format!("{CODEX_TURN}\ni=0; while [ $i -lt 2000 ]; do echo '{line}' >&2; i=$((i+1)); done\necho last-line >&2");
    let (d, run, _bin) = run_fake(vec![("SPACES_OUTPUT_LOG_MAX_BYTES".into(), bound.to_string())], &script).await;
    // The turn ends at `turn.completed`; the rest of the output comes before the exit.
    d.wait_for_event("s", &run, Duration::from_secs(60), |e| e.kind == spaces_sdk::EventKind::Exited).await;
    let run_dir = d.state_dir().join("runs").join(&run);
    let log = std::fs::metadata(run_dir.join("output.log")).map(|m| m.len()).unwrap_or(0);
    let rotated = std::fs::metadata(run_dir.join("output.log.1")).map(|m| m.len()).unwrap_or(0);
    assert!(rotated > 0, "output.log was never rotated (output.log: {log} bytes)");
    assert!(log <= bound + 1100 && rotated <= bound + 1100, "output.log {log}, output.log.1 {rotated}, bound {bound}");
    assert!(std::fs::read_to_string(run_dir.join("output.log")).unwrap().contains("last-line"));
}
