//! The V4A patch engine behind `apply_patch`: parse, check versions, plan. Pure: no filesystem.
//!
//! Theory of operation. V4A is the text patch format of Codex's `apply_patch` (`*** Begin Patch`,
//! `*** Add File:`, `*** Update File:` with optional `*** Move to:`, `*** Delete File:`, `@@`
//! hunks of ` `/`-`/`+` lines, `*** End of File`, `*** End Patch`). A request goes through:
//!
//! 1. [`parse`]: text -> [`Patch`], or `INVALID_PATCH` naming the patch line and what was expected.
//! 2. [`check_expected_versions`]: each `expected_versions` entry must equal the file's current
//!    [`version`] (`sha256:<hex>`, or `absent`), else `VERSION_CONFLICT` with the current version.
//! 3. [`apply`]: every operation is planned in memory against a [`Source`] of current contents,
//!    giving one [`Change`] per operation (`before`/`after` bytes), or one refusal for the whole
//!    patch: a hunk must match exactly once (exact, then ignoring trailing whitespace, then
//!    ignoring surrounding whitespace), `ADD_FILE_EXISTS`, `MOVE_DESTINATION_EXISTS`,
//!    `FILE_NOT_FOUND`.
//!
//! [`plan`] runs all three. Writing is the committer's job (elsewhere): it takes the changes,
//! re-checks each `before` at open time, writes atomically and rolls back on failure. Because
//! the whole patch is planned before anything is written, a refused patch never changes a file.
//!
//! Bytes are preserved: unchanged lines (including loosely matched context) keep their exact
//! bytes, added lines take the file's dominant line ending (`\r\n` or `\n`), and a file without
//! a final newline keeps lacking one. Patch text is UTF-8; files may hold any bytes.

mod apply;
mod lines;
mod parse;
mod seek;
mod update;
mod version;

#[cfg(test)]
mod cases;
#[cfg(test)]
mod proptests;

use std::collections::BTreeMap;

use spaces_sdk::ErrorCode;

pub use apply::{apply, Change, ChangeKind, Source};
pub use parse::{normalize_path, parse, FileOp, Hunk, HunkLine, Patch};
pub use version::{check_expected_versions, hex, version, version_of, version_of_digest, ABSENT};

/// Errors of the patch engine. [`PatchError::code`] gives the wire code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The text is not V4A. `line` is 1-based in the patch text. Not retryable as is: fix the
    /// patch at that line.
    #[error("invalid patch, line {line}: {message}")]
    Parse { line: usize, message: String },
    /// Hunk number `hunk` (1-based within its file) of `path` matches nowhere after the previous
    /// hunk, even ignoring whitespace. `first_line` is its first context (or `@@` header) line;
    /// `near` lists 1-based file lines equal to it ignoring whitespace. Read the file again and
    /// rebuild the hunk.
    #[error(
        "invalid patch: hunk {hunk} of {path} (starting {first_line:?}) does not match the file{}; \
         read the file again and rebuild the hunk",
        near_lines(near)
    )]
    ContextNotFound {
        path: String,
        hunk: usize,
        first_line: String,
        near: Vec<usize>,
    },
    /// Hunk number `hunk` of `path` matches at several places (`candidates`: 1-based first file
    /// lines). Add context lines or an `@@ <line>` header so it matches once.
    #[error(
        "invalid patch: hunk {hunk} of {path} (starting {first_line:?}) matches at lines {}; \
         add context lines or an `@@` header so it matches once",
        list(candidates)
    )]
    AmbiguousContext {
        path: String,
        hunk: usize,
        first_line: String,
        candidates: Vec<usize>,
    },
    /// Hunk number `hunk` of `path` matches only before where hunk `hunk - 1` ended (its first
    /// line is at file line `line`; the previous hunk ended at line `after`): hunks must follow
    /// the file's order (case X40). Reorder the hunks, or split them into separate patches.
    #[error(
        "invalid patch: hunk {hunk} of {path} (starting {first_line:?}) matches at line {line}, \
         before the end of hunk {} (line {after}): hunks must follow the file's order; \
         reorder them",
        hunk - 1
    )]
    HunkOutOfOrder {
        path: String,
        hunk: usize,
        first_line: String,
        line: usize,
        after: usize,
    },
    /// `*** Add File:` names an existing file. Use `*** Update File:`, or delete it first.
    #[error("{path} already exists; update it instead of adding it")]
    AddFileExists { path: String },
    /// `*** Move to:` names an existing file. Not retryable until that file is gone.
    #[error("cannot move {path} to {to}: {to} already exists")]
    MoveDestinationExists { path: String, to: String },
    /// `*** Update File:` or `*** Delete File:` names a missing file.
    #[error("{path} does not exist")]
    FileNotFound { path: String },
    /// `expected_versions` says `expected` but the file is at `current`. Read it again and build
    /// a new patch; never force the old one.
    #[error(
        "{path} changed: expected version {expected}, current version {current}; read it again"
    )]
    VersionConflict {
        path: String,
        expected: String,
        current: String,
    },
    /// The [`Source`] could not read `path`; `code` is its wire code (`PATH_ESCAPE`,
    /// `SYMLINK_REJECTED`, `FILE_OPERATION_FAILED`, ...); `message` names the path. Retry depends
    /// on the cause.
    #[error("{message}")]
    Source {
        path: String,
        code: ErrorCode,
        message: String,
    },
}

