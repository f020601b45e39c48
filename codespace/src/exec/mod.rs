//! `exec_command` and its handles (API.md, "CodeSpace execution layer": `exec_command`,
//! `read_process`, `process_status`, `write_stdin`, `process_resize`, `terminate_process`).
//!
//! Theory of operation:
//! - **Spawn** (`spawn.rs`, through the one spawner [`spaces_os::process::spawn`], whose module doc
//!   explains sessions, the controlling terminal, close-on-exec and reaping): no shell, argv as
//!   given; a new session, so the process leads its own process group (pgid = pid); the
//!   environment is exactly [`ExecSpec::env`] plus `SPACES_PROCESS_TAG=<tag>`. Pipe mode: stdout
//!   and stderr share ONE pipe (the combined stream keeps the true interleaving), stdin is a pipe.
//!   PTY mode: the slave is stdin/stdout/stderr and the controlling terminal, echo is off (case
//!   E13), we keep the master.
//! - **Collection** (`io.rs`): one task reads the output fd (non-blocking, tokio `AsyncFd`) into
//!   a ring of the last [`ExecLimits::retained_bytes`] bytes with absolute offsets. `EIO` on a
//!   PTY master means every slave end is closed: EOF, not an error (case P2,
//!   [`spaces_os::process::read_now`]). In pipe mode the pipe is widened to 1 MiB (best effort,
//!   `F_SETPIPE_SZ`) and read up to 128 KiB at a time, so a fast producer does not stall on a
//!   full pipe each time the collector is off the CPU. The window starts on a UTF-8 character boundary and a chunk
//!   never ends inside a character, so a `chunk` holds a U+FFFD only where the program printed
//!   bytes that are not UTF-8 (case R36, `ring.rs`).
//! - **Reaping**: one task awaits the child (tokio `Child::wait`) and records the exit status the
//!   moment the child exits, even if a grandchild still holds the output open; collection then
//!   goes on until EOF or [`ExecLimits::drain_after_exit`] after the exit (whatever is readable
//!   at that point is drained first), and then it is finished (`eof`).
//! - **Stopping** (`terminate_process`, the time limit): SIGTERM to the process group and to
//!   every process carrying the tag, [`ExecLimits::grace`], then SIGKILL; the call returns once
//!   the child is reaped. The termination reads `terminated` / `timeout`; a signal from outside
//!   reads `signaled` with its number, never `exited 0` (case P2).
//! - **Handles** (`table.rs`): a running process is never evicted. An exited one is kept for
//!   **10 minutes** ([`ExecLimits::keep_exited_for`]) and at most **256** exited handles are kept
//!   ([`ExecLimits::keep_exited_max`], oldest exit evicted first); after that its id answers
//!   `PROCESS_NOT_FOUND` (case P9).
//! - **Ownership**: one live process per owner (workspace); a second `exec` gets
//!   `WORKSPACE_BUSY` ([`Processes::live_for`] is the check other tools use).
//! - **Input** (`write_stdin`): every byte is written, waiting while the pipe or terminal is
//!   full, but never without bound: a process that stopped reading its input would otherwise
//!   hang the caller (case E15). After [`ExecLimits::stdin_timeout`] (default
//!   [`WriteStdinRequest::TIMEOUT_MS`], 10 s, for the whole call) the answer is `TIMEOUT`
//!   ([`crate::error::Error::StdinTimeout`]) saying how many bytes of how many went through; the
//!   process keeps running, and the caller treats the write as interrupted.
//!
//! - **Shims** (`shimmed.rs`, when the host gives a [`ShimSetup`]: `spacesd` does): the process
//!   is started by a shim in raw mode ([`spaces_os::shim`]), which owns its pipe or PTY, writes the
//!   output to bounded files whose byte offsets are the cursors (at most three segments of
//!   `max(retained_bytes + 4, 64 KiB)`), and journals the exit when it reaps it. The handle's
//!   ring is fed from those files, so a daemon that was killed or stopped re-adopts the command
//!   ([`Processes::adopt`]) with the same id and cursors; input, resize and stops go through the
//!   shim's socket with the same answers (E13, E15). A shim keeps the tree after the exit (as a
//!   direct spawn does); evicting the handle removes its directory, and the shim then ends what
//!   is left; the time limit covers that tree too (what the command left running in the
//!   background is ended when the limit passes, its recorded exit kept). Where the host has
//!   cgroups, the shim starts each command in a cgroup of its own
//!   ([`spaces_os::process::cgroup`]) with the host's process and memory limits, and a stop ends
//!   everything in it. Without a [`ShimSetup`] (the crate's own tests) processes are spawned
//!   directly, as described above, and end with this process.
//!
//! Writing to a pipe whose reader is gone raises SIGPIPE in this process unless it is ignored
//! (Rust binaries ignore it by default); a host that embeds this crate must keep it ignored.

