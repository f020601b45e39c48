//! Issue 15, the boundary between the operator and what runs in a Space: a run's or a
//! command's own processes are callers of their Space, never the operator; children see no
//! daemon secret and no state-dir path; secrets stay out of storage; every descendant of a
//! command ends with it; storage stays bounded.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{spacesd_bin, TestDaemon};

pub(super) async fn tool(d: &TestDaemon, name: &str, args: Value) -> Value {
    match d.client.call_named(name, args.clone()).await {
        Ok(v) => v,
        Err(e) => panic!("{name} {args} failed: {e}"),
    }
}

/// Runs `script` with `sh -c` as an `exec_command` in Space `space` and returns its whole
/// output once it ended (it must end within 60 s).
pub(super) async fn run_in(d: &TestDaemon, space: &str, script: &str) -> String {
    let started = tool(d, "exec_command", json!({"workspace_id": space, "command": ["sh", "-c", script]})).await;
    let id = started["process_id"].as_str().unwrap().to_owned();
    let mut out = String::new();
    let mut cursor = 0;
    let deadline = Instant::now() + crate::support::scaled(Duration::from_secs(60));
    loop {
        let r = tool(d, "read_process", json!({"process_id": id, "cursor": cursor, "wait_ms": 2000})).await;
        out.push_str(r["chunk"].as_str().unwrap());
        cursor = r["cursor"].as_u64().unwrap();
        if r["eof"] == json!(true) {
            return out;
        }
        assert!(Instant::now() < deadline, "the command did not end within 60 s; output so far:\n{out}");
    }
}

/// The section of `out` after the line `== name`, up to the next `== ` line.
pub(super) fn section<'a>(out: &'a str, name: &str) -> &'a str {
    let start = out.find(&format!("== {name}\n")).unwrap_or_else(|| panic!("no section {name} in:\n{out}"));
    let rest = &out[start + name.len() + 4..];
    &rest[..rest.find("\n== ").map_or(rest.len(), |i| i + 1)]
}

/// Issue 28's attacks from inside a command, against a root daemon and an unprivileged one:
/// the operator's socket, its token, the state dir (another run's `env.json`), another Space's
/// files and processes are not in the command's sandbox.
pub(super) async fn a_commands_processes_reach_nothing_of_the_operator(d: TestDaemon) {
    let own = d.space("own").await;
    let other = d.space("other").await;
    std::fs::write(own.join("f.txt"), "mine\n").unwrap();
    std::fs::write(other.join("g.txt"), "theirs\n").unwrap();
    // Another run's secrets, where the daemon keeps them.
    let other_run = d.state_dir().join("runs").join("run-other");
    std::fs::create_dir_all(&other_run).unwrap();
    std::fs::write(other_run.join("env.json"), "{\"KEY\": \"ENVJSON-MARKER\"}").unwrap();
    // A process of the other Space, to be killed from this one.
    let victim = tool(&d, "exec_command", json!({"workspace_id": "other", "command": ["sleep", "120"]})).await;
    let victim = victim["process_id"].as_str().unwrap().to_owned();
    let host_pid = wait_for_pid(&other, b"sleep\x00120\x00").await;
    let (bin, state) = (spacesd_bin(), d.state_dir());
    let (bin, state) = (bin.display(), state.display());
    let token = std::fs::read_to_string(d.state_dir().join("token")).unwrap();
    let script = format!(
        r#"
B='{bin}'; S='{state}'
t() {{ name=$1; shift; echo "== $name"; "$@" 2>&1; echo "exit=$?"; }}
t space_add "$B" --state-dir "$S" space add alias '{other}'
t re_policy "$B" --state-dir "$S" space add own '{own}' --read-only --replace
t space_list "$B" --state-dir "$S" space list
t token_create "$B" --state-dir "$S" token create --space other --scope control
t token cat "$S/token"
t env_json cat "$S/runs/run-other/env.json"
t other_file cat '{other}/g.txt'
t other_space "$B" --state-dir "$S" tool read '{{"workspace_id": "other", "path": "g.txt"}}'
t operator_socket curl -s -f --unix-socket "$S/spacesd.sock" http://localhost/v1/spaces
t tcp_no_token curl -s -f http://{addr}/v1/spaces
t kill_other kill -9 {host_pid}
t pkill_other pkill -9 -f 'sleep 120'
echo "== end"
"#,
        other = other.display(),
        own = own.display(),
        addr = std::fs::read_to_string(d.state_dir().join("tcp.addr")).unwrap().trim(),
    );
    let out = run_in(&d, "own", &script).await;
    for refused in [
        "space_add",
        "re_policy",
        "space_list",
        "token_create",
        "token",
        "env_json",
        "other_file",
        "other_space",
        "operator_socket",
        "tcp_no_token",
        "kill_other",
    ] {
        let s = section(&out, refused);
        assert!(!s.contains("exit=0\n"), "{refused} succeeded from inside a command:\n{s}\nwhole output:\n{out}");
    }
    assert!(!out.contains("theirs") && !out.contains("ENVJSON-MARKER") && !out.contains(token.trim()), "{out}");
    // Nothing changed: the operator (this test) sees both Spaces as they were, the other
    // Space's command still runs, and the operator's token still works.
    let spaces = d.client.space_list(&spaces_sdk::Empty {}).await.unwrap();
    let names: Vec<&str> = spaces.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["other", "own"]);
    assert!(spaces.iter().all(|s| !s.read_only));
    let status = tool(&d, "process_status", json!({"process_id": victim})).await;
    assert_eq!(status["state"], "running", "the other Space's process was killed: {status}");
    let addr = std::fs::read_to_string(d.state_dir().join("tcp.addr")).unwrap();
    let tcp = spaces_sdk::client::Client::new(spaces_sdk::client::Endpoint::Tcp { addr: addr.trim().into(), token: token.trim().into() });
    assert_eq!(tcp.space_list(&spaces_sdk::Empty {}).await.unwrap().len(), 2, "the operator's token works for the operator");
    assert!(std::fs::read_to_string(d.state_dir().join("tokens.json")).map_or(true, |t| !t.contains("\"other\"")), "no token was made");
    tool(&d, "terminate_process", json!({"process_id": victim})).await;
}

