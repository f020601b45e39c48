//! [`Error`] on the wire: its contract code ([`Error::code`]), the wire error with the ids and
//! field a variant carries ([`Error::to_api`], `From<Error> for ApiError`), and the errors of the
//! crates beneath converted into this crate's once (`From`).

use spaces_sdk::{ApiError, ErrorCode};

use super::Error;
use super::OperationRef;

impl Error {
    /// The wire error code (API reference, "Error codes"): the one mapping.
    pub fn code(&self) -> ErrorCode {
        use Error as E;
        match self {
            E::WorkspaceNotFound { .. } => ErrorCode::WorkspaceNotFound,
            E::ReadOnly { .. } | E::NetworkUnenforced { .. } => ErrorCode::Unauthorized,
            E::WorkspaceBusy { .. } => ErrorCode::WorkspaceBusy,
            E::RootUnavailable { source, .. } => match source.kind() {
                std::io::ErrorKind::NotFound => ErrorCode::FileNotFound,
                std::io::ErrorKind::NotADirectory => ErrorCode::PathNotDirectory,
                _ => ErrorCode::FileOperationFailed,
            },
            E::PathEscape { .. } => ErrorCode::PathEscape,
            E::SymlinkRejected { .. } | E::RootRedirected { .. } => ErrorCode::SymlinkRejected,
            E::RootGone { .. } => ErrorCode::WorkspaceNotFound,
            E::SpecialFileRejected { .. } => ErrorCode::SpecialFileRejected,
            E::FileNotFound { .. } => ErrorCode::FileNotFound,
            E::PathNotDirectory { .. } => ErrorCode::PathNotDirectory,
            E::FileOperationFailed { .. } | E::VerifyMismatch { .. } | E::CommitFailed { .. } => ErrorCode::FileOperationFailed,
            E::Patch(refusal) => refusal.code(),
            E::RollbackFailed { cause, .. } => cause.code(),
            E::OperationKeyConflict { .. } => ErrorCode::OperationKeyConflict,
            E::OperationNotFound { .. } => ErrorCode::OperationNotFound,
            E::InOperation { error, .. } => error.code(),
            E::Replayed(stored) => stored.code,
            E::ApprovalRequired { .. } => ErrorCode::ApprovalRequired,
            E::ApprovalNotFound { .. } => ErrorCode::ApprovalNotFound,
            E::ApprovalQueueFull { .. } | E::ApprovalQueueTooLarge { .. } => ErrorCode::ResourceQueueFull,
            E::ApprovalConflict { .. } => ErrorCode::ApprovalConflict,
            E::ApprovalAmbiguous { .. } => ErrorCode::ApprovalAmbiguous,
            E::EmptyCommand => ErrorCode::InvalidCommand,
            E::SpawnFailed { .. } => ErrorCode::ProcessSpawnFailed,
            E::ProcessNotFound { .. } => ErrorCode::ProcessNotFound,
            E::ProcessNotTty { .. } => ErrorCode::ProcessNotTty,
            E::ProcessNotRunning { .. } | E::StdinClosed { .. } => ErrorCode::ProcessNotRunning,
            E::StdinTimeout { .. } => ErrorCode::Timeout,
            E::WorkNotFound { .. } => ErrorCode::WorkNotFound,
            E::WorkClosed { .. } => ErrorCode::WorkClosed,
            E::IntentNotFound { .. } | E::IntentNotInWork { .. } => ErrorCode::IntentNotFound,
            E::IntentAlreadyClaimed { .. } => ErrorCode::IntentAlreadyClaimed,
            E::IntentNotEditable { .. } => ErrorCode::IntentNotEditable,
            E::IntentRevisionConflict { .. } => ErrorCode::IntentRevisionConflict,
            E::IsDirectory { .. } | E::LineTooLong { .. } | E::IntentNotClaimed { .. } | E::InvalidArgument { .. } => {
                ErrorCode::InvalidArgument
            }
            E::Registry(_)
            | E::OperationFinished { .. }
            | E::ProcessIo { .. }
            | E::StdinFailed { .. }
            | E::NoRuntime(_)
            | E::Db(_)
            | E::Json(_)
            | E::StoredUnreadable { .. }
            | E::TaskFailed(_) => ErrorCode::Internal,
        }
    }

    /// The wire error: [`Error::code`], the message, and the `operation_id`, `approval_id` and
    /// `field` this error carries. A [`Error::Replayed`] answer is returned as it was stored.
    pub fn to_api(&self) -> ApiError {
        match self {
            Error::Replayed(stored) => stored.clone(),
            Error::InOperation { operation_id, error } => ApiError { operation_id: Some(operation_id.clone()), ..error.to_api() },
            other => ApiError {
                code: other.code(),
                message: other.to_string(),
                operation_id: other.operation_id().map(str::to_owned),
                approval_id: other.approval_id().map(str::to_owned),
                field: match other {
                    Error::InvalidArgument { field, .. } => field.clone(),
                    _ => None,
                },
            },
        }
    }

    fn operation_id(&self) -> Option<&str> {
        match self {
            Error::OperationKeyConflict { operation_id, .. } | Error::OperationFinished { operation_id } => Some(operation_id),
            Error::OperationNotFound { by: OperationRef::Id(operation_id) } => Some(operation_id),
            _ => None,
        }
    }