mod handle;
pub(crate) mod io;
mod ring;
mod shimmed;
mod spawn;
mod table;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

pub use shimmed::ShimSetup;
use spaces_sdk::tools::WriteStdinRequest;
/// The process tools' wire shapes, defined once in `spaces_sdk::tools`.
pub use spaces_sdk::tools::{DispatchStatus, ExecCommandResult, ProcessState, ProcessStatus, ReadProcessResult, Termination};
pub use table::Processes;

/// A command to start (`exec_command`). The caller (the daemon) fills in cwd = workspace root,
/// the operator's environment and time limit.
#[derive(Debug, Clone)]
pub struct ExecSpec {
    /// Program and arguments, no shell. Empty argv or an empty program: `INVALID_COMMAND`.
    /// A relative program is looked up in the `PATH` of `env`.
    pub argv: Vec<String>,
    /// Working directory (the workspace root).
    pub cwd: PathBuf,
    /// The complete environment: nothing is inherited from this process; `SPACES_PROCESS_TAG`
    /// is added. For a PTY the caller sets `TERM`.
    pub env: BTreeMap<String, String>,
    /// Allocate a PTY instead of pipes.
    pub tty: bool,
    /// Initial PTY size as `(rows, cols)`; `None` = 24x80 (API.md). Ignored without `tty`.
    pub tty_size: Option<(u16, u16)>,
    /// What owns the process: one live process per owner (the service uses the workspace's
    /// root, so Spaces sharing a root share it).
    pub owner: String,
    /// The workspace the process runs for, reported by `process_status`.
    pub workspace_id: String,
    /// Time limit; when it passes the process group is stopped and the termination reads
    /// `timeout`.
    pub timeout: Option<Duration>,
    /// Unique tag stored as `SPACES_PROCESS_TAG`; descendants carry it, so termination finds
    /// them even outside the process group. Empty = `exec/<process_id>`.
    pub tag: String,
    /// The sandbox it starts in (`spaces_os::sandbox`); `None`: none (the operator turned it
    /// off). A sandbox needs a shim: without [`ShimSetup`] such a spec is refused.
    pub sandbox: Option<spaces_os::sandbox::Policy>,
}

/// Retention and timing limits of the process table.
#[derive(Debug, Clone)]
pub struct ExecLimits {
    /// Output bytes retained per process (the tail); default 262144 (256 KiB, API.md).
    pub retained_bytes: usize,
    /// How long an exited handle stays readable; default 10 minutes.
    pub keep_exited_for: Duration,
    /// How many exited handles are kept at most (oldest exit evicted first); default 256.
    pub keep_exited_max: usize,
    /// Time between SIGTERM and SIGKILL when stopping; default 2 s.
    pub grace: Duration,
    /// How long output is still collected after the child exited while a descendant keeps the
    /// output open; default 2 s.
    pub drain_after_exit: Duration,
    /// How long one `write_stdin` may wait in total for the process to take its input (a full
    /// pipe or terminal) before it answers `TIMEOUT` with the bytes written so far; default
    /// [`WriteStdinRequest::TIMEOUT_MS`] (10 s).
    pub stdin_timeout: Duration,
}

impl Default for ExecLimits {
    fn default() -> Self {
        Self {
            retained_bytes: 256 * 1024,
            keep_exited_for: Duration::from_secs(600),
            keep_exited_max: 256,
            grace: Duration::from_secs(2),
            drain_after_exit: Duration::from_secs(2),
            stdin_timeout: Duration::from_millis(WriteStdinRequest::TIMEOUT_MS),
        }
    }
}