impl PatchError {
    /// The wire error code (API reference, "Error codes").
    pub fn code(&self) -> ErrorCode {
        match self {
            PatchError::Parse { .. }
            | PatchError::ContextNotFound { .. }
            | PatchError::AmbiguousContext { .. }
            | PatchError::HunkOutOfOrder { .. } => ErrorCode::InvalidPatch,
            PatchError::AddFileExists { .. } => ErrorCode::AddFileExists,
            PatchError::MoveDestinationExists { .. } => ErrorCode::MoveDestinationExists,
            PatchError::FileNotFound { .. } => ErrorCode::FileNotFound,
            PatchError::VersionConflict { .. } => ErrorCode::VersionConflict,
            PatchError::Source { code, .. } => *code,
        }
    }
}

/// Lists at most 10 line numbers: "3, 9, 14".
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
        many => format!(
            " (its first line is at lines {}, the lines after them differ)",
            list(many)
        ),
    }
}

/// `Result` of the patch engine.
pub type Result<T> = std::result::Result<T, PatchError>;

/// A checked, planned patch: what a committer writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The parsed patch.
    pub patch: Patch,
    /// One change per operation, in patch order.
    pub changes: Vec<Change>,
}

impl Plan {
    /// Every path the plan touches (sources and move destinations), sorted, without repeats.
    pub fn files(&self) -> Vec<String> {
        let mut files: Vec<String> = self
            .changes
            .iter()
            .flat_map(|c| {
                let to = match &c.kind {
                    ChangeKind::Move { to } => Some(to.clone()),
                    _ => None,
                };
                std::iter::once(c.path.clone()).chain(to)
            })
            .collect();
        files.sort();
        files.dedup();
        files
    }
}

/// Parses `patch`, checks `expected_versions`, and plans every change against `source`.
///
/// Errors: any [`PatchError`]; parse errors come first, then version conflicts, then refusals
/// from planning. On error nothing is planned.
pub fn plan(
    patch: &str,
    expected_versions: &BTreeMap<String, String>,
    source: &dyn Source,
) -> Result<Plan> {
    let patch = parse(patch)?;
    let mut expected = BTreeMap::new();
    for (path, version) in expected_versions {
        let normal = normalize_path(path);
        if let Some(other) = expected.insert(normal.clone(), version.clone()) {
            if &other != version {
                return Err(PatchError::Source {
                    path: normal,
                    code: ErrorCode::InvalidArgument,
                    message: format!("expected_versions names {path:?} twice (as spellings of one file) with different versions"),
                });
            }
        }
    }
    check_expected_versions(&expected, source)?;
    let changes = apply(&patch, source)?;
    Ok(Plan { patch, changes })
}
