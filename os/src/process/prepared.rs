//! A child forked ahead of need, already inside its cgroups, waiting for its program.
//!
//! Joining a cgroup is the slow part of starting a contained program: on cgroup v1 the write to
//! `cgroup.procs` waits for an RCU grace period, 5 to 20 ms on a 2-core host whether it is idle or
//! busy (`docs/benchmarks.md`, "Spare shims"). A spare shim ([`crate::shim::spare`]) therefore
//! forks its child with [`prepare`] before it knows the program: the child joins the spare's
//! cgroups at once, then blocks on its control socket. [`Prepared::start`] later hands it a
//! [`SpawnSpec`]; it execs the program exactly as [`super::spawn`] would (same environment,
//! working directory, session, priority and close-on-exec fds), so nothing on the start path
//! waits for the grace period.
//!
//! Protocol on the control socket (a `socketpair`, the child's end close-on-exec): the child
//! writes one byte once it joined its cgroups; the parent writes one JSON order (the program, as
//! a [`SpawnSpec`] says it) and shuts its side down; the child answers nothing when the exec
//! succeeded (its end closes at exec: EOF), or one line saying why it failed (then it exits 127).
//! A parent that goes away without an order (EOF at once) makes the child exit 0; a parent that
//! dies kills the waiting child (`PR_SET_PDEATHSIG`, cleared before the exec: the program
//! outlives its shim as one started by [`super::spawn`] does).
//!
//! **A warm sandbox** ([`prepare_warm`]): the child joins its cgroups as above, then execs
//! bubblewrap at once with a command (combined output, a stdin pipe) whose helper waits on the
//! same socket (`sandbox-exec --await FD`, `crate::sandbox::enter`): the namespaces and mounts,
//! the slow part of a sandboxed start (5 to 8 ms), are made before the command is known.
//! [`Prepared::start_warm`] reads the helper's `r` (ready), writes its
//! [`crate::sandbox::enter::Order`] and shuts down its side; the helper closes the socket and
//! execs the program. A sandbox that died before it was ready (bubblewrap refused a mount)
//! answers EOF instead of `r`: the start fails and the caller starts the program the usual way.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;

use nix::libc;
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::waitpid;
use nix::unistd::{fork, ForkResult, Pid};
use serde::{Deserialize, Serialize};

use super::spawn::{base_command, in_child, pipe_pair, stdin_pair, stdout_apart, MAX_CGROUPS};
use super::{Error, Result};
use super::{SpawnSpec, StdinSpec, StdioSpec};

/// A forked child waiting for its program; our ends of its stdin, stdout and stderr pipes.
/// Dropped without [`Prepared::start`], the child is killed and reaped.
#[derive(Debug)]
pub struct Prepared {
    pid: i32,
    ctl: Option<UnixStream>,
    stdin: Option<OwnedFd>,
    out: Option<OwnedFd>,
    err: Option<OwnedFd>,
    /// The child is a warm sandbox ([`prepare_warm`]), started by [`Prepared::start_warm`] only.
    warm: bool,
}

/// A program started through [`Prepared::start`]: as [`super::Spawned`] without a `Child`
/// handle (the caller reaps it by pid, as a shim does).
#[derive(Debug)]
pub struct Started {
    /// Process id = process group id = session id.
    pub pid: i32,
    /// Stdout ([`StdioSpec::Pipes`]), or stdout and stderr as one stream ([`StdioSpec::Combined`]).
    pub output: OwnedFd,
    /// Its stderr: with [`StdioSpec::Pipes`] only.
    pub stderr: Option<OwnedFd>,
    /// The write end of its stdin: with [`StdinSpec::Pipe`] only.
    pub stdin: Option<OwnedFd>,
}

/// What the parent sends the child: the program, as [`SpawnSpec`] says it.
#[derive(Debug, Serialize, Deserialize)]
struct Order {
    argv: Vec<String>,
    cwd: PathBuf,
    env: BTreeMap<String, String>,
    markers: Vec<(String, String)>,
    tag: String,
    stdin_pipe: bool,
    combined: bool,
    /// Cgroups to join now (those [`prepare`] did not join), at most [`MAX_CGROUPS`].
    join: Vec<PathBuf>,
    nice: i32,
    /// [`SpawnSpec::sandboxed`].
    #[serde(default)]
    sandboxed: bool,
}

