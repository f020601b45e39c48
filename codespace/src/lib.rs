//! # spaces-codespace: the CodeSpace execution layer
//!
//! Theory of operation: this crate is the tools an agent loop calls on a Space (a workspace);
//! processes, shims and the sandbox beneath them are the OS layer's (`spaces-os`):
//! - the V4A patch engine is its own crate, `spaces-v4a` (pure: parse, check versions, plan).
//! - [`fs`]: a workspace root with confinement at open time (`read`, `find`, the patch source,
//!   and the atomic commit of a planned patch).
//! - [`exec`]: `exec_command` and its handles: PTY or pipes, retained output read by cursor,
//!   status, stdin, resize, termination.
//! - [`ledger`]: the SQLite operations ledger (idempotent `apply_patch`), approval holds.
//! - [`steer`]: works and intents (the steering inbox).
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
pub mod service;
pub mod sqlite;
pub mod steer;

pub use error::{Error, Result};
