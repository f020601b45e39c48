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
//! - A session belongs to the credential that opened it ([`Owners`]): the operator, or one
//!   tool caller (one caller token, one run's socket). A request or `DELETE` naming a session
//!   with another credential is refused `FORBIDDEN` (403) before rmcp sees it, and the session
//!   goes on for its owner; a session id this layer does not know is 404, as rmcp answers.
//! - A `GET` with `Last-Event-ID` resumes a stream only from an event its session was sent;
//!   another id (never sent, another session's, malformed, of a stream no longer kept) is a
//!   `400` JSON-RPC error, never an empty `200` stream ([`super::resume`], case M44).
//! - The daemon's shutdown token ends every session and stream.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use spaces_service::Service;
use tokio_util::sync::CancellationToken;

use super::SpacesMcp;
use crate::access::{Principal, Via};

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
    ["localhost", "127.0.0.1", "[::1]"].iter().flat_map(|h| [format!("http://{h}:*"), format!("https://{h}:*")]).collect()
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
        Arc::new(super::resume::Resumable::new(sessions)),
        config,
    );
    Router::new().route_service(PATH, mcp).layer(axum::middleware::from_fn_with_state(Arc::new(Owners::default()), owned_sessions))
}

/// The credential a session belongs to: the operator (any of its credentials: the daemon's uid,
/// its token, a browser session), or one tool caller (a caller token's id, a run's socket).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owner {
    Operator,
    Caller(Via),
}

impl Owner {
    fn of(principal: &Principal) -> Owner {
        match principal {
            Principal::Operator => Owner::Operator,
            Principal::Caller(caller) => Owner::Caller(caller.via.clone()),
        }
    }
}

/// Which credential opened each live session, and when it was last used. An entry idle for
/// twice [`SESSION_IDLE`] is dropped (rmcp has ended that session by then).
#[derive(Debug, Default)]
pub struct Owners {
    sessions: Mutex<HashMap<String, (Owner, Instant)>>,
}

/// What [`Owners::check`] found for a request naming a session.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Own,
    Foreign,
    Unknown,
}

impl Owners {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Owner, Instant)>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn opened(&self, id: String, owner: Owner) {
        let mut sessions = self.lock();
        let now = Instant::now();
        sessions.retain(|_, (_, used)| now.duration_since(*used) < 2 * SESSION_IDLE);
        sessions.insert(id, (owner, now));
    }

    fn check(&self, id: &str, owner: &Owner) -> Seen {
        match self.lock().get_mut(id) {
            Some((own, used)) if own == owner => {
                *used = Instant::now();
                Seen::Own
            }
            Some(_) => Seen::Foreign,
            None => Seen::Unknown,
        }
    }

    fn ended(&self, id: &str) {
        self.lock().remove(id);
    }
}

/// The session rules around rmcp (see the module doc): a session named by a request must be
/// the request's credential's, and a new session is recorded as its. rmcp answers a session's
/// `DELETE` with 202; clients (the Python SDK among them) expect 200 or 204 and log a failure
/// otherwise, so the answer to a `DELETE` becomes 200. A `GET` whose `Last-Event-ID` was refused
/// ([`super::resume`]) is answered with that refusal instead of rmcp's empty stream. Every other
/// answer passes unchanged (202 stays the answer to a POSTed notification, as the protocol says).
async fn owned_sessions(
    axum::extract::State(owners): axum::extract::State<Arc<Owners>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::StatusCode;
    use spaces_sdk::{ApiError, ErrorCode};
    let Some(owner) = req.extensions().get::<Principal>().map(Owner::of) else {
        let e = ApiError::new(ErrorCode::Unauthorized, "no credential: /mcp needs the operator or a tool caller");
        return crate::http::error_response(e, StatusCode::FORBIDDEN);
    };
    let delete = req.method() == axum::http::Method::DELETE;
    let session = req.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    if let Some(id) = &session {
        match owners.check(id, &owner) {
            Seen::Own => {}
            Seen::Foreign => {
                let e = ApiError::new(
                    ErrorCode::Forbidden,
                    "this MCP session was opened with another credential: only that credential may use or end it; \
                     initialize a session of your own",
                );
                return crate::http::error_response(e, StatusCode::FORBIDDEN);
            }
            Seen::Unknown => {
                let e = ApiError::new(ErrorCode::InvalidArgument, "unknown or ended MCP session: initialize a new one");
                return crate::http::error_response(e, StatusCode::NOT_FOUND);
            }
        }
    }
    let (mut res, refused) = super::resume::capture(next.run(req)).await;
    if let Some(refusal) = refused {
        return super::resume::refusal_response(&refusal);
    }
    match &session {
        None => {
            if let Some(id) = res.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()) {
                owners.opened(id.to_owned(), owner);
            }
        }
        Some(id) if delete && res.status().is_success() => owners.ended(id),
        Some(id) if res.status() == StatusCode::NOT_FOUND => owners.ended(id),
        Some(_) => {}
    }
    if delete && res.status() == StatusCode::ACCEPTED {
        *res.status_mut() = StatusCode::OK;
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

    #[test]
    fn a_session_is_its_openers_alone() {
        let owners = Owners::default();
        let a = Owner::Caller(Via::Token("tok-a".into()));
        owners.opened("s1".into(), a.clone());
        assert_eq!(owners.check("s1", &a), Seen::Own);
        assert_eq!(owners.check("s1", &Owner::Caller(Via::Token("tok-b".into()))), Seen::Foreign);
        assert_eq!(owners.check("s1", &Owner::Caller(Via::Tree("run/x".into()))), Seen::Foreign);
        assert_eq!(owners.check("s1", &Owner::Operator), Seen::Foreign);
        assert_eq!(owners.check("s2", &a), Seen::Unknown);
        owners.ended("s1");
        assert_eq!(owners.check("s1", &a), Seen::Unknown);
    }
}
