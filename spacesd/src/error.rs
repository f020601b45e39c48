//! The daemon's error type and its mapping to the wire [`ApiError`] (`code` + `message`).

use spaces_sdk::{ApiError, ErrorCode};

/// Every failure a daemon operation can return.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A typed refusal for the caller (bad input, unknown id, busy run). Retry only after doing
    /// what the message says.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The SQLite store failed (disk full, corruption). Reported as `INTERNAL`.
    #[error("state database error: {0}")]
    Db(#[from] rusqlite::Error),
    /// A file operation in the state dir failed. Reported as `INTERNAL`.
    #[error("state directory error: {0}")]
    Io(#[from] std::io::Error),
    /// The event writer's transaction failed (its `BEGIN` or `COMMIT`: disk full, I/O error), or
    /// the writer thread has stopped. Reported as `INTERNAL`; a retry helps only once the disk
    /// has room again.
    #[error("state database write failed: {0}")]
    Writer(String),
    /// JSON (de)serialization of stored state failed. Reported as `INTERNAL`.
    #[error("stored state is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// Stored state does not have the shape this daemon wrote (a chunk of events whose line
    /// count disagrees with its seq range). Reported as `INTERNAL`.
    #[error("stored state is damaged: {0}")]
    Damaged(String),
}

/// `Result` of daemon operations.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The wire error: typed refusals as they are, everything else `INTERNAL` with its message.
    pub fn to_api(&self) -> ApiError {
        match self {
            Error::Api(e) => e.clone(),
            other => ApiError::new(ErrorCode::Internal, other.to_string()),
        }
    }
}

/// Shorthand for a typed refusal.
pub fn refuse(code: ErrorCode, message: impl Into<String>) -> Error {
    Error::Api(ApiError::new(code, message))
}
