//! Starting the daemon of a state dir for `spacesd mcp`, so an MCP client's config needs
//! nothing else set up: when nothing answers on `<state dir>/spacesd.sock`, this very binary's
//! `serve` is spawned detached (its own session, stdin `/dev/null`, stdout and stderr appended
//! to `<state dir>/spacesd.log`, never the MCP client's pipes) and waited for until its socket
//! answers.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::config::Config;

/// How long a freshly started daemon may take to answer (it recovers runs first).
pub const START_TIMEOUT: Duration = Duration::from_secs(20);

/// The daemon's log when `spacesd mcp` started it: `<state dir>/spacesd.log`.
pub fn log_path(cfg: &Config) -> std::path::PathBuf {
    cfg.state_dir.join("spacesd.log")
}

/// True when a daemon accepts connections on `socket` (`serve` binds it last, once it is ready).
pub async fn answers(socket: &Path) -> bool {
    tokio::net::UnixStream::connect(socket).await.is_ok()
}

/// Makes sure the daemon of `cfg` answers, starting one if none does. Errors: the state dir or
/// the log cannot be created, the binary cannot be spawned, or the new daemon exited or did not
/// answer within [`START_TIMEOUT`] (the message carries the end of its log).
pub async fn ensure_daemon(cfg: &Config) -> anyhow::Result<()> {
    let socket = cfg.socket_path();
    if answers(&socket).await {
        return Ok(());
    }
    crate::fsutil::create_private_dir(&cfg.state_dir)
        .with_context(|| format!("cannot create state dir {}", cfg.state_dir.display()))?;
    let log = log_path(cfg);
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .with_context(|| format!("cannot open {}", log.display()))?;
    let err = out.try_clone()?;
    let exe = std::env::current_exe().context("cannot find the spacesd binary")?;
    let mut cmd = Command::new(&exe);
    cmd.arg("--state-dir").arg(&cfg.state_dir).arg("serve").stdin(Stdio::null()).stdout(out).stderr(err);
    detach(&mut cmd);
    let mut child = cmd.spawn().with_context(|| format!("cannot start {} serve", exe.display()))?;
    tracing::info!(pid = child.id(), log = %log.display(), "started spacesd serve");
    // One line on stderr (never stdout): the MCP client shows it in its server log.
    eprintln!("spacesd mcp: started spacesd serve (pid {}, log {})", child.id(), log.display());
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if answers(&socket).await {
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            // Another `spacesd mcp` may have started one first: then that one answers.
            if answers(&socket).await {
                return Ok(());
            }
            anyhow::bail!("spacesd serve exited ({status}) before answering on {}; its log {} ends:\n{}", socket.display(), log.display(), tail(&log));
        }
        if Instant::now() > deadline {
            anyhow::bail!(
                "spacesd serve (pid {}) did not answer on {} within {} s; its log {} ends:\n{}",
                child.id(),
                socket.display(),
                START_TIMEOUT.as_secs(),
                log.display(),
                tail(&log)
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The child starts a session of its own: no controlling terminal, and no signal meant for the
/// MCP client's process group (a Ctrl-C in its terminal) reaches it.
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
