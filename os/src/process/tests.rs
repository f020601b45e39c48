//! The one spawner on real processes: what every child gets, whichever caller started it
//! (agent runs, `exec_command`, installs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::process::ExitStatus;
use std::time::Duration;

use tempfile::TempDir;
use tokio::io::unix::AsyncFd;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;

use super::Error;
use super::{read_now, spawn, spawn_self_starting, SpawnSpec, Spawned, StdinSpec, StdioSpec, TAG_ENV};

const PATIENCE: Duration = Duration::from_secs(30);
const COMBINED: StdioSpec = StdioSpec::Combined { stdin: StdinSpec::Null };
const PTY: StdioSpec = StdioSpec::Pty { rows: 24, cols: 80 };

fn spec(dir: &TempDir, argv: &[&str], stdio: StdioSpec) -> SpawnSpec {
    SpawnSpec {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: dir.path().to_path_buf(),
        env: BTreeMap::from([("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()), ("LANG".to_owned(), "C.UTF-8".to_owned())]),
        markers: Vec::new(),
        tag: format!("test/{}", uuid::Uuid::new_v4()),
        stdio,
        cgroups: Vec::new(),
        nice: 0,
        sandboxed: false,
    }
}

async fn read_pipe(fd: OwnedFd) -> String {
    let mut out = Vec::new();
    pipe::Receiver::from_owned_fd(fd).unwrap().read_to_end(&mut out).await.unwrap();
    String::from_utf8(out).unwrap()
}

async fn read_master(fd: OwnedFd) -> String {
    // SAFETY: the `OwnedFd` stays open for as long as the `AsyncFd` owns it.
    let fd = unsafe { AsyncFd::register(fd) }.unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let mut guard = fd.readable().await.unwrap();
        match read_now(fd.get_ref(), &mut buf).unwrap() {
            None => guard.clear_ready(),
            Some(0) => return String::from_utf8(out).unwrap(),
            Some(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// Everything the child wrote (stdout or the combined stream or the terminal; stderr apart
/// with pipes) and its exit status.
async fn finish(spawned: Spawned, pty: bool) -> (String, Option<String>, ExitStatus) {
    let work = async {
        let out = if pty { read_master(spawned.output).await } else { read_pipe(spawned.output).await };
        let err = match spawned.stderr {
            Some(fd) => Some(read_pipe(fd).await),
            None => None,
        };
        let mut child = spawned.child;
        (out, err, child.wait().await.unwrap())
    };
    tokio::time::timeout(PATIENCE, work).await.expect("the child did not finish")
}

/// Fields 3.. of `/proc/<pid>/stat` as printed by `cat`: state, ppid, pgrp, session, tty_nr,
/// tpgid, ...
fn stat_fields(stat: &str) -> Vec<i64> {
    let (_, rest) = stat.rsplit_once(')').unwrap();
    rest.split_whitespace().skip(1).take(5).map(|f| f.parse().unwrap()).collect()
}

#[tokio::test]
async fn a_child_leads_its_own_session_and_process_group() {
    let dir = TempDir::new().unwrap();
    let spawned = spawn(&spec(&dir, &["cat", "/proc/self/stat"], COMBINED)).unwrap();
    let pid = i64::from(spawned.pid);
    let (out, _, status) = finish(spawned, false).await;
    assert!(status.success());
    let f = stat_fields(&out);
    assert_eq!((f[1], f[2], f[3]), (pid, pid, 0), "pgrp, session = pid; no terminal: {out}");
}

/// A program that starts itself (the shim) is started without a fork of this process: nothing
/// runs in the child before `exec`, so it stays in this process's session until it calls
/// `own_session` itself; what needs the child's side is refused.
#[tokio::test]
async fn a_self_starting_program_runs_with_its_environment_and_what_needs_the_childs_side_is_refused() {
    let dir = TempDir::new().unwrap();
    let spawned = spawn_self_starting(&spec(&dir, &["sh", "-c", "echo \"$SPACES_PROCESS_TAG\"; cat /proc/self/stat"], COMBINED)).unwrap();
    let pid = i64::from(spawned.pid);
    let (out, _, status) = finish(spawned, false).await;
    assert!(status.success(), "{out}");
    let (tag, stat) = out.split_once('\n').unwrap();
    assert!(tag.starts_with("test/"), "the tag is set: {out}");
    let f = stat_fields(stat);
    // SAFETY: getsid of the calling process.
    let ours = i64::from(unsafe { nix::libc::getsid(0) });
    assert_eq!((f[2], f[1] == pid), (ours, false), "still in this process's session, no group of its own: {out}");
    let refused = |s: SpawnSpec| matches!(spawn_self_starting(&s), Err(Error::SpawnFailed { .. }));
    let mut with_cgroup = spec(&dir, &["true"], COMBINED);
    with_cgroup.cgroups.push(dir.path().to_path_buf());
    let mut lowered = spec(&dir, &["true"], COMBINED);
    lowered.nice = 10;
    assert!(refused(with_cgroup) && refused(lowered) && refused(spec(&dir, &["true"], PTY)));
}

// P8's precondition: the slave is the controlling terminal and the child's group is its
// foreground group, so SIGWINCH and Ctrl-C reach it.
#[tokio::test]
async fn a_pty_child_has_the_slave_as_controlling_terminal_in_the_foreground() {
    let dir = TempDir::new().unwrap();
    let spawned = spawn(&spec(&dir, &["cat", "/proc/self/stat"], PTY)).unwrap();
    let pid = i64::from(spawned.pid);
    let (out, err, status) = finish(spawned, true).await;
    assert!(status.success());
    assert_eq!(err, None);
    let f = stat_fields(&out);
    assert_eq!((f[1], f[2]), (pid, pid), "{out}");
    assert_ne!(f[3], 0, "a controlling terminal: {out}");
    assert_eq!(f[4], pid, "its group is the terminal's foreground group: {out}");
}

#[tokio::test]
async fn the_environment_is_exactly_env_then_markers_then_the_tag() {
    let dir = TempDir::new().unwrap();
    for stdio in [COMBINED, PTY] {
        let mut s = spec(&dir, &["env"], stdio);
        s.env.insert("A".into(), "from-env".into());
        s.env.insert(TAG_ENV.into(), "spoofed".into());
        s.markers = vec![("A".into(), "from-marker".into()), ("SPACES_RUN_ID".into(), "run-1".into())];
        let want = vec![
            "A=from-marker".to_owned(),
            "LANG=C.UTF-8".to_owned(),
            "PATH=/usr/local/bin:/usr/bin:/bin".to_owned(),
            format!("{TAG_ENV}={}", s.tag),
            "SPACES_RUN_ID=run-1".to_owned(),
        ];
        let (out, _, status) = finish(spawn(&s).unwrap(), stdio == PTY).await;
        assert!(status.success());
        let mut got: Vec<String> = out.lines().map(|l| l.trim_end_matches('\r').to_owned()).collect();
        got.sort();
        assert_eq!(got, want, "{stdio:?}");
    }
}

#[tokio::test]
async fn pipes_keep_stdout_and_stderr_apart_and_a_null_stdin_is_at_eof() {
    let dir = TempDir::new().unwrap();
    let s = spec(&dir, &["sh", "-c", "cat; echo out; echo err >&2"], StdioSpec::Pipes { stdin: StdinSpec::Null });
    let spawned = spawn(&s).unwrap();
    assert!(spawned.stdin.is_none());
    let (out, err, status) = finish(spawned, false).await;
    assert_eq!((out.as_str(), err.as_deref(), status.code()), ("out\n", Some("err\n"), Some(0)));
}

// Close-on-exec for everything above fd 2, even an fd this process left inheritable.
#[tokio::test]
async fn a_child_gets_no_fd_above_2_even_one_left_inheritable() {
    let dir = TempDir::new().unwrap();
    let devnull = std::fs::File::open("/dev/null").unwrap();
    // F_DUPFD (not F_DUPFD_CLOEXEC): the copy would survive exec without the spawner's care.
    let raw = nix::fcntl::fcntl(&devnull, nix::fcntl::FcntlArg::F_DUPFD(300)).unwrap();
    // SAFETY: `raw` is a fresh descriptor nobody else owns.
    let leaky = unsafe { OwnedFd::from_raw_fd(raw) };
    let path = format!("/proc/self/fd/{}", leaky.as_raw_fd());
    assert!(std::path::Path::new(&path).exists());
    for stdio in [COMBINED, PTY] {
        let (_, _, status) = finish(spawn(&spec(&dir, &["test", "-e", &path], stdio)).unwrap(), stdio == PTY).await;
        assert_eq!(status.code(), Some(1), "{path} must not be open in the child ({stdio:?})");
    }
}

#[tokio::test]
async fn signals_the_daemon_ignores_are_default_in_the_child() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    let dir = TempDir::new().unwrap();
    // SAFETY: SIG_IGN installs no handler code; the previous disposition is put back below.
    let before = unsafe { signal(Signal::SIGHUP, SigHandler::SigIgn) }.unwrap();
    let spawned = spawn(&spec(&dir, &["grep", "SigIgn", "/proc/self/status"], COMBINED));
    // SAFETY: restores what was there.
    unsafe { signal(Signal::SIGHUP, before) }.unwrap();
    let (out, _, _) = finish(spawned.unwrap(), false).await;
    let ignored = u64::from_str_radix(out.trim().trim_start_matches("SigIgn:").trim(), 16).unwrap();
    let reset = [Signal::SIGHUP, Signal::SIGINT, Signal::SIGQUIT, Signal::SIGTERM];
    for sig in reset {
        assert_eq!(ignored & (1 << (sig as u64 - 1)), 0, "{sig} is ignored in the child: {out}");
    }
}

// An execve that fails after the fork (here: a script whose interpreter is missing) comes back
// as a spawn error, in pipe and PTY mode alike, never as a child that ran and died.
#[tokio::test]
async fn an_exec_failure_after_the_fork_is_a_spawn_error() {
    let dir = TempDir::new().unwrap();
    let script = dir.path().join("bad-interpreter.sh");
    std::fs::write(&script, "#!/nonexistent/interpreter\necho hi\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    for stdio in [COMBINED, PTY] {
        match spawn(&spec(&dir, &[script.to_str().unwrap()], stdio)) {
            Err(Error::SpawnFailed { source, .. }) => assert_eq!(source.kind(), std::io::ErrorKind::NotFound, "{stdio:?}"),
            other => panic!("{stdio:?}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_missing_cwd_is_a_spawn_error_never_a_fallback() {
    let dir = TempDir::new().unwrap();
    for stdio in [COMBINED, PTY] {
        let mut s = spec(&dir, &["pwd"], stdio);
        s.cwd = dir.path().join("missing");
        assert!(matches!(spawn(&s), Err(Error::SpawnFailed { .. })), "{stdio:?}");
    }
}

#[test]
fn an_empty_program_is_refused_before_anything_starts() {
    let dir = TempDir::new().unwrap();
    assert!(matches!(spawn(&spec(&dir, &[], COMBINED)), Err(Error::EmptyCommand)));
    assert!(matches!(spawn(&spec(&dir, &[""], COMBINED)), Err(Error::EmptyCommand)));
}

#[test]
fn widen_pipe_grows_a_pipe_and_refuses_what_is_not_one() {
    let (r, _w) = nix::unistd::pipe().unwrap();
    let size = super::widen_pipe(&r, 1 << 20).unwrap();
    assert!(size >= 1 << 20, "{size}");
    let file = tempfile::tempfile().unwrap();
    assert_eq!(super::widen_pipe(&file, 1 << 20).unwrap_err(), nix::errno::Errno::EBADF);
}

/// Records every push, to see how `read_output` cut the stream.
struct Pushes(Vec<Vec<u8>>);

impl super::OutputSink for Pushes {
    fn push(&mut self, bytes: &[u8]) {
        self.0.push(bytes.to_vec());
    }
}

#[tokio::test]
async fn read_output_asks_for_at_most_read_bytes_per_read_and_keeps_the_order() {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_CLOEXEC).unwrap();
    let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(nix::unistd::write(&w, &data).unwrap(), data.len());
    drop(w);
    // SAFETY: the `OwnedFd` keeps its fd open until the `AsyncFd` drops it.
    let fd = unsafe { AsyncFd::register(r) }.unwrap();
    let mut sink = Pushes(Vec::new());
    let cut = super::read_output(&fd, std::future::pending(), PATIENCE, None, 1000, &mut sink).await;
    assert!(!cut, "EOF, not a cut");
    assert!(sink.0.iter().all(|p| p.len() <= 1000), "{:?}", sink.0.iter().map(Vec::len).collect::<Vec<_>>());
    assert_eq!(sink.0.concat(), data);
}
