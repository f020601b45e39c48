//! The snapshot manifest: every entry of the home with its metadata and where its contents live,
//! plus the safety rules every path and symlink of a manifest or archive must pass.
//!
//! A manifest is `homes/<home>/snapshots/<seq>.json`. Deleted files are simply absent from the
//! newer manifest; layers only carry contents that no earlier layer of the chain holds.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::error::{Result, VolumeError};
use crate::types::{SkippedEntry, SnapshotInfo};

/// Format version written in every manifest.
pub(crate) const FORMAT: u32 = 1;

/// What an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    File,
    Dir,
    Symlink,
}

/// One entry of the home.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// Relative, `/`-separated, no `.`/`..`/empty parts.
    pub path: String,
    pub kind: Kind,
    /// Permission bits (`0o1777` at most: set-id bits are never stored).
    pub mode: u32,
    /// File size in bytes (0 for dirs and symlinks).
    #[serde(default)]
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    /// sha256 of the contents (files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Symlink target, as stored in the link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The layer (sha256 of the blob) that holds the contents (files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
    /// The entry name inside that layer, when it differs from `path` (same contents stored once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<String>,
}

/// The root directory's own metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Root {
    pub mode: u32,
    pub mtime_ns: i64,
}

/// A snapshot manifest.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub format: u32,
    pub id: String,
    pub home: String,
    pub created_ms: u64,
    pub host: String,
    /// The snapshot this one was saved on top of.
    #[serde(default)]
    pub parent: Option<String>,
    /// The lease epoch that committed it.
    #[serde(default)]
    pub lease_epoch: u64,
    pub nonce: String,
    pub meta: serde_json::Value,
    pub skipped: Vec<SkippedEntry>,
    pub root: Root,
    /// Every layer the entries reference, in first-use order.
    pub layers: Vec<String>,
    /// Sorted by path (parents before children).
    pub entries: Vec<Entry>,
}

impl Manifest {
    pub fn info(&self) -> SnapshotInfo {
        let files = self.entries.iter().filter(|e| e.kind == Kind::File);
        SnapshotInfo {
            id: self.id.clone(),
            home: self.home.clone(),
            created_ms: self.created_ms,
            host: self.host.clone(),
            files: files.clone().count() as u64,
            bytes: files.map(|e| e.size).sum(),
            layers: self.layers.len() as u32,
            meta: self.meta.clone(),
            skipped: self.skipped.clone(),
        }
    }

    /// Parses and checks a manifest read from the store: format, and every entry safe.
    pub fn parse(bytes: &[u8], what: &str) -> Result<Manifest> {
        let m: Manifest = serde_json::from_slice(bytes).map_err(|e| VolumeError::corrupt(what, e.to_string()))?;
        if m.format != FORMAT {
            return Err(VolumeError::corrupt(what, format!("unknown manifest format {}", m.format)));
        }
        m.check()?;
        Ok(m)
    }

    /// Every entry passes [`check_rel_path`]; symlinks stay inside the home; no entry sits under
    /// a symlink entry; files name a listed layer; no path twice.
    pub fn check(&self) -> Result<()> {
        let mut guard = Guard::default();
        let layers: HashSet<&str> = self.layers.iter().map(String::as_str).collect();
        for e in &self.entries {
            match e.kind {
                Kind::Dir => guard.dir(&e.path)?,
                Kind::File => {
                    guard.file(&e.path)?;
                    let layer = e.layer.as_deref().unwrap_or_default();
                    if e.sha256.is_none() || !layers.contains(layer) {
                        return Err(VolumeError::corrupt(
                            format!("manifest {}", self.id),
                            format!("file {:?} names no listed layer or hash", e.path),
                        ));
                    }
                    if let Some(src) = &e.src {
                        check_rel_path(src)?;
                    }
                }
                Kind::Symlink => guard.symlink(&e.path, e.target.as_deref().unwrap_or_default())?,
            }
        }
        check_tree(self.entries.iter().map(|e| (e.path.as_str(), e.kind, e.target.as_deref())))
    }
}

