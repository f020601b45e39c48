//! Serving the router on a listener, within limits, behind the listener's credential check.
//!
//! - **Connections**: at most [`Limits::max_connections`] open at once per listener. At the cap
//!   the listener stops accepting (new connections wait in the kernel's backlog and hold no
//!   descriptor of the daemon), so a flood on TCP never starves the Unix socket, runs or
//!   commands of file descriptors. The default is a quarter of the daemon's `RLIMIT_NOFILE`
//!   (between 16 and 1024).
//! - **Header read and idle**: a connection that has not sent a whole request head within
//!   [`Limits::header_read`] (from its start, or from the end of its previous response) is
//!   closed; this is also the keep-alive idle limit. A response being streamed (long-polls, SSE,
//!   MCP streams) is not idle.
//! - **Body read**: a request body that stalls (no data) for [`Limits::body_stall`] fails; the
//!   operation is refused `INVALID_ARGUMENT` and nothing runs.
//! - **Large bodies**: at most a few read at once across listeners ([`super::bodies`]), after
//!   the credential check.
//! - An accept error (e.g. `EMFILE`) is logged and retried after a pause, never a busy loop.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use spaces_host::config::Config;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::Semaphore;
use tower_http::timeout::TimeoutBody;

use super::auth::{self, Peer};
use super::bodies;
use super::peer::Accepted;
use crate::access::{Access, Principal};

/// The limits of one listener (see the module doc).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub header_read: Duration,
    pub body_stall: Duration,
}

impl Limits {
    /// The operator's limits (`config.json` / environment), the connection cap defaulting to a
    /// quarter of `RLIMIT_NOFILE`.
    pub fn of(cfg: &Config) -> Limits {
        Limits {
            max_connections: cfg.http_max_connections.unwrap_or_else(default_max_connections).max(1),
            header_read: Duration::from_millis(cfg.http_header_timeout_ms.max(1)),
            body_stall: Duration::from_millis(cfg.http_body_timeout_ms.max(1)),
        }
    }
}

/// A quarter of this process's soft `RLIMIT_NOFILE`, within 16..=1024.
pub fn default_max_connections() -> usize {
    let soft = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).map(|(soft, _)| soft).unwrap_or(1024);
    (soft / 4).clamp(16, 1024) as usize
}

/// One accepted connection and who is at its other end.
trait Accept: Send + 'static {
    type Io: AsyncRead + AsyncWrite + Send + Unpin + 'static;
    fn accept(&self) -> impl Future<Output = std::io::Result<(Self::Io, Accepted)>> + Send;
}

impl Accept for TcpListener {
    type Io = tokio::net::TcpStream;
    async fn accept(&self) -> std::io::Result<(Self::Io, Accepted)> {
        let (stream, _) = TcpListener::accept(self).await?;
        Ok((stream, Accepted::Tcp))
    }
}

impl Accept for UnixListener {
    type Io = tokio::net::UnixStream;
    async fn accept(&self) -> std::io::Result<(Self::Io, Accepted)> {
        let (stream, _) = UnixListener::accept(self).await?;
        // A peer whose credentials cannot be read gets no uid: it is refused.
        let cred = stream.peer_cred().ok().map(|c| (c.uid(), c.pid()));
        Ok((stream, Accepted::Unix(cred)))
    }
}

/// The peer of a connection: its uid on the Unix socket (`SO_PEERCRED`). Nothing is guessed
/// from the peer's process: a process of a run reaches the daemon only through its run's own
/// socket ([`serve_run`]).
fn peer_of(accepted: Accepted) -> Peer {
    let uid = match accepted {
        Accepted::Unix(Some((uid, _))) => Some(uid),
        _ => None,
    };
    Peer { uid }
}

/// Serve `app` on loopback TCP: every request needs a bearer token ([`auth::check_tcp`]).
/// Returns only on a fatal error.
pub async fn serve_tcp(listener: TcpListener, app: Router, access: Arc<Access>, limits: Limits) -> std::io::Result<()> {
    let app = app.layer(axum::middleware::from_fn(bodies::limit)).layer(axum::middleware::from_fn_with_state(access, auth::check_tcp));
    serve(listener, app, limits).await
}

/// `app` behind the Unix socket's credential check: the peer's uid or a bearer token decides
/// ([`auth::check_unix`]), then the large-body limit.
pub fn unix_app(app: Router, access: Arc<Access>) -> Router {
    app.layer(axum::middleware::from_fn(bodies::limit)).layer(axum::middleware::from_fn_with_state(access, auth::check_unix))
}

/// Serve `app` on the Unix socket; `app` is [`unix_app`], or a [`super::starting`] router that
/// hands requests to one. Returns only on a fatal error.
pub async fn serve_unix(listener: UnixListener, app: Router, limits: Limits) -> std::io::Result<()> {
    serve(listener, app, limits).await
}

/// Serve `app` on one run's own socket (`spaces_host::supervisor::api`): every request is `principal`
/// (that run, a caller of its Space), whatever it presents ([`auth::as_run`]). Returns only on
/// a fatal error.
pub async fn serve_run(listener: UnixListener, app: Router, principal: Principal, limits: Limits) -> std::io::Result<()> {
    // The run's layers wrap the router once, as one service. `Router::layer` would wrap every
    // route of it: a copy of the whole routing table per run, kept while the run lives (issue
    // 30: about 0.35 MB a run, 370 MB for a thousand idle runs).
    use tower::Layer;
    let limited = axum::middleware::from_fn(bodies::limit).layer(app);
    let app = axum::middleware::from_fn_with_state(principal, auth::as_run).layer(limited);
    serve(listener, Router::new().fallback_service(app), limits).await
}

async fn serve<L: Accept>(listener: L, app: Router, limits: Limits) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        // Never closed: acquiring fails only if it were.
        let slot = slots.clone().acquire_owned().await.map_err(std::io::Error::other)?;
        let (io, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(%e, "cannot accept a connection; trying again shortly");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let app = app.clone();
        tokio::spawn(async move {
            let known = peer_of(peer);
            let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let (app, known) = (app.clone(), known.clone());
                async move {
                    let peer = known;
                    let mut req = req.map(|body| axum::body::Body::new(TimeoutBody::new(limits.body_stall, body)));
                    req.extensions_mut().insert(peer);
                    tower::ServiceExt::oneshot(app, req).await
                }
            });
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read)
                .serve_connection(TokioIo::new(io), service)
                .await;
            if let Err(e) = served {
                tracing::debug!(%e, "connection ended with an error");
            }
            drop(slot);
        });
    }
}