/// Issue 28's first attack, "kill your own shim": a command starts an escapee (`setsid env -i`,
/// in the background) and kills its parent; the escapee then calls the daemon as the operator
/// would. In the sandbox its parent is the pid namespace's init, which a kill from inside does
/// not reach, and the escapee is still in the sandbox: no operator socket, nothing changes.
pub(super) async fn an_escapee_that_kills_its_parent_is_still_inside(d: TestDaemon) {
    let own = d.space("own").await;
    let (bin, state) = (spacesd_bin(), d.state_dir());
    let script = format!(
        "setsid env -i sh -c 'sleep 0.5; \"$0\" --state-dir \"$1\" space add own \"$2\" --read-only --replace >\"$2/escapee.out\" 2>&1; echo \"exit=$?\" >>\"$2/escapee.out\"' '{bin}' '{state}' '{own}' </dev/null >/dev/null 2>&1 &\nsleep 0.2; kill -9 $PPID; echo \"kill=$?\"",
        bin = bin.display(),
        state = state.display(),
        own = own.display()
    );
    let out = run_in(&d, "own", &script).await;
    let escapee = own.join("escapee.out");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&escapee).is_ok_and(|s| s.contains("exit=")) {
        assert!(Instant::now() < deadline, "the escapee never finished; the command said: {out}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let escaped = std::fs::read_to_string(&escapee).unwrap();
    assert!(!escaped.contains("exit=0"), "the escapee reached the daemon: {escaped}");
    let spaces = d.client.space_list(&spaces_sdk::Empty {}).await.unwrap();
    assert!(spaces.iter().all(|s| !s.read_only), "the escapee changed a Space's policy: {spaces:?}");
}

#[tokio::test]
async fn case_28_an_escapee_that_kills_its_parent_is_still_inside_root_daemon() {
    an_escapee_that_kills_its_parent_is_still_inside(TestDaemon::start().await).await
}

#[tokio::test]
async fn case_28_an_escapee_that_kills_its_parent_is_still_inside_unprivileged_daemon() {
    an_escapee_that_kills_its_parent_is_still_inside(TestDaemon::start_unprivileged(vec![], vec![]).await).await
}

/// The host pid of the process whose command line is `cmdline` and whose working directory is
/// `cwd` (a command's pid inside its sandbox is not the host's).
async fn wait_for_pid(cwd: &std::path::Path, cmdline: &[u8]) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let found = std::fs::read_dir("/proc").unwrap().flatten().filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok()).find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == cmdline)
                && std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c == cwd)
        });
        if let Some(pid) = found {
            return pid;
        }
        assert!(Instant::now() < deadline, "no process {:?} in {}", String::from_utf8_lossy(cmdline), cwd.display());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn case_28_a_commands_processes_reach_nothing_of_the_operator_root_daemon() {
    let d = TestDaemon::start_with(vec![], vec!["--tcp".into(), "127.0.0.1:0".into()]).await;
    a_commands_processes_reach_nothing_of_the_operator(d).await
}

