//! The HTTP API of `spacesd` (JSON under `/v1`). Handlers are adapters: parse, call the
//! supervisor, map the error to `{"error": {code, message}}` with the contract's HTTP status
//! (404 for `*_NOT_FOUND`, 409 for conflicts, 403 for `UNAUTHORIZED`, 400 otherwise).
//!
//! Routes:
//! - `GET  /v1/health` -> `{"ok": true, "version": ...}`
//! - `GET  /v1/capabilities` -> `agent_capabilities`
//! - `GET  /v1/spaces`, `POST /v1/spaces {name, root, read_only?}`
//! - `POST /v1/spaces/{space}/agents {agent, prompt, show?, options?}` -> `AgentStartReport`
//! - `GET  /v1/spaces/{space}/agents` -> `[AgentRunStatus]`, newest first
//! - `GET  /v1/spaces/{space}/agents/{run_id}?tail=N` -> `AgentRunStatus`
//! - `GET  /v1/spaces/{space}/agents/{run_id}/events?cursor=&max=&wait_ms=&raw=` -> events page
//! - `POST /v1/spaces/{space}/agents/{run_id}/message {text, force?}` -> `AgentActionReport`
//! - `POST /v1/spaces/{space}/agents/{run_id}/interrupt`, `.../stop` -> `AgentActionReport`
//! - `GET  /v1/tools` -> `{"tools": [...]}`; `POST /v1/tools/{name}` with the tool's arguments
//!   -> its result (CodeSpace tools: `read`, `apply_patch`, `exec_command`, ...; see [`tools`])
//! - `/inbox/...`: the user's side of steering (see [`inbox`])
//! - anything else: `{"error": {code: INVALID_ARGUMENT, ...}}` with 400
//!
//! On the Unix socket (0600) no token is needed. On TCP every request needs
//! `Authorization: Bearer <token>`, and `Host`/`Origin` must name a loopback host.

mod auth;
mod inbox;
mod routes;
mod tools;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use spaces_sdk::error::ErrorEnvelope;
use spaces_sdk::ApiError;

pub use auth::{check as auth_check, TcpAuth};
pub use routes::{router, AppState};

/// An error answer.
pub struct HttpError(pub ApiError);

impl From<crate::error::Error> for HttpError {
    fn from(e: crate::error::Error) -> Self {
        HttpError(e.to_api())
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.code.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
        (status, Json(ErrorEnvelope { error: self.0 })).into_response()
    }
}
