//! Local file-system steps of a restore: staging directories, modes and times applied after
//! contents (directories last, deepest first), the atomic swap, and removal of trees that hold
//! read-only directories.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::sys::stat::{utimensat, UtimensatFlags};
use nix::sys::time::TimeSpec;

use crate::error::{IoContext, Result, VolumeError};
use crate::manifest::{Kind, Root};

/// A fresh, private (0700) directory `.<name>.<what>-<nonce>` beside `target`, on the same file
/// system so the final rename is atomic.
pub(crate) fn staging_beside(target: &Path, what: &str) -> Result<PathBuf> {
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "home".into());
    if !parent.is_dir() {
        return Err(VolumeError::io(parent, std::io::Error::new(std::io::ErrorKind::NotFound, "the target's parent directory does not exist")));
    }
    let staging = parent.join(format!(".{name}.{what}-{}", crate::lease::nonce()));
    fs::create_dir(&staging).at(&staging)?;
    fs::set_permissions(&staging, fs::Permissions::from_mode(0o700)).at(&staging)?;
    Ok(staging)
}

/// Removes `path` whatever it is, making directories writable first (a 0555 directory holding
/// files cannot be emptied otherwise). Never follows symlinks. A missing path is fine.
pub(crate) fn force_remove(path: &Path) -> Result<()> {
    let md = match fs::symlink_metadata(path) {
        Ok(md) => md,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(VolumeError::io(path, e)),
    };
    if !md.is_dir() {
        return fs::remove_file(path).at(path);
    }
    if md.permissions().mode() & 0o700 != 0o700 {
        fs::set_permissions(path, fs::Permissions::from_mode(0o700)).at(path)?;
    }
    for ent in fs::read_dir(path).at(path)? {
        force_remove(&ent.at(path)?.path())?;
    }
    fs::remove_dir(path).at(path)
}

fn ts(ns: i64) -> TimeSpec {
    TimeSpec::new(ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000))
}

/// Sets mtime (and atime to the same) of `path` without following a final symlink.
pub(crate) fn set_mtime(path: &Path, mtime_ns: i64) -> Result<()> {
    let t = ts(mtime_ns);
    utimensat(nix::fcntl::AT_FDCWD, path, &t, &t, UtimensatFlags::NoFollowSymlink)
        .map_err(|e| VolumeError::io(path, std::io::Error::from_raw_os_error(e as i32)))
}

/// One entry whose metadata is applied after all contents are in place.
pub(crate) struct Finish {
    pub path: String,
    pub kind: Kind,
    pub mode: u32,
    pub mtime_ns: i64,
}

/// Applies modes and times: files and symlinks first, then directories deepest first, then the
/// root, so writing into a directory never happens after it became read-only.
pub(crate) fn apply_metadata(staging: &Path, root: Root, entries: &mut [Finish]) -> Result<()> {
    for e in entries.iter().filter(|e| e.kind != Kind::Dir) {
        let p = staging.join(&e.path);
        if e.kind == Kind::File {
            fs::set_permissions(&p, fs::Permissions::from_mode(e.mode & crate::scan::MODE_MASK)).at(&p)?;
        }
        set_mtime(&p, e.mtime_ns)?;
    }
    let mut dirs: Vec<&Finish> = entries.iter().filter(|e| e.kind == Kind::Dir).collect();
    dirs.sort_by_key(|e| std::cmp::Reverse(e.path.matches('/').count()));
    for e in dirs {
        let p = staging.join(&e.path);
        fs::set_permissions(&p, fs::Permissions::from_mode(e.mode & crate::scan::MODE_MASK)).at(&p)?;
        set_mtime(&p, e.mtime_ns)?;
    }
    fs::set_permissions(staging, fs::Permissions::from_mode(root.mode & crate::scan::MODE_MASK)).at(staging)?;
    set_mtime(staging, root.mtime_ns)
}

/// Puts `staging` in place of `target`: target → backup, staging → target, then the backup is
/// removed. If the second rename fails the backup is put back, so target is exactly as before.
pub(crate) fn swap_in(staging: &Path, target: &Path) -> Result<()> {
    match fs::symlink_metadata(target) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return fs::rename(staging, target).at(target),
        Err(e) => return Err(VolumeError::io(target, e)),
        Ok(_) => {}
    }
    let backup = staging.with_file_name(format!(
        "{}.old",
        staging.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    ));
    fs::rename(target, &backup).at(target)?;
    if let Err(e) = fs::rename(staging, target) {
        let _ = fs::rename(&backup, target);
        return Err(VolumeError::io(target, e));
    }
    if let Err(e) = force_remove(&backup) {
        tracing::warn!(backup = %backup.display(), error = %e, "could not remove the previous copy after a restore");
    }
    Ok(())
}
