//! Confinement at open time: every path is opened relative to the root's file descriptor by the
//! kernel, never resolved by string tests.
//!
//! Theory of operation. A path first passes a cheap string gate ([`components`]): empty,
//! absolute, NUL or `..` is `PATH_ESCAPE`; `.` and empty components (`a//b`) are dropped. The
//! remaining components are then opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS)` relative to the root fd ([`via_openat2`]), so the kernel refuses a
//! symlink anywhere on the path (`ELOOP`) and any escape (`EXDEV`). Kernels without `openat2`
//! (`ENOSYS`, or `EPERM` from an old seccomp filter) get [`via_walk`]: one `openat` per component,
//! each parent with `O_NOFOLLOW | O_DIRECTORY`, the leaf with `O_NOFOLLOW`. Errno values map to
//! their refusals in [`refusal`]. [`open_regular`] adds the file-type check after the open (`fstat`):
//! only regular files are read; FIFOs are opened `O_NONBLOCK` so they never block.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::error::{Error, Result};
use nix::errno::Errno;
use nix::fcntl::{openat, openat2, AtFlags, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{fstat, fstatat, FileStat, Mode, SFlag};

/// The normal components of a workspace-relative `path` (`.` and empty components dropped).
///
/// Errors: `PATH_ESCAPE` for an empty or absolute path, a NUL byte, or a `..` component. A path
/// of only `.` gives no components (the root itself).
pub(crate) fn components(path: &str) -> Result<Vec<&str>> {
    let escape = |why: &'static str| Error::PathEscape { path: path.to_owned(), why };
    if path.is_empty() {
        return Err(escape("is empty"));
    }
    if path.contains('\0') {
        return Err(escape("contains a NUL byte"));
    }
    if path.starts_with('/') {
        return Err(escape("is absolute"));
    }
    let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    if comps.contains(&"..") {
        return Err(escape("has a `..` component"));
    }
    Ok(comps)
}

/// Opens `comps` beneath `root` with `flags` (`O_CLOEXEC` is added): [`via_openat2`], falling
/// back to [`via_walk`] when the kernel lacks `openat2`. Errors are raw errno values; map them
/// with [`refusal`].
pub(crate) fn open_beneath(root: BorrowedFd, comps: &[&str], flags: OFlag) -> nix::Result<OwnedFd> {
    match via_openat2(root, comps, flags) {
        Err(Errno::ENOSYS | Errno::EPERM) => via_walk(root, comps, flags),
        other => other,
    }
}

/// `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`.
pub(crate) fn via_openat2(root: BorrowedFd, comps: &[&str], flags: OFlag) -> nix::Result<OwnedFd> {
    let rel = if comps.is_empty() { ".".to_owned() } else { comps.join("/") };
    let how = OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    openat2(root, rel.as_str(), how)
}

/// The fallback: one `openat` per component, never following a symlink. Each parent is opened
/// `O_PATH | O_DIRECTORY | O_NOFOLLOW`; the leaf with `flags | O_NOFOLLOW`. A symlink met on the
/// way is `ELOOP` (an `O_PATH` open of a symlink leaf succeeds; [`open_regular`] refuses it
/// after `fstat`). `..` cannot occur: [`components`] refused it.
pub(crate) fn via_walk(root: BorrowedFd, comps: &[&str], flags: OFlag) -> nix::Result<OwnedFd> {
    let Some((leaf, parents)) = comps.split_last() else {
        return openat(root, ".", flags | OFlag::O_CLOEXEC, Mode::empty());
    };
    let mut dir: Option<OwnedFd> = None;
    let parent_flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    for comp in parents {
        let base = dir.as_ref().map_or(root, |d| d.as_fd());
        let next = openat(base, *comp, parent_flags, Mode::empty()).map_err(|e| refine(base, comp, e))?;
        dir = Some(next);
    }
    let base = dir.as_ref().map_or(root, |d| d.as_fd());
    let leaf_flags = flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    openat(base, *leaf, leaf_flags, Mode::empty()).map_err(|e| refine(base, leaf, e))
}

/// `O_PATH | O_NOFOLLOW | O_DIRECTORY` on a symlink reports `ENOTDIR`; say `ELOOP` instead
/// when the entry really is a symlink, so callers see `SYMLINK_REJECTED`.
fn refine(base: BorrowedFd, comp: &str, err: Errno) -> Errno {
    if err != Errno::ENOTDIR {
        return err;
    }
    match fstatat(base, comp, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) if file_type(&st) == SFlag::S_IFLNK => Errno::ELOOP,
        _ => err,
    }
}

/// The `S_IFMT` bits of `st`.
pub(crate) fn file_type(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT
}

/// Maps an open error on `path` to its refusal, with a message that says what to do.
pub(crate) fn refusal(err: Errno, path: &str) -> Error {
    let path = path.to_owned();
    match err {
        Errno::ELOOP => Error::SymlinkRejected { path },
        Errno::EXDEV => Error::PathEscape { path, why: "resolves outside the workspace root" },
        Errno::ENOENT => Error::FileNotFound { path, hint: " (its version is `absent`); check the path with find" },
        Errno::ENOTDIR => Error::PathNotDirectory { path },
        Errno::ENXIO => Error::SpecialFileRejected { path },
        other => Error::FileOperationFailed { path, action: "opening", source: other.into() },
    }
}

/// Opens `path` for reading as a regular file: `Ok(None)` when it does not exist (a missing
/// parent directory included), else the file and its `fstat`.
///
/// Errors: `PATH_ESCAPE`, `SYMLINK_REJECTED`, `PATH_NOT_DIRECTORY` (a parent is a file),
/// `SPECIAL_FILE_REJECTED` (FIFO, device, socket), `INVALID_ARGUMENT` (a directory),
/// `FILE_OPERATION_FAILED` (anything else, e.g. permissions).
pub(crate) fn open_regular(root: BorrowedFd, path: &str) -> Result<Option<(File, FileStat)>> {
    let comps = components(path)?;
    let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    let fd = match open_beneath(root, &comps, flags) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Ok(None),
        Err(err) => return Err(refusal(err, path)),
    };
    let st = fstat(fd.as_fd()).map_err(|e| refusal(e, path))?;
    match file_type(&st) {
        SFlag::S_IFREG => Ok(Some((File::from(fd), st))),
        SFlag::S_IFDIR => Err(Error::IsDirectory { path: path.to_owned() }),
        SFlag::S_IFLNK => Err(refusal(Errno::ELOOP, path)),
        _ => Err(Error::SpecialFileRejected { path: path.to_owned() }),
    }
}

/// Opens the directory `comps` beneath `root` for `fsync` and `*at` calls (`O_RDONLY |
/// O_DIRECTORY`). Errors: raw errno (`ENOENT`, `ENOTDIR`, `ELOOP`, ...).
pub(crate) fn open_dir(root: BorrowedFd, comps: &[&str]) -> nix::Result<OwnedFd> {
    open_beneath(root, comps, OFlag::O_RDONLY | OFlag::O_DIRECTORY)
}
