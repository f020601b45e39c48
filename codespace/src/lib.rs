//! # spaces-codespace: the CodeSpace execution layer
//!
//! Theory of operation: this crate owns what touches the OS on behalf of a Space. Today that is
//! the process layer ([`process`]): detached processes in their own session and process group,
//! tagged so that every descendant can be found and ended, with pipes the caller reads. The V4A
//! patch engine ([`patch`]) parses and applies patches in memory before anything is written.
//!
//! What it never does: decide policy for agent runs (the daemon's run supervisor does), or talk
//! to a network.

pub mod patch;
pub mod process;