    fn approval_id(&self) -> Option<&str> {
        match self {
            Error::WorkspaceBusy { approval_id, .. } => approval_id.as_deref(),
            Error::ApprovalRequired { approval_id, .. }
            | Error::ApprovalNotFound { approval_id }
            | Error::ApprovalConflict { approval_id, .. }
            | Error::ApprovalAmbiguous { approval_id } => Some(approval_id),
            _ => None,
        }
    }
}

/// A process that did not start ([`spaces_os::process::spawn`]) as this crate's error:
/// `INVALID_COMMAND` or `PROCESS_SPAWN_FAILED`.
impl From<spaces_os::process::Error> for Error {
    fn from(e: spaces_os::process::Error) -> Self {
        match e {
            spaces_os::process::Error::EmptyCommand => Error::EmptyCommand,
            spaces_os::process::Error::SpawnFailed { program, source } => Error::SpawnFailed { program, source },
        }
    }
}

/// The patch engine's refusal as this crate's error (see [`Error::Patch`]).
impl From<spaces_v4a::Error> for Error {
    fn from(e: spaces_v4a::Error) -> Self {
        match e {
            spaces_v4a::Error::FileNotFound { path } => Error::FileNotFound { path, hint: "" },
            refusal @ spaces_v4a::Error::ExpectedTwice { .. } => {
                Error::InvalidArgument { message: refusal.to_string(), field: Some("expected_versions".to_owned()) }
            }
            refusal => Error::Patch(refusal),
        }
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        match e {
            Error::Replayed(stored) => stored,
            other => other.to_api(),
        }
    }
}

impl From<&Error> for ApiError {
    fn from(e: &Error) -> ApiError {
        e.to_api()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn the_wire_error_carries_the_ids_and_field_of_its_variant() {
        let e = Error::OperationKeyConflict { operation_key: "k".into(), operation_id: "op-1".into() }.to_api();
        assert_eq!((e.code, e.operation_id.as_deref(), e.approval_id), (ErrorCode::OperationKeyConflict, Some("op-1"), None));
        let e = ApiError::from(Error::WorkspaceBusy {
            workspace_id: "demo".into(),
            process_id: "proc-1".into(),
            approval_id: Some("appr-1".into()),
        });
        assert_eq!((e.code, e.approval_id.as_deref()), (ErrorCode::WorkspaceBusy, Some("appr-1")));
        let e = ApiError::from(Error::InvalidArgument { field: Some("arguments.cmd".into()), message: "no".into() });
        assert_eq!((e.code, e.field.as_deref(), e.message.as_str()), (ErrorCode::InvalidArgument, Some("arguments.cmd"), "no"));
    }

    #[test]
    fn an_error_inside_an_operation_keeps_its_code_and_names_the_operation() {
        let inner =
            Error::Patch(spaces_v4a::Error::VersionConflict { path: "a".into(), expected: "absent".into(), current: "sha256:00".into() });
        let message = inner.to_string();
        let e = ApiError::from(inner.in_operation("op-7"));
        assert_eq!(e.code, ErrorCode::VersionConflict);
        assert_eq!(e.operation_id.as_deref(), Some("op-7"));
        assert_eq!(e.message, message);
    }

    #[test]
    fn a_replayed_answer_is_the_stored_one() {
        let mut stored = ApiError::new(ErrorCode::InvalidPatch, "line 1");
        stored.operation_id = Some("op-1".into());
        let e = Error::Replayed(stored.clone());
        assert_eq!(e.code(), ErrorCode::InvalidPatch);
        assert_eq!(e.to_string(), "line 1");
        assert_eq!(ApiError::from(e), stored);
    }

    #[test]
    fn messages_show_request_values_bounded() {
        let huge = "a/".repeat(1 << 20);
        let errors = [
            Error::FileNotFound { path: huge.clone(), hint: "" },
            Error::PathEscape { path: huge.clone(), why: "is absolute" },
            Error::FileOperationFailed { path: huge.clone(), action: "open", source: std::io::Error::other("too long") },
            Error::Patch(spaces_v4a::Error::MoveDestinationExists { path: huge.clone(), to: huge.clone() }),
            Error::WorkspaceNotFound { workspace_id: huge.clone() },
            Error::SpawnFailed { program: huge.clone(), source: std::io::Error::other("no") },
            Error::ProcessNotFound { process_id: huge.clone() },
            Error::OperationNotFound { by: OperationRef::Key(huge.clone()) },
            Error::Patch(spaces_v4a::Error::ContextNotFound { path: huge.clone(), hunk: 1, first_line: huge.clone(), near: vec![] }),
        ];
        for e in errors {
            let message = e.to_api().message;
            assert!(message.len() < 1000, "{}", &message[..1000]);
            assert!(message.contains(&format!("({} bytes)", huge.len())), "{message}");
        }
    }

    #[test]
    fn a_root_that_cannot_be_opened_answers_by_its_cause() {
        let root = PathBuf::from("/nope");
        let code = |kind| Error::RootUnavailable { root: root.clone(), source: std::io::Error::from(kind) }.code();
        assert_eq!(code(std::io::ErrorKind::NotFound), ErrorCode::FileNotFound);
        assert_eq!(code(std::io::ErrorKind::NotADirectory), ErrorCode::PathNotDirectory);
        assert_eq!(code(std::io::ErrorKind::PermissionDenied), ErrorCode::FileOperationFailed);
    }
}
