//! The HTTP API of `spacesd` (JSON under `/v1`): an adapter over the operation table
//! ([`spaces_service`]). Every operation has one route (`ops`); errors go out in the envelope
//! `{"error": {code, message, ...}}` with the status [`status_of`] gives.
//!
//! Routes: one per operation of the table (see docs/api.md, generated from it), plus
//! - `GET /v1/health` -> `{"ok": true, "version": ..., "ready": true}`; `"ready": false` while
//!   the daemon opens its state and recovers runs ([`starting`]), when other requests wait
//! - `GET /v1/openapi.json` -> the OpenAPI 3.1 document of these routes
//! - `GET /v1/tools` -> `{"tools": [names]}` (the CodeSpace tools)
//! - `agent_events`' route with `Accept: text/event-stream`: the run's events as server-sent
//!   events, resumable with `Last-Event-ID` (`sse`).
//! - `POST /v1/ui/tickets` and, on TCP, the web page of runs under `/ui/` ([`ui`]).
//! - anything else: 404 (unknown route) or 405 (wrong method, with `Allow`), in the envelope.
//!
//! Who may call what is decided per request ([`auth`], [`crate::access`]): on the Unix socket
//! (0600) the peer's uid or a bearer token, on TCP a bearer token and a loopback
//! `Host`/`Origin`. The listeners and their limits: [`listen`]. Error messages never repeat
//! request values (a body, a query value, a token): only field names and what was expected;
//! a path, a name or an id an operation refuses is shown cut to 200 characters
//! ([`spaces_sdk::bounded`]), and every error body to [`spaces_sdk::error::MAX_MESSAGE_BYTES`].

mod args;
pub mod auth;
pub mod bodies;
pub mod listen;
mod ops;
mod peer;
mod routes;
mod sse;
pub mod starting;
mod tools;
pub mod ui;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use spaces_sdk::error::ErrorEnvelope;
use spaces_sdk::{ApiError, ErrorCode};

pub use args::MAX_BODY_BYTES;
pub use listen::{serve_run, serve_tcp, serve_unix, unix_app, Limits};
pub use routes::{router, AppState};

/// An error answer: the envelope, with the status of its code.
pub struct HttpError(pub ApiError);

/// The envelope of `e` with an explicit `status` (404/405 for routes, 413 for a large body),
/// its message cut to [`spaces_sdk::error::MAX_MESSAGE_BYTES`] ([`ApiError::capped`]): the one
/// door every HTTP error body goes out through.
pub fn error_response(e: ApiError, status: StatusCode) -> Response {
    (status, Json(ErrorEnvelope { error: e.capped() })).into_response()
}

/// The HTTP status of an error code (API reference, "Error codes"): 404 for `*_NOT_FOUND`, 409
/// for conflicts and busy states, 403 for `UNAUTHORIZED` and `FORBIDDEN`, 429 for `RESOURCE_QUEUE_FULL`, 500 for
/// `INTERNAL`, 400 otherwise.
pub fn status_of(code: ErrorCode) -> StatusCode {
    use ErrorCode::*;
    match code {
        Unauthorized | Forbidden => StatusCode::FORBIDDEN,
        WorkspaceNotFound | FileNotFound | OperationNotFound | ProcessNotFound | WorkNotFound | IntentNotFound | ApprovalNotFound
        | RunNotFound => StatusCode::NOT_FOUND,
        WorkspaceBusy
        | WorkspaceExists
        | AddFileExists
        | MoveDestinationExists
        | VersionConflict
        | OperationKeyConflict
        | IntentAlreadyClaimed
        | IntentNotEditable
        | IntentRevisionConflict
        | ApprovalConflict
        | ApprovalAmbiguous
        | AgentBusy
        | LeaseHeld
        | BudgetReached
        | WorkClosed
        | ProcessNotRunning => StatusCode::CONFLICT,
        ResourceQueueFull => StatusCode::TOO_MANY_REQUESTS,
        Internal => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::BAD_REQUEST,
    }
}

impl From<spaces_host::error::Error> for HttpError {
    fn from(e: spaces_host::error::Error) -> Self {
        HttpError(e.to_api())
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let code = self.0.code;
        error_response(self.0, status_of(code))
    }
}