/// Fork a child that joins `cgroups` (each directory's `cgroup.procs`) now and then waits for
/// [`Prepared::start`]. Returns once the child is in its cgroups (on cgroup v1 that takes an
/// RCU grace period: this is the wait the spare takes off the start path). Errors:
/// [`Error::SpawnFailed`] when the pipes or the fork fail, or the child died before joining. A
/// failed join is reported by [`Prepared::start`].
///
/// # Safety
/// The calling process must be single-threaded (a shim before its runtime starts): the child
/// runs ordinary code after the fork, which may allocate.
pub unsafe fn prepare(cgroups: &[PathBuf]) -> Result<Prepared> {
    let fail = |source: std::io::Error| Error::SpawnFailed { program: "prepared child".into(), source };
    let nix_fail = |e: nix::Error| fail(e.into());
    let (ours, theirs) = UnixStream::pair().map_err(fail)?;
    let (stdin_w, stdin_r) = stdin_pair().map_err(nix_fail)?;
    let (out_r, out_w) = pipe_pair().map_err(nix_fail)?;
    let (err_r, err_w) = pipe_pair().map_err(nix_fail)?;
    let parent = std::process::id() as i32;
    // SAFETY: the caller guarantees this process is single-threaded, so the child may run any code.
    match unsafe { fork() }.map_err(nix_fail)? {
        ForkResult::Child => {
            drop((ours, stdin_w, out_r, err_r));
            child(parent, theirs, (stdin_r, out_w, err_w), cgroups)
        }
        ForkResult::Parent { child } => {
            drop((theirs, stdin_r, out_w, err_w));
            let mut prepared =
                Prepared { pid: child.as_raw(), ctl: Some(ours), stdin: Some(stdin_w), out: Some(out_r), err: Some(err_r), warm: false };
            // Wait until the child is in its cgroups (one byte), so that nobody renames a
            // directory it is still about to join.
            let mut joined = [0u8; 1];
            if let Some(ctl) = prepared.ctl.as_mut() {
                ctl.read_exact(&mut joined).map_err(fail)?;
            }
            Ok(prepared)
        }
    }
}

/// Fork a child that joins `cgroups` and then execs a warm sandbox: `argv(fd)` is bubblewrap's
/// command line whose helper awaits its order on `fd` (`crate::sandbox::bwrap::warm_command`).
/// Its stdin is a pipe; its stdout and stderr one stream ([`StdioSpec::Combined`], a command's),
/// or with `split` two ([`StdioSpec::Pipes`], an agent's), the program's stdout then set apart
/// from bubblewrap's as [`super::spawn`] sets it ([`crate::sandbox::STDOUT_APART_ENV`]: the
/// program that closes its stdout is seen at EOF, case R42). It starts with the signals a stop
/// sends ignored and in a session of its own, as [`super::spawn`] starts a sandbox. Returns
/// once the child is in its cgroups; the sandbox itself comes up meanwhile. Errors: as
/// [`prepare`].
///
/// # Safety
/// As [`prepare`]: the calling process must be single-threaded.
pub unsafe fn prepare_warm(cgroups: &[PathBuf], split: bool, argv: impl FnOnce(RawFd) -> Vec<String>) -> Result<Prepared> {
    let fail = |source: std::io::Error| Error::SpawnFailed { program: "warm sandbox".into(), source };
    let nix_fail = |e: nix::Error| fail(e.into());
    let (ours, theirs) = UnixStream::pair().map_err(fail)?;
    let (stdin_w, stdin_r) = stdin_pair().map_err(nix_fail)?;
    let (out_r, out_w) = pipe_pair().map_err(nix_fail)?;
    let (err_r, err_w) = if split {
        let (r, w) = pipe_pair().map_err(nix_fail)?;
        (Some(r), Some(w))
    } else {
        (None, None)
    };
    let parent = std::process::id() as i32;
    // SAFETY: the caller guarantees this process is single-threaded, so the child may run any code.
    match unsafe { fork() }.map_err(nix_fail)? {
        ForkResult::Child => {
            drop((ours, stdin_w, out_r, err_r));
            warm_child(parent, theirs, (stdin_r, out_w, err_w), cgroups, argv)
        }
        ForkResult::Parent { child } => {
            drop((theirs, stdin_r, out_w, err_w));
            let mut prepared =
                Prepared { pid: child.as_raw(), ctl: Some(ours), stdin: Some(stdin_w), out: Some(out_r), err: err_r, warm: true };
            let mut joined = [0u8; 1];
            if let Some(ctl) = prepared.ctl.as_mut() {
                ctl.read_exact(&mut joined).map_err(fail)?;
            }
            Ok(prepared)
        }
    }
}

