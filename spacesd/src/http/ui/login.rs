//! Logging a browser in: one-time tickets for the operator, redeemed for a session cookie
//! ([`crate::access::sessions`]).

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use spaces_sdk::{ApiError, ErrorCode};

use super::super::auth::BrowserSession;
use super::super::HttpError;
use crate::access::sessions::{SESSION_TTL, TICKET_TTL};
use crate::access::{Access, Principal};

/// Where tickets are minted.
pub const TICKETS_PATH: &str = "/v1/ui/tickets";

/// The answer of `POST /v1/ui/tickets`.
#[derive(Debug, Serialize, Deserialize)]
pub struct TicketAnswer {
    /// The one-time login link: `http://<tcp addr>/ui/login?ticket=<ticket>`.
    pub url: String,
    /// How long the link stays usable, ms (it works once).
    pub expires_in_ms: u64,
}

fn refuse(code: ErrorCode, message: &str) -> Response {
    HttpError(ApiError::new(code, message)).into_response()
}

/// `POST /v1/ui/tickets`: a login link for the operator (on the Unix socket as the daemon's uid,
/// or with the operator's bearer token); refused `FORBIDDEN` to a tool caller or a browser
/// session (a session does not extend itself), `INVALID_ARGUMENT` when the daemon has no TCP
/// listener to serve the page on.
pub async fn mint(
    State(access): State<Arc<Access>>,
    principal: Option<Extension<Principal>>,
    browser: Option<Extension<BrowserSession>>,
) -> Response {
    match principal {
        Some(Extension(Principal::Operator)) if browser.is_none() => {}
        Some(_) => {
            return refuse(
                ErrorCode::Forbidden,
                "only the operator (the Unix socket as the daemon's uid, or the operator's token) mints login links",
            )
        }
        None => return refuse(ErrorCode::Unauthorized, "no credential was checked for this request"),
    }
    let sessions = access.sessions();
    let Some(addr) = sessions.tcp() else {
        return refuse(
            ErrorCode::InvalidArgument,
            "this daemon has no TCP listener to serve the page on: start it with `spacesd serve --tcp 127.0.0.1:7700`",
        );
    };
    let ticket = sessions.mint_ticket(Instant::now());
    Json(TicketAnswer { url: format!("http://{addr}{}?ticket={ticket}", super::LOGIN_PATH), expires_in_ms: TICKET_TTL.as_millis() as u64 })
        .into_response()
}

/// `GET /ui/login?ticket=...`: uses the ticket up, sets the session cookie (HttpOnly,
/// `SameSite=Strict`, `Path=/`, for [`SESSION_TTL`]) and redirects to `/ui/` (so the ticket
/// leaves the address bar). A ticket that is unknown, used or expired is refused 403
/// `UNAUTHORIZED`.
pub async fn login(State(access): State<Arc<Access>>, RawQuery(query): RawQuery) -> Response {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.as_deref().unwrap_or("")).unwrap_or_default();
    let ticket = pairs.into_iter().find(|(k, _)| k == "ticket").map(|(_, v)| v).unwrap_or_default();
    let sessions = access.sessions();
    let Some(opened) = sessions.redeem(&ticket, Instant::now()) else {
        return refuse(ErrorCode::Unauthorized, "this login link is unknown, already used or expired: run `spacesd ui` for a new one");
    };
    let cookie =
        format!("{}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}", sessions.cookie_name(), opened.cookie, SESSION_TTL.as_secs());
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "/ui/")]).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, v);
    }
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response.headers_mut().insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

/// `POST /ui/logout` (with the CSRF token, like every state-changing request of the page): ends
/// the session and clears the cookie. `{"ok": true}`.
pub async fn logout(State(access): State<Arc<Access>>, browser: Option<Extension<BrowserSession>>) -> Response {
    let Some(Extension(session)) = browser else {
        return refuse(ErrorCode::Unauthorized, "no browser session to end");
    };
    let sessions = access.sessions();
    sessions.end(&session.cookie);
    let mut response = Json(serde_json::json!({"ok": true})).into_response();
    let clear = format!("{}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0", sessions.cookie_name());
    if let Ok(v) = HeaderValue::from_str(&clear) {
        response.headers_mut().insert(header::SET_COOKIE, v);
    }
    response
}
