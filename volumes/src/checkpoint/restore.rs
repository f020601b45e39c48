//! Making a folder what a checkpoint holds, in place: entries made since are removed, files
//! whose stat key moved are written again from their verified contents (each in one rename),
//! symlinks and directories made as recorded, and directory modes applied last (a read-only
//! directory restores). Excluded paths are never touched. Every entry is reached beneath the
//! folder without following a symlink (`Beneath`).

use std::collections::HashMap;
use std::path::Path;

use globset::GlobSet;

use super::objects::Objects;
use super::{Item, Snapshot};
use crate::beneath::Beneath;
use crate::error::{Result, VolumeError};
use crate::manifest::Kind;
use crate::scan::{self, Walked};

/// What [`super::Checkpoints::restore`] changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// Files and symlinks written (their contents or target differed) and directories made.
    pub written: u64,
    /// Entries removed (made after the checkpoint, or of another kind there).
    pub removed: u64,
    /// Files the checkpoint holds no contents of (over 64 MiB, holding a secret value, a live
    /// database SQLite could not copy) that differ from what it recorded, or are gone: left as
    /// they are, not restored. Sorted by path.
    pub unrestored: Vec<String>,
}

pub(crate) fn restore(objects: &Objects, folder: &Path, exclude: &GlobSet, snap: &Snapshot) -> Result<RestoreReport> {
    let root = Beneath::open(folder)?;
    let now = scan::walk(&root, exclude)?;
    let want: HashMap<&str, &Item> = snap.index();
    let mut report = RestoreReport::default();
    let have: HashMap<&str, &Walked> =
        now.entries.iter().filter(|w| want.get(w.path.as_str()).is_some_and(|t| t.kind == w.kind)).map(|w| (w.path.as_str(), w)).collect();
    // Every content to be written is read and checked first: a damaged one fails the restore
    // before anything of the folder changed.
    let rewrite = |item: &Item| {
        item.kind == Kind::File
            && !item.unstored()
            && !have.get(item.path.as_str()).is_some_and(|w| w.key == item.key && w.mode == item.mode)
    };
    for item in snap.entries.iter().filter(|i| rewrite(i)) {
        if let Some(sha) = &item.sha256 {
            objects.verify(sha)?;
        }
    }

    // Removals, children before parents: what the checkpoint does not have, or has as
    // another kind (a file where a directory was).
    let mut gone: Vec<&Walked> = now.entries.iter().filter(|w| want.get(w.path.as_str()).is_none_or(|t| t.kind != w.kind)).collect();
    gone.sort_by(|a, b| b.path.cmp(&a.path));
    // Entries a checkpoint never holds (a symlink leaving the folder, a socket, a FIFO) are
    // left alone, unless the checkpoint has something at their path.
    let odd: Vec<&str> = now
        .skipped
        .iter()
        .filter(|s| matches!(s.kind.as_str(), "symlink_outside" | "socket" | "fifo") && want.contains_key(s.path.as_str()))
        .map(|s| s.path.as_str())
        .collect();
    for path in odd {
        root.remove(path, false)?;
        report.removed += 1;
    }
    for w in gone {
        let removed = match w.kind {
            // A database goes with its log and index.
            Kind::File => scan::without_sqlite_sides(&root, &w.path, &now.skipped, || root.remove(&w.path, false)),
            // A symlink is unlinked as a file is, whatever it points to (never `AT_REMOVEDIR`).
            Kind::Symlink => root.remove(&w.path, false),
            Kind::Dir => root.remove(&w.path, true),
        };
        match removed {
            Ok(()) => report.removed += 1,
            // A directory that keeps excluded entries (`node_modules` made later) stays, unless
            // the checkpoint needs its path for something else.
            Err(VolumeError::Io { source, .. })
                if w.kind == Kind::Dir
                    && source.raw_os_error() == Some(nix::errno::Errno::ENOTEMPTY as i32)
                    && !want.contains_key(w.path.as_str()) => {}
            Err(e) => return Err(e),
        }
    }

    // Parents first (entries are sorted that way).
    for item in &snap.entries {
        let found = have.get(item.path.as_str());
        match item.kind {
            Kind::Dir => {
                if found.is_none() {
                    root.mkdir(&item.path)?;
                    report.written += 1;
                }
            }
            // Its target holds a secret value: not stored, left as it is.
            Kind::Symlink if item.secret => {}
            Kind::Symlink => {
                if found.is_some_and(|w| w.target == item.target) {
                    continue;
                }
                if found.is_some() {
                    root.remove(&item.path, false)?;
                }
                root.symlink(&item.path, item.target.as_deref().unwrap_or_default())?;
                root.finish(&item.path, Kind::Symlink, 0, item.mtime_ns)?;
                report.written += 1;
            }
            // Too big to be stored, or holding a secret value: left as it is (never copied),
            // and named when it is not what the checkpoint recorded.
            Kind::File if item.unstored() || item.sha256.is_none() => {
                if !found.is_some_and(|w| w.size == item.size && w.mtime_ns == item.mtime_ns) {
                    report.unrestored.push(item.path.clone());
                }
            }
            Kind::File => {
                // The same file untouched since the checkpoint (same size, times, inode; its
                // mode changes its ctime) is left as it is.
                if !rewrite(item) {
                    continue;
                }
                let bytes = objects.get(item.sha256.as_deref().unwrap_or_default())?;
                // A database comes back whole (a consistent copy): a newer log beside it goes.
                scan::without_sqlite_sides(&root, &item.path, &now.skipped, || {
                    root.replace_file(&item.path, &mut bytes.as_slice(), item.mode, item.mtime_ns)
                })?;
                report.written += 1;
            }
        }
    }
    // Directory modes and times last, children first: a read-only directory is filled first.
    for item in snap.entries.iter().rev().filter(|e| e.kind == Kind::Dir) {
        root.finish(&item.path, Kind::Dir, item.mode, item.mtime_ns)?;
    }
    Ok(report)
}
