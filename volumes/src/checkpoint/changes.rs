//! What changed between two checkpoints: files and symlinks added, changed or removed, with
//! their +/- line counts, and the unified diff (`similar`, 3 lines of context).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use similar::{ChangeTag, TextDiff};

use super::objects::Objects;
use super::{Item, Snapshot};
use crate::error::Result;
use crate::manifest::Kind;

/// Files bigger than this (bytes) are not compared line by line: they count as binary (as do
/// files too big to be stored at all, [`super::MAX_STORED_BYTES`]).
const TEXT_LIMIT: u64 = 4 << 20;

/// How a path changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// It did not exist before.
    Added,
    /// Its contents, mode, kind or link target changed.
    Changed,
    /// It no longer exists.
    Removed,
}

/// One changed file (or symlink) between two checkpoints.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// Path relative to the folder, `/`-separated.
    pub path: String,
    pub change: ChangeKind,
    /// Lines added (0 for a binary file).
    pub added_lines: u64,
    /// Lines removed (0 for a binary file).
    pub removed_lines: u64,
    /// Not compared line by line: not UTF-8, holds a NUL byte, or over 4 MiB.
    pub binary: bool,
}

/// The text of `item` for a line diff: `None` when binary. A symlink's text is its target with
/// no newline after it, as git writes a link's blob (`git apply` makes the link from it).
fn text_of(objects: &Objects, item: Option<&Item>) -> Result<Option<String>> {
    let Some(item) = item else { return Ok(Some(String::new())) };
    match item.kind {
        Kind::Symlink if item.secret => Ok(None),
        Kind::Symlink => Ok(Some(item.target.clone().unwrap_or_default())),
        Kind::Dir => Ok(Some(String::new())),
        Kind::File if item.unstored() || item.size > TEXT_LIMIT => Ok(None),
        Kind::File => {
            let bytes = match &item.sha256 {
                Some(sha) => objects.get(sha)?,
                None => Vec::new(),
            };
            if bytes.contains(&0) {
                return Ok(None);
            }
            Ok(String::from_utf8(bytes).ok())
        }
    }
}

/// Paths of files and symlinks that differ between `a` and `b`, sorted.
fn changed_paths<'a>(a: &'a Snapshot, b: &'a Snapshot) -> Vec<(&'a str, Option<&'a Item>, Option<&'a Item>)> {
    let (ia, ib) = (a.index(), b.index());
    let paths: BTreeSet<&str> = a.entries.iter().chain(&b.entries).filter(|e| e.kind != Kind::Dir).map(|e| e.path.as_str()).collect();
    paths
        .into_iter()
        .filter_map(|p| {
            let (x, y) = (ia.get(p).copied().filter(|e| e.kind != Kind::Dir), ib.get(p).copied().filter(|e| e.kind != Kind::Dir));
            match (x, y) {
                (Some(x), Some(y)) if x.same_as(y) => None,
                _ => Some((p, x, y)),
            }
        })
        .collect()
}

/// What changed from checkpoint `a` to checkpoint `b`.
pub(crate) fn between(objects: &Objects, a: &Snapshot, b: &Snapshot) -> Result<Vec<FileChange>> {
    Ok(compare(objects, a, b, false)?.0)
}

/// [`between`], and the unified diff of it, git style (`git apply` takes it, binary files
/// aside): a header per file, `--- /dev/null` for an added one, `Binary files ... differ` for a
/// binary one, and a file that became a symlink (or back) as a deletion then an addition, as
/// git writes a change of type. Each file's contents are read and compared once for both.
pub(crate) fn with_diff(objects: &Objects, a: &Snapshot, b: &Snapshot) -> Result<(Vec<FileChange>, String)> {
    compare(objects, a, b, true)
}

