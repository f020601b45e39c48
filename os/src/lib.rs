//! # spaces-os: the OS layer's sandbox
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
//! (`process/` and `shim/` still live in `spaces-codespace`; they move here with issue 29.)

pub mod sandbox;
