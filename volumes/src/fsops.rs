//! Local file-system steps of a restore: staging directories, modes and times applied after
//! contents (directories last, deepest first), the atomic swap, and removal of trees that hold
//! read-only directories.

use std::ffi::CString;
use std::fs;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::openat;
use nix::sys::stat::{fchmod, fchmodat, fstat, FchmodatFlags, Mode};
use nix::unistd::{unlinkat, UnlinkatFlags};

use crate::beneath::Beneath;
use crate::error::{IoContext, Result, VolumeError};
use crate::manifest::{Kind, Root};

/// A fresh, private (0700) directory `.<name>.<what>-<nonce>` beside `target`, on the same file
/// system so the final rename is atomic; returned with a [`Beneath`] of it (everything built in
/// it goes through that descriptor, never through its path).
pub(crate) fn staging_beside(target: &Path, what: &str) -> Result<(PathBuf, Beneath)> {
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "home".into());
    if !parent.is_dir() {
        return Err(VolumeError::io(
            parent,
            std::io::Error::new(std::io::ErrorKind::NotFound, "the target's parent directory does not exist"),
        ));
    }
    let staging = parent.join(format!(".{name}.{what}-{}", crate::lease::nonce()));
    fs::DirBuilder::new().mode(0o700).create(&staging).at(&staging)?;
    let root = Beneath::open(&staging)?;
    root.set_root_mode(0o700)?;
    Ok((staging, root))
}

use crate::beneath::{errno_io, DIR_FLAGS};

/// Removes `path` whatever it is, making directories writable first (a 0555 directory holding
/// files cannot be emptied otherwise). Never follows symlinks, and changes no mode outside the
/// tree: every directory is opened `O_NOFOLLOW` from its parent's descriptor. A missing path is
/// fine.
pub(crate) fn force_remove(path: &Path) -> Result<()> {
    let md = match fs::symlink_metadata(path) {
        Ok(md) => md,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(VolumeError::io(path, e)),
    };
    if !md.is_dir() {
        return fs::remove_file(path).at(path);
    }
    let dir = match openat(nix::fcntl::AT_FDCWD, path, DIR_FLAGS, Mode::empty()) {
        Ok(fd) => fd,
        // Replaced by a symlink meanwhile: remove the link, follow nothing.
        Err(Errno::ELOOP | Errno::ENOTDIR) => return fs::remove_file(path).at(path),
        Err(Errno::ENOENT) => return Ok(()),
        Err(Errno::EACCES) => {
            fchmodat(nix::fcntl::AT_FDCWD, path, Mode::from_bits_truncate(0o700), FchmodatFlags::NoFollowSymlink)
                .map_err(|e| errno_io(path, e))?;
            openat(nix::fcntl::AT_FDCWD, path, DIR_FLAGS, Mode::empty()).map_err(|e| errno_io(path, e))?
        }
        Err(e) => return Err(errno_io(path, e)),
    };
    empty_dir(&dir, path)?;
    fs::remove_dir(path).at(path)
}

/// Removes everything in the open directory `dir` (shown as `shown` in errors).
fn empty_dir(dir: &OwnedFd, shown: &Path) -> Result<()> {
    let st = fstat(dir).map_err(|e| errno_io(shown, e))?;
    if st.st_mode & 0o700 != 0o700 {
        fchmod(dir, Mode::from_bits_truncate(0o700)).map_err(|e| errno_io(shown, e))?;
    }
    let listing = dir.try_clone().map_err(|e| VolumeError::io(shown, e))?;
    let mut names: Vec<CString> = Vec::new();
    let mut listed = nix::dir::Dir::from_fd(listing).map_err(|e| errno_io(shown, e))?;
    for ent in listed.iter() {
        let ent = ent.map_err(|e| errno_io(shown, e))?;
        let n = ent.file_name();
        if n.to_bytes() != b"." && n.to_bytes() != b".." {
            names.push(n.to_owned());
        }
    }
    for name in names {
        let here = shown.join(std::ffi::OsStr::from_bytes(name.as_bytes()));
        let opened = match openat(dir, name.as_c_str(), DIR_FLAGS, Mode::empty()) {
            Err(Errno::EACCES) => {
                // A directory without read or search permission for its owner: give it back
                // (never through a symlink: refused for one).
                fchmodat(dir, name.as_c_str(), Mode::from_bits_truncate(0o700), FchmodatFlags::NoFollowSymlink)
                    .map_err(|e| errno_io(&here, e))?;
                openat(dir, name.as_c_str(), DIR_FLAGS, Mode::empty())
            }
            other => other,
        };
        match opened {
            Ok(sub) => {
                empty_dir(&sub, &here)?;
                unlinkat(dir, name.as_c_str(), UnlinkatFlags::RemoveDir).map_err(|e| errno_io(&here, e))?;
            }
            Err(Errno::ELOOP | Errno::ENOTDIR) => {
                unlinkat(dir, name.as_c_str(), UnlinkatFlags::NoRemoveDir).map_err(|e| errno_io(&here, e))?
            }
            Err(Errno::ENOENT) => {}
            Err(e) => return Err(errno_io(&here, e)),
        }
    }
    Ok(())
}

/// One entry whose metadata is applied after all contents are in place.
pub(crate) struct Finish {
    pub path: String,
    pub kind: Kind,
    pub mode: u32,
    pub mtime_ns: i64,
}

/// Applies modes and times: files and symlinks first, then directories deepest first, then the
/// root, so writing into a directory never happens after it became read-only. Every entry is
/// reached beneath `staging` without following a symlink ([`Beneath::finish`]).
pub(crate) fn apply_metadata(staging: &Beneath, root: Root, entries: &mut [Finish]) -> Result<()> {
    for e in entries.iter().filter(|e| e.kind != Kind::Dir) {
        staging.finish(&e.path, e.kind, e.mode, e.mtime_ns)?;
    }
    let mut dirs: Vec<&Finish> = entries.iter().filter(|e| e.kind == Kind::Dir).collect();
    dirs.sort_by_key(|e| std::cmp::Reverse(e.path.matches('/').count()));
    for e in dirs {
        staging.finish(&e.path, Kind::Dir, e.mode, e.mtime_ns)?;
    }
    staging.finish_root(root.mode, root.mtime_ns)
}

/// Puts `staging` in place of `target`: target → backup, staging → target, then the backup is
/// removed. If the second rename fails the backup is put back, so target is exactly as before.
pub(crate) fn swap_in(staging: &Path, target: &Path) -> Result<()> {
    match fs::symlink_metadata(target) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return fs::rename(staging, target).at(target),
        Err(e) => return Err(VolumeError::io(target, e)),
        Ok(_) => {}
    }
    let backup =
        staging.with_file_name(format!("{}.old", staging.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()));
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
