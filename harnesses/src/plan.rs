//! Launch plans, install specs and process recipes: what the daemon executes for a harness.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use spaces_sdk::McpServer;

/// The pinned npm install of a CLI into the host's tools directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallSpec {
    /// npm package names with exact versions, e.g. `@anthropic-ai/claude-code@2.1.197`.
    pub packages: Vec<String>,
    /// The version string the installed CLI reports (for capabilities).
    pub version: &'static str,
    /// The binary to launch, relative to the tools directory (the native binary, not the Node
    /// launcher, so signals reach the process that does the work).
    pub binary: &'static str,
}

/// How turns map to processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessModel {
    /// One process per run; each turn is a message on stdin ([`crate::harness::Harness::user_message`]);
    /// a respawn resumes the session.
    LongLived,
    /// One process per turn; turn 2+ resumes the session by id.
    PerTurn,
}

/// What the agent's stdin is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdinMode {
    /// `/dev/null` (one-shot CLIs hang or wait on an open stdin).
    Null,
    /// A pipe the daemon keeps open for messages and control requests.
    Pipe,
    /// A pipe that carries the plan's `initial_stdin` and is then closed: how a one-shot CLI
    /// gets its prompt without it ever being on the command line (where `ps` shows it to every
    /// user, and where a prompt over the kernel's 128 KiB argument limit fails with `E2BIG`).
    Once,
}

/// How to cancel the turn in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterruptRecipe {
    /// Write these bytes on stdin (a control request); the process stays alive.
    Stdin(Vec<u8>),
    /// Send this signal to the agent's whole process group; the process ends and the next turn
    /// resumes the session.
    SignalGroup(i32),
}

/// Everything a harness needs to plan one process.
#[derive(Debug, Clone)]
pub struct LaunchContext<'a> {
    pub run_id: &'a str,
    /// The turn this process starts with (1-based).
    pub turn: u32,
    /// That turn's text.
    pub prompt: &'a str,
    /// Resume this session (Claude session id, Codex thread id) instead of starting one.
    pub session_id: Option<&'a str>,
    /// The CLI binary to run.
    pub binary: &'a Path,
    /// Working directory (inside the Space).
    pub cwd: &'a Path,
    /// The run's private agent home (becomes `HOME`; config dirs live under it).
    pub home: &'a Path,
    /// The run's private directory (0700), for launch files that must not live in the agent's
    /// home (a home may be saved and restored elsewhere), such as MCP configs with secrets.
    pub run_dir: &'a Path,
    pub model: Option<&'a str>,
    /// Custom model endpoint (e.g. `http://127.0.0.1:PORT`).
    pub base_url: Option<&'a str>,
    /// Caller env plus forwarded host keys, already merged.
    pub env: &'a BTreeMap<String, String>,
    /// MCP servers to give the CLI, in its own config format (names already validated: unique,
    /// `[A-Za-z0-9_-]+`). Empty: the CLI's MCP configuration is left alone.
    pub mcp_servers: &'a [McpServer],
    /// What the run may still spend in this process, US dollars, for a CLI with a limit of its
    /// own (Claude Code's `--max-budget-usd`); `None`: no limit. The daemon keeps the rest of a
    /// budget itself (issue 33).
    pub max_budget_usd: Option<f64>,
    /// Continue `session_id` as it was at this point, after a rewind (`agent_rewind`, issue 34):
    /// the [`crate::Normalizer::turn_point`] recorded at the end of the turn rewound to (Claude
    /// Code: a message uuid, for `--resume-session-at` with `--fork-session`; Codex app-server:
    /// a turn id, for `thread/fork` with `lastTurnId`). `None`: resume (or start) as usual.
    pub resume_at: Option<&'a str>,
}

/// How long each CLI is told to wait for its MCP servers ([`LaunchContext::mcp_servers`]) to
/// start before its first model request, in ms. Left to themselves `claude -p` and `codex exec`
/// send that request at once, without a server still starting, and the model's call to it is
/// refused (docs/harnesses.md, "MCP servers").
pub const MCP_STARTUP_WAIT_MS: u64 = 30_000;

/// One process to spawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchPlan {
    /// `argv[0]` is the binary.
    pub argv: Vec<String>,
    /// The environment on top of the daemon's clean base (`PATH`, `LANG`); includes `HOME`.
    pub env: BTreeMap<String, String>,
    /// Files to write (atomically, 0600) before launch, e.g. a run-local `config.toml`.
    pub files: Vec<(PathBuf, String)>,
    pub stdin: StdinMode,
    /// Bytes to write on stdin right after spawn (the first turn's message for stream-json).
    pub initial_stdin: Option<Vec<u8>>,
}

/// How an agent process ended, as the supervisor saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExitInfo {
    /// Exit code when it exited normally.
    pub code: Option<i32>,
    /// Signal number when it was killed by a signal.
    pub signal: Option<i32>,
    /// The last stderr lines (redacted), for error reasons.
    pub stderr_tail: String,
    /// The caller asked to stop the run (turn in flight ends `stopped`).
    pub stop_requested: bool,
}

#[cfg(test)]
impl LaunchPlan {
    /// A readable rendering for snapshot tests: argv one per line, the environment, each file
    /// with its content, the stdin mode.
    pub(crate) fn render(&self) -> String {
        let mut out = String::from("argv:\n");
        for a in &self.argv {
            out.push_str(&format!("  {a}\n"));
        }
        out.push_str("env:\n");
        for (k, v) in &self.env {
            out.push_str(&format!("  {k}={v}\n"));
        }
        for (path, content) in &self.files {
            out.push_str(&format!("file {}:\n", path.display()));
            for line in content.lines() {
                out.push_str(&format!("  | {line}\n"));
            }
        }
        out.push_str(&format!("stdin: {:?}\n", self.stdin));
        out
    }
}
