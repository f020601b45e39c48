//! The local daemon of a state dir: where it is, whether it answers, and starting one when none
//! does, for front doors that should need no set-up (`spacesd mcp`, the Python and Node SDKs).
//!
//! A state dir (`SPACES_HOME`, else `<user data dir>/spaces`) holds the daemon's Unix socket
//! `spacesd.sock`. [`ensure_daemon`] connects to it; when nothing answers it spawns the command
//! it is given (which must run `serve` for that state dir: `spacesd --state-dir DIR serve`, or a
//! language binding's own entry point) detached: its own session (no controlling terminal, no
//! signal meant for the caller's process group reaches it), stdin `/dev/null`, stdout and
//! stderr appended to `<state dir>/spacesd.log`. It outlives the caller. Then it waits until
//! the socket answers. Two callers racing both spawn; the second daemon finds the socket taken
//! and exits, and both callers see the first one answer.
//!
//! A daemon started with `serve --exit-when-unused` (what the SDKs start unless asked to keep
//! it) also listens on `<state dir>/spacesd.hold`; each client [`hold`]s it by keeping one
//! connection open there, and the daemon ends a few seconds after the last connection closes
//! (a process that exits, even by SIGKILL, closes its own), once no turn is in flight. A
//! client that asks to keep the daemon writes `keep` on its connection: that daemon then runs
//! on like one started without the flag.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a freshly started daemon may take to answer (it recovers runs first).
pub const START_TIMEOUT: Duration = Duration::from_secs(20);

/// `SPACES_HOME`, else `<user data dir>/spaces`, else `./.spaces` (the daemon's own default).
pub fn default_state_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("SPACES_HOME").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    dirs::data_dir().map(|d| d.join("spaces")).unwrap_or_else(|| PathBuf::from(".spaces"))
}

/// The daemon's Unix socket in `state_dir`.
pub fn socket_path(state_dir: &Path) -> PathBuf {
    state_dir.join("spacesd.sock")
}

/// The log of a daemon started by [`ensure_daemon`]: `<state dir>/spacesd.log`.
pub fn log_path(state_dir: &Path) -> PathBuf {
    state_dir.join("spacesd.log")
}

/// Where a daemon started with `serve --exit-when-unused` counts its clients:
/// `<state dir>/spacesd.hold` (a Unix stream socket, 0600; see [`hold`]).
pub fn hold_path(state_dir: &Path) -> PathBuf {
    state_dir.join("spacesd.hold")
}

/// The line a client writes on its hold connection to keep the daemon running after the last
/// client is gone (`keep_daemon=True` in Python, `keepDaemon: true` in Node).
pub const KEEP_LINE: &[u8] = b"keep\n";

/// One client's hold on the daemon of a state dir ([`hold`]): the daemon does not end for
/// being unused while this lives. Dropping it (or the process exiting) closes the connection.
#[derive(Debug)]
pub struct Hold {
    _conn: std::os::unix::net::UnixStream,
}

/// Holds the daemon of `state_dir` when it was started with `serve --exit-when-unused`: a
/// connection to [`hold_path`] kept open for the life of the returned [`Hold`]. With `keep`, also
/// tells it to run on after its last client (it then never ends for being unused). Returns
/// `None` when the daemon keeps no count (started without the flag, by an operator, or an
/// older one): nothing to hold then. The connection is a plain blocking socket: it holds no
/// event loop of the caller's open (Node exits as if it were not there).
pub fn hold(state_dir: &Path, keep: bool) -> Option<Hold> {
    use std::io::Write;
    let mut conn = std::os::unix::net::UnixStream::connect(hold_path(state_dir)).ok()?;
    if keep {
        conn.write_all(KEEP_LINE).ok()?;
    }
    Some(Hold { _conn: conn })
}

/// True when a daemon accepts connections on `socket` (`serve` binds it last, once ready).
pub async fn answers(socket: &Path) -> bool {
    tokio::net::UnixStream::connect(socket).await.is_ok()
}

/// Why the daemon could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The state dir or its log could not be created. Fix the path or its permissions.
    #[error("cannot prepare {path}: {source}")]
    Prepare { path: PathBuf, source: std::io::Error },
    /// The command could not be spawned (not found, not executable).
    #[error("cannot start the daemon ({command}): {source}")]
    Spawn { command: String, source: std::io::Error },
    /// The daemon exited, or did not answer within [`START_TIMEOUT`]; `log_tail` is the end of
    /// its log, which says why.
    #[error("the daemon ({command}) {what}; its log {log} ends:\n{log_tail}")]
    NotAnswering { command: String, what: String, log: PathBuf, log_tail: String },
}

/// Makes sure the daemon of `state_dir` answers, spawning `serve_command` (program and
/// arguments; it must serve `state_dir`) detached when none does, and waiting up to
/// [`START_TIMEOUT`]. Returns `Ok(Some(pid))` when it started one, `Ok(None)` when one was
/// already answering. Errors: [`StartError`].
pub async fn ensure_daemon(state_dir: &Path, serve_command: &[OsString]) -> Result<Option<u32>, StartError> {
    let socket = socket_path(state_dir);
    if answers(&socket).await {
        return Ok(None);
    }
    let prepare = |path: &Path, source| StartError::Prepare { path: path.to_owned(), source };
    std::fs::create_dir_all(state_dir).map_err(|e| prepare(state_dir, e))?;
    let log = log_path(state_dir);
    let out = std::fs::OpenOptions::new().create(true).append(true).open(&log).map_err(|e| prepare(&log, e))?;
    let err = out.try_clone().map_err(|e| prepare(&log, e))?;
    let command = serve_command.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ");
    let Some((program, args)) = serve_command.split_first() else {
        return Err(StartError::Spawn { command, source: std::io::Error::other("empty command") });
    };
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(Stdio::null()).stdout(out).stderr(err);
    detach(&mut cmd);
    let mut child = cmd.spawn().map_err(|source| StartError::Spawn { command: command.clone(), source })?;
    let pid = child.id();
    let deadline = Instant::now() + START_TIMEOUT;
    let not_answering = |what: String| StartError::NotAnswering { command: command.clone(), what, log: log.clone(), log_tail: tail(&log) };
    loop {
        if answers(&socket).await {
            // Reap it later without blocking: the daemon runs on; a zombie is avoided by the
            // thread that waits for it.
            std::thread::spawn(move || child.wait());
            return Ok(Some(pid));
        }
        match child.try_wait() {
            Ok(Some(status)) => {
                // Another caller may have started one first: then that one answers.
                if answers(&socket).await {
                    return Ok(Some(pid));
                }
                return Err(not_answering(format!("exited ({status}) before answering on {}", socket.display())));
            }
            Ok(None) => {}
            Err(e) => return Err(not_answering(format!("could not be watched: {e}"))),
        }
        if Instant::now() > deadline {
            return Err(not_answering(format!("(pid {pid}) did not answer on {} within {} s", socket.display(), START_TIMEOUT.as_secs())));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The child starts a session of its own.
fn detach(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: runs in the forked child before exec and only calls setsid(2), which is
    // async-signal-safe; nothing is allocated or locked.
    unsafe {
        cmd.pre_exec(|| nix::unistd::setsid().map(|_| ()).map_err(std::io::Error::from));
    }
}

/// The last lines of the log, for an error message.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}