#[tokio::test]
async fn case_28_a_commands_processes_reach_nothing_of_the_operator_unprivileged_daemon() {
    let d = TestDaemon::start_unprivileged(vec![], vec!["--tcp".into(), "127.0.0.1:0".into()]).await;
    a_commands_processes_reach_nothing_of_the_operator(d).await
}

/// A fork bomb in a command of an unprivileged daemon (no cgroups) stops at the sandbox's
/// process ceiling (`SPACES_PIDS_MAX`, `RLIMIT_NPROC` in its user namespace), the daemon answers
/// `/v1/health` within a second throughout, and ending the command ends every process of it.
/// Bounded twice: the ceiling under test, and `prlimit --nproc` around the whole daemon.
#[tokio::test]
async fn case_28_a_fork_bomb_in_an_unprivileged_daemons_command_is_bounded() {
    let d = TestDaemon::start_unprivileged(vec![("SPACES_PIDS_MAX".into(), "48".into())], vec![]).await;
    let root = d.space("s").await;
    let started = tool(&d, "exec_command", json!({"workspace_id": "s", "command": ["bash", "-c", "b() { b & b & wait; }; b"]})).await;
    let id = started["process_id"].as_str().unwrap().to_owned();
    let in_space = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c == root))
            .count()
    };
    let mut most = 0;
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let asked = Instant::now();
        assert_eq!(d.raw("GET", "/v1/health", None).0, 200);
        assert!(asked.elapsed() < Duration::from_secs(1), "/v1/health took {:?} during the bomb", asked.elapsed());
        most = most.max(in_space());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(most > 10, "the bomb never got going ({most} processes)");
    // The ceiling, bubblewrap's outer process and the namespace's init.
    assert!(most <= 48 + 2, "{most} processes in the sandbox, over its ceiling of 48");
    tool(&d, "terminate_process", json!({"process_id": id})).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while in_space() > 0 {
        assert!(Instant::now() < deadline, "{} processes of the bomb outlived its end", in_space());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The uid [`a_fork_bomb_that_takes_every_task_of_the_daemons_uid_leaves_it_answering_without_a_panic`]
/// runs its daemon as: no other test's, so the bomb that exhausts it takes nothing from them.
const BOMB_UID: u32 = 64_999;

/// The processes of `uid` (real uid), each with its number of tasks (threads included).
fn processes_of(uid: u32) -> Vec<(i32, usize)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else { continue };
        let field =
            |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.split_whitespace().next().unwrap_or("").to_owned());
        if field("Uid:").is_some_and(|u| u == uid.to_string()) {
            found.push((pid, field("Threads:").and_then(|t| t.parse().ok()).unwrap_or(1)));
        }
    }
    found
}

fn pids_of(uid: u32) -> Vec<i32> {
    processes_of(uid).into_iter().map(|(pid, _)| pid).collect()
}

/// The processes and the tasks (threads included) of `uid`: what `RLIMIT_NPROC` counts.
fn processes_and_tasks_of(uid: u32) -> (usize, usize) {
    let found = processes_of(uid);
    (found.len(), found.iter().map(|(_, tasks)| tasks).sum())
}

/// `GET /v1/health` over `sock`, given 1 s: whether it answered 200 within it.
fn health_within_a_second(sock: &std::path::Path) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::os::unix::net::UnixStream::connect(sock) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
    if s.write_all(b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200")
}

