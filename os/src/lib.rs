//! # spaces-os: the OS layer
//!
//! Theory of operation: every agent run and every `exec_command` starts inside a **sandbox**
//! that its shim sets up before the program runs ([`sandbox`]): new mount, pid, ipc and uts
//! namespaces (and a user namespace when the daemon is not root), made by bubblewrap (`bwrap`,
//! Debian's `bubblewrap` package, the same tool Codex and Anthropic's sandbox runtime use on
//! Linux); the host's files read-only; writable only what the [`sandbox::Policy`] lists (the
//! Space root, the run's own home, a private `/tmp`); the daemon's state dir, token file and
//! other Spaces not there at all; `/proc` of the sandbox's own pid namespace; a seccomp filter
//! and `no_new_privs`; a process ceiling without cgroups.
//!
//! What it knows: paths, namespaces, system calls. What it never knows: runs, agents, HTTP.
//! The daemon decides what a tree may see (it builds the [`sandbox::Policy`]); the shim turns
//! the policy into a command line ([`sandbox::command`]); the program's first instructions run
//! in [`sandbox::enter`], inside the sandbox, before its `exec`.
//!
//! The crate's parts, bottom up:
//! - [`process`]: the one place the host starts a process ([`process::spawn`]) and the one that
//!   ends process trees ([`process::kill_tree`]); PTYs, cgroups, priorities, the bulk lane.
//! - [`sandbox`]: the policy and the bubblewrap command line above.
//! - [`shim`]: the per-run shim that holds an agent process (or an `exec_command`) across
//!   daemon restarts, its versioned control protocol, and its journal.
//! - [`disk`]: a full disk told apart (`ENOSPC`, `EDQUOT`) and room allocated ahead of need.
//! - [`redact`]: secret values replaced in everything stored or shown; the shim redacts what
//!   it journals and the daemon what it stores, with the same [`redact::Redactor`].
//!
//! Errors: each part has its own type ([`process::Error`], [`sandbox::Error`]); callers map
//! them to the wire once (`spaces-codespace` for commands, `spacesd` for runs).

pub mod disk;
pub mod memory;
pub mod path_io;
pub mod process;
pub mod redact;
pub mod sandbox;
pub mod shim;
