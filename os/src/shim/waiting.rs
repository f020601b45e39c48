//! A shim process between its start and its launch: a spare waiting in the pool
//! ([`super::spare`]) or one started for a launch just now ([`super::ShimClient::launch`]).
//! Both hand it the launch on its stdin and read its one reply line on its stdout.

use std::collections::BTreeMap;
use std::path::Path;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;

use super::error::{Error, Result};
use super::protocol::Reply;
use crate::process::{self, SpawnSpec, StdinSpec, StdioSpec};

/// A shim process waiting for its launch on stdin (a spare, or one started just now): our ends
/// of its stdio.
#[derive(Debug)]
pub(super) struct Waiting {
    pub(super) pid: i32,
    stdin: std::os::fd::OwnedFd,
    stdout: std::os::fd::OwnedFd,
    /// Held until the reply, so the shim's early messages have somewhere to go.
    stderr: Option<std::os::fd::OwnedFd>,
    /// To tell whether it still runs (its pid could be another process's once it was reaped).
    /// Not killed when dropped: it outlives the launch, and is reaped when it exits.
    child: Reaped,
}

/// A child that, once dropped while it still runs, is awaited by a task of its own (tokio
/// waits for it on its pidfd). Dropped as is, tokio would put it in its orphan queue, which it
/// walks at every SIGCHLD: with a thousand live shims, every exit on the host cost the daemon
/// a thousand `wait4` calls (issue 30: a fifth of the daemon's time in a stop-all).
#[derive(Debug)]
struct Reaped(Option<tokio::process::Child>);

impl Drop for Reaped {
    fn drop(&mut self) {
        let Some(mut child) = self.0.take() else { return };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = child.wait().await;
            });
        }
    }
}

/// A shim that has its launch and will answer one [`Reply`] line.
pub(super) struct Handed {
    stdout: pipe::Receiver,
    _stderr: Option<std::os::fd::OwnedFd>,
}

impl Waiting {
    /// Start `spacesd shim DIR` (`command` with `shim DIR` appended) with exactly `env`, tagged
    /// `tag` (`shim/<tree>`). The shim makes its own session (`server::main`), so it is started
    /// without a fork of this (large) process. Errors: the spawn's.
    pub(super) fn start(command: &[String], env: BTreeMap<String, String>, dir: &Path, tag: String) -> Result<Waiting> {
        let mut argv = command.to_vec();
        argv.push("shim".into());
        argv.push(dir.display().to_string());
        let shim = SpawnSpec {
            argv,
            cwd: dir.to_owned(),
            env,
            markers: Vec::new(),
            tag,
            stdio: StdioSpec::Pipes { stdin: StdinSpec::Pipe },
            cgroups: Vec::new(),
            // The shim journals its agent's output: it keeps the daemon's priority.
            nice: 0,
            sandboxed: false,
        };
        let spawned = process::spawn_self_starting(&shim)?;
        let stdin = spawned.stdin.ok_or_else(|| Error::Gone(std::io::Error::other("the shim has no stdin")))?;
        Ok(Waiting { pid: spawned.pid, stdin, stdout: spawned.output, stderr: spawned.stderr, child: Reaped(Some(spawned.child)) })
    }

    /// Whether the shim still runs (not exited, not reaped).
    pub(super) fn alive(&mut self) -> bool {
        self.child.0.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Write the launch `json` and close the shim's stdin. Errors: the write failed (the shim
    /// is gone).
    pub(super) async fn hand(self, json: &[u8]) -> Result<Handed> {
        let mut input = pipe::Sender::from_owned_fd(self.stdin).map_err(Error::Gone)?;
        let stdout = pipe::Receiver::from_owned_fd(self.stdout).map_err(Error::Gone)?;
        input.write_all(json).await.map_err(Error::Gone)?;
        drop(input);
        Ok(Handed { stdout, _stderr: self.stderr })
    }
}

impl Handed {
    /// The shim's one reply line. Errors: it exited first, or the line is not a [`Reply`].
    pub(super) async fn reply(self) -> Result<Reply> {
        let mut lines = BufReader::new(self.stdout).lines();
        match lines.next_line().await {
            Ok(Some(line)) => serde_json::from_str::<Reply>(&line).map_err(|source| Error::Unreadable { line, source }),
            Ok(None) => {
                Err(Error::Gone(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the shim exited before it started the agent")))
            }
            Err(e) => Err(Error::Gone(e)),
        }
    }
}