/// Issue 30: a fork bomb in a command of an unprivileged daemon whose uid may have fewer tasks
/// than the sandbox's ceiling (`SPACES_PIDS_MAX` 4096 under `prlimit --nproc=192`): the ceiling
/// is then the uid's, shared with the daemon, and the bomb takes every task the daemon's uid may
/// have, so no thread of the daemon can start meanwhile. Its runtime's threads were made before
/// they were needed: `/v1/health` answers within 1 s throughout (checked every 100 ms), calls
/// that need a blocking thread (`agent_list`, `space_list`) are answered, the daemon's log has no
/// panic (no "can't spawn worker thread"), and within 10 s of the command's end its processes
/// are gone and the uid's process count is back to its baseline. The bomb starts after 11 s of
/// quiet, when a blocking thread started on demand would have ended (tokio keeps an idle one
/// 10 s by default). Bounded: `prlimit --nproc=192` around the daemon, a uid of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_that_takes_every_task_of_the_daemons_uid_leaves_it_answering_without_a_panic() {
    assert!(nix::unistd::geteuid().is_root(), "this test runs its daemon as a uid of its own: run the tests as root (as CI does)");
    const NPROC: usize = 192;
    let dir = tempfile::Builder::new().prefix("spaces-test-").tempdir().unwrap();
    let uid = nix::unistd::Uid::from_raw(BOMB_UID);
    nix::unistd::chown(dir.path(), Some(uid), Some(nix::unistd::Gid::from_raw(BOMB_UID))).unwrap();
    let state = dir.path().join("state");
    let sock = state.join("spacesd.sock");
    let log_path = dir.path().join("spacesd.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut cmd = std::process::Command::new("setpriv");
    cmd.args(["--reuid", &BOMB_UID.to_string(), "--regid", &BOMB_UID.to_string(), "--clear-groups", "--"])
        .args(["prlimit", &format!("--nproc={NPROC}"), "--"])
        .arg(spacesd_bin());
    crate::support::hermetic(&mut cmd)
        .arg("serve")
        .arg("--state-dir")
        .arg(&state)
        .env("HOME", dir.path())
        .env("SPACES_PIDS_MAX", "4096")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log);
    /// Ends every process of the test's uid, the daemon first, whatever the test's outcome.
    struct Reap(std::process::Child, std::path::PathBuf);
    impl Drop for Reap {
        fn drop(&mut self) {
            if std::thread::panicking() {
                let status = self.0.try_wait();
                eprintln!("the daemon ({status:?}) logged:\n{}", std::fs::read_to_string(&self.1).unwrap_or_default());
            }
            let _ = self.0.kill();
            let _ = self.0.wait();
            // Whatever of its tree is left, by pid (the uid is this test's alone).
            for pid in pids_of(BOMB_UID) {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
            }
        }
    }
    let _daemon = Reap(cmd.spawn().expect("spawn spacesd"), log_path.clone());
    let client = spaces_sdk::client::Client::new(spaces_sdk::client::Endpoint::Unix(sock.clone()));
    crate::support::wait_until("spacesd answers", Duration::from_secs(20), || health_within_a_second(&sock)).await;
    let root = dir.path().join("space-s");
    std::fs::create_dir(&root).unwrap();
    nix::unistd::chown(&root, Some(uid), Some(nix::unistd::Gid::from_raw(BOMB_UID))).unwrap();
    let root = std::fs::canonicalize(root).unwrap();
    client.call_named("space_add", json!({"name": "s", "root": root.display().to_string()})).await.unwrap();
    client.call_named("agent_list", json!({"space": "s"})).await.unwrap();
    let in_space = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c == root))
            .count()
    };
    // Two commands first: from the second on, the daemon keeps a warm sandbox for the Space
    // (an idle shim and bubblewrap's processes, counted in the baseline as after the bomb).
    for _ in 0..2 {
        let first = client.call_named("exec_command", json!({"workspace_id": "s", "command": ["true"]})).await.unwrap();
        let first = first["process_id"].as_str().unwrap().to_owned();
        let _ = client.call_named("read_process", json!({"process_id": first, "cursor": 0, "wait_ms": 2000})).await;
        crate::support::wait_until("the command ends", Duration::from_secs(20), || in_space() == 0).await;
        let deadline = Instant::now() + crate::support::scaled(Duration::from_secs(20));
        while client.call_named("process_status", json!({"process_id": first})).await.unwrap()["state"] != "exited" {
            assert!(Instant::now() < deadline, "the command {first} did not end");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // Quiet, so a blocking thread made on demand would be gone by now.
    tokio::time::sleep(Duration::from_secs(11)).await;
    let (baseline, _) = processes_and_tasks_of(BOMB_UID);

    let started = client
        .call_named("exec_command", json!({"workspace_id": "s", "command": ["bash", "-c", "b() { b & b & wait; }; b"]}))
        .await
        .unwrap();
    let id = started["process_id"].as_str().unwrap().to_owned();
    let (mut most, mut exhausted_at) = (0, None);
    let until = Instant::now() + Duration::from_secs(15);
    while Instant::now() < until {
        let asked = Instant::now();
        assert!(health_within_a_second(&sock), "/v1/health did not answer within 1 s during the bomb");
        let (_, tasks) = processes_and_tasks_of(BOMB_UID);
        most = most.max(tasks);
        if tasks + 4 >= NPROC && exhausted_at.is_none() {
            exhausted_at = Some(Instant::now());
        }
        // The uid exhausted for a while: calls that run on the blocking pool are answered.
        if exhausted_at.is_some_and(|t| t.elapsed() > Duration::from_secs(2)) {
            let listed = tokio::time::timeout(Duration::from_secs(10), client.call_named("agent_list", json!({"space": "s"}))).await;
            assert!(matches!(listed, Ok(Ok(_))), "agent_list during the bomb: {listed:?}");
            let spaces = tokio::time::timeout(Duration::from_secs(10), client.call_named("space_list", json!({}))).await;
            assert!(matches!(spaces, Ok(Ok(_))), "space_list during the bomb: {spaces:?}");
            assert!(health_within_a_second(&sock), "/v1/health did not answer within 1 s during the bomb");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100).saturating_sub(asked.elapsed())).await;
    }
    assert!(exhausted_at.is_some(), "the bomb never took the uid's {NPROC} tasks (at most {most})");
    assert!(most <= NPROC, "{most} tasks of the uid, over its limit of {NPROC}");

    client.call_named("terminate_process", json!({"process_id": id})).await.unwrap();
    let ended = Instant::now();
    loop {
        assert!(health_within_a_second(&sock), "/v1/health did not answer within 1 s after the bomb");
        let (processes, _) = processes_and_tasks_of(BOMB_UID);
        if in_space() == 0 && processes <= baseline {
            break;
        }
        assert!(
            ended.elapsed() < Duration::from_secs(10),
            "10 s after the command's end: {} processes of the bomb left, {processes} of the uid (baseline {baseline})",
            in_space()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(!log.contains("panicked") && !log.contains("can't spawn worker thread"), "the daemon's log:\n{log}");
}

/// Sends the head of a POST with a `len`-byte body and `sent` bytes of it; the connection is
/// left open.
fn start_upload(d: &TestDaemon, len: usize, sent: usize) -> std::os::unix::net::UnixStream {
    use std::io::Write;
    let mut s = std::os::unix::net::UnixStream::connect(d.state_dir().join("spacesd.sock")).unwrap();
    write!(s, "POST /v1/spaces HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {len}\r\n\r\n").unwrap();
    s.write_all(&vec![b' '; sent]).unwrap();
    s
}

fn status_of(s: &mut std::os::unix::net::UnixStream) -> (u16, String) {
    use std::io::Read;
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = vec![0u8; 4096];
    let n = s.read(&mut buf).unwrap_or(0);
    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
    (text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0), text)
}

#[tokio::test]
async fn a_few_large_bodies_at_a_time_and_small_requests_never_wait() {
    let d = TestDaemon::start().await;
    const MIB: usize = 1024 * 1024;
    // Four slow uploads of 2 MiB hold every large-body slot.
    let held: Vec<_> = (0..4).map(|_| start_upload(&d, 2 * MIB, 10)).collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let mut fifth = start_upload(&d, 2 * MIB, 10);
    // A small request answers at once meanwhile.
    assert_eq!(d.raw("GET", "/v1/health", None).0, 200);
    assert!(started.elapsed() < Duration::from_secs(2), "a small request waited for large ones");
    let (status, text) = tokio::task::spawn_blocking(move || status_of(&mut fifth)).await.unwrap();
    assert_eq!(status, 429, "{text}");
    assert!(text.contains("RESOURCE_QUEUE_FULL"), "{text}");
    assert!(started.elapsed() >= Duration::from_secs(4), "it waited for a slot first");
    drop(held);
    // With the slots free, a large body is read (and refused for what it is, not for its size).
    let (status, body) = tokio::task::spawn_blocking({
        let sock = d.state_dir().join("spacesd.sock");
        move || {
            use std::io::Write;
            let mut s = std::os::unix::net::UnixStream::connect(sock).unwrap();
            let body = vec![b' '; 2 * MIB];
            write!(
                s,
                "POST /v1/spaces HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .unwrap();
            s.write_all(&body).unwrap();
            status_of(&mut s)
        }
    })
    .await
    .unwrap();
    assert_eq!(status, 400, "{body}");
}

/// Every file under `dir` (recursively) holding `needle`, as paths.
fn files_holding(dir: &std::path::Path, needle: &[u8]) -> Vec<String> {
    let mut hits = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if std::fs::read(&p).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle)) {
                hits.push(p.display().to_string());
            }
        }
    }
    hits
}

