//! Detached, tagged processes and whole-tree termination.
//!
//! Process model (Linux):
//! - Every process is spawned in a **new session** (`setsid` between fork and exec), so it is its
//!   own process group leader (pgid = pid) and has no controlling terminal. A daemon restart or a
//!   closed client connection does not signal it.
//! - Every process carries its **tag** in the environment (`SPACES_PROCESS_TAG`), plus whatever
//!   **marker** (`NAME=value`, see [`env_marker`]) the caller puts in its environment to name a
//!   group of processes (the daemon marks every process of an agent run). Descendants inherit
//!   both, including tools that a program starts in process groups of their own. Ending a tree
//!   therefore means: signal its process group, then every process whose environment carries the
//!   marker ([`kill_tree`]), until none is left. Which marker means what is the caller's business.
//! - The environment is built from scratch (`env_clear`): nothing of the daemon's own environment
//!   (tokens, cloud keys) reaches a child unless the caller names it (case M32).
//! - Stdout and stderr are pipes the caller reads; stdin is `/dev/null` or a pipe.
//!
//! Reaping: the direct child is reaped by tokio's `Child::wait`. Orphaned grandchildren are
//! reparented to PID 1 (or the nearest subreaper); [`kill_tree`] treats zombies as gone.

mod scan;
mod spawn;

pub use scan::{alive_with_env, alive_with_marker, kill_tree, KillReport};
pub use spawn::{spawn, SpawnSpec, Spawned, StdinSpec};

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

/// Errors of the process layer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `argv` was empty. Not retryable: give a program.
    #[error("empty command: give at least the program to run")]
    EmptyCommand,
    /// The OS refused to start the program (missing binary, permissions). Retry only after fixing
    /// the cause named in the message.
    #[error("could not start {program}: {source}")]
    Spawn { program: String, source: std::io::Error },
}

/// `Result` of this module.
pub type Result<T> = std::result::Result<T, Error>;
