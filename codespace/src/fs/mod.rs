//! The workspace filesystem: a root directory and the file tools of the CodeSpace execution
//! layer (API.md, "CodeSpace execution layer": `read`, `find`, Paths, `apply_patch`'s commit).
//!
//! Theory of operation. [`Root::open_bound`] opens a Space's folder at its registered path (no
//! symlink on the way) and keeps an `O_PATH | O_DIRECTORY` descriptor of it; the service opens
//! one per call, so a folder replaced at its path is the new one and a renamed folder is never
//! followed to its new name (case R43). ([`Root::open`] canonicalizes a path once instead, for
//! callers with no registered path.) Every access goes through that descriptor:
//! paths are opened by the kernel with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` (or a
//! no-follow walk on old kernels), so a symlink anywhere on a path, `..`, an absolute path or
//! a FIFO/device is refused at open time, never by string tests alone (see the `confine` module).
//!
//! - [`Root::read`]: a window of one regular file (<= 1 MiB) with the whole file's version.
//! - [`Root::find`]: a no-follow walk listing regular files matching a glob, sorted, paged.
//! - [`Root::plan_patch`]: the pure V4A engine ([`spaces_v4a`]) planned against the confined
//!   source, so a patch naming an escaping path is refused before anything is written.
//! - [`Root::commit`]: writes a plan atomically (re-check, stage temps, swap, verify), rolling
//!   back from the in-memory `before` bytes on failure.

mod commit;
mod confine;
mod find;
mod read;
mod report;
mod swap;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use nix::fcntl::{open, OFlag};
use nix::sys::stat::Mode;

pub use find::{FIND_MAX_PATHS, FIND_MAX_VISITS};
pub use read::READ_MAX_BYTES;
pub use report::{change_record, ChangeRecord, CommitReport, CommitStatus};
pub use spaces_sdk::tools::{FindResult, ReadResult};

/// A workspace root: the descriptor every confined open starts from, and its canonical path.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
    path: PathBuf,
}

impl Root {
    /// Opens the workspace root at `path` (symlinks in `path` itself are resolved once, here).
    ///
    /// Errors: [`Error::RootUnavailable`]: `FILE_NOT_FOUND` when it does not exist,
    /// `PATH_NOT_DIRECTORY` when it is not a directory, `FILE_OPERATION_FAILED` when it cannot
    /// be opened.
    pub fn open(path: &Path) -> Result<Root> {
        let unavailable = |source: std::io::Error| Error::RootUnavailable { root: path.to_path_buf(), source };
        let canonical = std::fs::canonicalize(path).map_err(unavailable)?;
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let fd = open(canonical.as_path(), flags, Mode::empty()).map_err(|e| unavailable(e.into()))?;
        Ok(Root { fd, path: canonical })
    }

    /// Opens the folder registered at `path` as a workspace root **bound to that path** (case
    /// R43): `path` must be absolute and lead to the directory with no symlink on its way (the
    /// daemon registers Spaces by their canonical path), and is opened now, never followed
    /// elsewhere. Each tool call opens its Space's root this way, so a folder renamed away and
    /// replaced by another at the registered path is the new one from the next call on (the
    /// renamed folder is never touched again), and a folder gone, or a symlink put in its place,
    /// is refused naming the change. The open refuses symlinks in the kernel
    /// (`openat2(RESOLVE_NO_SYMLINKS)` from `/`, or a no-follow walk on old kernels), so no check
    /// and open can be raced apart.
    ///
    /// Errors: [`Error::RootGone`] (nothing at `path`, or a parent missing: `WORKSPACE_NOT_FOUND`),
    /// [`Error::RootRedirected`] (a symlink at `path` or on its way: `SYMLINK_REJECTED`),
    /// [`Error::RootUnavailable`] (not a directory: `PATH_NOT_DIRECTORY`; anything else:
    /// `FILE_OPERATION_FAILED`).
    pub fn open_bound(path: &Path) -> Result<Root> {
        let text = path.to_str().unwrap_or_default();
        let unavailable = |source: std::io::Error| Error::RootUnavailable { root: path.to_path_buf(), source };
        let Some(rel) = text.strip_prefix('/') else {
            return Err(unavailable(std::io::Error::other("the registered path is not absolute UTF-8")));
        };
        let comps = confine::components(if rel.is_empty() { "." } else { rel })
            .map_err(|_| unavailable(std::io::Error::other("the registered path holds a `..` component")))?;
        let fs_root = open(Path::new("/"), OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())
            .map_err(|e| unavailable(e.into()))?;
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY;
        match confine::open_beneath(fs_root.as_fd(), &comps, flags) {
            Ok(fd) => Ok(Root { fd, path: path.to_path_buf() }),
            Err(nix::errno::Errno::ENOENT) => Err(Error::RootGone { root: path.to_path_buf() }),
            Err(nix::errno::Errno::ELOOP) => Err(Error::RootRedirected { root: path.to_path_buf(), now: std::fs::canonicalize(path).ok() }),
            Err(e) => Err(unavailable(e.into())),
        }
    }

    /// The canonical absolute path of the root.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Checks that `rel` is an existing directory inside the root (for a process's cwd) and
    /// returns its absolute path. `.` is the root itself; an empty path is `PATH_ESCAPE`.
    ///
    /// Errors: as for any confined path (`PATH_ESCAPE`, `SYMLINK_REJECTED`, `FILE_NOT_FOUND`),
    /// and `PATH_NOT_DIRECTORY` when it (or a parent) is not a directory.
    pub fn check_dir(&self, rel: &str) -> Result<PathBuf> {
        let comps = confine::components(rel)?;
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY;
        confine::open_beneath(self.fd(), &comps, flags).map_err(|e| confine::refusal(e, rel))?;
        Ok(comps.iter().fold(self.path.clone(), |p, c| p.join(c)))
    }

    /// Plans `patch` against the current files, read through the confined source (API.md,
    /// `apply_patch`: the whole patch is checked before any write). Nothing is written.
    ///
    /// Errors: those of [`spaces_v4a::plan`], and the refusals of a path the workspace refuses
    /// (`PATH_ESCAPE`, `SYMLINK_REJECTED`, `SPECIAL_FILE_REJECTED`, ...).
    pub fn plan_patch(&self, patch: &str, expected: &BTreeMap<String, String>) -> Result<spaces_v4a::Plan> {
        spaces_v4a::plan(patch, expected, self)
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The whole content and permission bits of `path`, `None` when it does not exist.
    fn load(&self, path: &str) -> Result<Option<(Vec<u8>, u32)>> {
        use std::io::Read;
        let Some((mut file, st)) = confine::open_regular(self.fd(), path)? else {
            return Ok(None);
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|source| Error::FileOperationFailed { path: path.to_owned(), action: "reading", source })?;
        Ok(Some((bytes, st.st_mode & 0o7777)))
    }
}

/// The confined source of the patch engine: a missing file is `None`; a refused path is the
/// refusal itself (`PATH_ESCAPE`, `SYMLINK_REJECTED`, ...).
impl spaces_v4a::Source for Root {
    type Error = Error;

    fn read(&self, path: &str) -> Result<Option<Vec<u8>>> {
        self.load(path).map(|found| found.map(|(bytes, _)| bytes))
    }
}
