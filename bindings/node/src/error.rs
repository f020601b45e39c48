//! Every error of the binding, mapped once: a rejected Promise's `Error` has as its message the
//! JSON of the typed error (`{code, message, field?, operation_id?, approval_id?}`), which
//! `index.js` (`fromNative`) turns into a `SpacesError` with `.code` (the wire code,
//! `RUN_NOT_FOUND`, ...), `.field`, `.operationId` and `.approvalId`. (napi's async functions
//! only reject with its own `Status`, so the code travels in the message.)
//!
//! Codes beyond the contract's are sdk-core's `client_codes`, the same as Python's:
//! `DAEMON_UNREACHABLE` (no daemon answers), `DAEMON_START_FAILED` (one could not be started),
//! `PROTOCOL` (an answer that was not understood), `CONNECTION_LOST` (no answer came).

use spaces_sdk::client::{client_codes, ClientError};
use spaces_sdk::local::StartError;
use spaces_sdk::{ApiError, ErrorCode};

/// A napi error carrying the typed error as JSON.
pub type NodeError = napi::Error;
pub type Result<T> = std::result::Result<T, NodeError>;

/// The JS error for a typed API error.
pub fn api(e: ApiError) -> NodeError {
    let body = serde_json::to_string(&e).unwrap_or_else(|_| e.message.clone());
    napi::Error::from_reason(body)
}

/// An error with `code` (not necessarily one of the contract's) and `message`.
pub fn other(code: &str, message: String) -> NodeError {
    let body = serde_json::json!({ "code": code, "message": message }).to_string();
    napi::Error::from_reason(body)
}

/// `INVALID_ARGUMENT` with `message`.
pub fn invalid(message: String) -> NodeError {
    api(ApiError::new(ErrorCode::InvalidArgument, message))
}

/// A failed client call.
pub fn client(e: ClientError) -> NodeError {
    match e {
        ClientError::Api(e) => api(e),
        e => other(&e.code(), e.to_string()),
    }
}

/// The daemon could not be started.
pub fn start(e: StartError) -> NodeError {
    other(client_codes::DAEMON_START_FAILED, e.to_string())
}
