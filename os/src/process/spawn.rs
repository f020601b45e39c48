//! [`spawn`]: a spec in, a child in its own session with a clean environment out. See the module
//! doc of [`crate::process`] for the process model.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::libc;
use nix::unistd::pipe2;
use tokio::process::{Child, Command};

use super::{pty, TAG_ENV};
use super::{Error, Result};
use crate::sandbox::STDOUT_APART_ENV;

/// What the child's stdin is (pipe modes; a PTY's stdin is the terminal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdinSpec {
    /// `/dev/null`: a program that reads its input to EOF finishes (case P5).
    Null,
    /// A pipe whose write end is returned in [`Spawned::stdin`].
    Pipe,
}

/// How the child's stdin, stdout and stderr are connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdioSpec {
    /// Stdout and stderr on two pipes, for callers that tell them apart (agent runs).
    Pipes { stdin: StdinSpec },
    /// Stdout and stderr on ONE pipe: the combined stream keeps the true interleaving
    /// (`exec_command`, installs).
    Combined { stdin: StdinSpec },
    /// A new PTY of `rows` x `cols` with echo off; its slave is fds 0-2 and the controlling
    /// terminal.
    Pty { rows: u16, cols: u16 },
}

/// A process to start.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// Program and arguments, no shell; a relative `argv[0]` is looked up in the `PATH` of `env`.
    pub argv: Vec<String>,
    /// Working directory; a missing one is a spawn error, never a fallback.
    pub cwd: PathBuf,
    /// The complete environment: nothing is inherited from this process.
    pub env: BTreeMap<String, String>,
    /// Marker variables (`NAME`, `value`) added to the environment after `env`: what
    /// [`super::kill_tree`] and [`super::alive_with_marker`] later find this tree by.
    pub markers: Vec<(String, String)>,
    /// Unique tag, stored as `SPACES_PROCESS_TAG` (set last, so nothing overrides it).
    pub tag: String,
    pub stdio: StdioSpec,
    /// Cgroup directories the child joins before it execs (at most 4, one per
    /// hierarchy; see [`super::cgroup`]); empty: it stays in this process's.
    pub cgroups: Vec<PathBuf>,
    /// Nice value the child starts with, 0 (the daemon's priority) to 19; agents and commands
    /// get [`super::priority::agent_nice`], shims 0.
    pub nice: i32,
    /// The program is bubblewrap starting a sandbox (`crate::sandbox`): it starts with
    /// SIGHUP, SIGINT, SIGQUIT and SIGTERM ignored (a stop or a Ctrl-C aimed at the group must
    /// not kill bubblewrap's outer process), and the sandbox's helper gives the program their
    /// default action back. `false`: they start at their default action.
    pub sandboxed: bool,
}

/// Most cgroup directories one child joins (cgroup v1 `pids` and `memory`, or one v2).
pub const MAX_CGROUPS: usize = 4;

/// A started process and our ends of its stdio. Every fd is `O_CLOEXEC` and `O_NONBLOCK`.
#[derive(Debug)]
pub struct Spawned {
    /// Process id = process group id = session id.
    pub pid: i32,
    /// Await `wait()` to reap it and read its status.
    pub child: Child,
    /// Where its output is read: stdout ([`StdioSpec::Pipes`]), stdout and stderr as one stream
    /// ([`StdioSpec::Combined`]), or the PTY master, which also takes its input and its window
    /// size ([`StdioSpec::Pty`]).
    pub output: OwnedFd,
    /// Its stderr: with [`StdioSpec::Pipes`] only.
    pub stderr: Option<OwnedFd>,
    /// The write end of its stdin: with [`StdinSpec::Pipe`] only.
    pub stdin: Option<OwnedFd>,
}

/// Start `spec` (see the module doc for what every child gets). Must run inside a tokio runtime
/// (the child's reaper registers with it). Errors: [`Error::EmptyCommand`], [`Error::SpawnFailed`]
/// with the OS reason.
pub fn spawn(spec: &SpawnSpec) -> Result<Spawned> {
    start(spec, true)
}

