//! `sandbox-exec`: the program's side of the sandbox, run inside it by bubblewrap as the
//! daemon's own command (`spacesd sandbox-exec [--max-processes N] -- PROGRAM ARGS...`), or by
//! the shim itself at the Landlock level (`sandbox-exec --landlock POLICY-JSON [--report] --
//! PROGRAM ARGS...`), then replaced by the program (`execvp`: a relative program is found in
//! `PATH`).
//!
//! In order: the signals the shim kept from bubblewrap ([`super::IGNORED_SIGNALS`]) back to
//! their default action and none blocked; stdio not close-on-exec; the process ceiling (`RLIMIT_NPROC`, counted in the
//! sandbox's user namespace, which exists by now); at the Landlock level, root's capabilities
//! dropped for good (bubblewrap drops them at its level) and the ruleset applied
//! ([`super::landlock::restrict`]; `--report` prints what it reached, one JSON line on stdout,
//! for the daemon's start-up probe); the seccomp filter with `no_new_privs`
//! ([`super::seccomp`]); the exec. A failure prints one line on stderr (the program's output,
//! so it reaches the journal) and exits 127, as a shell does for a program it cannot run.
//!
//! **A warm sandbox** (`sandbox-exec [--max-processes N] --await FD`, started by a spare shim
//! before its command is known: [`crate::shim::spare`]) takes every step above but the exec,
//! then says it is ready (one byte, `r`, on the socket FD) and waits there for its [`Order`]
//! (one JSON object, then EOF): the program, its working directory and its whole environment.
//! It closes FD, enters the directory and execs the program with exactly that environment. A
//! socket closed without an order (the spare was dropped) makes it exit 0; everything after
//! the order fails as above (one line on stderr, exit 127), so a command fails the same way in
//! a warm sandbox and in a cold one.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use nix::libc;
use nix::sys::resource::{getrlimit, setrlimit, Resource};

use serde::{Deserialize, Serialize};

use super::{Error, Policy};

/// What a warm sandbox is told to run (`--await`): written by the shim as one JSON object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    /// The program and its arguments (a relative program is found in the order's `PATH`).
    pub argv: Vec<String>,
    /// Its working directory (a path inside the sandbox: the same as on the host).
    pub cwd: PathBuf,
    /// Its whole environment (nothing of the helper's own is kept).
    pub env: BTreeMap<String, String>,
}

/// What `sandbox-exec` was asked.
#[derive(Debug, PartialEq, Eq)]
pub struct Args {
    /// `RLIMIT_NPROC` to set (`--max-processes N`).
    pub max_processes: Option<u64>,
    /// The Landlock level's policy (`--landlock JSON`).
    pub landlock: Option<Policy>,
    /// Print what Landlock reached before the exec (`--report`).
    pub report: bool,
    /// A warm sandbox: wait on this socket fd for the [`Order`] (`--await FD`); `argv` is empty.
    pub await_fd: Option<i32>,
    /// The program and its arguments.
    pub argv: Vec<String>,
}

/// Parses the arguments after `sandbox-exec`. Errors: [`Error::Usage`].
pub fn parse(args: &[String]) -> Result<Args, Error> {
    let mut out = Args { max_processes: None, landlock: None, report: false, await_fd: None, argv: Vec::new() };
    let mut rest = args;
    loop {
        match rest {
            [flag, n, tail @ ..] if flag == "--max-processes" => {
                out.max_processes = Some(n.parse().map_err(|_| Error::Usage(format!("--max-processes takes a number, not {n:?}")))?);
                rest = tail;
            }
            [flag, json, tail @ ..] if flag == "--landlock" => {
                out.landlock = Some(serde_json::from_str(json).map_err(|e| Error::Usage(format!("--landlock takes a policy: {e}")))?);
                rest = tail;
            }
            [flag, tail @ ..] if flag == "--report" => {
                out.report = true;
                rest = tail;
            }
            [flag, fd] if flag == "--await" && out.landlock.is_none() => {
                out.await_fd = Some(fd.parse().map_err(|_| Error::Usage(format!("--await takes an fd number, not {fd:?}")))?);
                return Ok(out);
            }
            [dash, argv @ ..] if dash == "--" && !argv.is_empty() => {
                out.argv = argv.to_vec();
                return Ok(out);
            }
            _ => {
                return Err(Error::Usage(
                    "usage: sandbox-exec [--max-processes N] [--landlock POLICY-JSON [--report]] -- PROGRAM [ARGS...]\n   \
                     or: sandbox-exec [--max-processes N] --await FD"
                        .into(),
                ))
            }
        }
    }
}