const API_KEY: &str = "sk-ant-daemon-0123456789";
const PASSWORD: &str = "pa\"ss\\w/ord-é-98765";

#[tokio::test]
async fn secrets_of_the_daemon_reach_no_stored_file_and_children_inherit_no_fd() {
    let bin_dir = tempfile::tempdir().unwrap();
    // A fake Codex: prints the forwarded key, the file of secrets and Python's JSON of the
    // password as output and inside its JSON events.
    let agent = bin_dir.path().join("fake-codex");
    std::fs::write(
        &agent,
        r#"#!/bin/sh
cat >/dev/null
echo "key on stderr: $ANTHROPIC_API_KEY" >&2
cat secrets.txt >&2
python3 -c 'import json,sys; print(json.dumps({"type":"item.completed","item":{"id":"i0","type":"agent_message","text":open("secrets.txt").read()}}))'
echo '{"type":"thread.started","thread_id":"t1"}'
echo '{"type":"turn.completed","usage":{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1}}'
"#,
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let env = vec![
        ("SPACES_HARNESS_BIN_OPENAI_CODEX".to_owned(), agent.display().to_string()),
        ("ANTHROPIC_API_KEY".to_owned(), API_KEY.to_owned()),
        ("MY_SERVICE_PASSWORD".to_owned(), PASSWORD.to_owned()),
    ];
    let d = TestDaemon::start_leaking_fd(env, vec!["--tcp".into(), "127.0.0.1:0".into()]).await;
    let token = std::fs::read_to_string(d.state_dir().join("token")).unwrap().trim().to_owned();
    let root = d.space("s").await;
    std::fs::write(root.join("secrets.txt"), format!("{API_KEY} {PASSWORD} {token}\n")).unwrap();

    // A command: the file, Python's JSON spelling (\u00e9) and a `\/` spelling; and its fds.
    let out = run_in(
        &d,
        "s",
        r#"cat secrets.txt; python3 -c 'import json; print(json.dumps(open("secrets.txt").read()))'
python3 -c 'import json; print(json.dumps(open("secrets.txt").read()).replace("/", "\\/"))'
echo "== parent"; tr '\0' '\n' </proc/$PPID/environ; cat "$SPACES_HOST/token" 2>&1
echo "== fds"; ls /proc/$$/fd; echo "== end""#,
    )
    .await;
    assert!(out.contains("[redacted] [redacted] [redacted]"), "{out}");
    // The issue's own attack: the parent's environment (the shim's allow-list) and the token
    // file under $SPACES_HOST (an opaque id, no path) give nothing away.
    let parent = section(&out, "parent");
    for leak in ["ANTHROPIC_API_KEY", "MY_SERVICE_PASSWORD", API_KEY, PASSWORD, token.as_str()] {
        assert!(!parent.contains(leak), "{leak:?} reached the command through its parent or $SPACES_HOST:\n{parent}");
    }
    let fds: Vec<&str> = section(&out, "fds").lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(fds, ["0", "1", "2"], "only stdio is inherited (the daemon had fd 7 open):\n{out}");

    // A run with the key forwarded.
    let req = spaces_sdk::AgentStartRequest {
        space: "s".into(),
        agent: "openai-codex-exec".into(),
        prompt: "print them".into(),
        show: None,
        options: Some(spaces_sdk::SpaceAgentOptions { env_from_host: vec!["ANTHROPIC_API_KEY".into()], ..Default::default() }),
        request_id: None,
        traceparent: None,
    };
    let run = d.client.agent_start(&req).await.unwrap().run_id;
    d.wait_turn_end("s", &run, 1, Duration::from_secs(60)).await;
    let events = d.events("s", &run).await;
    assert!(format!("{events:?}").contains("[redacted]"), "{}", crate::support::describe(&events));

    // No stored file holds any spelling of any secret, but the two that must: the token file
    // and the run's 0600 env.json (the forwarded key it relaunches the agent with).
    let redactor = spaces_os::redact::Redactor::new([API_KEY, PASSWORD, token.as_str()]);
    for spelling in redactor.spellings() {
        let hits: Vec<String> = files_holding(&d.state_dir(), spelling.as_bytes())
            .into_iter()
            .filter(|p| !p.ends_with("/token") && !p.ends_with("/env.json"))
            .collect();
        assert!(hits.is_empty(), "{spelling:?} is stored in {hits:?}");
    }
}

/// The nice value (field 19 of `/proc/PID/stat`) of process `pid` as `sh` prints it.
const NICE_OF: &str = "awk '{print $19}' /proc";
/// A CPU-busy loop of shell builtins (no child process) that ends once this shell runs at nice
/// 10 or lower and so does its session's autogroup (where the kernel has them), or after a
/// bound of about ten seconds of spinning. Both, because a suite run under `nice -n 10` starts
/// the shell at 10 already, while its autogroup starts at 0 until the daemon lowers it.
const SPIN_UNTIL_LOWERED: &str = "i=0; while [ $i -lt 1000000 ]; do read -r l < /proc/$$/stat; set -- $l; if [ \"${19}\" -ge 10 ]; then \
     g=10; [ -r /proc/$$/autogroup ] && read -r _ _ g < /proc/$$/autogroup; [ \"$g\" -ge 10 ] && break; fi; i=$((i+1)); done";

/// The agent's shim, seen from the host (the agent's sandbox has a pid namespace of its own, so
/// `$PPID` inside is not the shim): the parent of the bubblewrap process working in `root`.
fn shim_of_agent_in(root: &std::path::Path) -> Option<i32> {
    let chdir = format!("--chdir\0{}\0", root.display());
    std::fs::read_dir("/proc").ok()?.flatten().filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok()).find_map(|pid| {
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let cmd = String::from_utf8_lossy(&cmd).into_owned();
        if !(cmd.contains("bwrap\0") && cmd.contains(&chdir) && cmd.contains("sandbox-exec")) {
            return None;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
    })
}

/// `(nice, session id)` of `pid`, from `/proc/PID/stat`.
fn nice_and_session(pid: i32) -> (String, i32) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<String> = stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().map(String::from).collect()).unwrap_or_default();
    (fields.get(16).cloned().unwrap_or_default(), fields.get(3).and_then(|s| s.parse().ok()).unwrap_or(0))
}

