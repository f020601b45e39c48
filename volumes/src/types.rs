//! The public records: what the volume reports about homes, snapshots, leases and transfers.

use serde::{Deserialize, Serialize};

/// Which kind of store a volume lives on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VolumeKind {
    /// A local directory (`/abs/dir` or `file:///abs/dir`). Serialized as `"local"`.
    Local,
    /// An S3-compatible bucket and prefix (`s3://bucket/prefix`). Serialized as `"s3"`.
    S3,
}

/// Who holds a home's lease, as recorded in the store.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LeaseInfo {
    /// The home's name.
    pub home: String,
    /// The holder as given to `Volume::acquire`, e.g. `host-a/run-1234`.
    pub holder: String,
    /// The lease record's epoch: every acquire, renew and release writes the next epoch.
    pub epoch: u64,
    /// When the lease expires unless renewed, Unix milliseconds.
    pub expires_ms: u64,
}

/// One snapshot of a home, as its manifest records it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SnapshotInfo {
    /// The snapshot's id: its sequence number as 20 decimal digits (`00000000000000000001`).
    /// Ids of one home sort oldest first.
    pub id: String,
    /// The home's name.
    pub home: String,
    /// When the snapshot was committed, Unix milliseconds.
    pub created_ms: u64,
    /// The host id of the volume that committed it (`Volume::open`'s `host`).
    pub host: String,
    /// Regular files in the snapshot.
    pub files: u64,
    /// Total size of those files, bytes.
    pub bytes: u64,
    /// How many layers (`.tar.zst` blobs) a restore of this snapshot reads.
    pub layers: u32,
    /// The caller's metadata given to `save` or `import` (e.g. the harness and session id).
    pub meta: serde_json::Value,
    /// Entries that were not stored, each with why.
    pub skipped: Vec<SkippedEntry>,
}

/// An entry of the home that a save did not store, and why. Nothing is dropped silently.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct SkippedEntry {
    /// Path relative to the home, `/`-separated.
    pub path: String,
    /// Why: `socket`, `fifo`, `char_device`, `block_device`, `excluded` (matched
    /// `SaveOptions::exclude`; a whole excluded directory is one entry), `symlink_outside` (a
    /// symlink whose target leaves the home: restore would refuse it), `sqlite_wal` /
    /// `sqlite_shm` (a SQLite database's write-ahead log and index: their contents are folded
    /// into a consistent copy of the database itself), or `unsupported_name` (not UTF-8).
    pub kind: String,
}

/// One home in the volume.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HomeSummary {
    /// The home's name.
    pub name: String,
    /// How many snapshots it has.
    pub snapshots: u64,
    /// The newest snapshot, if any.
    pub latest: Option<SnapshotInfo>,
    /// The live lease, if any (`None` too when its record cannot be read: see `broken`).
    pub lease: Option<LeaseInfo>,
    /// Why part of this home could not be read, when a part could not: its newest manifest is
    /// truncated, corrupt or refused as unsafe (then `latest` is `None`), its lease record is
    /// unreadable (then `lease` is `None`), or the store failed reading one of its objects. The
    /// text names the object and the cause. A listing never fails for one home's sake.
    pub broken: Option<String>,
}

/// One entry of a home's snapshot listing ([`crate::Volume::snapshot_listing`]): the snapshot, or
/// the id of one whose manifest cannot be read and why.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub enum ListedSnapshot {
    /// A snapshot whose manifest reads and passes its checks.
    Readable(SnapshotInfo),
    /// A snapshot whose manifest is truncated, corrupt or refused as unsafe, or that the store
    /// failed to return: a restore or export of it is refused the same way.
    Broken {
        /// The snapshot's id (20 decimal digits, from its object's name).
        id: String,
        /// What is wrong, naming the object (the `Display` of the error that reading it gave).
        why: String,
    },
}

impl ListedSnapshot {
    /// The snapshot's id, readable or not.
    pub fn id(&self) -> &str {
        match self {
            ListedSnapshot::Readable(s) => &s.id,
            ListedSnapshot::Broken { id, .. } => id,
        }
    }
}

/// How to save a home.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SaveOptions {
    /// Caller metadata stored in the snapshot (returned as `SnapshotInfo::meta`). A save whose
    /// files and meta both equal the latest snapshot's commits nothing.
    pub meta: serde_json::Value,
    /// Glob patterns (globset syntax) matched against paths relative to the saved directory,
    /// `/`-separated, e.g. `cache/**` or `**/*.tmp`. Matching entries are listed in
    /// `SnapshotInfo::skipped` as `excluded`; a pattern `D/**` excludes the directory `D` itself.
    pub exclude: Vec<String>,
    /// Secret values no saved file may hold (a run's secrets, each spelling a value of its own):
    /// a save that reads a file holding one, or lists a path or symlink target holding one,
    /// fails with `VolumeError::Secret` naming the file and the secret's name, and stores
    /// nothing. Files unchanged since the snapshot the directory last matched are not read
    /// again (they are already stored). Never serialized; `Debug` never shows the values.
    #[serde(skip)]
    pub refuse: Vec<SecretValue>,
}

/// A secret a save refuses to store: its name (what an error says) and its bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue {
    /// What to call it, e.g. the environment variable's name. Shown in errors.
    pub name: String,
    /// The bytes to look for. Never shown.
    pub value: Vec<u8>,
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretValue").field("name", &self.name).field("value", &"[redacted]").finish()
    }
}

/// What a save did.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SaveReport {
    /// The new snapshot, or the previous one when `unchanged`.
    pub snapshot: SnapshotInfo,
    /// True when the directory and meta equal the latest snapshot: nothing was written.
    pub unchanged: bool,
    /// Bytes sent to the store (layer and manifest), 0 when `unchanged`.
    pub uploaded_bytes: u64,
    /// Entries looked at in the directory walk.
    pub walked: u64,
    /// Files whose contents were read and hashed (the others came from the stat-cache).
    pub hashed: u64,
    /// Wall time of the save, milliseconds.
    pub elapsed_ms: u64,
}

/// What a restore did.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RestoreReport {
    /// The snapshot restored.
    pub snapshot: SnapshotInfo,
    /// Regular files written.
    pub files: u64,
    /// Bytes of file contents written.
    pub bytes: u64,
    /// Wall time, milliseconds.
    pub elapsed_ms: u64,
}

/// What a delete removed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DeleteReport {
    /// The home's name.
    pub home: String,
    /// Objects deleted (manifests, layers, old lease records).
    pub objects: u64,
}

/// Receives progress of long transfers (save, restore, export, import, compact).
pub trait Progress: Send + Sync {
    /// `step` names the phase (`walk`, `hash`, `upload`, `download`, `unpack`, `verify`,
    /// `write`); `done_bytes` of `total_bytes` (when known) are done. Called from worker threads;
    /// keep it cheap.
    fn update(&self, step: &str, done_bytes: u64, total_bytes: Option<u64>);
}

/// A [`Progress`] that ignores every update.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn update(&self, _step: &str, _done_bytes: u64, _total_bytes: Option<u64>) {}
}