fn compare(objects: &Objects, a: &Snapshot, b: &Snapshot, unified: bool) -> Result<(Vec<FileChange>, String)> {
    let (mut changes, mut out) = (Vec::new(), String::new());
    for (path, x, y) in changed_paths(a, b) {
        let change = match (x, y) {
            (None, _) => ChangeKind::Added,
            (_, None) => ChangeKind::Removed,
            _ => ChangeKind::Changed,
        };
        let (old, new) = (text_of(objects, x)?, text_of(objects, y)?);
        let binary = old.is_none() || new.is_none();
        // One line diff for the counts and the text.
        let lines = match (&old, &new) {
            (Some(old), Some(new)) => Some(TextDiff::from_lines(old.as_str(), new.as_str())),
            _ => None,
        };
        let (added, removed) = lines.as_ref().map_or((0, 0), line_counts);
        if unified {
            let type_changed = matches!((x, y), (Some(x), Some(y)) if (x.kind == Kind::Symlink) != (y.kind == Kind::Symlink));
            if type_changed {
                let gone = old.as_deref().map(|old| TextDiff::from_lines(old, ""));
                let made = new.as_deref().map(|new| TextDiff::from_lines("", new));
                file_diff(&mut out, path, ChangeKind::Removed, (x, None), gone.as_ref());
                file_diff(&mut out, path, ChangeKind::Added, (None, y), made.as_ref());
            } else {
                file_diff(&mut out, path, change, (x, y), lines.as_ref());
            }
        }
        changes.push(FileChange { path: path.to_owned(), change, added_lines: added, removed_lines: removed, binary });
    }
    Ok((changes, out))
}

/// Lines added and removed in `diff`.
fn line_counts<'a>(diff: &TextDiff<'a, 'a, 'a, str>) -> (u64, u64) {
    let (mut added, mut removed) = (0, 0);
    for c in diff.iter_all_changes() {
        match c.tag() {
            ChangeTag::Insert => added += 1,
            ChangeTag::Delete => removed += 1,
            ChangeTag::Equal => {}
        }
    }
    (added, removed)
}

/// Appends the git-style diff of one path going from `x` to `y` (entries; `None`: absent),
/// whose line diff is `lines` (`None`: binary).
fn file_diff<'a>(
    out: &mut String,
    path: &str,
    change: ChangeKind,
    (x, y): (Option<&Item>, Option<&Item>),
    lines: Option<&'a TextDiff<'a, 'a, 'a, str>>,
) {
    let old_name = if change == ChangeKind::Added { "/dev/null".to_owned() } else { format!("a/{path}") };
    let new_name = if change == ChangeKind::Removed { "/dev/null".to_owned() } else { format!("b/{path}") };
    out.push_str(&format!("diff --git a/{path} b/{path}\n"));
    match change {
        ChangeKind::Added => out.push_str(&format!("new file mode {}\n", git_mode(y))),
        ChangeKind::Removed => out.push_str(&format!("deleted file mode {}\n", git_mode(x))),
        ChangeKind::Changed => {
            let (m0, m1) = (git_mode(x), git_mode(y));
            if m0 != m1 {
                out.push_str(&format!("old mode {m0}\nnew mode {m1}\n"));
            }
        }
    }
    match lines {
        // Same text (a mode change only): no hunk.
        Some(diff) if diff.ops().iter().all(|op| op.tag() == similar::DiffTag::Equal) => {}
        Some(diff) => {
            out.push_str(&diff.unified_diff().context_radius(3).header(&old_name, &new_name).to_string());
            if !out.ends_with('\n') {
                out.push('\n');
            }
        }
        None => out.push_str(&format!("Binary files {old_name} and {new_name} differ\n")),
    }
}

/// A mode as git writes it: `100644`, `100755`, `120000` for a symlink.
fn git_mode(item: Option<&Item>) -> String {
    match item {
        Some(e) if e.kind == Kind::Symlink => "120000".to_owned(),
        Some(e) => format!("{:06o}", 0o100000 | (e.mode & 0o7777)),
        None => "000000".to_owned(),
    }
}
