//! Why a process did not start: the one error type of [`crate::process`].
//!
//! Callers above this crate map it to their own errors once (`spaces-codespace` turns it into
//! `INVALID_COMMAND` or `PROCESS_SPAWN_FAILED`, API reference "Error codes"); the display text
//! here is for logs and the shim's own replies, so it does not echo a long program name whole.

use spaces_sdk::bounded;

/// A start refused before or by the OS.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The argv is empty, or its program an empty string. A retry does not help.
    #[error("command must be a non-empty argument array, e.g. [\"/bin/echo\", \"hi\"]")]
    EmptyCommand,

    /// The OS refused to start `program` (missing binary or interpreter, permissions, a missing
    /// working directory, no PTY left, a cgroup that could not be joined); `source` names the
    /// cause. A retry helps only after fixing it.
    #[error("could not start {program}: {source}", program = bounded(program))]
    SpawnFailed {
        /// The program (argv\[0\]) as given.
        program: String,
        /// The OS's error.
        source: std::io::Error,
    },
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