#[tokio::test]
async fn agents_and_commands_are_lowered_below_the_daemons_priority_once_cpu_hungry() {
    let body = format!(
        "cat >/dev/null\n{NICE_OF}/$$/stat > agent-nice-idle\n{SPIN_UNTIL_LOWERED}\n{NICE_OF}/$$/stat > agent-nice\ncat /proc/self/autogroup > agent-autogroup 2>/dev/null || true\nwhile [ ! -e release ]; do sleep 0.05; done\n{}\n{}",
        super::survive::message("measured"),
        super::survive::DONE
    );
    let (d, root, _bin) = super::survive::fake_daemon(&body).await;
    let req = crate::support::start_request("s", "openai-codex-exec", "hi");
    let run = d.client.agent_start(&req).await.unwrap().run_id;
    let read = |name: &str| std::fs::read_to_string(root.join(name)).unwrap_or_default().trim().to_owned();
    let wait_file = |name: &'static str| {
        let path = root.join(name);
        async move {
            let deadline = Instant::now() + Duration::from_secs(60);
            while !std::fs::read_to_string(&path).is_ok_and(|s| s.ends_with('\n')) {
                assert!(Instant::now() < deadline, "the agent never wrote {name}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    wait_file("agent-nice-idle").await;
    let shim = shim_of_agent_in(&root).expect("the agent's shim");
    let (shim_idle, sid) = nice_and_session(shim);
    wait_file("agent-nice").await;
    let (shim_busy, _) = nice_and_session(shim);
    std::fs::write(root.join("release"), "").unwrap();
    d.wait_turn_end("s", &run, 1, Duration::from_secs(60)).await;
    // The daemon inherits this test's nice value (a suite run under `nice` starts at 10).
    let ours: i32 = std::fs::read_to_string("/proc/self/stat")
        .unwrap()
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .nth(16)
        .unwrap()
        .parse()
        .unwrap();
    let expected = ours.max(10).to_string();
    assert_eq!(read("agent-nice-idle"), ours.to_string(), "an agent that waits keeps the daemon's priority");
    assert_eq!(shim_idle, ours.to_string(), "its shim keeps the daemon's priority");
    // The shim is started without a fork of the daemon and makes its own session: it leads it.
    assert_eq!(shim, sid, "the shim leads its own session");
    assert_eq!(read("agent-nice"), expected, "a busy agent is lowered to nice 10 (or the daemon's, if lower)");
    assert_eq!(shim_busy, expected, "its shim is lowered with it (it journals the busy tree's output)");
    let autogroup = read("agent-autogroup");
    if std::path::Path::new("/proc/self/autogroup").exists() {
        assert!(autogroup.ends_with(&format!("nice {expected}")), "the busy agent's session autogroup is lowered too: {autogroup:?}");
    }
    let out = run_in(&d, "s", &format!("{NICE_OF}/$$/stat")).await;
    assert_eq!(out.trim(), ours.to_string(), "a command that does not keep a CPU busy keeps the daemon's priority");
    let out = run_in(&d, "s", &format!("{SPIN_UNTIL_LOWERED}; echo \"${{19}}\"")).await;
    assert_eq!(out.trim(), expected, "a busy command is lowered to nice 10 too");
}

/// The sandbox level is said where an operator or caller looks: `agent_capabilities.sandbox`,
/// `workspace_info`'s `command_sandbox`, and, when the operator turned it off, every run's notes.
#[tokio::test]
async fn case_28_the_sandbox_in_force_is_reported_and_running_without_it_is_said() {
    let bin = tempfile::tempdir().unwrap();
    let agent = super::fake_agents::fake(bin.path(), "fake-codex", "cat >/dev/null");
    for (setting, level) in [("on", "bubblewrap"), ("landlock", "landlock"), ("off", "none")] {
        let env = vec![
            ("SPACES_SANDBOX".to_owned(), setting.to_owned()),
            ("SPACES_HARNESS_BIN_OPENAI_CODEX".to_owned(), agent.display().to_string()),
        ];
        let d = TestDaemon::start_with_env(env).await;
        d.space("s").await;
        let caps = d.client.agent_capabilities(&spaces_sdk::Empty {}).await.unwrap();
        assert_eq!(caps.sandbox, level, "SPACES_SANDBOX={setting}");
        let info = tool(&d, "workspace_info", json!({"workspace_id": "s"})).await;
        assert_eq!(info["execution"]["isolation"]["command_sandbox"], level, "{info}");
        let req = crate::support::start_request("s", "openai-codex-exec", "hi");
        let report = d.client.agent_start(&req).await.unwrap();
        let warned = report.notes.iter().any(|n| n.starts_with("unsandboxed:"));
        assert_eq!(warned, setting == "off", "SPACES_SANDBOX={setting}: {:?}", report.notes);
        let weaker = report.notes.iter().any(|n| n.starts_with("landlock:") && n.contains("no pid namespace"));
        assert_eq!(weaker, setting == "landlock", "SPACES_SANDBOX={setting}: {:?}", report.notes);
        d.client.space("s").agent_stop(&report.run_id).await.unwrap();
    }
}
