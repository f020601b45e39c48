//! The daemon's error type and its mapping to the wire [`ApiError`] (`code` + `message`).

use spaces_sdk::{ApiError, ErrorCode};

/// Every failure a daemon operation can return.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A typed refusal for the caller (bad input, unknown id, busy run). Retry only after doing
    /// what the message says.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The state dir failed: its database, its files, the event writer, stored state that does
    /// not parse ([`spaces_store::Error`]). Reported as `INTERNAL`.
    #[error(transparent)]
    Store(#[from] spaces_store::Error),
}

/// `Result` of daemon operations.
pub type Result<T> = std::result::Result<T, Error>;

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Error::Store(e.into())
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Store(e.into())
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::Store(e.into())
    }
}

impl Error {
    /// True when the failure is a full disk or quota where the state lives
    /// ([`spaces_store::Error::is_disk_full`]).
    pub fn is_disk_full(&self) -> bool {
        matches!(self, Error::Store(e) if e.is_disk_full())
    }

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

/// Shorthand for an `INVALID_ARGUMENT` refusal naming the request field `field`.
pub fn invalid_field(field: &str, message: impl Into<String>) -> Error {
    Error::Api(ApiError::new(ErrorCode::InvalidArgument, message).with_field(field))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// A refusal goes out as it is; a failure of the state dir goes out `INTERNAL` with the
    /// store's own message, and a full disk is still told apart.
    #[test]
    fn refusals_go_out_as_they_are_and_store_failures_as_internal() {
        let e = refuse(ErrorCode::RunNotFound, "no run r1");
        assert_eq!((e.to_api().code, e.to_api().message.as_str()), (ErrorCode::RunNotFound, "no run r1"));
        assert!(!e.is_disk_full());
        let e = Error::from(std::io::Error::from_raw_os_error(28));
        assert_eq!(e.to_api().code, ErrorCode::Internal);
        assert!(e.to_api().message.starts_with("state directory error: "), "{}", e.to_api().message);
        assert!(e.is_disk_full(), "ENOSPC");
        let e = Error::Store(spaces_store::Error::DiskFull("commit failed".into()));
        assert!(e.is_disk_full() && e.to_api().message.contains("no space left on device"), "{}", e.to_api().message);
    }
}
