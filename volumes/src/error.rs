//! The crate's one error enum.

use std::path::PathBuf;

/// `Result` with [`VolumeError`].
pub type Result<T, E = VolumeError> = std::result::Result<T, E>;

/// Everything a volume operation can fail with. Each variant says when it happens and whether a
/// retry can help.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// A home name is not `[A-Za-z0-9._-]{1,64}` or starts with `.`. Retrying never helps.
    #[error("invalid home name {name:?}: {why}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// The volume URL cannot be used (unknown scheme, relative path, credentials inside the URL,
    /// plain `http://` to a non-loopback endpoint without `AWS_ALLOW_HTTP=true`, ...). Retrying
    /// never helps.
    #[error("invalid volume URL {url:?}: {why}")]
    InvalidUrl {
        /// The URL as given (credentials, if any, removed).
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// The home has no snapshot in this volume.
    #[error("home {home:?} has no snapshot in this volume")]
    HomeNotFound {
        /// The home's name.
        home: String,
    },
    /// The home exists but has no snapshot with this id (never existed, or dropped by `compact`).
    #[error("home {home:?} has no snapshot {snapshot:?}")]
    SnapshotNotFound {
        /// The home's name.
        home: String,
        /// The snapshot id asked for.
        snapshot: String,
    },
    /// Another holder has a live lease on the home. Retrying after `expires_ms` (Unix ms) can help.
    #[error("home {home:?} is leased by {holder:?} until {expires_ms} (Unix ms)")]
    LeaseHeld {
        /// The home's name.
        home: String,
        /// The live holder, e.g. `host-a/run-1234`.
        holder: String,
        /// When that lease expires unless renewed, Unix milliseconds.
        expires_ms: u64,
    },
    /// The caller's lease expired, was taken over, was released, or was superseded by a newer
    /// lease record; nothing was committed. Acquire again before retrying.
    #[error("the lease on home {home:?} was lost (expired, taken over or released)")]
    LeaseLost {
        /// The home's name.
        home: String,
    },
    /// A restore or import refused an entry that would escape the home or is of a refused kind
    /// (`..` parts, absolute path, symlink or hard link pointing outside, written through an
    /// earlier symlink, device or other unknown entry type). Nothing was changed. Retrying never
    /// helps.
    #[error("refused entry {entry:?}: {why}")]
    Unsafe {
        /// The offending entry's path as found in the archive or manifest.
        entry: String,
        /// Why it was refused.
        why: String,
    },
    /// A layer, archive or manifest is truncated, corrupt or does not match its recorded hash.
    /// Nothing was changed. Retrying helps only if the object was still being written.
    #[error("{what} is corrupt: {why}")]
    Corrupt {
        /// The object or file (e.g. `layer <sha256>`, `snapshot 0000…0003`, an archive path).
        what: String,
        /// What was wrong.
        why: String,
    },
    /// A save found one of the caller's secret values (`SaveOptions::refuse`) in a file of the
    /// home (or in a path or symlink target); nothing was stored. Retrying helps once the file
    /// no longer holds it.
    #[error("refused to save {path:?}: it holds the value of {name}, a secret; nothing was saved")]
    Secret {
        /// The file (or entry), relative to the saved directory.
        path: String,
        /// The secret's name (never its value).
        name: String,
    },
    /// The object store failed (network, permissions, missing object, ...). Retrying may help.
    /// `message` never holds credentials.
    #[error("object store {op} failed: {message}")]
    Store {
        /// The operation, e.g. `put homes/a/snapshots/…`.
        op: String,
        /// The store's error text.
        message: String,
    },
    /// A local file operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The local path involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl VolumeError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        VolumeError::Io { path: path.into(), source }
    }

    pub(crate) fn store(op: impl Into<String>, err: object_store::Error) -> Self {
        VolumeError::Store { op: op.into(), message: err.to_string() }
    }

    pub(crate) fn unsafe_entry(entry: impl Into<String>, why: impl Into<String>) -> Self {
        VolumeError::Unsafe { entry: entry.into(), why: why.into() }
    }

    pub(crate) fn corrupt(what: impl Into<String>, why: impl Into<String>) -> Self {
        VolumeError::Corrupt { what: what.into(), why: why.into() }
    }
}

/// Adds the path to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn at(self, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|e| VolumeError::io(path, e))
    }
}
