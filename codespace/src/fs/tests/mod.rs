//! Tests of the workspace filesystem on real files in temp directories.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bound;
mod commit;
mod confine;
mod find;
mod read;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use tempfile::TempDir;

use super::Root;

/// A fresh workspace directory and its root.
pub(super) fn workspace() -> (TempDir, Root) {
    let dir = TempDir::new().unwrap();
    let root = Root::open(dir.path()).unwrap();
    (dir, root)
}

/// Writes `bytes` at `rel` under `base`, creating parents.
pub(super) fn put(base: &Path, rel: &str, bytes: &[u8]) {
    let path = base.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// Everything under `base` (never following symlinks): relative path -> kind, mode and bytes
/// (a symlink's target for a link). Two equal snapshots mean no byte or mode changed.
pub(super) fn snapshot(base: &Path) -> BTreeMap<String, (String, u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![base.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode();
            let ft = meta.file_type();
            let value = if ft.is_symlink() {
                ("link".to_owned(), mode, std::fs::read_link(&path).unwrap().into_os_string().into_encoded_bytes())
            } else if ft.is_dir() {
                stack.push(path.clone());
                ("dir".to_owned(), mode, Vec::new())
            } else if ft.is_file() {
                ("file".to_owned(), mode, std::fs::read(&path).unwrap())
            } else {
                ("special".to_owned(), mode, Vec::new())
            };
            out.insert(rel, value);
        }
    }
    out
}
