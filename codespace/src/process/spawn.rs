//! Spawning a detached, tagged process with a clean environment.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;

use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use super::{Error, Result, TAG_ENV};

/// What the child's stdin is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdinSpec {
    /// `/dev/null`.
    Null,
    /// A pipe (returned in [`Spawned::stdin`]).
    Pipe,
}

/// A process to start.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// Program and arguments; `argv[0]` is resolved against `PATH` of `env` if not absolute.
    pub argv: Vec<String>,
    /// The complete environment (nothing is inherited). A marker that should find this process
    /// tree later (see [`super::env_marker`]) goes here too.
    pub env: BTreeMap<String, String>,
    pub cwd: PathBuf,
    pub stdin: StdinSpec,
    /// Unique tag, stored as `SPACES_PROCESS_TAG` in the child's environment.
    pub tag: String,
}

/// A started process. The process group id equals `pid` (it leads its own session).
#[derive(Debug)]
pub struct Spawned {
    pub pid: u32,
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
}

/// Start `spec` in a new session with piped stdout/stderr. Errors: [`Error::EmptyCommand`],
/// [`Error::Spawn`].
pub fn spawn(spec: &SpawnSpec) -> Result<Spawned> {
    let program = spec.argv.first().ok_or(Error::EmptyCommand)?;
    let mut cmd = Command::new(program);
    cmd.args(&spec.argv[1..])
        .env_clear()
        .envs(&spec.env)
        .env(TAG_ENV, &spec.tag)
        .current_dir(&spec.cwd)
        .stdin(match spec.stdin {
            StdinSpec::Null => Stdio::null(),
            StdinSpec::Pipe => Stdio::piped(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(false);
    // SAFETY: the closure runs in the forked child before exec and only calls setsid(2), which is
    // async-signal-safe; it allocates nothing and touches no locks.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    let mut child =
        cmd.spawn().map_err(|source| Error::Spawn { program: program.clone(), source })?;
    let pid = child.id().unwrap_or(0);
    let stdin = child.stdin.take();
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(Error::Spawn {
            program: program.clone(),
            source: std::io::Error::other("stdout/stderr pipes were not created"),
        });
    };
    Ok(Spawned { pid, child, stdin, stdout, stderr })
}
