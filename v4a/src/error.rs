//! The engine's one error type: why a patch is refused.
//!
//! Each variant says what happened and whether a retry helps; [`Error::code`] gives the
//! contract's error code (API reference, `apply_patch`). A [`crate::Source`] has its own error
//! type, into which these convert (`From<Error>`), so a refusal of the source (a path outside
//! the workspace, say) and a refusal of the engine travel as one value without a downcast.

use spaces_sdk::{bounded, ErrorCode};

/// Why a patch was refused. Nothing was planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The text is not V4A (`INVALID_PATCH`); `line` is 1-based in the patch text. A retry does
    /// not help: fix the patch at that line.
    #[error("invalid patch, line {line}: {message}")]
    InvalidPatch {
        /// 1-based line of the patch text.
        line: usize,
        /// What was expected there.
        message: String,
    },

    /// Hunk number `hunk` (1-based within its file) of `path` matches nowhere after the previous
    /// hunk, even ignoring whitespace (`INVALID_PATCH`). `first_line` is its first context (or
    /// `@@` header) line; `near` lists 1-based file lines equal to it ignoring whitespace. A
    /// retry does not help: read the file again and rebuild the hunk.
    #[error(
        "invalid patch: hunk {hunk} of {path} (starting {first_line:?}) does not match the file{}; \
         read the file again and rebuild the hunk",
        near_lines(near),
        path = bounded(path), first_line = bounded(first_line)
    )]
    ContextNotFound {
        /// The file, as written in the patch.
        path: String,
        /// 1-based hunk number within the file.
        hunk: usize,
        /// The hunk's first context (or `@@` header) line.
        first_line: String,
        /// 1-based file lines equal to `first_line` ignoring whitespace.
        near: Vec<usize>,
    },

    /// Hunk number `hunk` of `path` matches at several places (`candidates`: 1-based first file
    /// lines; `INVALID_PATCH`). A retry does not help: add context lines or an `@@` header so it
    /// matches once.
    #[error(
        "invalid patch: hunk {hunk} of {path} (starting {first_line:?}) matches at lines {}; \
         add context lines or an `@@` header so it matches once",
        list(candidates),
        path = bounded(path), first_line = bounded(first_line)
    )]
    AmbiguousContext {
        /// The file, as written in the patch.
        path: String,
        /// 1-based hunk number within the file.
        hunk: usize,
        /// The hunk's first context (or `@@` header) line.
        first_line: String,
        /// 1-based first file lines of every match.
        candidates: Vec<usize>,
    },

    /// Hunk number `hunk` of `path` matches only before where hunk `hunk - 1` ended (its first
    /// line is at file line `line`; the previous hunk ended at line `after`; `INVALID_PATCH`,
    /// case X40). A retry does not help: reorder the hunks to follow the file, or split them
    /// into separate patches.
    #[error(
        "invalid patch: hunk {hunk} of {path} (starting {first_line:?}) matches at line {line}, \
         before the end of hunk {} (line {after}): hunks must follow the file's order; \
         reorder them",
        hunk - 1,
        path = bounded(path), first_line = bounded(first_line)
    )]
    HunkOutOfOrder {
        /// The file, as written in the patch.
        path: String,
        /// 1-based hunk number within the file.
        hunk: usize,
        /// The hunk's first context (or `@@` header) line.
        first_line: String,
        /// 1-based file line where it matches.
        line: usize,
        /// 1-based file line where the previous hunk ended.
        after: usize,
    },

    /// `*** Add File:` names an existing file (`ADD_FILE_EXISTS`). A retry does not help: use
    /// `*** Update File:`, or delete it first.
    #[error("{path} already exists; update it instead of adding it", path = bounded(path))]
    AddFileExists {
        /// The file, as written in the patch.
        path: String,
    },

    /// `*** Move to:` names an existing file (`MOVE_DESTINATION_EXISTS`). A retry helps only
    /// once that file is gone.
    #[error("cannot move {path} to {to}: {to} already exists", path = bounded(path), to = bounded(to))]
    MoveDestinationExists {
        /// The file moved.
        path: String,
        /// Where to.
        to: String,
    },

    /// An update or delete names a file that does not exist (`FILE_NOT_FOUND`). A retry helps
    /// only once it exists.
    #[error("{path} does not exist", path = bounded(path))]
    FileNotFound {
        /// The file, as written in the patch.
        path: String,
    },

    /// The file is at `current`, not at the `expected` version the caller started from
    /// (`VERSION_CONFLICT`). A retry does not help: read it again and build a new patch; never
    /// force the old one.
    #[error(
        "{path} changed: expected version {expected}, current version {current}; read it again \
         and rebuild the patch",
        path = bounded(path), expected = bounded(expected), current = bounded(current)
    )]
    VersionConflict {
        /// The file.
        path: String,
        /// The version the caller gave (`sha256:<hex>` or `absent`).
        expected: String,
        /// The file's version now.
        current: String,
    },

    /// `expected_versions` names one file twice (as two spellings of one path) with different
    /// versions (`INVALID_ARGUMENT`). A retry does not help: name each file once.
    #[error("expected_versions names {path:?} twice (as spellings of one file) with different versions", path = bounded(path))]
    ExpectedTwice {
        /// One of the spellings, as given.
        path: String,
    },
}

impl Error {
    /// The contract's error code (API reference, "Error codes").
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::InvalidPatch { .. } | Error::ContextNotFound { .. } | Error::AmbiguousContext { .. } | Error::HunkOutOfOrder { .. } => {
                ErrorCode::InvalidPatch
            }
            Error::AddFileExists { .. } => ErrorCode::AddFileExists,
            Error::MoveDestinationExists { .. } => ErrorCode::MoveDestinationExists,
            Error::FileNotFound { .. } => ErrorCode::FileNotFound,
            Error::VersionConflict { .. } => ErrorCode::VersionConflict,
            Error::ExpectedTwice { .. } => ErrorCode::InvalidArgument,
        }
    }
}

/// `Result` with the engine's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// At most ten line numbers, then how many more.
fn list(lines: &[usize]) -> String {
    const MAX: usize = 10;
    let mut shown: Vec<String> = lines.iter().take(MAX).map(usize::to_string).collect();
    if lines.len() > MAX {
        shown.push(format!("and {} more", lines.len() - MAX));
    }
    shown.join(", ")
}

fn near_lines(near: &[usize]) -> String {
    match near {
        [] => String::new(),
        [one] => format!(" (its first line is at line {one}, the lines after it differ)"),
        many => format!(" (its first line is at lines {}, the lines after them differ)", list(many)),
    }
}
