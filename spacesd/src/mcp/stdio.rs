//! `spacesd mcp`: the MCP server on stdin/stdout (newline-delimited JSON-RPC), serving the
//! daemon of the state dir (started in the background if none answers, see
//! [`crate::backend::autostart`], unless `--no-autostart`), optionally scoped to one Space
//! ([`crate::access::scope`]).
//!
//! Stdout carries only JSON-RPC: nothing on this path prints, and logs go through `tracing` to
//! stderr. When stdin closes, calls still waiting are abandoned at once (their processes and
//! runs keep going in the daemon) and the command returns, so the process exits with code 0.

use std::pin::Pin;
use std::task::{Context, Poll};

use rmcp::ServiceExt;
use spaces_host::config::Config;
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::CancellationToken;

use super::SpacesMcp;
use crate::access::scope::Scope;
use crate::backend::Daemon;

/// How `spacesd mcp` serves.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Scope every tool to this Space ([`crate::access::scope`]).
    pub space: Option<String>,
    /// Never start a daemon: serve even when none answers, and refuse calls until one does.
    /// The `spaces` server of an agent run uses it: a daemon started from inside a run would
    /// carry the agent's environment and die with the run.
    pub no_autostart: bool,
}

/// Serve MCP on stdio until stdin closes. Errors: no daemon answers and none could be started,
/// or the MCP handshake failed (a client that closes stdin before `initialize` is no error).
pub async fn run(cfg: Config, options: Options) -> anyhow::Result<()> {
    if options.no_autostart {
        if !crate::backend::autostart::answers(&cfg.socket_path()).await {
            tracing::warn!(socket = %cfg.socket_path().display(), "spacesd mcp: no daemon answers; calls are refused until one does");
        }
    } else {
        crate::backend::autostart::ensure_daemon(&cfg).await?;
    }
    let ended = CancellationToken::new();
    let (stdin, stdout) = rmcp::transport::io::stdio_pipes();
    let stdin = EofSignal { inner: stdin, eof: ended.clone() };
    let mut handler = SpacesMcp::new(Daemon::new(cfg, !options.no_autostart), ended.clone());
    if let Some(space) = options.space {
        handler = handler.scoped(Scope::new(space));
    }
    let running = match handler.serve((stdin, stdout)).await {
        Ok(running) => running,
        // The client went away before initializing (stdin closed): nothing to serve.
        Err(e) if ended.is_cancelled() => {
            tracing::debug!(%e, "spacesd mcp: stdin closed before initialize");
            return Ok(());
        }
        Err(e) => anyhow::bail!("MCP handshake on stdio failed: {e}"),
    };
    let reason = running.waiting().await;
    ended.cancel();
    tracing::debug!(?reason, "spacesd mcp: stdio closed");
    Ok(())
}

/// A reader that cancels `eof` when its input ends, so calls in flight stop waiting as soon as
/// the client closes stdin (rmcp would otherwise give them up to 5 s to answer).
struct EofSignal<R> {
    inner: R,
    eof: CancellationToken,
}

impl<R: AsyncRead + Unpin> AsyncRead for EofSignal<R> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let (before, room) = (buf.filled().len(), buf.remaining() > 0);
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(result) = &polled {
            if result.is_err() || (room && buf.filled().len() == before) {
                self.eof.cancel();
            }
        }
        polled
    }
}
