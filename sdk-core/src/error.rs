//! Error codes shared by every transport (API reference, "Error codes").

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The closed set of error codes. Serialized SCREAMING_SNAKE_CASE, e.g. `RUN_NOT_FOUND`.
///
/// The contract's `OUTPUT_LIMIT` is not in this set: every output here is windowed with a
/// cursor (`read` offsets, `find` pages, `read_process` and `agent_events` cursors), so no call
/// fails because of output size. `RESOURCE_QUEUE_FULL`: a run already holds its limit of
/// queued follow-ups. `AGENT_BUSY`: a follow-up while a stop is ending the run. `TIMEOUT`:
/// `write_stdin` to a process that stopped reading.
///
/// `UNAUTHORIZED`: no credential, or a wrong one (also a mutation of a read-only Space).
/// `WORKSPACE_EXISTS`: `space_add` of a name already registered differently (a conflict, HTTP
/// 409; add again with `replace` to change it). Like `FORBIDDEN`, an addition to the contract's list.
/// `FORBIDDEN`: the credential is known but lacks the right (a tool caller's token asking for
/// an operator's operation, another Space, or a change with watch scope).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    Unauthorized,
    Forbidden,
    WorkspaceNotFound,
    WorkspaceBusy,
    WorkspaceExists,
    ResourceQueueFull,
    InvalidPatch,
    InvalidCommand,
    InvalidArgument,
    PathEscape,
    SymlinkRejected,
    SpecialFileRejected,
    FileNotFound,
    PathNotDirectory,
    FileOperationFailed,
    AddFileExists,
    MoveDestinationExists,
    VersionConflict,
    OperationKeyConflict,
    OperationNotFound,
    ProcessSpawnFailed,
    ProcessNotFound,
    ProcessNotTty,
    ProcessNotRunning,
    Timeout,
    WorkNotFound,
    WorkClosed,
    IntentNotFound,
    IntentAlreadyClaimed,
    IntentNotEditable,
    IntentRevisionConflict,
    ApprovalRequired,
    ApprovalNotFound,
    ApprovalConflict,
    ApprovalAmbiguous,
    RunNotFound,
    HarnessUnavailable,
    AgentBusy,
    LeaseHeld,
    BudgetReached,
    Internal,
}

impl ErrorCode {
    /// The wire spelling, e.g. `"RUN_NOT_FOUND"`.
    pub fn as_str(self) -> String {
        serde_json::to_value(self).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_else(|| "INTERNAL".to_owned())
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.as_str())
    }
}

/// The error body every transport returns: `{code, message, operation_id?, approval_id?}`.
/// `message` says what happened and what to do next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// For `INVALID_ARGUMENT`: the path of the offending request field (`options.base_url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl ApiError {
    /// An error with `code` and a message that tells the caller what to do.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), operation_id: None, approval_id: None, field: None }
    }

    /// This error naming the request field it is about (`field`).
    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }
}

/// The most characters of a request value an error message repeats ([`bounded`]).
pub const MAX_SHOWN_CHARS: usize = 200;

/// The longest message (and `field`) an error body carries, in bytes: a last guard behind
/// [`bounded`], for a message that repeats several values or a long list ([`ApiError::capped`]).
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// A value of a request (a path, a name, a command, a patch line) as an error message shows it:
/// at most [`MAX_SHOWN_CHARS`] characters; a longer value is cut, ends in `…` and is followed by
/// its length in bytes, so a 63 MiB `path` comes back as 200 characters, not 63 MiB. `{}` shows
/// it bare (`a/b.txt`), `{:?}` quoted and escaped (`"a/b.txt"`).
pub fn bounded(value: &str) -> Bounded<'_> {
    Bounded(value)
}

/// See [`bounded`].
#[derive(Clone, Copy)]
pub struct Bounded<'a>(&'a str);

impl Bounded<'_> {
    /// The shown part and whether it was cut.
    fn head(&self) -> (&str, bool) {
        match self.0.char_indices().nth(MAX_SHOWN_CHARS) {
            Some((end, _)) => (&self.0[..end], true),
            None => (self.0, false),
        }
    }
}

impl std::fmt::Display for Bounded<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.head() {
            (all, false) => f.write_str(all),
            (head, true) => write!(f, "{head}… ({} bytes)", self.0.len()),
        }
    }
}

impl std::fmt::Debug for Bounded<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.head() {
            (all, false) => write!(f, "{all:?}"),
            (head, true) => write!(f, "\"{}…\" ({} bytes)", head.escape_debug(), self.0.len()),
        }
    }
}

/// `text` cut to at most `max` bytes (at a character boundary) with `… (N bytes)` after it.
fn cap(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let len = text.len();
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!("… ({len} bytes)"));
}

impl ApiError {
    /// This error with its message and `field` cut to [`MAX_MESSAGE_BYTES`]: what every front
    /// door sends, so no error body grows with a request whatever a message repeats.
    pub fn capped(mut self) -> Self {
        cap(&mut self.message, MAX_MESSAGE_BYTES);
        if let Some(field) = &mut self.field {
            cap(field, MAX_SHOWN_CHARS);
        }
        for id in [&mut self.operation_id, &mut self.approval_id].into_iter().flatten() {
            cap(id, MAX_SHOWN_CHARS);
        }
        self
    }
}

/// The HTTP error envelope: `{"error": {code, message, ...}}`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorEnvelope {
    pub error: ApiError,
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod bounded_tests {
    use super::*;

    #[test]
    fn short_values_are_shown_whole_and_long_ones_cut_with_their_length() {
        assert_eq!(format!("{}", bounded("a/b.txt")), "a/b.txt");
        assert_eq!(format!("{:?}", bounded("a\"b")), "\"a\\\"b\"");
        let long = "é".repeat(10_000);
        let shown = format!("{}", bounded(&long));
        assert_eq!(shown, format!("{}… (20000 bytes)", "é".repeat(MAX_SHOWN_CHARS)));
        let quoted = format!("{:?}", bounded(&long));
        assert!(quoted.starts_with("\"éé") && quoted.ends_with("…\" (20000 bytes)"), "{quoted}");
        assert_eq!(format!("{}", bounded(&"x".repeat(MAX_SHOWN_CHARS))), "x".repeat(MAX_SHOWN_CHARS));
    }

    #[test]
    fn a_capped_error_is_short_whatever_it_carried() {
        let mut e = ApiError::new(ErrorCode::InvalidArgument, "ä".repeat(1 << 20));
        e.field = Some("f".repeat(1 << 20));
        let e = e.capped();
        assert!(e.message.len() < MAX_MESSAGE_BYTES + 40 && e.message.ends_with(&format!("… ({} bytes)", 2 << 20)), "{}", e.message.len());
        assert!(e.field.unwrap().len() < MAX_SHOWN_CHARS + 40);
        let small = ApiError::new(ErrorCode::Internal, "fine");
        assert_eq!(small.clone().capped(), small);
    }
}
