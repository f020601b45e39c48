//! A three-way merge of two folders against a checkpoint (`agent_merge`, issue 34): what a fork
//! changed since its fork point is brought into its parent's folder. A path only the fork
//! changed is taken from the fork; one both changed the same way is left; one both changed
//! differently is merged line by line (`diffy`) when both sides are text, else it is a conflict.
//! Nothing is written unless every path merges: a conflict anywhere leaves the parent's folder
//! as it was, and the report names each conflicting file and why.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use globset::GlobSet;

use super::objects::Objects;
use super::{Item, Snapshot};
use crate::beneath::Beneath;
use crate::error::Result;
use crate::manifest::Kind;
use crate::scan::{self, Content, Walked};

/// One path of a merge that could not be merged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// Path relative to the folders, `/`-separated.
    pub path: String,
    /// Why, for people: `both changed the same lines`, `removed on one side, changed on the other`, ...
    pub why: String,
}

/// What [`super::Checkpoints::merge`] did (or would have done).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MergeReport {
    /// Paths written or removed in the target folder (empty when there were conflicts).
    pub applied: Vec<String>,
    /// Paths that could not be merged; when any, nothing was written.
    pub conflicts: Vec<Conflict>,
}

/// A path's state on one side: absent, a file (contents, mode), or a symlink (target).
#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    Absent,
    File {
        sha: String,
        mode: u32,
    },
    Link(String),
    /// A live SQLite database SQLite could not copy consistently (locked): never merged.
    Unreadable,
}

/// What the merge writes at a path.
enum Write {
    File { bytes: Vec<u8>, mode: u32 },
    Link(String),
    Remove,
}

/// A folder's files and symlinks, read on demand.
struct Side<'a> {
    root: Beneath,
    entries: HashMap<String, &'a Walked>,
    spool: &'a Path,
}

impl Side<'_> {
    fn state(&self, path: &str) -> Result<(State, Option<Vec<u8>>)> {
        match self.entries.get(path) {
            None => Ok((State::Absent, None)),
            Some(w) if w.kind == Kind::Symlink => Ok((State::Link(w.target.clone().unwrap_or_default()), None)),
            Some(w) if w.sqlite_wal => match scan::sqlite_copy(&self.root, path, self.spool, super::SQLITE_BUSY) {
                Some((content, sha)) => Ok((State::File { sha, mode: w.mode }, Some(bytes_of(content)?))),
                None => Ok((State::Unreadable, None)),
            },
            Some(w) => match scan::read_stable(&self.root, path, self.spool)? {
                Some((content, sha, _)) => Ok((State::File { sha, mode: w.mode }, Some(bytes_of(content)?))),
                None => Ok((State::Absent, None)),
            },
        }
    }
}

/// The bytes of what was read.
fn bytes_of(content: Content) -> Result<Vec<u8>> {
    match content {
        Content::Mem(b) => Ok(b),
        Content::Spool(t) => std::fs::read(t.path()).map_err(|e| crate::error::VolumeError::io(t.path(), e)),
    }
}

fn base_state(item: Option<&&Item>) -> State {
    match item {
        None => State::Absent,
        Some(i) if i.kind == Kind::Symlink => State::Link(i.target.clone().unwrap_or_default()),
        Some(i) => State::File { sha: i.sha256.clone().unwrap_or_default(), mode: i.mode },
    }
}

fn text(bytes: &[u8]) -> Option<&str> {
    (!bytes.contains(&0)).then(|| std::str::from_utf8(bytes).ok()).flatten()
}

/// The files and symlinks of a walk, by path.
fn files_of(w: &scan::Walk) -> HashMap<String, &Walked> {
    w.entries.iter().filter(|e| e.kind != Kind::Dir).map(|e| (e.path.clone(), e)).collect()
}

