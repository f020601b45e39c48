//! File-system work confined physically beneath one directory (case V41).
//!
//! A [`Beneath`] holds a file descriptor of a directory (a restore's staging directory, the
//! home being saved). Every entry is reached from that descriptor, one component at a time:
//! each parent is opened with `O_DIRECTORY | O_NOFOLLOW`, so a symlink on the way (`notes ->
//! loop/loop/../../outside`) fails the call instead of being followed, whatever the order the
//! entries came in and whatever the links say as text. The final component is created or opened
//! without following it either (`O_EXCL | O_NOFOLLOW` for new files, `symlinkat`, `mkdirat`);
//! modes and times are set through the entry's own descriptor (`fchmod`, `futimens`), or for a
//! symlink with `utimensat(AT_SYMLINK_NOFOLLOW)` on its parent. A symlink is created as a
//! symlink and never followed.
//!
//! A refusal because a parent is a symlink or not a directory is [`VolumeError::Unsafe`] naming
//! the entry; other failures are `Io`.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat, AtFlags, OFlag};
use nix::sys::stat::{fchmod, fstat, fstatat, futimens, mkdirat, utimensat, FileStat, Mode, SFlag, UtimensatFlags};
use nix::sys::time::TimeSpec;

use crate::error::{Result, VolumeError};
use crate::manifest::Kind;

/// Permission bits kept: set-uid and set-gid are never stored or restored.
pub(crate) const MODE_MASK: u32 = 0o1777;

/// A directory that entries are made and read beneath, never through a symlink.
pub(crate) struct Beneath {
    root: OwnedFd,
    path: PathBuf,
}

impl std::fmt::Debug for Beneath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Beneath").field("path", &self.path).finish()
    }
}

pub(crate) fn errno_io(path: &Path, e: Errno) -> VolumeError {
    VolumeError::io(path, std::io::Error::from_raw_os_error(e as i32))
}

pub(crate) const DIR_FLAGS: OFlag = OFlag::O_RDONLY.union(OFlag::O_DIRECTORY).union(OFlag::O_NOFOLLOW).union(OFlag::O_CLOEXEC);

fn ts(ns: i64) -> TimeSpec {
    TimeSpec::new(ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000))
}

/// The parent of an entry: the root's descriptor or one opened on the way.
enum Parent<'a> {
    Root(BorrowedFd<'a>),
    Opened(OwnedFd),
}

impl Parent<'_> {
    fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Parent::Root(fd) => *fd,
            Parent::Opened(fd) => fd.as_fd(),
        }
    }
}

impl Beneath {
    /// Opens directory `path` (itself not a symlink).
    pub fn open(path: &Path) -> Result<Beneath> {
        let root = openat(nix::fcntl::AT_FDCWD, path, DIR_FLAGS, Mode::empty()).map_err(|e| errno_io(path, e))?;
        Ok(Beneath { root, path: path.to_path_buf() })
    }

    /// The directory's path (for messages and for work that needs a path).
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn abs(&self, rel: &str) -> PathBuf {
        self.path.join(rel)
    }