/// The warm child: as [`child`] up to the joins, then bubblewrap's exec (with `err`: stderr
/// apart, stdout set apart from bubblewrap's). Never returns.
fn warm_child(
    parent: i32,
    mut ctl: UnixStream,
    (stdin, out, err): (OwnedFd, OwnedFd, Option<OwnedFd>),
    cgroups: &[PathBuf],
    argv: impl FnOnce(RawFd) -> Vec<String>,
) -> ! {
    // SAFETY: plain system calls on integers.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != parent {
            libc::_exit(0);
        }
    }
    let joined = join(cgroups);
    let _ = ctl.write_all(b"j");
    if let Err(why) = joined {
        // No `r` will come: the start fails and goes the usual way, which reports the join.
        let _ = writeln!(ctl, "{why}");
        exit(127);
    }
    let argv = argv(ctl.as_raw_fd());
    let mut cmd = std::process::Command::new(argv.first().map_or("", String::as_str));
    cmd.args(argv.iter().skip(1)).env_clear().env("PATH", "/usr/bin:/bin").current_dir("/");
    cmd.stdin(Stdio::from(stdin));
    // Held until the exec, so no other fd takes its number.
    let mut apart = None;
    match err {
        Some(err) => {
            let Ok(fd) = stdout_apart(&mut cmd, out) else { exit(127) };
            apart = Some(fd);
            cmd.stderr(Stdio::from(err));
        }
        None => {
            let Ok(out2) = out.try_clone() else { exit(127) };
            cmd.stdout(Stdio::from(out)).stderr(Stdio::from(out2));
        }
    }
    let kept = [ctl.as_raw_fd(), apart.as_ref().map_or(-1, |fd| fd.as_raw_fd())];
    // SAFETY: `in_child` makes async-signal-safe system calls on stack values only.
    unsafe {
        cmd.pre_exec(move || in_child(false, &[-1; MAX_CGROUPS], 0, true, kept));
    }
    // The sandbox outlives this shim as a started program does; a waiting one ends when the
    // shim's end of the socket closes (its helper reads EOF and exits).
    // SAFETY: a plain system call on integers.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, 0) };
    let _ = cmd.exec();
    exit(127)
}

impl Prepared {
    /// Whether [`Prepared::start`] can start a program with `stdio`: pipes and a combined stream;
    /// a PTY needs [`super::spawn`].
    pub fn fits(stdio: &StdioSpec) -> bool {
        !matches!(stdio, StdioSpec::Pty { .. })
    }

    /// Whether this is a warm sandbox ([`prepare_warm`]): [`Prepared::start_warm`] starts it.
    pub fn is_warm(&self) -> bool {
        self.warm
    }