/// Start `spec`, a program that makes its own session first thing ([`own_session`]: the
/// shim), without forking this process: `posix_spawn` (glibc's `clone(CLONE_VM | CLONE_VFORK)`)
/// copies no page tables, where a `fork` of a daemon of 100 MB copies them all and takes a
/// copy-on-write fault for each page written before the child's `exec` (about 5 ms of CPU per
/// start in the load bench's profile). So nothing runs in the child before `exec`: `spec` must
/// join no cgroup, keep nice 0 and use pipes. Errors: as [`spawn`], and
/// [`Error::SpawnFailed`] for a spec that needs the child's side.
pub fn spawn_self_starting(spec: &SpawnSpec) -> Result<Spawned> {
    if !spec.cgroups.is_empty() || spec.nice != 0 || matches!(spec.stdio, StdioSpec::Pty { .. }) {
        let program = spec.argv.first().cloned().unwrap_or_default();
        let why = "a program that starts itself joins no cgroup, keeps nice 0 and uses pipes";
        return Err(Error::SpawnFailed { program, source: std::io::Error::other(why) });
    }
    start(spec, false)
}

/// Make the calling process what [`spawn`] makes a child before its `exec`, for a program
/// started by [`spawn_self_starting`]: the leader of a new session, no signal blocked, the
/// signals a stop or an interrupt sends at their default action, and every fd above 2
/// close-on-exec (so nothing the starter leaked reaches what this program starts). Call it
/// first thing, before any thread starts. A process that already leads its session (started
/// by [`spawn`]) keeps it. Errors: `setsid`'s (the caller leads a process group but not its
/// session).
pub fn own_session() -> std::io::Result<()> {
    // SAFETY: plain system calls on stack values.
    unsafe {
        if libc::getsid(0) != libc::getpid() {
            new_session()?;
        }
        fds_above_2_close_on_exec();
    }
    Ok(())
}

/// Close every fd above 2 that this process inherited open across its `exec` (those without
/// `FD_CLOEXEC`): for the shim, first thing, so nothing a careless parent of the daemon left
/// open (and the daemon passed on) is held for the life of a run. Fds the process opened itself
/// are close-on-exec (Rust's, Python's and Node's runtimes open every fd so; a shim may run
/// inside either, `spacesd shim` carried by a binding), and stay.
pub fn close_inherited_fds() {
    let fds: Vec<i32> = match std::fs::read_dir("/proc/self/fd") {
        Ok(dir) => dir.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).filter(|fd| *fd > 2).collect(),
        Err(_) => return,
    };
    for fd in fds {
        // SAFETY: plain system calls on an integer; an fd that is gone (the directory's own)
        // fails F_GETFD and is left alone.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                libc::close(fd);
            }
        }
    }
}