/// Runs `sandbox-exec` with `args` (those after the word): never returns when the program
/// starts; returns 127 (after saying why on stderr) when it cannot.
pub fn main(args: &[String]) -> i32 {
    let err = match parse(args).and_then(|a| enter(&a)) {
        Ok(never) => match never {},
        Err(e) => e,
    };
    eprintln!("{err}");
    127
}

/// The steps of the module doc, then the exec. Returns only on failure.
fn enter(args: &Args) -> Result<std::convert::Infallible, Error> {
    // SAFETY: plain system calls on stack values, before any thread of ours exists.
    unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        for sig in super::IGNORED_SIGNALS {
            libc::signal(sig, libc::SIG_DFL);
        }
        // The program's stdout back on fd 1 when the shim set it apart from bubblewrap's.
        stdout_back();
        // Stdio goes to the program: a runtime hosting this helper (Node marks its stdio
        // close-on-exec) must not take it along.
        for fd in 0..=2 {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC != 0 {
                libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
            }
        }
    }
    if let Some(n) = args.max_processes {
        // Never above the ceiling the daemon itself was given (raising a hard limit is refused).
        let hard = getrlimit(Resource::RLIMIT_NPROC).map_or(n, |(_, hard)| hard);
        let n = n.min(hard);
        setrlimit(Resource::RLIMIT_NPROC, n, n).map_err(|e| Error::Enter { what: "set the process ceiling", source: e.into() })?;
    }
    if let Some(policy) = &args.landlock {
        if nix::unistd::geteuid().is_root() {
            drop_capabilities()?;
        }
        let reached = super::landlock::restrict(policy)?;
        if args.report {
            let line = serde_json::to_string(&reached).unwrap_or_default();
            println!("{line}");
        }
    }
    let program =
        super::seccomp::filter().map_err(|e| Error::Enter { what: "build the seccomp filter", source: std::io::Error::other(e) })?;
    seccompiler::apply_filter(&program)
        .map_err(|e| Error::Enter { what: "load the seccomp filter", source: std::io::Error::other(e.to_string()) })?;
    let (program, source) = match args.await_fd {
        None => (&args.argv[0], std::process::Command::new(&args.argv[0]).args(&args.argv[1..]).exec()),
        Some(fd) => {
            let order = wait_for_order(fd)?;
            let Some(program) = order.argv.first() else {
                return Err(Error::Enter { what: "start the program", source: std::io::Error::other("the order names no program") });
            };
            std::env::set_current_dir(&order.cwd).map_err(|source| Error::Enter { what: "enter the working directory", source })?;
            let source = std::process::Command::new(program).args(&order.argv[1..]).env_clear().envs(&order.env).exec();
            return Err(Error::Start { program: program.clone(), source });
        }
    };
    Err(Error::Start { program: program.clone(), source })
}

/// A warm sandbox's wait: `r` on the socket `fd`, then the [`Order`] up to EOF; the socket is
/// closed before the order is carried out. EOF without an order (the spare shim let its
/// sandbox go) exits 0 here. Errors: [`Error::Enter`] (the socket fails, the order is not JSON).
fn wait_for_order(fd: i32) -> Result<Order, Error> {
    let fail = |source: std::io::Error| Error::Enter { what: "read the order", source };
    // SAFETY: the fd was handed to this process for this use alone (`--await FD`).
    let mut ctl = unsafe { UnixStream::from_raw_fd(fd) };
    ctl.write_all(b"r").map_err(fail)?;
    let mut order = Vec::new();
    ctl.read_to_end(&mut order).map_err(fail)?;
    drop(ctl);
    if order.is_empty() {
        std::process::exit(0);
    }
    serde_json::from_slice(&order).map_err(|e| fail(std::io::Error::other(e)))
}

