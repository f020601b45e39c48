//! Starting the daemon of a state dir for `spacesd mcp`, so an MCP client's config needs
//! nothing else set up: when nothing answers on `<state dir>/spacesd.sock`, this very binary's
//! `serve` is spawned detached by [`spaces_sdk::local::ensure_daemon`] (its own session, stdio
//! to `<state dir>/spacesd.log`, never the MCP client's pipes) and waited for.

use anyhow::Context;

use spaces_host::config::Config;

pub use spaces_sdk::local::{answers, START_TIMEOUT};

/// The daemon's log when `spacesd mcp` started it: `<state dir>/spacesd.log`.
pub fn log_path(cfg: &Config) -> std::path::PathBuf {
    spaces_sdk::local::log_path(&cfg.state_dir)
}

/// Makes sure the daemon of `cfg` answers, starting one if none does. Errors: the binary
/// cannot be found or spawned, or the new daemon exited or did not answer within
/// [`START_TIMEOUT`] (the message carries the end of its log).
pub async fn ensure_daemon(cfg: &Config) -> anyhow::Result<()> {
    spaces_store::fsutil::create_private_dir(&cfg.state_dir)
        .with_context(|| format!("cannot create state dir {}", cfg.state_dir.display()))?;
    let exe = std::env::current_exe().context("cannot find the spacesd binary")?;
    let command = [exe.into_os_string(), "--state-dir".into(), cfg.state_dir.clone().into_os_string(), "serve".into()];
    if let Some(pid) = spaces_sdk::local::ensure_daemon(&cfg.state_dir, &command).await? {
        tracing::info!(pid, log = %log_path(cfg).display(), "started spacesd serve");
        // One line on stderr (never stdout): the MCP client shows it in its server log.
        eprintln!("spacesd mcp: started spacesd serve (pid {pid}, log {})", log_path(cfg).display());
    }
    Ok(())
}
