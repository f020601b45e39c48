//! `find`: regular files under the root matching a glob, sorted, paged.
//!
//! The walk starts at the root descriptor and opens every directory with `openat(O_NOFOLLOW |
//! O_DIRECTORY)` relative to its parent's descriptor, so it never leaves the tree. Symlinks are
//! neither followed nor listed; FIFOs, devices and sockets are not listed. A directory that
//! cannot be opened or read, a name that is not UTF-8, or the visit bound being reached sets
//! `incomplete`. Hidden files and directories (`.git` too) are listed like any other. The full
//! sorted match list is hashed into `listing_version`, then one page of it is returned.

use spaces_sdk::bounded;
use std::os::fd::{AsFd, OwnedFd};

use super::{confine, Root};
use crate::error::{Error, Result};
use globset::{GlobBuilder, GlobMatcher};
use nix::dir::{Dir, Type};
use nix::fcntl::{openat, AtFlags, OFlag};
use nix::sys::stat::{fstatat, Mode, SFlag};
use spaces_sdk::tools::{FindRequest, FindResult};

/// Most paths one `find` page returns (API.md `find_max_paths`): the SDK's
/// [`FindRequest::LIMIT_MAX`]. Also the default.
pub const FIND_MAX_PATHS: u64 = FindRequest::LIMIT_MAX;

/// Most directory entries one walk visits before it stops and reports `incomplete`.
pub const FIND_MAX_VISITS: usize = 1_000_000;

impl Root {
    /// Lists regular files matching `glob` (all files when `None`), skipping `offset` paths
    /// (default 0) and returning at most `limit` (default and maximum [`FIND_MAX_PATHS`]; a
    /// larger limit is clamped). Globs match the whole relative path and `*` never crosses
    /// `/`: `*.rs` is top level only, `**/*.rs` is recursive.
    ///
    /// Errors: `INVALID_ARGUMENT` for an invalid glob or `limit` 0; `FILE_OPERATION_FAILED`
    /// when the root itself cannot be listed.
    pub fn find(&self, glob: Option<&str>, offset: Option<u64>, limit: Option<u64>) -> Result<FindResult> {
        self.find_bounded(glob, offset, limit, FIND_MAX_VISITS)
    }

    pub(crate) fn find_bounded(
        &self,
        glob: Option<&str>,
        offset: Option<u64>,
        limit: Option<u64>,
        max_visits: usize,
    ) -> Result<FindResult> {
        let limit = limit.unwrap_or(FindRequest::LIMIT_DEFAULT).min(FIND_MAX_PATHS);
        if limit == 0 {
            return Err(Error::invalid("limit must be at least 1 (at most 10000)"));
        }
        let matcher = glob.map(compile).transpose()?;
        let root = confine::open_dir(self.fd(), &[]).map_err(|e| Error::FileOperationFailed {
            path: ".".to_owned(),
            action: "listing the workspace root",
            source: e.into(),
        })?;
        let mut walk = Walk { matcher, found: Vec::new(), incomplete: false, visits: 0, max_visits };
        walk.run(root);
        let mut all = walk.found;
        all.sort();
        let listing: Vec<u8> = all.iter().flat_map(|p| p.bytes().chain([b'\n'])).collect();
        let listing_version = spaces_v4a::version(&listing);
        let skip = usize::try_from(offset.unwrap_or(0)).unwrap_or(usize::MAX).min(all.len());
        let take = usize::try_from(limit).unwrap_or(usize::MAX);
        let paths: Vec<String> = all.iter().skip(skip).take(take).cloned().collect();
        let next = skip + paths.len();
        let truncated = next < all.len();
        Ok(FindResult { paths, truncated, next_offset: truncated.then_some(next as u64), incomplete: walk.incomplete, listing_version })
    }
}

fn compile(glob: &str) -> Result<GlobMatcher> {
    GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| Error::invalid(format!("invalid glob {:?}: {e}; use e.g. `*.rs` (top level) or `**/*.rs`", bounded(glob))))
}

struct Walk {
    matcher: Option<GlobMatcher>,
    found: Vec<String>,
    incomplete: bool,
    visits: usize,
    max_visits: usize,
}

enum Kind {
    File,
    Dir,
    Skip,
}

/// One open directory of the walk and its subdirectories still to visit. Only the directories
/// on the current path are open, so the walk holds as many descriptors as the tree is deep.
struct Frame {
    prefix: String,
    dir: Dir,
    subdirs: Vec<String>,
}

impl Walk {
    fn run(&mut self, root: OwnedFd) {
        let mut stack: Vec<Frame> = Vec::new();
        if let Some(frame) = self.list(String::new(), root) {
            stack.push(frame);
        }
        while let Some(top) = stack.last_mut() {
            if self.visits > self.max_visits {
                return;
            }
            let Some(name) = top.subdirs.pop() else {
                stack.pop();
                continue;
            };
            let rel = join(&top.prefix, &name);
            let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            match openat(top.dir.as_fd(), name.as_str(), flags, Mode::empty()) {
                Ok(fd) => {
                    if let Some(frame) = self.list(rel, fd) {
                        stack.push(frame);
                    }
                }
                // Replaced by a symlink since it was listed: not followed, not listed.
                Err(nix::errno::Errno::ELOOP) => {}
                Err(_) => self.incomplete = true,
            }
        }
    }

    /// Reads one directory: records matching files, returns the frame with its subdirectories.
    fn list(&mut self, prefix: String, fd: OwnedFd) -> Option<Frame> {
        let Ok(mut dir) = Dir::from_fd(fd) else {
            self.incomplete = true;
            return None;
        };
        let mut listed: Vec<(String, Option<Type>)> = Vec::new();
        for entry in dir.iter() {
            let Ok(entry) = entry else {
                self.incomplete = true;
                break;
            };
            let raw = entry.file_name().to_bytes();
            if raw == b"." || raw == b".." {
                continue;
            }
            self.visits += 1;
            if self.visits > self.max_visits {
                self.incomplete = true;
                break;
            }
            match std::str::from_utf8(raw) {
                Ok(name) => listed.push((name.to_owned(), entry.file_type())),
                Err(_) => self.incomplete = true,
            }
        }
        let mut subdirs = Vec::new();
        let mut files = Vec::new();
        for (name, file_type) in listed {
            let kind = match file_type {
                Some(Type::File) => Kind::File,
                Some(Type::Directory) => Kind::Dir,
                Some(_) => Kind::Skip,
                None => stat_kind(&dir, &name),
            };
            match kind {
                Kind::File => files.push(name),
                Kind::Dir => subdirs.push(name),
                Kind::Skip => {}
            }
        }
        for name in files {
            let rel = join(&prefix, &name);
            if self.matcher.as_ref().is_none_or(|m| m.is_match(&rel)) {
                self.found.push(rel);
            }
        }
        Some(Frame { prefix, dir, subdirs })
    }
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}/{name}")
    }
}

/// The kind of an entry whose `d_type` the filesystem did not report.
fn stat_kind(dir: &Dir, name: &str) -> Kind {
    match fstatat(dir.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => match confine::file_type(&st) {
            SFlag::S_IFREG => Kind::File,
            SFlag::S_IFDIR => Kind::Dir,
            _ => Kind::Skip,
        },
        Err(_) => Kind::Skip,
    }
}
