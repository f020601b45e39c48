//! The web page of runs: static HTML, CSS and JavaScript modules (no build step) embedded in the
//! binary and served on the TCP listener under `/ui/`, plus its login.
//!
//! - `POST /v1/ui/tickets` (both listeners; the operator only, never a browser session): a
//!   one-time login ticket and its link `http://<tcp addr>/ui/login?ticket=...` ([`login`]);
//!   `spacesd ui` prints it.
//! - `GET /ui/login?ticket=...`: redeems the ticket, sets the HttpOnly, `SameSite=Strict`
//!   session cookie and redirects to `/ui/`. `POST /ui/logout` ends the session.
//! - `GET /ui/` (the Spaces and their runs, live) and `GET /ui/spaces/{space}/runs/{run_id}` (one
//!   run: its transcript streamed over SSE, follow-ups, interrupt, stop): the same page, with the
//!   session's CSRF token in `<meta name="csrf-token">`; its scripts route on the path.
//! - `GET /ui/assets/{file}`: the page's CSS and JavaScript modules.
//! - `GET /favicon.ico`: the page's icon, the one path here that takes no credential (browsers
//!   ask for it on their own, without the cookie's path or any token; it says nothing).
//!
//! The page calls the ordinary `/v1` routes with the session cookie; the cookie, CSRF and
//! `Host`/`Origin` checks are [`super::auth`]'s. Every answer of the page forbids framing and
//! scripts from elsewhere (`Content-Security-Policy`).

pub mod login;

use std::sync::Arc;

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use spaces_sdk::{ApiError, ErrorCode};

use super::auth::BrowserSession;
pub use super::auth::{FAVICON_PATH, LOGIN_PATH};
use super::{error_response, HttpError};
use crate::access::Access;

/// The page's own files: name, content type, text.
const ASSETS: &[(&str, &str, &str)] = &[
    ("style.css", "text/css; charset=utf-8", include_str!("assets/style.css")),
    ("app.js", "text/javascript; charset=utf-8", include_str!("assets/app.js")),
    ("api.js", "text/javascript; charset=utf-8", include_str!("assets/api.js")),
    ("render.js", "text/javascript; charset=utf-8", include_str!("assets/render.js")),
    ("runs.js", "text/javascript; charset=utf-8", include_str!("assets/runs.js")),
    ("run.js", "text/javascript; charset=utf-8", include_str!("assets/run.js")),
    ("markdown.js", "text/javascript; charset=utf-8", include_str!("assets/markdown.js")),
];

/// The icon: an ICO holding 16 and 32 pixel PNGs (a `>_` prompt on the page's blue).
const FAVICON: &[u8] = include_bytes!("assets/favicon.ico");

const INDEX: &str = include_str!("assets/index.html");

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; \
                   base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The ticket route, on both listeners.
pub fn tickets(access: Arc<Access>) -> Router {
    Router::new().route(login::TICKETS_PATH, post(login::mint)).with_state(access)
}

/// The page, its files and its login, for the TCP listener.
pub fn pages(access: Arc<Access>) -> Router {
    Router::new()
        .route(LOGIN_PATH, get(login::login))
        .route("/ui/logout", post(login::logout))
        .route("/ui", get(|| async { Redirect::to("/ui/") }))
        .route("/ui/", get(index))
        .route("/ui/spaces/{space}/runs/{run_id}", get(index))
        .route("/ui/assets/{file}", get(asset))
        .route(FAVICON_PATH, get(favicon))
        .with_state(access)
}

/// Headers every answer of the page carries.
fn guarded(mut response: Response, content_type: &'static str) -> Response {
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The page, with the session's CSRF token; refused without a browser session (a bearer token
/// alone has no CSRF token to give the page).
async fn index(session: Option<Extension<BrowserSession>>) -> Response {
    let Some(Extension(session)) = session else {
        return HttpError(ApiError::new(
            ErrorCode::Unauthorized,
            "the page needs a browser session: open the one-time link `spacesd ui` prints",
        ))
        .into_response();
    };
    // The token is hex: nothing in it needs escaping in an attribute.
    let page = INDEX.replace("{{CSRF_TOKEN}}", &session.csrf);
    guarded(page.into_response(), "text/html; charset=utf-8")
}

async fn favicon() -> Response {
    let mut response = guarded(FAVICON.into_response(), "image/x-icon");
    // The icon is the same for everyone and every version of the page.
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=86400"));
    response
}

async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, kind, text)) => guarded(text.into_response(), kind),
        None => error_response(ApiError::new(ErrorCode::InvalidArgument, "no such file of the page"), StatusCode::NOT_FOUND),
    }
}