/// Most symlinks followed while resolving one link (Linux's own limit).
const MAX_HOPS: u32 = 40;

/// Where a symlink at `link` with `target` ends up, resolved as the kernel would through the
/// other symlinks of `tree` (path → (kind, target)): `Err(why)` when it leaves the home (an
/// absolute target, or more `..` than levels once links are followed: `notes ->
/// loop/loop/../../x` with `loop -> .`) or needs more than [`MAX_HOPS`] links. A part that is
/// not in the tree is taken as a directory (as the text says).
pub(crate) fn resolve_link(tree: &HashMap<&str, (Kind, Option<&str>)>, link: &str, target: &str) -> std::result::Result<(), String> {
    if target.is_empty() || target.contains('\0') {
        return Err(format!("symlink target {target:?} is empty or holds a NUL"));
    }
    let mut cur: Vec<&str> = link.split('/').collect();
    cur.pop();
    let absolute = |t: &str| format!("symlink to {target:?} leads to the absolute path {t:?}, outside the home");
    if target.starts_with('/') {
        return Err(absolute(target));
    }
    // Parts still to walk, the next one last.
    let mut pending: Vec<&str> = target.split('/').rev().collect();
    let mut hops = 0;
    while let Some(part) = pending.pop() {
        match part {
            "" | "." => {}
            ".." => {
                if cur.pop().is_none() {
                    return Err(format!("symlink to {target:?} resolves outside the home (following the symlinks on its way)"));
                }
            }
            name => {
                cur.push(name);
                if let Some((Kind::Symlink, t)) = tree.get(cur.join("/").as_str()) {
                    hops += 1;
                    if hops > MAX_HOPS {
                        return Err(format!("symlink to {target:?} does not resolve: more than {MAX_HOPS} symlinks on its way"));
                    }
                    cur.pop();
                    let t = t.unwrap_or_default();
                    if t.is_empty() {
                        return Err(format!("symlink to {target:?} passes through a symlink with an empty target"));
                    }
                    if t.starts_with('/') {
                        return Err(absolute(t));
                    }
                    pending.extend(t.split('/').rev());
                }
            }
        }
    }
    Ok(())
}

/// The rules over a whole set of entries, whatever their order: every symlink resolves inside
/// the home through the others ([`resolve_link`]), and every parent of an entry is a directory
/// entry of the set (never a symlink, a file, or missing). Checked before anything is made.
pub(crate) fn check_tree<'a>(entries: impl Iterator<Item = (&'a str, Kind, Option<&'a str>)>) -> Result<()> {
    let list: Vec<(&str, Kind, Option<&str>)> = entries.collect();
    let tree: HashMap<&str, (Kind, Option<&str>)> = list.iter().map(|(p, k, t)| (*p, (*k, *t))).collect();
    for (path, kind, target) in &list {
        if *kind == Kind::Symlink {
            resolve_link(&tree, path, target.unwrap_or_default()).map_err(|why| VolumeError::unsafe_entry(*path, why))?;
        }
    }
    for (path, _, _) in &list {
        let mut end = 0;
        let parts: Vec<&str> = path.split('/').collect();
        for part in &parts[..parts.len().saturating_sub(1)] {
            end += part.len();
            let prefix = &path[..end];
            match tree.get(prefix) {
                Some((Kind::Dir, _)) => {}
                Some((Kind::Symlink, _)) => {
                    return Err(VolumeError::unsafe_entry(
                        *path,
                        format!("lies beneath the symlink {prefix:?}: it would be written through it"),
                    ))
                }
                Some((Kind::File, _)) => return Err(VolumeError::unsafe_entry(*path, format!("{prefix:?} is a file, not a directory"))),
                None => return Err(VolumeError::unsafe_entry(*path, format!("its parent {prefix:?} is not a directory of the snapshot"))),
            }
            end += 1;
        }
    }
    Ok(())
}

