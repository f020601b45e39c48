//! A full disk as a state: telling its errors apart, and keeping room ahead for what must be
//! written whatever happens.
//!
//! A write on a full file system fails with `ENOSPC` (or `EDQUOT` past a quota). The shim and
//! the daemon never treat that as a reason to panic or to go on silently: [`is_full`] tells the
//! error apart, and what was being written ends with a reason naming the disk (docs/operations.md,
//! "A full disk"). So that the reason itself can still be written, space is allocated ahead of
//! need ([`allocate`]): a shim's journal keeps the room for its last records past its end, and
//! the daemon keeps a reserve file in its state dir that it gives up when the disk fills.

use std::fs::File;
use std::os::fd::AsFd;

use nix::errno::Errno;
use nix::fcntl::{fallocate, FallocateFlags};

/// True when `e` says the file system (or the writer's quota) has no room: `ENOSPC` or
/// `EDQUOT`. Only freeing space helps; retrying as is does not.
pub fn is_full(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(code) if code == Errno::ENOSPC as i32 || code == Errno::EDQUOT as i32)
}

/// Allocate the blocks of `file` in `[offset, offset + len)` without changing its size
/// (`fallocate(FALLOC_FL_KEEP_SIZE)`): writes into that range later need no new space, even on a
/// full disk. Returns `Ok(false)` when the file system cannot allocate ahead (`EOPNOTSUPP`,
/// `ENOSYS`: the caller goes on without). Errors: no room ([`is_full`]), or another failure.
pub fn allocate(file: &File, offset: u64, len: u64) -> std::io::Result<bool> {
    if len == 0 {
        return Ok(true);
    }
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    };
    loop {
        match fallocate(file.as_fd(), FallocateFlags::FALLOC_FL_KEEP_SIZE, offset, len) {
            Ok(()) => return Ok(true),
            Err(Errno::EINTR) => continue,
            Err(Errno::EOPNOTSUPP | Errno::ENOSYS) => return Ok(false),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Write `text` and a newline to stderr, ignoring failure. `eprintln!` panics when stderr
/// cannot be written, and a shim's stderr is its log in the state dir: on a full disk the
/// message about the full disk would be the panic.
pub fn say(text: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(text).and_then(|()| err.write_all(b"\n"));
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn enospc_and_edquot_are_a_full_disk_other_errors_are_not() {
        assert!(is_full(&std::io::Error::from_raw_os_error(Errno::ENOSPC as i32)));
        assert!(is_full(&std::io::Error::from_raw_os_error(Errno::EDQUOT as i32)));
        assert!(!is_full(&std::io::Error::from_raw_os_error(Errno::EIO as i32)));
        assert!(!is_full(&std::io::Error::other("no space left on device")), "only the errno counts, never a message");
    }

    #[test]
    fn space_allocated_ahead_keeps_the_size_of_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("f")).unwrap();
        let supported = allocate(&file, 0, 1 << 20).unwrap();
        assert_eq!(file.metadata().unwrap().len(), 0, "the file's length is unchanged");
        if supported {
            use std::os::unix::fs::MetadataExt;
            assert!(file.metadata().unwrap().blocks() * 512 >= 1 << 20, "the blocks are allocated");
        }
    }
}
