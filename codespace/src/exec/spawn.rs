//! Starting an `exec_command` process through the one spawner ([`spaces_os::process::spawn`]): one
//! pipe for combined stdout+stderr plus a stdin pipe, or a PTY (write to its master); the process
//! layer's errors are the answers.

use super::ExecSpec;
use crate::error::Result;
use spaces_os::process::{self, SpawnSpec, Spawned, StdinSpec, StdioSpec};

/// Initial PTY size when the spec names none (API.md: "PTY at 24x80").
pub(crate) const DEFAULT_TTY_SIZE: (u16, u16) =
    (spaces_sdk::tools::ExecCommandRequest::TTY_ROWS, spaces_sdk::tools::ExecCommandRequest::TTY_COLS);

/// Start `spec`. Errors: `INVALID_COMMAND` (empty argv or program), `PROCESS_SPAWN_FAILED` with
/// the OS reason (missing program or interpreter, bad cwd, no PTY available).
pub(crate) fn spawn(spec: &ExecSpec) -> Result<Spawned> {
    let stdio = if spec.tty {
        let (rows, cols) = spec.tty_size.unwrap_or(DEFAULT_TTY_SIZE);
        StdioSpec::Pty { rows, cols }
    } else {
        StdioSpec::Combined { stdin: StdinSpec::Pipe }
    };
    let spec = SpawnSpec {
        argv: spec.argv.clone(),
        cwd: spec.cwd.clone(),
        env: spec.env.clone(),
        markers: Vec::new(),
        tag: spec.tag.clone(),
        stdio,
        cgroups: Vec::new(),
        nice: process::priority::agent_nice(),
        sandboxed: false,
    };
    Ok(process::spawn(&spec)?)
}