/// Refuses paths that are empty, absolute, or hold `.`, `..` or empty parts, NULs or backslash
/// tricks; returns the path's parts.
pub(crate) fn check_rel_path(path: &str) -> Result<Vec<&str>> {
    let refuse = |why: &str| Err(VolumeError::unsafe_entry(path, why));
    if path.is_empty() {
        return refuse("empty path");
    }
    if path.starts_with('/') {
        return refuse("absolute path");
    }
    if path.contains('\0') {
        return refuse("NUL in path");
    }
    let parts: Vec<&str> = path.split('/').collect();
    for p in &parts {
        match *p {
            ".." => return refuse("`..` part escapes the home"),
            "." | "" => return refuse("`.` or empty part in path"),
            _ => {}
        }
    }
    Ok(parts)
}

/// Whether a symlink at `path` with `target` resolves (lexically) inside the home.
pub(crate) fn symlink_inside(path: &str, target: &str) -> bool {
    if target.is_empty() || target.starts_with('/') || target.contains('\0') {
        return false;
    }
    let mut depth: Vec<&str> = path.split('/').collect();
    depth.pop();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if depth.pop().is_none() {
                    return false;
                }
            }
            p => depth.push(p),
        }
    }
    true
}

/// Tracks the entries laid down so far, refusing what would escape: duplicate paths, entries
/// under a symlink (written through it) or under a file, symlinks or hard links leaving the home.
#[derive(Default)]
pub(crate) struct Guard {
    kinds: HashMap<String, Kind>,
}

impl Guard {
    fn place(&mut self, path: &str, kind: Kind) -> Result<()> {
        let parts = check_rel_path(path)?;
        let mut prefix = String::new();
        for p in &parts[..parts.len() - 1] {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(p);
            match self.kinds.get(&prefix) {
                Some(Kind::Symlink) => {
                    return Err(VolumeError::unsafe_entry(path, format!("written through the earlier symlink {prefix:?}")))
                }
                Some(Kind::File) => return Err(VolumeError::unsafe_entry(path, format!("{prefix:?} is a file, not a directory"))),
                _ => {}
            }
        }
        match self.kinds.get(path) {
            Some(Kind::Dir) if kind == Kind::Dir => Ok(()),
            Some(_) => Err(VolumeError::unsafe_entry(path, "appears twice")),
            None => {
                self.kinds.insert(path.to_string(), kind);
                Ok(())
            }
        }
    }

    /// The parents of `path` that are not yet placed (to create as directories), outermost first.
    pub fn missing_parents(&self, path: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut prefix = String::new();
        let parts: Vec<&str> = path.split('/').collect();
        for p in &parts[..parts.len().saturating_sub(1)] {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(p);
            if !self.kinds.contains_key(&prefix) {
                out.push(prefix.clone());
            }
        }
        out
    }

    pub fn dir(&mut self, path: &str) -> Result<()> {
        self.place(path, Kind::Dir)
    }

    pub fn file(&mut self, path: &str) -> Result<()> {
        self.place(path, Kind::File)
    }

    pub fn symlink(&mut self, path: &str, target: &str) -> Result<()> {
        if !symlink_inside(path, target) {
            return Err(VolumeError::unsafe_entry(path, format!("symlink to {target:?} points outside the home")));
        }
        self.place(path, Kind::Symlink)
    }

    /// A hard link must name an earlier regular file of the same archive.
    pub fn hardlink(&mut self, path: &str, target: &str) -> Result<()> {
        if check_rel_path(target).is_err() {
            return Err(VolumeError::unsafe_entry(path, format!("hard link to {target:?} points outside the home")));
        }
        if self.kinds.get(target) != Some(&Kind::File) {
            return Err(VolumeError::unsafe_entry(path, format!("hard link to {target:?}, which is not an earlier file of the archive")));
        }
        self.place(path, Kind::File)
    }

    pub fn is_placed(&self, path: &str) -> bool {
        self.kinds.contains_key(path)
    }
}