    /// Hand a warm sandbox its program (`order`: its argv, directory and whole environment).
    /// Blocks until the helper took the order (it is ready within milliseconds of the spare's
    /// start; at most 10 s). The started process is bubblewrap's, with the stdin pipe and the
    /// output as [`prepare_warm`] made it (one stream, or stdout and stderr apart). Errors: [`Error::SpawnFailed`] when the sandbox is not ready (it died: a
    /// mount it could not make) or the socket fails; the sandbox is killed and reaped then, and
    /// the caller starts the program the usual way.
    pub fn start_warm(mut self, order: &crate::sandbox::enter::Order) -> Result<Started> {
        let program = order.argv.first().cloned().unwrap_or_default();
        let fail = |why: String| Error::SpawnFailed { program: program.clone(), source: std::io::Error::other(why) };
        if program.is_empty() {
            return Err(Error::EmptyCommand);
        }
        if !self.warm {
            return Err(fail("not a warm sandbox".into()));
        }
        let mut ctl = self.ctl.take().ok_or_else(|| fail("the warm sandbox was already used".into()))?;
        let answer = (|| -> std::io::Result<String> {
            ctl.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
            let mut ready = [0u8; 1];
            ctl.read_exact(&mut ready)?;
            if &ready != b"r" {
                let mut why = String::from_utf8_lossy(&ready).into_owned();
                let _ = ctl.read_to_string(&mut why);
                return Err(std::io::Error::other(format!("the sandbox is not ready: {}", why.trim())));
            }
            hand(&mut ctl, order)
        })();
        taken(answer, "the warm sandbox").map_err(fail)?;
        let pid = self.pid;
        let output = self.out.take().ok_or_else(|| fail("no output pipe".into()))?;
        let (stdin, stderr) = (self.stdin.take(), self.err.take());
        self.pid = 0;
        Ok(Started { pid, output, stderr, stdin })
    }

    /// Hand `spec` to the child, which execs it. `spec.cgroups` are joined only if [`prepare`]
    /// was not given them (pass them already joined by renaming the directories: see
    /// [`crate::shim::spare`]); `already_joined` says which. Blocks until the exec happened or
    /// failed. Errors: [`Error::SpawnFailed`] with the child's reason (program not found, bad
    /// working directory, a cgroup it could not join); the child is reaped then.
    pub fn start(mut self, spec: &SpawnSpec, already_joined: bool) -> Result<Started> {
        let program = spec.argv.first().cloned().unwrap_or_default();
        let fail = |why: String| Error::SpawnFailed { program: program.clone(), source: std::io::Error::other(why) };
        if program.is_empty() {
            return Err(Error::EmptyCommand);
        }
        if self.warm {
            return Err(fail("a warm sandbox starts through start_warm".into()));
        }
        let (stdin_pipe, combined) = match spec.stdio {
            StdioSpec::Pipes { stdin } => (stdin == StdinSpec::Pipe, false),
            StdioSpec::Combined { stdin } => (stdin == StdinSpec::Pipe, true),
            StdioSpec::Pty { .. } => return Err(fail("a prepared child cannot start a program on a terminal".into())),
        };
        let join = if already_joined { Vec::new() } else { spec.cgroups.clone() };
        if join.len() > MAX_CGROUPS {
            return Err(fail(format!("at most {MAX_CGROUPS} cgroups can be joined")));
        }
        let order = Order {
            argv: spec.argv.clone(),
            cwd: spec.cwd.clone(),
            env: spec.env.clone(),
            markers: spec.markers.clone(),
            tag: spec.tag.clone(),
            stdin_pipe,
            combined,
            join,
            nice: spec.nice,
            sandboxed: spec.sandboxed,
        };
        let mut ctl = self.ctl.take().ok_or_else(|| fail("the prepared child was already used".into()))?;
        taken(hand(&mut ctl, &order), "the prepared child").map_err(fail)?;
        let pid = self.pid;
        let output = self.out.take().ok_or_else(|| fail("no output pipe".into()))?;
        let (stdin, stderr) = (self.stdin.take(), self.err.take());
        // The program runs now: dropping `self` must not kill it.
        self.pid = 0;
        Ok(Started { pid, output, stderr: if combined { None } else { stderr }, stdin: if stdin_pipe { stdin } else { None } })
    }
}

/// Write `order` as one JSON object on the control socket, shut our side down, and read the
/// answer up to EOF (empty: the exec happened; a line: why it did not).
fn hand(ctl: &mut UnixStream, order: &impl Serialize) -> std::io::Result<String> {
    ctl.write_all(&serde_json::to_vec(order).map_err(std::io::Error::other)?)?;
    ctl.shutdown(std::net::Shutdown::Write)?;
    let mut answer = String::new();
    ctl.read_to_string(&mut answer)?;
    Ok(answer)
}

