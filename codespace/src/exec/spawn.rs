//! Starting an `exec_command` process: a new session, a clean environment, and either one pipe
//! for combined stdout+stderr (plus a stdin pipe) or a PTY whose slave is the controlling terminal.
//!
//! Every descriptor we create is `O_CLOEXEC`, so a process started concurrently by another task
//! cannot inherit our ends (an inherited write end would keep our output open past the exit).
//! The `Command` (which holds the child's copies) is dropped right after the spawn, so the only
//! writers of the output pipe / slave are the child and its descendants: EOF means they are done.

use std::os::fd::{AsFd, OwnedFd};
use std::process::Stdio;

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::unistd::pipe2;
use spaces_sdk::{ApiError, ErrorCode};
use tokio::process::{Child, Command};

use super::{pty, ExecSpec};
use crate::process::TAG_ENV;

/// Initial PTY size when the spec names none (API.md: "PTY at 24x80").
pub(crate) const DEFAULT_TTY_SIZE: (u16, u16) =
    (spaces_sdk::tools::ExecCommandRequest::TTY_ROWS, spaces_sdk::tools::ExecCommandRequest::TTY_COLS);

/// A started child and our ends of its I/O.
pub(crate) struct Spawned {
    pub child: Child,
    /// Process id = process group id = session id.
    pub pid: i32,
    /// Where the combined output is read: the pipe's read end or the PTY master (non-blocking).
    pub output: OwnedFd,
    /// The stdin pipe's write end (non-blocking); `None` for a PTY (write to the master).
    pub input: Option<OwnedFd>,
}

fn spawn_failed(program: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        ErrorCode::ProcessSpawnFailed,
        format!("could not start {program:?}: {why}; check that the program exists in PATH and is executable"),
    )
}

fn nonblocking(fd: &OwnedFd) -> nix::Result<()> {
    let flags = OFlag::from_bits_truncate(fcntl(fd.as_fd(), FcntlArg::F_GETFL)?);
    fcntl(fd.as_fd(), FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK)).map(|_| ())
}

/// Start `spec`. Errors: `INVALID_COMMAND` (empty argv or program), `PROCESS_SPAWN_FAILED` with
/// the OS reason (missing program, bad cwd, no PTY available).
pub(crate) fn spawn(spec: &ExecSpec) -> Result<Spawned, ApiError> {
    let program = match spec.argv.first() {
        Some(p) if !p.is_empty() => p.clone(),
        _ => {
            return Err(ApiError::new(
                ErrorCode::InvalidCommand,
                "the command is empty: give the program and its arguments as an array",
            ))
        }
    };
    let mut cmd = Command::new(&program);
    cmd.args(&spec.argv[1..])
        .env_clear()
        .envs(&spec.env)
        .env(TAG_ENV, &spec.tag)
        .current_dir(&spec.cwd)
        .kill_on_drop(false);
    let fail = |e: nix::Error| spawn_failed(&program, e);
    let (output, input) = if spec.tty {
        let (rows, cols) = spec.tty_size.unwrap_or(DEFAULT_TTY_SIZE);
        let pair = pty::open_pty(rows, cols).map_err(fail)?;
        let clone = |fd: &OwnedFd| fd.try_clone().map_err(|e| spawn_failed(&program, e));
        cmd.stdin(Stdio::from(clone(&pair.slave)?))
            .stdout(Stdio::from(clone(&pair.slave)?))
            .stderr(Stdio::from(pair.slave));
        // SAFETY: runs in the forked child before exec; setsid(2) and ioctl(2) are
        // async-signal-safe and nothing is allocated. Stdio is already on fds 0-2 at this point.
        unsafe {
            cmd.pre_exec(|| {
                nix::unistd::setsid()?;
                if nix::libc::ioctl(0, nix::libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        (pair.master, None)
    } else {
        let (out_r, out_w) = pipe2(OFlag::O_CLOEXEC).map_err(fail)?;
        let (in_r, in_w) = pipe2(OFlag::O_CLOEXEC).map_err(fail)?;
        let out_w2 = out_w.try_clone().map_err(|e| spawn_failed(&program, e))?;
        cmd.stdin(Stdio::from(in_r)).stdout(Stdio::from(out_w)).stderr(Stdio::from(out_w2));
        // SAFETY: as above; setsid(2) only.
        unsafe {
            cmd.pre_exec(|| {
                nix::unistd::setsid()?;
                Ok(())
            });
        }
        (out_r, Some(in_w))
    };
    nonblocking(&output).map_err(fail)?;
    if let Some(fd) = &input {
        nonblocking(fd).map_err(fail)?;
    }
    let child = cmd.spawn().map_err(|e| spawn_failed(&program, e))?;
    drop(cmd); // closes our copies of the child's ends
    let pid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or_else(|| spawn_failed(&program, "the child exited before its pid was known"))?;
    Ok(Spawned { child, pid, output, input })
}
