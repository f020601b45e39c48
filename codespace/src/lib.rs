//! # spaces-codespace: the CodeSpace execution layer
//!
//! Theory of operation: this crate owns what touches the OS on behalf of a Space (a workspace):
//! - [`process`]: detached processes in their own session and process group, tagged so that
//!   every descendant can be found and ended (agent runs launch through it).
//! - [`patch`]: the pure V4A patch engine: parse, check versions, plan in memory.
//! - [`fs`]: a workspace root with confinement at open time (`read`, `find`, the patch source,
//!   and the atomic commit of a planned patch).
//! - [`exec`]: `exec_command` and its handles: PTY or pipes, retained output read by cursor,
//!   status, stdin, resize, termination.
//! - [`ledger`]: the SQLite operations ledger (idempotent `apply_patch`), approval holds.
//! - [`steer`]: works and intents (the steering inbox).
//! - [`shim`]: the per-run shim that holds an agent process across daemon restarts, and its
//!   journal.
//! - [`service`]: the tools themselves (`call(name, arguments)`), policy checks and the
//!   per-workspace gate, shared by every transport.
//!
//! Errors: one [`Error`] for the whole crate ([`error`]); each variant says what happened and
//! whether a retry helps, and [`Error::code`] maps it to the contract's error code. The daemon
//! turns it into the wire error at its service boundary.
//!
//! What it never does: decide policy for agent runs (the daemon's run supervisor does), or talk
//! to a network.

pub mod error;
pub mod exec;
pub mod fs;
pub mod ledger;
pub mod patch;
pub mod process;
pub mod service;
pub mod shim;
pub mod sqlite;
pub mod steer;

pub use error::{Error, Result};