/// [`hand`]'s answer as the start's outcome: `Err` with the child's reason, or with why `who`
/// did not take its program.
fn taken(answer: std::io::Result<String>, who: &str) -> std::result::Result<(), String> {
    match answer {
        Ok(answer) if answer.is_empty() => Ok(()),
        Ok(answer) => Err(answer.trim().to_owned()),
        Err(e) => Err(format!("{who} did not take its program: {e}")),
    }
}

impl Drop for Prepared {
    fn drop(&mut self) {
        if self.pid > 0 {
            let pid = Pid::from_raw(self.pid);
            let _ = kill(pid, Signal::SIGKILL);
            let _ = waitpid(pid, None);
        }
    }
}

/// The child: die with the parent, let go of the parent's stdio, join `cgroups`, wait for the
/// order and exec it. Never returns.
fn child(parent: i32, mut ctl: UnixStream, ends: (OwnedFd, OwnedFd, OwnedFd), cgroups: &[PathBuf]) -> ! {
    // SAFETY: plain system calls on integers.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != parent {
            libc::_exit(0);
        }
    }
    // The parent's stdin and stdout are the daemon's pipes: holding them would hide the
    // parent's exit from the daemon.
    if let Ok(null) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null") {
        for fd in 0..3 {
            // SAFETY: dup2 onto the standard fds.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
    let joined = join(cgroups);
    // Tell the parent the joins are done (a failed one is reported with the order).
    let _ = ctl.write_all(b"j");
    let mut order = Vec::new();
    let why = match ctl.read_to_end(&mut order) {
        Ok(0) => exit(0),
        Ok(_) => match serde_json::from_slice::<Order>(&order) {
            Ok(order) => joined.and_then(|()| join(&order.join)).and_then(|()| exec(order, ends)),
            Err(e) => Err(format!("the order is not valid: {e}")),
        },
        Err(e) => Err(format!("cannot read the order: {e}")),
    };
    let _ = writeln!(ctl, "{}", why.err().unwrap_or_default());
    exit(127)
}

fn exit(code: i32) -> ! {
    // SAFETY: `_exit` runs no handler of the parent's copy (no buffers flushed twice).
    unsafe { libc::_exit(code) }
}

/// Write `0` (this process) to each directory's `cgroup.procs`.
fn join(cgroups: &[PathBuf]) -> std::result::Result<(), String> {
    for dir in cgroups {
        let procs = dir.join("cgroup.procs");
        std::fs::write(&procs, "0").map_err(|e| format!("cannot join the cgroup {}: {e}", procs.display()))?;
    }
    Ok(())
}

/// Exec `order` with the pipes' child ends as stdio; returns only on failure.
fn exec(order: Order, (stdin, out, err): (OwnedFd, OwnedFd, OwnedFd)) -> std::result::Result<(), String> {
    let Some(program) = order.argv.first() else { return Err("no program".into()) };
    let mut cmd = base_command(&order.argv, &order.env, &order.markers, &order.tag, &order.cwd);
    cmd.stdin(if order.stdin_pipe { Stdio::from(stdin) } else { Stdio::null() });
    // Under bubblewrap the program's stdout goes apart from bubblewrap's ([`stdout_apart`]).
    let mut keep = None;
    if order.combined {
        let out2 = out.try_clone().map_err(|e| e.to_string())?;
        cmd.stdout(Stdio::from(out)).stderr(Stdio::from(out2));
    } else if order.sandboxed {
        keep = Some(stdout_apart(&mut cmd, out).map_err(|e| format!("cannot set the program's stdout apart: {e}"))?);
        cmd.stderr(Stdio::from(err));
    } else {
        cmd.stdout(Stdio::from(out)).stderr(Stdio::from(err));
    }
    let (nice, sandboxed) = (order.nice, order.sandboxed);
    let kept = keep.as_ref().map_or(-1, |fd| fd.as_raw_fd());
    // SAFETY: `in_child` makes async-signal-safe system calls on stack values only.
    unsafe {
        cmd.pre_exec(move || in_child(false, &[-1; MAX_CGROUPS], nice, sandboxed, [kept, -1]));
    }
    // The program outlives its shim as any program does (the cgroup ends it): no death signal.
    // SAFETY: a plain system call on integers.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, 0) };
    let e = cmd.exec();
    Err(format!("cannot start {program}: {e}"))
}
