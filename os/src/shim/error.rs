//! Why a request to a shim failed: the one error type of [`super::ShimClient`].
//!
//! The daemon's supervisor (`spaces-host`'s `supervisor::error::Error::Shim`) and
//! `exec_command` (`spaces-codespace`) map it to their own errors;
//! [`Error::is_gone`] tells a shim that no longer exists (the run's process is lost) from one
//! that answered and refused.

use std::path::PathBuf;

/// A shim request that did not get its answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No shim listens at `socket` (it exited, or never started).
    #[error("no shim answers at {}: {source}", socket.display())]
    NoShim {
        /// The control socket tried (`<dir>/ctl.sock`).
        socket: PathBuf,
        /// The connect's error.
        source: std::io::Error,
    },
    /// The connection broke, or the shim closed it, before its answer.
    #[error("the shim is gone: {0}")]
    Gone(std::io::Error),
    /// The shim answered something that is not a reply of this protocol.
    #[error("the shim's reply is not readable ({source}): {line:?}")]
    Unreadable {
        /// The line received, as text.
        line: String,
        /// Why it does not parse.
        source: serde_json::Error,
    },
    /// The shim answered and refused: its reason (a stop of a process that is not running, a
    /// protocol version it does not speak, a program it could not start, ...).
    #[error("{0}")]
    Refused(String),
    /// A new shim did not say it started its program within `secs` seconds.
    #[error("the shim did not answer within {secs} s")]
    Timeout {
        /// The limit, seconds.
        secs: u64,
    },
    /// The shim process itself could not be started.
    #[error("cannot start the shim: {0}")]
    Start(#[from] crate::process::Error),
    /// A request could not be encoded (never expected: the protocol's types always encode).
    #[error("cannot encode the request: {0}")]
    Encode(#[from] serde_json::Error),
}

impl Error {
    /// True when the shim is not there to answer (as opposed to having refused): the process
    /// it held is lost to this daemon.
    pub fn is_gone(&self) -> bool {
        matches!(self, Error::NoShim { .. } | Error::Gone(_) | Error::Timeout { .. } | Error::Start(_))
    }
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
