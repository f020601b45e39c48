//! What every scripted wire answers with: SSE frames and plain (non-streaming) bodies, beneath
//! the wires (`anthropic`, `openai`, `chat`, `gemini`) and the server that dispatches to them.

use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;

/// One SSE frame: `event: <name>` (optional) and `data: <json>` (a JSON string is sent as its
/// text, unquoted: `data: [DONE]`).
#[derive(Debug, Clone)]
pub struct SseFrame {
    pub event: Option<String>,
    pub data: serde_json::Value,
    /// Pause before sending this frame.
    pub delay: Duration,
}

/// A non-streaming answer with `status` and `body` (JSON error bodies are passed as text).
pub(crate) fn plain(status: u16, body: String) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(axum::http::header::CONTENT_TYPE, axum::http::HeaderValue::from_static("application/json"));
    resp
}