/// [`spawn`] and [`spawn_self_starting`]: `in_child_setup` says whether the child's side
/// ([`in_child`]) runs between fork and exec.
fn start(spec: &SpawnSpec, in_child_setup: bool) -> Result<Spawned> {
    let program = match spec.argv.first() {
        Some(p) if !p.is_empty() => p.clone(),
        _ => return Err(Error::EmptyCommand),
    };
    let fail = |source: std::io::Error| Error::SpawnFailed { program: program.clone(), source };
    let nix_fail = |e: nix::Error| fail(e.into());
    let mut cmd = Command::from(base_command(&spec.argv, &spec.env, &spec.markers, &spec.tag, &spec.cwd));
    cmd.kill_on_drop(false);
    // Bubblewrap's stdout apart from the program's ([`stdout_apart`]): the fd the child keeps.
    let (mut keep, mut kept): (RawFd, Option<OwnedFd>) = (-1, None);
    let (output, stderr, stdin, controlling_tty) = match spec.stdio {
        StdioSpec::Pipes { stdin } => {
            let (out_r, out_w) = pipe_pair().map_err(nix_fail)?;
            let (err_r, err_w) = pipe_pair().map_err(nix_fail)?;
            let stdin = connect_stdin(&mut cmd, stdin).map_err(nix_fail)?;
            if spec.sandboxed {
                let apart = stdout_apart(cmd.as_std_mut(), out_w).map_err(fail)?;
                keep = apart.as_raw_fd();
                kept = Some(apart);
                cmd.stderr(Stdio::from(err_w));
            } else {
                cmd.stdout(Stdio::from(out_w)).stderr(Stdio::from(err_w));
            }
            (out_r, Some(err_r), stdin, false)
        }
        StdioSpec::Combined { stdin } => {
            let (out_r, out_w) = pipe_pair().map_err(nix_fail)?;
            let out_w2 = out_w.try_clone().map_err(fail)?;
            let stdin = connect_stdin(&mut cmd, stdin).map_err(nix_fail)?;
            cmd.stdout(Stdio::from(out_w)).stderr(Stdio::from(out_w2));
            (out_r, None, stdin, false)
        }
        StdioSpec::Pty { rows, cols } => {
            let pair = pty::open_pty(rows, cols).map_err(|e| fail(std::io::Error::other(format!("no terminal: {e}"))))?;
            nonblocking(&pair.master).map_err(nix_fail)?;
            let slave = |fd: &OwnedFd| fd.try_clone().map_err(fail);
            cmd.stdin(Stdio::from(slave(&pair.slave)?)).stdout(Stdio::from(slave(&pair.slave)?)).stderr(Stdio::from(pair.slave));
            (pair.master, None, None, true)
        }
    };
    if spec.cgroups.len() > MAX_CGROUPS {
        return Err(fail(std::io::Error::other(format!("at most {MAX_CGROUPS} cgroups can be joined"))));
    }
    // Opened here (close-on-exec), written in the child: the child allocates nothing.
    let mut joins = Vec::with_capacity(spec.cgroups.len());
    for dir in &spec.cgroups {
        let procs = dir.join("cgroup.procs");
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&procs)
            .map_err(|e| fail(std::io::Error::other(format!("cannot open {}: {e}", procs.display()))))?;
        joins.push(OwnedFd::from(file));
    }
    let mut join_fds = [-1; MAX_CGROUPS];
    for (slot, fd) in join_fds.iter_mut().zip(&joins) {
        *slot = fd.as_raw_fd();
    }
    let nice = spec.nice;
    let sandboxed = spec.sandboxed;
    // SAFETY: the closure runs in the forked child before exec, with stdio already on fds 0-2.
    // It only makes async-signal-safe system calls (write, sigprocmask, signal, setsid,
    // getpriority, setpriority, open, close, ioctl, close_range, fcntl, getrlimit) on values on
    // its stack: no allocation, no locks. The
    // cgroup fds it writes stay open in this process until the spawn returned.
    if in_child_setup {
        unsafe {
            cmd.pre_exec(move || in_child(controlling_tty, &join_fds, nice, sandboxed, [keep, -1]));
        }
    }
    let child = cmd.spawn().map_err(fail);
    drop(joins);
    drop(kept);
    let child = child?;
    drop(cmd); // closes our copies of the child's ends: EOF now means the tree is done with them
    let pid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or_else(|| fail(std::io::Error::other("the child exited before its pid was known")))?;
    Ok(Spawned { pid, child, output, stderr, stdin })
}

/// Lowest fd number a program's stdout is moved to for [`STDOUT_APART_ENV`]: above what a
/// program's runtime (or std's exec-error pipe) takes first.
const STDOUT_APART_MIN_FD: RawFd = 10;