/// Merge into `ours` what `theirs` changed since `base`. See the module doc.
pub(crate) fn merge(
    objects: &Objects,
    base: &Snapshot,
    theirs: &Path,
    ours: &Path,
    exclude: &GlobSet,
    spool: &Path,
) -> Result<MergeReport> {
    let (t_root, o_root) = (Beneath::open(theirs)?, Beneath::open(ours)?);
    let (t_walk, o_walk) = (scan::walk(&t_root, exclude)?, scan::walk(&o_root, exclude)?);
    let t_side = Side { root: t_root, entries: files_of(&t_walk), spool };
    let o_side = Side { root: o_root, entries: files_of(&o_walk), spool };
    let base_items: HashMap<&str, &Item> = base.entries.iter().filter(|e| e.kind != Kind::Dir).map(|e| (e.path.as_str(), e)).collect();
    let paths: BTreeSet<String> = base_items.keys().map(|p| (*p).to_owned()).chain(t_side.entries.keys().cloned()).collect();

    let mut report = MergeReport::default();
    let mut writes: Vec<(String, Write)> = Vec::new();
    for path in paths {
        let b = base_state(base_items.get(path.as_str()));
        // A file the checkpoint did not store (too big, a secret) is not merged.
        if base_items.get(path.as_str()).is_some_and(|i| i.unstored()) {
            continue;
        }
        let (t, t_bytes) = t_side.state(&path)?;
        if t == b {
            continue;
        }
        let (o, o_bytes) = o_side.state(&path)?;
        if t == State::Unreadable || o == State::Unreadable {
            let why = "a live SQLite database that SQLite could not copy (held locked): close the program using it, then merge again";
            report.conflicts.push(Conflict { path: path.clone(), why: why.to_owned() });
            continue;
        }
        if o == t {
            continue;
        }
        let take_theirs = |t: &State, bytes: Option<Vec<u8>>| match t {
            State::Absent | State::Unreadable => Write::Remove,
            State::Link(target) => Write::Link(target.clone()),
            State::File { mode, .. } => Write::File { bytes: bytes.unwrap_or_default(), mode: *mode },
        };
        if o == b {
            writes.push((path.clone(), take_theirs(&t, t_bytes)));
            continue;
        }
        // Only the mode differs on one side: the contents of the other, the changed mode.
        if let (State::File { sha: bs, mode: bm }, State::File { sha: os, mode: om }, State::File { sha: ts, mode: tm }) = (&b, &o, &t) {
            if os == bs && tm == bm {
                writes.push((path.clone(), Write::File { bytes: t_bytes.unwrap_or_default(), mode: *om }));
                continue;
            }
            if ts == bs && om == bm {
                writes.push((path.clone(), Write::File { bytes: o_bytes.unwrap_or_default(), mode: *tm }));
                continue;
            }
        }
        // Both changed it, differently.
        let why = match (&b, &o, &t) {
            (State::File { sha, .. }, State::File { mode: om, .. }, State::File { mode: tm, .. }) => {
                let base_bytes = objects.get(sha)?;
                let (bt, ot, tt) = (text(&base_bytes), o_bytes.as_deref().and_then(text), t_bytes.as_deref().and_then(text));
                match (bt, ot, tt) {
                    (Some(bt), Some(ot), Some(tt)) => match diffy::merge(bt, ot, tt) {
                        Ok(merged) => {
                            // The side that changed the mode wins it.
                            let bm = match &b {
                                State::File { mode, .. } => *mode,
                                _ => *om,
                            };
                            let mode = if *tm != bm { *tm } else { *om };
                            writes.push((path.clone(), Write::File { bytes: merged.into_bytes(), mode }));
                            continue;
                        }
                        Err(_) => "both changed the same lines".to_owned(),
                    },
                    _ => "both changed a binary file".to_owned(),
                }
            }
            (_, State::Absent, _) => "removed in the parent, changed in the fork".to_owned(),
            (_, _, State::Absent) => "changed in the parent, removed in the fork".to_owned(),
            (State::Absent, _, _) => "added on both sides with different contents".to_owned(),
            _ => "both changed it differently".to_owned(),
        };
        report.conflicts.push(Conflict { path: path.clone(), why });
    }
    // What the parent's folder has in the way of a write is a conflict too, found before any
    // write: a folder where the fork has a file, a file (not removed by this merge) where the
    // fork has a folder.
    let removed: std::collections::HashSet<&str> =
        writes.iter().filter(|(_, w)| matches!(w, Write::Remove)).map(|(p, _)| p.as_str()).collect();
    let o_kinds: HashMap<&str, Kind> = o_walk.entries.iter().map(|e| (e.path.as_str(), e.kind)).collect();
    for (path, write) in &writes {
        if matches!(write, Write::Remove) {
            continue;
        }
        if o_kinds.get(path.as_str()) == Some(&Kind::Dir) {
            report.conflicts.push(Conflict { path: path.clone(), why: "a folder in the parent where the fork has a file".to_owned() });
            continue;
        }
        let mut at = String::new();
        for part in path.split('/').collect::<Vec<_>>().split_last().map_or(&[][..], |(_, dirs)| dirs) {
            if !at.is_empty() {
                at.push('/');
            }
            at.push_str(part);
            if o_kinds.get(at.as_str()).is_some_and(|k| *k != Kind::Dir) && !removed.contains(at.as_str()) {
                report
                    .conflicts
                    .push(Conflict { path: path.clone(), why: format!("{at:?} is a file in the parent, a folder in the fork") });
                break;
            }
        }
    }
    if !report.conflicts.is_empty() {
        return Ok(report);
    }
    let o_root = o_side.root;
    let dir_modes: HashMap<&str, u32> = t_walk.entries.iter().filter(|e| e.kind == Kind::Dir).map(|e| (e.path.as_str(), e.mode)).collect();
    // Removals first, then writes, so a file the fork turned into a folder is gone before the
    // folder is made.
    writes.sort_by_key(|(_, w)| !matches!(w, Write::Remove));
    for (path, write) in writes {
        if !matches!(write, Write::Remove) {
            make_parents(&o_root, &path, &dir_modes)?;
        }
        // A database replaced or removed takes its write-ahead log with it.
        scan::without_sqlite_sides(&o_root, &path, &o_walk.skipped, || match &write {
            Write::Remove => o_root.remove(&path, false),
            Write::Link(target) => {
                o_root.remove(&path, false)?;
                o_root.symlink(&path, target)
            }
            Write::File { bytes, mode } => o_root.replace_file(&path, &mut bytes.as_slice(), *mode, scan::now_ns()),
        })?;
        report.applied.push(path);
    }
    Ok(report)
}

/// Make the missing parent directories of `path` beneath `root`, with the fork's modes.
fn make_parents(root: &Beneath, path: &str, modes: &HashMap<&str, u32>) -> Result<()> {
    let mut at = String::new();
    let parts: Vec<&str> = path.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        if !at.is_empty() {
            at.push('/');
        }
        at.push_str(part);
        if root.lstat(&at).is_err() {
            root.mkdir(&at)?;
            root.finish(&at, Kind::Dir, modes.get(at.as_str()).copied().unwrap_or(0o755), scan::now_ns())?;
        }
    }
    Ok(())
}
