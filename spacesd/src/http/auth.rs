//! Each listener's credential check: the request's [`Principal`] (see [`crate::access`]) goes
//! into its extensions, or the request is refused `UNAUTHORIZED` here.
//!
//! - TCP ([`check_tcp`]): `Host`/`Origin` must name a loopback host (DNS rebinding, cross-site
//!   requests), and `Authorization: Bearer` must carry the operator's token or a caller's; a
//!   client process that a run or command holds (found by its socket, [`Peer::held`]) is a
//!   caller of that Space whatever token it read, as on the Unix socket.
//! - Unix socket ([`check_unix`]): a peer that a run or a command of this daemon holds (its pid,
//!   `SO_PEERCRED`, has one of the daemon's shims up its parent chain: [`Peer::held`]) is a
//!   caller of that run's Space ([`Access::by_tree`]) whatever it presents; otherwise a bearer
//!   token, when given, decides as on TCP (a process may present a caller's token to act with
//!   less), and without one the peer's uid must be the daemon's or root's.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use spaces_sdk::{ApiError, ErrorCode};

use spaces_codespace::process::held::Holder;

use super::HttpError;
use crate::access::{Access, Principal, TreeVerdict};

/// A connection's peer, set by the listener ([`super::listen`]) on every request of the
/// connection.
#[derive(Debug, Clone)]
pub struct Peer {
    /// Unix socket: the peer's uid (`SO_PEERCRED`).
    pub uid: Option<u32>,
    /// Which run's or command's tree holds the peer process, if one does
    /// (`spaces_codespace::process::held::holder_of`); [`Holder::Unknown`] when its pid could
    /// not be read (it is refused).
    pub held: Holder,
}

fn loopback_host(value: &str) -> bool {
    let host = value.trim();
    let host = host.strip_prefix("http://").or_else(|| host.strip_prefix("https://")).unwrap_or(host);
    let host = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.split(':').next().unwrap_or("")
    };
    matches!(host, "localhost" | "127.0.0.1" | "::1")
}

fn refuse(message: &str) -> Response {
    HttpError(ApiError::new(ErrorCode::Unauthorized, message)).into_response()
}

/// The bearer token of `headers`: `None` without an `Authorization` header, `Some(None)` for one
/// that is not `Bearer <token>`.
fn bearer(headers: &HeaderMap) -> Option<Option<&str>> {
    let value = headers.get(header::AUTHORIZATION)?;
    Some(value.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")).map(str::trim))
}

const BAD_TOKEN: &str = "missing or wrong bearer token: use the operator's token (the daemon's token file) or a caller's token from `spacesd token create`";

/// TCP: refuse a non-loopback `Host`/`Origin` or a missing or unknown bearer token (403
/// `UNAUTHORIZED`); otherwise run the request as the token's principal.
pub async fn check_tcp(State(access): State<Arc<Access>>, mut req: Request, next: Next) -> Response {
    let headers = req.headers();
    let host_ok = headers.get(header::HOST).and_then(|v| v.to_str().ok()).map(loopback_host).unwrap_or(false);
    let origin_ok = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()).map(loopback_host).unwrap_or(true);
    if !host_ok || !origin_ok {
        return refuse("Host/Origin must be a loopback address");
    }
    let Some(token) = bearer(headers).flatten() else { return refuse(BAD_TOKEN) };
    let Some(principal) = access.by_token(token) else { return refuse(BAD_TOKEN) };
    let principal = match req.extensions().get::<Peer>().map(|p| &p.held) {
        Some(Holder::Tree(tag)) => match access.by_tree(tag, Some(token)) {
            TreeVerdict::Is(principal) => principal,
            TreeVerdict::Refused(why) => return HttpError(ApiError::new(ErrorCode::Forbidden, why)).into_response(),
        },
        Some(Holder::Nobody) => principal,
        _ => return refuse("the peer of this connection is unknown"),
    };
    req.extensions_mut().insert(principal);
    next.run(req).await
}

/// Unix socket: a process of a run or command is that Space's caller (a token may only narrow
/// it, 403 `FORBIDDEN` otherwise); anyone else: a bearer token decides when given (refused if
/// unknown); without one, the peer uid must be the daemon's or root's (403 `UNAUTHORIZED`
/// otherwise).
pub async fn check_unix(State(access): State<Arc<Access>>, mut req: Request, next: Next) -> Response {
    let peer = req.extensions().get::<Peer>().cloned();
    if peer.as_ref().is_some_and(|p| p.held == Holder::Unknown) {
        return refuse("the peer of this connection is unknown");
    }
    if let Some(Holder::Tree(tag)) = peer.as_ref().map(|p| &p.held) {
        let token = match bearer(req.headers()) {
            None => None,
            Some(Some(t)) => Some(t),
            Some(None) => return refuse(BAD_TOKEN),
        };
        match access.by_tree(tag, token) {
            TreeVerdict::Is(principal) => {
                req.extensions_mut().insert(principal);
                return next.run(req).await;
            }
            TreeVerdict::Refused(why) => return HttpError(ApiError::new(ErrorCode::Forbidden, why)).into_response(),
        }
    }
    let principal: Principal = match bearer(req.headers()) {
        Some(token) => match token.and_then(|t| access.by_token(t)) {
            Some(p) => p,
            None => return refuse(BAD_TOKEN),
        },
        None => match peer.and_then(|p| p.uid) {
            Some(uid) => match access.by_peer_uid(uid) {
                Some(p) => p,
                None => {
                    return refuse(&format!(
                        "uid {uid} is not this daemon's (uid {}): present a caller's token (`spacesd token create`) as a bearer token",
                        access.daemon_uid()
                    ))
                }
            },
            None => return refuse("the peer of this connection is unknown"),
        },
    };
    req.extensions_mut().insert(principal);
    next.run(req).await
}
