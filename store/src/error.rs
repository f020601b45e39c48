//! The store's error type: what a read or a write of the state dir (the database, its files)
//! can fail with. None of it is the caller's fault; the daemon reports every one as `INTERNAL`
//! on the wire (its own error type wraps this one).

/// Every failure of the store and the event log.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The SQLite store failed (disk full, corruption).
    #[error("state database error: {0}")]
    Db(#[from] rusqlite::Error),
    /// A file operation in the state dir failed.
    #[error("state directory error: {0}")]
    Io(#[from] std::io::Error),
    /// The event writer's transaction failed (its `BEGIN` or `COMMIT`: disk full, I/O error), or
    /// the writer thread has stopped. A retry helps only once the disk has room again.
    #[error("state database write failed: {0}")]
    Writer(String),
    /// The disk (or quota) of the state dir is full: a transaction of the event writer failed
    /// for want of space (`SQLITE_FULL`, `ENOSPC`, `EDQUOT`). A retry helps only once space is
    /// freed ([`Error::is_disk_full`] tells every form of it).
    #[error("no space left on device: the state database cannot be written ({0})")]
    DiskFull(String),
    /// JSON (de)serialization of stored state failed.
    #[error("stored state is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// Stored state does not have the shape this daemon wrote (a chunk of events whose line
    /// count disagrees with its seq range).
    #[error("stored state is damaged: {0}")]
    Damaged(String),
}

/// `Result` of the store's operations.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// True when the failure is a full disk or quota where the state lives (the database's
    /// `SQLITE_FULL`, a file's `ENOSPC` or `EDQUOT`): nothing is wrong but the room, and the
    /// same write works once space is freed.
    pub fn is_disk_full(&self) -> bool {
        match self {
            Error::DiskFull(_) => true,
            Error::Db(e) => db_full(e),
            Error::Io(e) => spaces_os::disk::is_full(e),
            _ => false,
        }
    }
}

/// True when SQLite failed for want of space (`SQLITE_FULL`; an `ENOSPC` in a write is reported
/// so).
pub fn db_full(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Every form a full disk takes on the daemon's write paths is told apart, and only those.
    #[test]
    fn a_full_disk_is_told_apart_in_every_form_it_takes() {
        let full = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL), None);
        assert!(Error::Db(full).is_disk_full());
        let busy = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY), None);
        assert!(!Error::Db(busy).is_disk_full());
        assert!(Error::Io(std::io::Error::from_raw_os_error(28)).is_disk_full(), "ENOSPC");
        assert!(Error::Io(std::io::Error::from_raw_os_error(122)).is_disk_full(), "EDQUOT");
        assert!(!Error::Io(std::io::Error::from_raw_os_error(5)).is_disk_full(), "EIO");
        let e = Error::DiskFull("commit failed: database or disk is full".into());
        assert!(e.is_disk_full());
        assert!(e.to_string().contains("no space left on device"), "{e}");
        assert!(!Error::Writer("the event writer has stopped".into()).is_disk_full());
    }
}