/// Root keeps no capability across the exec: none in the bounding set, no ambient ones, and
/// `SECBIT_NOROOT` (locked), so uid 0 gets none from executing a program (capabilities(7)).
/// Bubblewrap does the same at its level. Errors: [`Error::Enter`] (the daemon lacks
/// `CAP_SETPCAP`).
fn drop_capabilities() -> Result<(), Error> {
    let fail = |source: std::io::Error| Error::Enter { what: "drop root's capabilities", source };
    // SAFETY: prctl with integer arguments only.
    unsafe {
        if libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 {
            return Err(fail(std::io::Error::last_os_error()));
        }
        // Up to the last capability this kernel knows (EINVAL past it).
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINVAL) {
                    break;
                }
                return Err(fail(e));
            }
        }
        const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
        const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
        if libc::prctl(libc::PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED, 0, 0, 0) != 0 {
            return Err(fail(std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// Under bubblewrap the shim gives the program its stdout on an fd of its own, named in
/// [`super::STDOUT_APART_ENV`] (bubblewrap's own processes keep their fd 1 for the
/// sandbox's life, so a program that closes its output would never be seen at EOF: case R42).
/// Move it to fd 1 and forget the variable, so the program's environment is exactly its own.
/// Without the variable (the Landlock level, a command's combined output), nothing changes.
fn stdout_back() {
    let Some(fd) = std::env::var(super::STDOUT_APART_ENV).ok().and_then(|v| v.parse::<i32>().ok()) else { return };
    std::env::remove_var(super::STDOUT_APART_ENV);
    if fd > 2 {
        // SAFETY: plain system calls on integers, before any thread of ours exists.
        unsafe {
            if libc::dup2(fd, 1) == 1 {
                libc::close(fd);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse_and_mistakes_are_refused() {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            parse(&s(&["--max-processes", "9", "--", "sh", "-c", "x"])).unwrap(),
            Args { max_processes: Some(9), landlock: None, report: false, await_fd: None, argv: s(&["sh", "-c", "x"]) }
        );
        assert_eq!(
            parse(&s(&["--", "true"])).unwrap(),
            Args { max_processes: None, landlock: None, report: false, await_fd: None, argv: s(&["true"]) }
        );
        let policy = Policy { level: super::super::Level::Landlock, ..Default::default() };
        let json = serde_json::to_string(&policy).unwrap();
        assert_eq!(
            parse(&s(&["--landlock", &json, "--report", "--", "true"])).unwrap(),
            Args { max_processes: None, landlock: Some(policy), report: true, await_fd: None, argv: s(&["true"]) }
        );
        assert!(matches!(parse(&s(&["--landlock", "{", "--", "true"])), Err(Error::Usage(_))));
        assert!(matches!(parse(&s(&["--"])), Err(Error::Usage(_))));
        assert!(matches!(parse(&s(&["--max-processes", "x", "--", "true"])), Err(Error::Usage(_))));
        assert!(matches!(parse(&s(&["true"])), Err(Error::Usage(_))));
        assert_eq!(
            parse(&s(&["--max-processes", "5", "--await", "7"])).unwrap(),
            Args { max_processes: Some(5), landlock: None, report: false, await_fd: Some(7), argv: vec![] }
        );
        assert!(matches!(parse(&s(&["--await", "x"])), Err(Error::Usage(_))), "an fd is a number");
        assert!(matches!(parse(&s(&["--await", "7", "--", "true"])), Err(Error::Usage(_))), "an order, not a program");
    }
}
