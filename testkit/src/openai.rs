//! PLACEHOLDER being written by a helper.

use axum::http::Method;
use axum::response::Response;

use crate::script::Reply;
use crate::server::SseFrame;

/// True when this request is a model call that consumes a script reply.
pub fn is_model_call(_path: &str, _body: Option<&serde_json::Value>) -> bool {
    unimplemented!()
}

/// The SSE frames that stream `reply` (never called with `HttpError` or `Hang`).
pub fn frames(_reply: &Reply, _request: Option<&serde_json::Value>) -> Vec<SseFrame> {
    unimplemented!()
}

/// Answer a request that is not a model call (preconnect `HEAD /`, model lists, ...).
pub fn side_request(_method: &Method, _path: &str, _body: Option<&serde_json::Value>) -> Response {
    unimplemented!()
}
