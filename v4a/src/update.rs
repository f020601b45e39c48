//! Applying the hunks of one `*** Update File:` to that file's bytes.
//!
//! Hunks apply in order. Each is searched from the line after the previous hunk's last old line
//! (and after its `@@` header line, if it has one). A hunk without old lines (only `+` lines) is
//! inserted right after its `@@` header line, or at the end of the file without one (Codex
//! appends there in both cases; inserting under the named header is what its author meant).
//! As in Codex, a hunk that does not match and ends with an empty context line (often a blank
//! line an editor left at the end of the hunk) is retried without that line.
//!
//! Bytes: lines the hunk does not add are copied from the file, so context matched loosely
//! keeps the file's spelling; added lines take the file's dominant line ending; a file without a
//! final newline keeps lacking one.

use super::lines::{self, Line, Output};
use super::parse::{Hunk, HunkLine};
use super::seek::{near, seek, seek_in, Index, Seek};
use crate::error::{Error, Result};

/// Hunks in one file from which its lines are indexed for the search (see [`Index`]).
const INDEX_FROM_HUNKS: usize = 4;

/// The file's new bytes after `hunks`, or an `INVALID_PATCH` refusal naming the first hunk
/// that does not match once.
pub(crate) fn update(path: &str, before: &[u8], hunks: &[Hunk]) -> Result<Vec<u8>> {
    let file = lines::split(before);
    // One pass to index the file's lines costs about what one hunk's scan of it does: with
    // several hunks, every exact search goes through the index instead.
    let index = (hunks.len() >= INDEX_FROM_HUNKS).then(|| Index::new(&file));
    let mut out = Output::new(lines::style(&file));
    let mut next = 0; // first file line not yet copied to `out`
    for (number, hunk) in hunks.iter().enumerate() {
        let (at, body) = locate(path, number + 1, &file, index.as_ref(), hunk, next)?;
        for line in &file[next..at] {
            out.keep(*line);
        }
        let mut cursor = at;
        for line in body {
            match line {
                HunkLine::Context(_) => {
                    out.keep(file[cursor]);
                    cursor += 1;
                }
                HunkLine::Remove(_) => cursor += 1,
                HunkLine::Add(text) => out.add(text),
            }
        }
        next = cursor;
    }
    for line in &file[next..] {
        out.keep(*line);
    }
    Ok(out.finish(lines::ends_with_newline(before)))
}

fn old_lines(body: &[HunkLine]) -> Vec<&[u8]> {
    body.iter()
        .filter_map(|l| match l {
            HunkLine::Context(t) | HunkLine::Remove(t) => Some(t.as_bytes()),
            HunkLine::Add(_) => None,
        })
        .collect()
}

/// Where hunk number `number` starts (0-based file line) and which of its lines apply there.
fn locate<'h>(
    path: &str,
    number: usize,
    file: &[Line<'_>],
    index: Option<&Index<'_>>,
    hunk: &'h Hunk,
    from: usize,
) -> Result<(usize, &'h [HunkLine])> {
    let after = from;
    let mut from = from;
    if let Some(header) = &hunk.header {
        match seek_in(file, index, &[header.as_bytes()], from, false) {
            Seek::Found(at) => from = at + 1,
            found => {
                let earlier = out_of_order(file, &[header.as_bytes()], after, false);
                return Err(refusal(path, number, header.as_bytes(), file, from, found, earlier));
            }
        }
    }
    let mut body = hunk.lines.as_slice();
    loop {
        let pattern = old_lines(body);
        let Some(first) = pattern.first() else {
            let at = if hunk.header.is_some() && !hunk.end_of_file { from } else { file.len() };
            return Ok((at, body));
        };
        match seek_in(file, index, &pattern, from, hunk.end_of_file) {
            Seek::Found(at) => return Ok((at, body)),
            Seek::NotFound if matches!(body.last(), Some(HunkLine::Context(t)) if t.is_empty()) => {
                body = &body[..body.len() - 1];
            }
            found => {
                // Under a header that matched, the hunk is positioned by it, not by the order.
                let earlier = if from == after { out_of_order(file, &old_lines(body), after, hunk.end_of_file) } else { None };
                return Err(refusal(path, number, first, file, from, found, earlier));
            }
        }
    }
}

/// Where a hunk that matches nowhere after `after` would match before it (0-based), if it
/// matches there exactly once: then the hunks are out of order (case X40).
fn out_of_order(file: &[Line<'_>], pattern: &[&[u8]], after: usize, end_of_file: bool) -> Option<usize> {
    if after == 0 || pattern.is_empty() {
        return None;
    }
    match seek(&file[..after.min(file.len())], pattern, 0, end_of_file) {
        Seek::Found(at) => Some(at),
        _ => None,
    }
}

fn refusal(path: &str, hunk: usize, first: &[u8], file: &[Line<'_>], from: usize, found: Seek, earlier: Option<usize>) -> Error {
    let first_line = String::from_utf8_lossy(first).into_owned();
    let one_based = |v: Vec<usize>| v.into_iter().map(|i| i + 1).collect();
    if let (Seek::NotFound, Some(at)) = (&found, earlier) {
        return Error::HunkOutOfOrder { path: path.to_owned(), hunk, first_line, line: at + 1, after: from };
    }
    match found {
        Seek::Ambiguous(candidates) => {
            Error::AmbiguousContext { path: path.to_owned(), hunk, first_line, candidates: one_based(candidates) }
        }
        Seek::Found(_) | Seek::NotFound => {
            Error::ContextNotFound { path: path.to_owned(), hunk, first_line, near: one_based(near(file, first, from)) }
        }
    }
}
