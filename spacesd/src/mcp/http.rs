//! Streamable HTTP at `/mcp`: rmcp's `StreamableHttpService` over the in-process
//! [`Service`], one per listener of the daemon, nested in its axum router.
//!
//! - Sessions (`Mcp-Session-Id`, protocol revisions up to 2025-11-25) live in memory and end
//!   after [`SESSION_IDLE`] without a request, with `DELETE /mcp`, or with the daemon; a request
//!   naming an unknown or ended session gets 404, so the client initializes again. Requests that
//!   negotiate the sessionless 2026-07-28 revision are served without a session.
//! - `Host` must name this listener ([`allowed_hosts`]; rmcp answers 403 otherwise: DNS
//!   rebinding) and an `Origin`, when present, a loopback origin. On TCP the daemon's bearer
//!   token and loopback checks ([`crate::http::auth`]) apply before either, and every tool call
//!   runs as the request's principal ([`crate::access`]).
//! - The daemon's shutdown token ends every session and stream.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::SpacesMcp;
use crate::service::Service;

/// The path of the MCP endpoint.
pub const PATH: &str = "/mcp";

/// A session with no request for this long ends (its next request gets 404).
pub const SESSION_IDLE: Duration = Duration::from_secs(30 * 60);

/// Which listener a `/mcp` route serves: it decides which `Host` values are accepted.
#[derive(Debug, Clone, Copy)]
pub enum Listener {
    /// The Unix socket: clients name a loopback host (`localhost`, as `spaces_sdk`'s client does).
    Unix,
    /// Loopback TCP at this bound address: `Host` must carry its port.
    Tcp(SocketAddr),
}

/// The `Host` values `/mcp` accepts on `listener`.
pub fn allowed_hosts(listener: Listener) -> Vec<String> {
    match listener {
        Listener::Unix => vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
        Listener::Tcp(addr) => {
            let port = addr.port();
            let ip = match addr {
                SocketAddr::V4(a) => a.ip().to_string(),
                SocketAddr::V6(a) => format!("[{}]", a.ip()),
            };
            vec![format!("localhost:{port}"), format!("{ip}:{port}")]
        }
    }
}

/// The `Origin` values `/mcp` accepts (a request without `Origin` is not a browser's and passes).
pub fn allowed_origins() -> Vec<String> {
    ["localhost", "127.0.0.1", "[::1]"]
        .iter()
        .flat_map(|h| [format!("http://{h}:*"), format!("https://{h}:*")])
        .collect()
}

/// The `/mcp` route for `listener`, serving `service`, ended by `shutdown`.
pub fn router(service: Service, listener: Listener, shutdown: CancellationToken) -> Router {
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts(listener))
        .with_allowed_origins(allowed_origins())
        .with_cancellation_token(shutdown.clone())
        .with_max_request_body_bytes(crate::http::MAX_BODY_BYTES);
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(SESSION_IDLE);
    let mcp = StreamableHttpService::new(
        move || Ok(SpacesMcp::new(service.clone(), shutdown.clone())),
        Arc::new(sessions),
        config,
    );
    Router::new().route_service(PATH, mcp).layer(axum::middleware::from_fn(session_end_is_ok))
}

/// rmcp answers a session's `DELETE` with 202; clients (the Python SDK among them) expect 200 or
/// 204 and log a failure otherwise, so the answer to a `DELETE` becomes 200. Every other answer
/// passes unchanged (202 stays the answer to a POSTed notification, as the protocol says).
async fn session_end_is_ok(req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    let delete = req.method() == axum::http::Method::DELETE;
    let mut res = next.run(req).await;
    if delete && res.status() == axum::http::StatusCode::ACCEPTED {
        *res.status_mut() = axum::http::StatusCode::OK;
    }
    res
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn hosts_come_from_the_bind_address() {
        let v4: SocketAddr = "127.0.0.1:7700".parse().unwrap();
        assert_eq!(allowed_hosts(Listener::Tcp(v4)), ["localhost:7700", "127.0.0.1:7700"]);
        let v6: SocketAddr = "[::1]:7701".parse().unwrap();
        assert_eq!(allowed_hosts(Listener::Tcp(v6)), ["localhost:7701", "[::1]:7701"]);
        assert!(allowed_hosts(Listener::Unix).contains(&"localhost".to_owned()));
    }
}
