//! # spacesd: the Spaces host daemon
//!
//! Theory of operation: `spacesd serve` owns one state dir (`--state-dir`/`SPACES_HOME`): a
//! SQLite database (spaces, runs, turns, event logs), one directory per run (0700: the secret
//! `env.json` 0600, the redacted output journal, the agent's private home), and a Unix socket.
//! Callers start agent runs through the HTTP API ([`http`]), MCP ([`mcp`]) or the command line
//! ([`cli`]), each an adapter over the operation table ([`spaces_service`]); the run supervisor
//! ([`spaces_host::supervisor`]) records each run and gives it an actor that launches the
//! harness's CLI as a detached, tagged process (`spaces-codespace`), turns its output into
//! normalized events (`spaces-harnesses`) and appends them to the durable event log
//! ([`spaces_store::eventlog`]), waking long-poll readers. This crate holds the transports, who
//! may call what ([`access`]), `spacesd serve` ([`serve`]) and the binary; the core lives in
//! `spaces-host`, the state in `spaces-store`.
//!
//! What it never does: keep a run's state only in memory (everything a caller can read survives
//! a restart), or pass its own environment to agents (only what a run names).

pub mod access;
pub mod backend;
pub mod cli;
pub mod http;
pub mod mcp;
pub mod serve;
pub mod unused;
