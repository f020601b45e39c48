//! The write primitives of a commit, all relative to confined directory descriptors.
//!
//! [`Dirs`] holds, for one commit, an open descriptor of every directory it writes into
//! (opened beneath the root, never through a symlink), and remembers the directories it had to
//! create. A file is replaced atomically: its new bytes go into a temp file created in the same
//! directory (`O_CREAT | O_EXCL | O_NOFOLLOW`, permission bits set, `fsync`), then `renameat`
//! swaps it in. Removal is `unlinkat`. Directories are `fsync`ed at the end.

use spaces_sdk::bounded;
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::{confine, Root};
use crate::error::{Error, Result};
use nix::errno::Errno;
use nix::fcntl::{openat, renameat, OFlag};
use nix::sys::stat::{fchmod, mkdirat, Mode};
use nix::unistd::{fsync, unlinkat, UnlinkatFlags};

/// Open directories of one commit, keyed by relative path (`""` is the root).
pub(crate) struct Dirs<'r> {
    root: &'r Root,
    open: BTreeMap<String, OwnedFd>,
    /// Directories this commit created, in creation order (parents first).
    pub(crate) created: Vec<String>,
}

/// `path` split into its parent directory key and leaf name.
pub(crate) fn split(path: &str) -> Result<(String, String)> {
    let comps = confine::components(path)?;
    match comps.split_last() {
        Some((leaf, parents)) => Ok((parents.join("/"), (*leaf).to_owned())),
        None => Err(Error::invalid(format!("{:?} names the workspace root, not a file", bounded(path)))),
    }
}

/// A failed system call (`action`) on `path`.
pub(crate) fn failed(path: &str, action: &'static str, err: Errno) -> Error {
    Error::FileOperationFailed { path: path.to_owned(), action, source: err.into() }
}

impl<'r> Dirs<'r> {
    pub(crate) fn new(root: &'r Root) -> Self {
        Dirs { root, open: BTreeMap::new(), created: Vec::new() }
    }

    /// The descriptor of the existing directory `key`, opened confined on first use.
    pub(crate) fn get(&mut self, key: &str) -> Result<BorrowedFd<'_>> {
        let fd: &OwnedFd = match self.open.entry(key.to_owned()) {
            Entry::Occupied(open) => open.into_mut(),
            Entry::Vacant(slot) => {
                let comps: Vec<&str> = key.split('/').filter(|c| !c.is_empty()).collect();
                let fd = confine::open_dir(self.root.fd(), &comps).map_err(|e| confine::refusal(e, key))?;
                slot.insert(fd)
            }
        };
        Ok(fd.as_fd())
    }

    /// Like [`Dirs::get`], creating missing directories of `key` one by one (`mkdirat` in the
    /// confined parent; recorded in `created`).
    pub(crate) fn ensure(&mut self, key: &str) -> Result<BorrowedFd<'_>> {
        let comps: Vec<String> = key.split('/').filter(|c| !c.is_empty()).map(str::to_owned).collect();
        self.get("")?;
        for i in 0..comps.len() {
            let here = comps[..=i].join("/");
            match self.get(&here) {
                Ok(_) => continue,
                Err(Error::FileNotFound { .. }) => {}
                Err(e) => return Err(e),
            }
            let parent = comps[..i].join("/");
            match mkdirat(self.get(&parent)?, comps[i].as_str(), Mode::from_bits_truncate(0o777)) {
                Ok(()) => self.created.push(here.clone()),
                Err(Errno::EEXIST) => {}
                Err(e) => return Err(failed(&here, "creating the directory", e)),
            }
            self.get(&here)?;
        }
        self.get(key)
    }

    /// Writes `bytes` into a new temp file beside `path` (creating missing parents), sets
    /// `mode` (permission bits; `None`: the default `0666 & ~umask`), `fsync`s it, and returns
    /// the temp's name in that directory.
    pub(crate) fn write_temp(&mut self, path: &str, bytes: &[u8], mode: Option<u32>) -> Result<String> {
        let (key, leaf) = split(path)?;
        let dir = self.ensure(&key)?;
        let temp = format!(".{leaf}.spaces-tmp-{}", uuid::Uuid::new_v4().simple());
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let create_mode = Mode::from_bits_truncate(if mode.is_some() { 0o600 } else { 0o666 });
        let fd = openat(dir, temp.as_str(), flags, create_mode).map_err(|e| failed(path, "creating a temp file", e))?;
        let mut file = std::fs::File::from(fd);
        let result = (|| {
            file.write_all(bytes).map_err(|source| Error::FileOperationFailed { path: path.to_owned(), action: "writing", source })?;
            if let Some(mode) = mode {
                fchmod(file.as_fd(), Mode::from_bits_truncate(mode)).map_err(|e| failed(path, "chmod", e))?;
            }
            fsync(file.as_fd()).map_err(|e| failed(path, "fsync", e))
        })();
        if let Err(e) = result {
            let _ = self.remove_temp(path, &temp);
            return Err(e);
        }
        Ok(temp)
    }

    /// Swaps the temp file `temp` in as `path` (`renameat` within one directory).
    pub(crate) fn rename_in(&mut self, path: &str, temp: &str) -> Result<()> {
        let (key, leaf) = split(path)?;
        let dir = self.get(&key)?;
        renameat(dir, temp, dir, leaf.as_str()).map_err(|e| failed(path, "renaming the temp file in", e))
    }

    /// Removes `path` (`unlinkat`); a file already gone is fine.
    pub(crate) fn unlink(&mut self, path: &str) -> Result<()> {
        let (key, leaf) = split(path)?;
        let dir = self.get(&key)?;
        match unlinkat(dir, leaf.as_str(), UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(failed(path, "removing", e)),
        }
    }

    /// Removes a temp file left beside `path`.
    pub(crate) fn remove_temp(&mut self, path: &str, temp: &str) -> Result<()> {
        let (key, _) = split(path)?;
        let dir = self.get(&key)?;
        match unlinkat(dir, temp, UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(failed(path, "removing its temp file", e)),
        }
    }

    /// Removes the directories this commit created, deepest first.
    pub(crate) fn remove_created(&mut self) -> Result<()> {
        while let Some(key) = self.created.pop() {
            self.open.remove(&key);
            let (parent, leaf) = split(&key)?;
            let dir = self.get(&parent)?;
            match unlinkat(dir, leaf.as_str(), UnlinkatFlags::RemoveDir) {
                Ok(()) | Err(Errno::ENOENT) => {}
                Err(e) => return Err(failed(&key, "removing the created directory", e)),
            }
        }
        Ok(())
    }

    /// `fsync`s every directory written into, so renames and removals are durable.
    /// A filesystem that cannot sync directories (`EINVAL`) is accepted as is.
    pub(crate) fn sync_all(&self) -> Result<()> {
        for (key, fd) in &self.open {
            match fsync(fd.as_fd()) {
                Ok(()) | Err(Errno::EINVAL) => {}
                Err(e) => {
                    let name = if key.is_empty() { "." } else { key };
                    return Err(failed(name, "fsync of the directory", e));
                }
            }
        }
        Ok(())
    }
}
