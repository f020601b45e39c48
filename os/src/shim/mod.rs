//! Per-run shims: the process that holds an agent while the daemon comes and goes.
//!
//! Models: conmon and the containerd shim. `spacesd` starts one shim per agent process
//! ([`ShimClient::spawn`]; the shim is `spacesd shim DIR`, the same binary, started in a session
//! of its own). The shim:
//! - becomes a **child subreaper** (`PR_SET_CHILD_SUBREAPER`) and starts the agent through
//!   [`crate::process::spawn`], so every descendant of the agent stays under the shim whatever
//!   it does with its environment or its session; a stop ends all of them ([`Request::Stop`]);
//! - owns the agent's stdio: it splits stdout and stderr into lines ([`lines`]) and **journals**
//!   them with the agent's exit to `DIR/journal` ([`journal`], which states the fsync policy);
//!   in raw mode ([`OutputMode::Raw`], `exec_command`) it copies the combined output or the
//!   PTY's bytes to bounded output files instead ([`output`]; a byte offset there is the
//!   command's cursor) and journals only the exit and the end of the output;
//! - takes **control** over a Unix socket, `DIR/ctl.sock` (stdin writes, raw input bytes with a
//!   time limit, PTY resize, signals, stop, ack), in
//!   the versioned line protocol of [`protocol`];
//! - after the agent exits and its output is drained, ends what is left of the tree, reaps it,
//!   journals [`Record::Done`], and exits once the daemon acknowledged the whole journal.
//!
//! The daemon reads the journal by byte offset ([`follow`]) and stores the offset it has
//! ingested with the events made from it, in one transaction. If the daemon dies, nothing the
//! agent does is lost: the shim keeps journaling, and the next daemon reconnects
//! ([`ShimClient::connect`]) and resumes from the stored offset, so each record becomes events
//! exactly once.
//!
//! `DIR` must be private (0700): the journal holds the agent's output and the socket controls
//! the agent. Its path must fit a Unix socket address (under 108 bytes with `/ctl.sock`).

pub mod client;
pub mod error;
pub mod journal;
pub mod lines;
pub mod output;
pub mod own;
pub mod protocol;
pub mod server;
pub mod spare;
pub mod syncer;
pub mod tree;
mod waiting;

use std::path::{Path, PathBuf};

pub use client::{follow, Followed, ShimClient, Watcher};
pub use error::Error;
pub use protocol::{InputStop, Launch, OutputMode, RawRecord, Record, Reply, Request, ShimSpec, Stream, PROTOCOL};

/// `<dir>/ctl.sock`: the shim's control socket.
pub fn socket_path(dir: &Path) -> PathBuf {
    dir.join("ctl.sock")
}
