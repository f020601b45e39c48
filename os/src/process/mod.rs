//! The one place the host starts a process, and the one that ends process trees.
//!
//! Every process the host starts goes through [`spawn`]: agent runs (the daemon's launcher),
//! `exec_command` (`spaces-codespace`'s `exec`) and the npm installs of the agent CLIs. A [`SpawnSpec`] says
//! everything about the start (argv, cwd, the complete environment, markers, tag, how stdio is
//! connected); nothing is taken from the daemon implicitly.
//!
//! Process model (Linux):
//! - **Session and process group.** The child calls `setsid` between fork and exec, so it leads
//!   a new session and its own process group (sid = pgid = pid) and has no controlling terminal
//!   of the daemon's. The one exception is the shim, started by [`spawn_self_starting`]
//!   without a fork of the daemon, which calls [`own_session`] itself first thing. Signals aimed at the daemon's group (a Ctrl-C at the terminal that started
//!   it, a closed client connection) do not reach it; stopping it means signalling the group
//!   `-pid` ([`kill_tree`]).
//! - **PTY and controlling terminal.** With [`StdioSpec::Pty`] the child gets a new terminal's
//!   slave as fds 0-2 and, right after `setsid`, makes it its controlling terminal
//!   (`TIOCSCTTY`). Its process group is then the terminal's foreground group: a window size set
//!   on the master ([`pty::resize`]) reaches it as SIGWINCH (case P8), a Ctrl-C written to the
//!   master as SIGINT. Echo is turned off before the child starts (case E13: what we write must
//!   not come back as output). A canonical-mode terminal silently drops the bytes of a line past
//!   [`pty::MAX_CANON_LINE`], so writers check [`pty::is_canonical`] and refuse such lines. We
//!   keep only the master; the slave is closed in this process once the child has it.
//! - **EIO as EOF.** When every slave fd is closed (the program and all its descendants are
//!   gone), reading the master fails with `EIO` instead of returning 0: [`read_now`] reports it
//!   as EOF, never as an error (case P2). A pipe simply returns 0.
//! - **Close-on-exec.** Every fd this module creates is `O_CLOEXEC`, so a child started
//!   concurrently by another task cannot inherit our ends (an inherited write end would hold an
//!   output open past the exit). In the child, after stdio is in place, `close_range(3, ~0,
//!   CLOSE_RANGE_CLOEXEC)` marks every other fd close-on-exec too, so a program starts with fds
//!   0-2 only, whatever the daemon or a library holds open (sockets, SQLite files). Marking,
//!   not closing, keeps the standard library's exec-error pipe working: a failed `execve` (a
//!   missing interpreter, say) is a spawn error, not a child that dies of SIGABRT.
//! - **Clean environment and signals.** The environment is exactly [`SpawnSpec::env`] plus the
//!   markers and the tag (`env_clear` first): nothing of the daemon's own environment (tokens,
//!   cloud keys) reaches a child unless the caller lists it (case M32). Signals the daemon may
//!   have inherited as ignored (SIGHUP, SIGINT, SIGQUIT, SIGTERM; a daemon started in the
//!   background by a shell ignores SIGINT) are reset to their defaults, so an interrupt or a stop
//!   reaches the program; the signal mask is emptied.
//! - **Tag and markers.** Every process carries its **tag** (`SPACES_PROCESS_TAG`, unique per
//!   spawn) and whatever **markers** (`NAME=value`, see [`env_marker`]) the caller names; the
//!   daemon marks every process of an agent run. Descendants inherit both, including tools that a
//!   program starts in process groups of their own. Ending a tree therefore means: signal its
//!   process group, then every process whose environment carries the marker ([`kill_tree`]),
//!   until none is left. Which marker means what is the caller's business.
//! - **Reaping.** The direct child is a tokio [`Child`](tokio::process::Child); its `wait()`
//!   reaps it and gives the status: an exit code, or the number of the signal that killed it
//!   (never "exited 0" for a `kill -9`, case P2). A child dropped before it was awaited is reaped
//!   by tokio in the background, never left a zombie. Orphaned grandchildren are reparented to
//!   PID 1 (or the nearest subreaper), which reaps them; [`kill_tree`] treats zombies as gone.
//!
//! - **Cgroups.** A spec may name cgroup directories ([`SpawnSpec::cgroups`]); the child joins
//!   each (writes `0` to its `cgroup.procs`, opened before the fork) before anything else, so
//!   the program and all it starts are inside from the first instruction. A failed join is a
//!   spawn error. See [`cgroup`] for who makes them and why.
//!
//! Our ends of the child's stdio are `O_NONBLOCK`, ready for tokio's `AsyncFd` or
//! `tokio::net::unix::pipe`; reads and writes never block the runtime.

pub mod bulk;
pub mod cgroup;
pub mod children;
pub mod demote;
mod drain;
mod error;
pub mod feed;
pub mod held;
pub mod prepared;
pub mod priority;
pub mod pty;
mod scan;
mod spawn;

#[cfg(test)]
mod tests;

pub use drain::{read_output, OutputSink, FINAL_DRAIN_MAX, READ_BUF};
pub use error::{Error, Result};
pub use scan::{alive_with_env, alive_with_marker, is_zombie_or_gone, kill_tree, KillReport};
pub use spawn::{
    close_inherited_fds, own_session, program_env, read_now, spawn, spawn_self_starting, widen_pipe, SpawnSpec, Spawned, StdinSpec,
    StdioSpec,
};

/// Environment variable holding a process's tag (unique per spawn, chosen by the caller).
pub const TAG_ENV: &str = "SPACES_PROCESS_TAG";

/// The environment entry `name=value`: the marker form [`kill_tree`] and [`alive_with_marker`]
/// look for. A process carries it when `name` is in its environment with that value.
pub fn env_marker(name: &str, value: &str) -> String {
    format!("{name}={value}")
}

/// The environment entry (`SPACES_PROCESS_TAG=<tag>`) carried by a tagged process and its
/// descendants: the marker that finds one command's processes.
pub fn tag_marker(tag: &str) -> String {
    env_marker(TAG_ENV, tag)
}
