//! # spaces-v4a: the V4A patch engine behind `apply_patch`
//!
//! Parse, check versions, plan. Pure: no filesystem, no processes; fuzzed (`scripts/fuzz`) and
//! property-tested. Its one error type is [`Error`] ([`error`]).
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
pub mod error;
mod lines;
mod parse;
mod seek;
mod source;
mod update;
mod version;

#[cfg(test)]
mod cases;
#[cfg(test)]
mod parse_cases;
#[cfg(test)]
mod proptests;

use std::collections::BTreeMap;

pub use apply::{apply, Change, ChangeKind};
pub use error::{Error, Result};
pub use parse::{normalize_path, parse, FileOp, Hunk, HunkLine, Patch};
pub use source::Source;
pub use version::{check_expected_versions, hex, version, version_of, version_of_digest, ABSENT};

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
/// Errors, all as the source's error type: parse errors ([`Error::InvalidPatch`]) come first,
/// then version conflicts ([`Error::VersionConflict`]; [`Error::ExpectedTwice`] when
/// `expected_versions` names one file twice with different versions), then refusals from
/// planning and the source's own errors. On error nothing is planned.
pub fn plan<S: Source + ?Sized>(patch: &str, expected_versions: &BTreeMap<String, String>, source: &S) -> Result<Plan, S::Error> {
    let patch = parse(patch)?;
    let mut expected = BTreeMap::new();
    for (path, version) in expected_versions {
        let normal = normalize_path(path);
        if let Some(other) = expected.insert(normal.clone(), version.clone()) {
            if &other != version {
                return Err(Error::ExpectedTwice { path: path.clone() }.into());
            }
        }
    }
    check_expected_versions(&expected, source)?;
    let changes = apply(&patch, source)?;
    Ok(Plan { patch, changes })
}