/// Put `out_w` (the program's stdout) on an fd of its own above [`STDOUT_APART_MIN_FD`]
/// (close-on-exec until the child's side clears it: see `in_child`'s `keep`), name it in
/// [`STDOUT_APART_ENV`], and give the started process `/dev/null` as stdout. Held by this
/// process until the spawn returned, so no other fd of the spawn takes its number.
pub(super) fn stdout_apart(cmd: &mut std::process::Command, out_w: OwnedFd) -> std::io::Result<OwnedFd> {
    let apart = fcntl(out_w.as_fd(), FcntlArg::F_DUPFD_CLOEXEC(STDOUT_APART_MIN_FD)).map_err(std::io::Error::from)?;
    // SAFETY: `fcntl` just returned this fd, owned by nothing else.
    let apart = unsafe { OwnedFd::from_raw_fd(apart) };
    cmd.env(STDOUT_APART_ENV, apart.as_raw_fd().to_string()).stdout(Stdio::null());
    Ok(apart)
}

/// What every child runs (here and in [`super::prepared`]): `argv` (not empty) with exactly
/// `env`, then the `markers`, then [`TAG_ENV`] = `tag` (set last, so nothing overrides it), in
/// `cwd`; stdio and the child's side are the caller's to add.
pub(super) fn base_command(
    argv: &[String],
    env: &BTreeMap<String, String>,
    markers: &[(String, String)],
    tag: &str,
    cwd: &Path,
) -> std::process::Command {
    let mut cmd = std::process::Command::new(argv.first().map_or("", String::as_str));
    cmd.args(argv.iter().skip(1)).env_clear().envs(program_env(env, markers, tag)).current_dir(cwd);
    cmd
}

/// The whole environment a started program gets: `env`, its `markers` and its tag
/// ([`TAG_ENV`]), later ones winning. A warm sandbox's order carries exactly this.
pub fn program_env(env: &BTreeMap<String, String>, markers: &[(String, String)], tag: &str) -> BTreeMap<String, String> {
    let mut all = env.clone();
    all.extend(markers.iter().cloned());
    all.insert(TAG_ENV.to_owned(), tag.to_owned());
    all
}

/// One non-blocking read from our end of a child's output. `Ok(None)` = nothing ready now;
/// `Ok(Some(0))` = EOF, including `EIO` from a PTY master whose slave ends are all closed.
pub fn read_now(fd: impl AsFd, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
    match nix::unistd::read(fd, buf) {
        Ok(n) => Ok(Some(n)),
        Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => Ok(None),
        Err(nix::errno::Errno::EIO) => Ok(Some(0)),
        Err(e) => Err(e.into()),
    }
}

/// Ask for a pipe buffer of at least `bytes` on the pipe `fd` (`F_SETPIPE_SZ`; the kernel rounds
/// up to a power of two of pages). Returns the buffer size now in effect, in bytes. Errors:
/// `EPERM` past `/proc/sys/fs/pipe-max-size` (1 MiB by default) or the user's pipe-page limits
/// (`pipe-user-pages-soft`) without `CAP_SYS_RESOURCE`; `EBADF` when `fd` is not a pipe (a PTY
/// master). The pipe keeps its size then (64 KiB by default): callers treat this as best effort.
pub fn widen_pipe(fd: impl AsFd, bytes: usize) -> nix::Result<usize> {
    let bytes = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    fcntl(fd, FcntlArg::F_SETPIPE_SZ(bytes)).map(|n| usize::try_from(n).unwrap_or(0))
}

/// An output pipe `(ours, the child's)`, both ends `O_CLOEXEC`, ours non-blocking.
pub(super) fn pipe_pair() -> nix::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = pipe2(OFlag::O_CLOEXEC)?;
    nonblocking(&r)?;
    Ok((r, w))
}

/// Connect the child's stdin; returns our (non-blocking) write end for [`StdinSpec::Pipe`].
fn connect_stdin(cmd: &mut Command, stdin: StdinSpec) -> nix::Result<Option<OwnedFd>> {
    match stdin {
        StdinSpec::Null => {
            cmd.stdin(Stdio::null());
            Ok(None)
        }
        StdinSpec::Pipe => {
            let (w, r) = stdin_pair()?;
            cmd.stdin(Stdio::from(r));
            Ok(Some(w))
        }
    }
}