    /// Why component `prefix` of entry `rel` could not be opened as a directory: `Unsafe` when it
    /// is a symlink or not a directory, else the error itself.
    fn refusal(&self, dir: BorrowedFd<'_>, name: &str, prefix: &str, rel: &str, e: Errno) -> VolumeError {
        if matches!(e, Errno::ELOOP | Errno::ENOTDIR) {
            let what = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).map(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT);
            return match what {
                Ok(t) if t == SFlag::S_IFLNK => {
                    VolumeError::unsafe_entry(rel, format!("lies beneath the symlink {prefix:?}: never followed"))
                }
                Ok(_) => VolumeError::unsafe_entry(rel, format!("{prefix:?} is not a directory")),
                Err(_) => errno_io(&self.abs(prefix), e),
            };
        }
        errno_io(&self.abs(prefix), e)
    }

    /// Opens every parent of `rel` from the root, without following any symlink; returns the
    /// innermost one and the final name.
    fn parent<'a>(&self, rel: &'a str) -> Result<(Parent<'_>, &'a str)> {
        let (dirs, name) = match rel.rsplit_once('/') {
            Some((d, n)) => (Some(d), n),
            None => (None, rel),
        };
        if name.is_empty() || name == "." || name == ".." {
            return Err(VolumeError::unsafe_entry(rel, "`.`, `..` or empty part in path"));
        }
        let mut cur = Parent::Root(self.root.as_fd());
        let Some(dirs) = dirs else { return Ok((cur, name)) };
        let mut end = 0;
        for part in dirs.split('/') {
            end += part.len();
            if part.is_empty() || part == "." || part == ".." {
                return Err(VolumeError::unsafe_entry(rel, "`.`, `..` or empty part in path"));
            }
            let next = openat(cur.fd(), part, DIR_FLAGS, Mode::empty()).map_err(|e| self.refusal(cur.fd(), part, &dirs[..end], rel, e))?;
            cur = Parent::Opened(next);
            end += 1;
        }
        Ok((cur, name))
    }

    /// The root directory's descriptor.
    pub fn root_fd(&self) -> BorrowedFd<'_> {
        self.root.as_fd()
    }

    /// `lstat` of entry `rel`, reached without following a symlink on the way.
    pub fn lstat(&self, rel: &str) -> Result<FileStat> {
        let (parent, name) = self.parent(rel)?;
        fstatat(parent.fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW).map_err(|e| errno_io(&self.abs(rel), e))
    }

    /// Whether the path of entry `rel` (`path()/rel`, as a library that only takes paths would
    /// resolve it, symlinks followed) names, right now, the directory reached beneath the root
    /// without following any: same device and inode. For SQLite, checked before and after it
    /// reads a database by path.
    pub fn path_is_beneath(&self, rel: &str) -> bool {
        let Ok((parent, _)) = self.parent(rel) else { return false };
        let Ok(mine) = fstat(parent.fd()) else { return false };
        let dir = match rel.rsplit_once('/') {
            Some((d, _)) => self.path.join(d),
            None => self.path.clone(),
        };
        match nix::sys::stat::stat(&dir) {
            Ok(theirs) => theirs.st_dev == mine.st_dev && theirs.st_ino == mine.st_ino,
            Err(_) => false,
        }
    }

    /// Makes directory `rel` (0700 until its metadata is applied).
    pub fn mkdir(&self, rel: &str) -> Result<()> {
        let (parent, name) = self.parent(rel)?;
        mkdirat(parent.fd(), name, Mode::from_bits_truncate(0o700)).map_err(|e| match e {
            Errno::EEXIST => VolumeError::unsafe_entry(rel, "appears twice"),
            e => errno_io(&self.abs(rel), e),
        })?;
        // Whatever the umask took away: the directory must be writable until it is finished.
        let fd = openat(parent.fd(), name, DIR_FLAGS, Mode::empty()).map_err(|e| self.refusal(parent.fd(), name, rel, rel, e))?;
        fchmod(&fd, Mode::from_bits_truncate(0o700)).map_err(|e| errno_io(&self.abs(rel), e))
    }

    /// Makes symlink `rel` pointing at `target` (never followed here).
    pub fn symlink(&self, rel: &str, target: &str) -> Result<()> {
        let (parent, name) = self.parent(rel)?;
        nix::unistd::symlinkat(target, parent.fd(), name).map_err(|e| match e {
            Errno::EEXIST => VolumeError::unsafe_entry(rel, "appears twice"),
            e => errno_io(&self.abs(rel), e),
        })
    }

    /// Creates the new regular file `rel` (never an existing entry: `O_EXCL`), 0600.
    pub fn create_file(&self, rel: &str) -> Result<File> {
        let (parent, name) = self.parent(rel)?;
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = openat(parent.fd(), name, flags, Mode::from_bits_truncate(0o600)).map_err(|e| match e {
            Errno::EEXIST => VolumeError::unsafe_entry(rel, "appears twice"),
            e => errno_io(&self.abs(rel), e),
        })?;
        Ok(File::from(fd))
    }

    /// Opens the existing entry `rel` for reading without following it; `want` says what it must
    /// be (a symlink or anything else found instead is `Unsafe`).
    fn open_kind(&self, rel: &str, want: Kind) -> Result<File> {
        let (parent, name) = self.parent(rel)?;
        let mut flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK;
        if want == Kind::Dir {
            flags |= OFlag::O_DIRECTORY;
        }
        let fd = openat(parent.fd(), name, flags, Mode::empty()).map_err(|e| match e {
            Errno::ELOOP => VolumeError::unsafe_entry(rel, "is a symlink: never followed"),
            e => errno_io(&self.abs(rel), e),
        })?;
        let st = fstat(&fd).map_err(|e| errno_io(&self.abs(rel), e))?;
        let t = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
        let ok = match want {
            Kind::Dir => t == SFlag::S_IFDIR,
            _ => t == SFlag::S_IFREG,
        };
        if !ok {
            return Err(VolumeError::unsafe_entry(rel, "is not a regular file"));
        }
        Ok(File::from(fd))
    }

    /// Opens the existing regular file `rel` for reading (not through, nor at, a symlink).
    pub fn open_file(&self, rel: &str) -> Result<File> {
        self.open_kind(rel, Kind::File)
    }

    /// Copies the regular file `from` into the new file `to`, both beneath the root.
    pub fn copy_file(&self, from: &str, to: &str) -> Result<u64> {
        let mut src = self.open_file(from)?;
        let mut dst = self.create_file(to)?;
        std::io::copy(&mut src, &mut dst).map_err(|e| VolumeError::io(self.abs(to), e))
    }

    /// Sets the mode (files and directories) and the times of entry `rel` of `kind`, through its
    /// own descriptor (a symlink: its own times only, on the link itself).
    pub fn finish(&self, rel: &str, kind: Kind, mode: u32, mtime_ns: i64) -> Result<()> {
        let t = ts(mtime_ns);
        if kind == Kind::Symlink {
            let (parent, name) = self.parent(rel)?;
            return utimensat(parent.fd(), name, &t, &t, UtimensatFlags::NoFollowSymlink).map_err(|e| errno_io(&self.abs(rel), e));
        }
        let f = self.open_kind(rel, kind)?;
        fchmod(&f, Mode::from_bits_truncate(mode & MODE_MASK)).map_err(|e| errno_io(&self.abs(rel), e))?;
        futimens(&f, &t, &t).map_err(|e| errno_io(&self.abs(rel), e))
    }

    /// Removes entry `rel` (a file or symlink; `dir`: an empty directory), reached without
    /// following a symlink. A missing entry is fine.
    pub fn remove(&self, rel: &str, dir: bool) -> Result<()> {
        let (parent, name) = self.parent(rel)?;
        let flags = if dir { nix::unistd::UnlinkatFlags::RemoveDir } else { nix::unistd::UnlinkatFlags::NoRemoveDir };
        match nix::unistd::unlinkat(parent.fd(), name, flags) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(errno_io(&self.abs(rel), e)),
        }
    }

    /// Renames the entry `rel` to `name` in the same directory (replacing what `name` was).
    /// Errors: `Io` (`rel` missing included), `Unsafe` (a symlink on the way).
    pub fn rename_beside(&self, rel: &str, name: &str) -> Result<()> {
        let (parent, from) = self.parent(rel)?;
        nix::fcntl::renameat(parent.fd(), from, parent.fd(), name).map_err(|e| errno_io(&self.abs(rel), e))
    }

    /// Writes regular file `rel` from `content` with `mode` and `mtime_ns`, replacing whatever
    /// file or symlink is there in one rename: a reader sees the old file or the new one, never
    /// half of it. The bytes go to a temp file beside it first (made `O_EXCL`, never followed).
    pub fn replace_file(&self, rel: &str, content: &mut dyn std::io::Read, mode: u32, mtime_ns: i64) -> Result<()> {
        let (parent, name) = self.parent(rel)?;
        // A short name whatever the file's: a name near the 255-byte limit still restores.
        let tmp = format!(".spaces-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = openat(parent.fd(), tmp.as_str(), flags, Mode::from_bits_truncate(0o600)).map_err(|e| errno_io(&self.abs(rel), e))?;
        let mut f = File::from(fd);
        let written = (|| -> Result<()> {
            std::io::copy(content, &mut f).map_err(|e| VolumeError::io(self.abs(rel), e))?;
            let t = ts(mtime_ns);
            fchmod(&f, Mode::from_bits_truncate(mode & MODE_MASK)).map_err(|e| errno_io(&self.abs(rel), e))?;
            futimens(&f, &t, &t).map_err(|e| errno_io(&self.abs(rel), e))?;
            nix::fcntl::renameat(parent.fd(), tmp.as_str(), parent.fd(), name).map_err(|e| errno_io(&self.abs(rel), e))
        })();
        if written.is_err() {
            let _ = nix::unistd::unlinkat(parent.fd(), tmp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
        }
        written
    }

    /// Sets the mode of the root directory itself.
    pub fn set_root_mode(&self, mode: u32) -> Result<()> {
        fchmod(&self.root, Mode::from_bits_truncate(mode & MODE_MASK)).map_err(|e| errno_io(&self.path, e))
    }

    /// Sets the mode and times of the root directory itself.
    pub fn finish_root(&self, mode: u32, mtime_ns: i64) -> Result<()> {
        let t = ts(mtime_ns);
        fchmod(&self.root, Mode::from_bits_truncate(mode & MODE_MASK)).map_err(|e| errno_io(&self.path, e))?;
        futimens(&self.root, &t, &t).map_err(|e| errno_io(&self.path, e))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::io::{Read, Write};
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn refused(r: Result<impl std::fmt::Debug>, entry: &str) {
        match r {
            Err(VolumeError::Unsafe { entry: e, .. }) => assert_eq!(e, entry),
            other => panic!("expected Unsafe naming {entry:?}, got {other:?}"),
        }
    }

    #[test]
    fn nothing_is_made_or_changed_through_a_symlink() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("victim"), b"v").unwrap();
        std::fs::set_permissions(outside.join("victim"), std::fs::Permissions::from_mode(0o644)).unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir(&home).unwrap();
        let b = Beneath::open(&home).unwrap();
        b.symlink("loop", ".").unwrap();
        b.symlink("notes", "loop/loop/../outside").unwrap();
        b.symlink("out", outside.to_str().unwrap()).unwrap();
        b.mkdir("d").unwrap();
        b.symlink("d/up", "..").unwrap();
        for rel in ["notes/todo.txt", "out/new", "loop/x", "loop/loop/notes/y", "d/up/out/z"] {
            refused(b.create_file(rel), rel);
            refused(b.mkdir(rel), rel);
            refused(b.symlink(rel, "x"), rel);
        }
        refused(b.open_file("out/victim"), "out/victim");
        refused(b.open_file("out"), "out");
        refused(b.finish("out/victim", Kind::File, 0o777, 0), "out/victim");
        refused(b.finish("notes", Kind::File, 0o777, 0), "notes");
        refused(b.copy_file("out/victim", "copy"), "out/victim");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
        assert_eq!(std::fs::metadata(outside.join("victim")).unwrap().permissions().mode() & 0o777, 0o644);
        assert!(!home.join("copy").exists());

        // Plain entries work, and an existing entry is never reused.
        let mut f = b.create_file("d/file").unwrap();
        f.write_all(b"data").unwrap();
        drop(f);
        refused(b.create_file("d/file"), "d/file");
        refused(b.mkdir("d"), "d");
        b.copy_file("d/file", "d/copy").unwrap();
        let mut s = String::new();
        b.open_file("d/copy").unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "data");
        b.finish("d/copy", Kind::File, 0o640, 1_000_000_000).unwrap();
        b.finish("notes", Kind::Symlink, 0o777, 2_000_000_000).unwrap();
        let md = std::fs::symlink_metadata(home.join("d/copy")).unwrap();
        assert_eq!(md.permissions().mode() & 0o777, 0o640);
        assert_eq!(std::os::unix::fs::MetadataExt::mtime(&md), 1);
        assert_eq!(std::os::unix::fs::MetadataExt::mtime(&std::fs::symlink_metadata(home.join("notes")).unwrap()), 2);
    }
}
