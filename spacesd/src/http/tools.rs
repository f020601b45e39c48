//! CodeSpace tools over HTTP: `GET /v1/tools` lists them, `POST /v1/tools/{name}` runs one with
//! its arguments as the JSON body (the same names and fields as the MCP tools).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::Json;
use serde_json::Value;
use spaces_codespace::service::{CodeSpace, TOOLS};
use spaces_sdk::{ApiError, ErrorCode};

use super::HttpError;

/// `GET /v1/tools` -> `{"tools": [names]}`.
pub async fn list() -> Json<Value> {
    Json(serde_json::json!({ "tools": TOOLS }))
}

/// Largest request body of a tool call, bytes (a patch of a large file fits).
pub const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// `POST /v1/tools/{name}` with the arguments object (an empty body means `{}`; at most
/// [`MAX_BODY_BYTES`]) -> the tool's result, or the error envelope.
pub async fn call(
    State(cs): State<CodeSpace>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, HttpError> {
    let body = body.map_err(|e| {
        HttpError(ApiError::new(
            ErrorCode::InvalidArgument,
            format!("cannot read the request body ({}); tool arguments are limited to {MAX_BODY_BYTES} bytes", e.body_text()),
        ))
    })?;
    let args: Value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Object(Default::default())
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            HttpError(ApiError::new(ErrorCode::InvalidArgument, format!("the body must be a JSON object of arguments: {e}")))
        })?
    };
    if !args.is_object() {
        return Err(HttpError(ApiError::new(ErrorCode::InvalidArgument, "the body must be a JSON object of arguments")));
    }
    Ok(Json(cs.call(&name, args).await.map_err(HttpError)?))
}