/// A stdin pipe `(ours: the write end, the child's: the read end)`, both `O_CLOEXEC`, ours
/// non-blocking.
pub(super) fn stdin_pair() -> nix::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = pipe2(OFlag::O_CLOEXEC)?;
    nonblocking(&w)?;
    Ok((w, r))
}

fn nonblocking(fd: &OwnedFd) -> nix::Result<()> {
    let flags = OFlag::from_bits_truncate(fcntl(fd.as_fd(), FcntlArg::F_GETFL)?);
    fcntl(fd.as_fd(), FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK)).map(|_| ())
}

/// Signals whose inherited "ignore" would make a stop or an interrupt miss the program.
const RESET_SIGNALS: [libc::c_int; 4] = crate::sandbox::IGNORED_SIGNALS;

/// The child's side, between fork and exec: into its cgroups (each `cgroup.procs` fd in
/// `joins`, -1 = none), default signals (ignored for a sandbox's bubblewrap: `sandboxed`), the
/// default time slice, a new session at priority `nice` ([`super::priority`]), the terminal (PTY
/// mode), every fd above 2 close-on-exec but those in `keep` (-1: none; the program's stdout
/// apart from bubblewrap's: [`STDOUT_APART_ENV`]; a warm sandbox's control socket).
pub(super) fn in_child(
    controlling_tty: bool,
    joins: &[RawFd; MAX_CGROUPS],
    nice: i32,
    sandboxed: bool,
    keep: [RawFd; 2],
) -> std::io::Result<()> {
    let last_error = std::io::Error::last_os_error;
    // SAFETY (all calls below): plain system calls on integers and stack values, each
    // async-signal-safe; see the SAFETY note at the `pre_exec` call.
    unsafe {
        for &fd in joins.iter().filter(|fd| **fd >= 0) {
            // `0`: the writing process itself.
            if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                return Err(last_error());
            }
        }
        new_session()?;
        if sandboxed {
            for sig in RESET_SIGNALS {
                libc::signal(sig, libc::SIG_IGN);
            }
        }
        // The daemon's (or a shim's) short slice is theirs, not the program's.
        super::priority::ask_default_slice();
        super::priority::lower_in_child(nice);
        if controlling_tty && libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
            return Err(last_error());
        }
        fds_above_2_close_on_exec();
        for fd in keep {
            if fd >= 0 && libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                return Err(last_error());
            }
        }
    }
    Ok(())
}

/// No signal blocked, [`RESET_SIGNALS`] at their default action, then `setsid`.
///
/// # Safety
/// Async-signal-safe system calls on stack values only: callable between fork and exec.
unsafe fn new_session() -> std::io::Result<()> {
    // SAFETY: see the function's contract.
    unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        for sig in RESET_SIGNALS {
            libc::signal(sig, libc::SIG_DFL);
        }
        if libc::setsid() < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Every fd above 2 close-on-exec (`close_range(CLOSE_RANGE_CLOEXEC)`, or one by one on kernels
/// before 5.11).
///
/// # Safety
/// Async-signal-safe system calls on stack values only: callable between fork and exec.
unsafe fn fds_above_2_close_on_exec() {
    // SAFETY: see the function's contract.
    unsafe {
        let flags = libc::CLOSE_RANGE_CLOEXEC as libc::c_long;
        if libc::syscall(libc::SYS_close_range, 3 as libc::c_long, libc::c_long::from(u32::MAX), flags) < 0 {
            // Kernels before 5.11 lack CLOSE_RANGE_CLOEXEC: mark each fd up to the soft limit.
            let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            let last =
                if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 { limit.rlim_cur.min(1 << 20) as libc::c_int } else { 1024 };
            for fd in 3..last {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                    libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
                }
            }
        }
    }
}
