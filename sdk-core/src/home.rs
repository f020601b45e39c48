//! Persistent agents and their homes (API reference, "Words": volume, persistent agent;
//! "Agent runs": `home`, `Spaces.persistent_agent_send`).
//!
//! A persistent agent is a name. Its home (the harness's config directory: sessions, memory,
//! settings) is kept as snapshots in the host's **volume** (a local directory, or an
//! S3-compatible store shared by many hosts) and restored before its run's first turn; one host
//! at a time holds its **lease**. A home belongs to the Space whose run created it (the `space`
//! of its newest snapshot's record): runs of another Space are refused it (`FORBIDDEN`) until
//! the operator moves it (`home_move`).

use serde::{Deserialize, Serialize};

/// `persistent_agent_send`: a follow-up to the named persistent agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PersistentAgentSendRequest {
    /// The persistent agent's name (the `home` its runs were started with).
    pub name: String,
    /// The message; must not be empty.
    pub text: String,
}

/// What `persistent_agent_send` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PersistentAgentSendReport {
    /// The run that takes the message.
    pub run_id: String,
    /// True when a fresh run was started (no live run of the agent on this host).
    pub started: bool,
    /// True when that run's home is restored from the volume before its first turn.
    pub restored: bool,
}

/// A request naming one persistent agent's home.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HomeRequest {
    /// The persistent agent's name: 1-64 of `[A-Za-z0-9._-]`, not starting with `.`.
    pub name: String,
}

/// `home_export`: one self-contained `.tar.zst` of a snapshot, written on the daemon's host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HomeExportRequest {
    pub name: String,
    /// The snapshot id; the latest when absent.
    #[serde(default)]
    pub at: Option<String>,
    /// Absolute path of the file to write (replaced atomically).
    pub path: String,
}

/// `home_import`: a `.tar.zst` on the daemon's host becomes the home's newest snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HomeImportRequest {
    pub name: String,
    /// Absolute path of the archive to read.
    pub path: String,
}

/// `home_restore`: point-in-time restore.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HomeRestoreRequest {
    pub name: String,
    /// The snapshot to restore; the latest when absent.
    #[serde(default)]
    pub at: Option<String>,
    /// Restore into this absolute directory (replaced atomically) instead of the volume: with
    /// `to`, the volume is not changed; without it, snapshot `at` becomes the newest snapshot
    /// again, so the agent's next run starts from it.
    #[serde(default)]
    pub to: Option<String>,
}

/// `home_move`: the home belongs to `space` from now on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HomeMoveRequest {
    pub name: String,
    /// The Space that gets the home: registered on this host.
    pub space: String,
}

/// What `home_move` did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HomeMoveReport {
    pub name: String,
    /// The Space it belongs to now.
    pub space: String,
    /// The Space it belonged to before; `null` when none (an archive imported without a record).
    pub from: Option<String>,
    /// The newest snapshot, whose record names `space` (a new snapshot of the same files, or the
    /// same one when the home already belonged to `space`).
    pub snapshot: HomeSnapshot,
}

/// A file-system entry a snapshot lists but does not hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SkippedEntry {
    /// Path relative to the home.
    pub path: String,
    /// `socket`, `fifo`, `char_device`, `block_device`, `excluded`, `symlink_outside` (it resolves
    /// outside the home, through other symlinks or not), `sqlite_wal`/`sqlite_shm` or
    /// `unsupported_name`.
    pub kind: String,
}

/// One snapshot of a home.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HomeSnapshot {
    /// Snapshot id (pass to `at`).
    pub id: String,
    pub name: String,
    /// When it was taken, ms since the Unix epoch.
    pub created_ms: u64,
    /// The host that took it.
    pub host: String,
    /// Regular files in it.
    pub files: u64,
    /// Their total size, bytes.
    pub bytes: u64,
    /// Layers a restore reads.
    pub layers: u32,
    /// The persistent agent's record at that time: `agent`, `space`, `session_id`, ...
    pub meta: serde_json::Value,
    /// Entries listed but not saved (sockets, FIFOs, devices, excluded caches, symlinks that
    /// resolve outside the home).
    pub skipped: Vec<SkippedEntry>,
    /// Set only in `home_snapshots`, for a snapshot whose manifest cannot be read (truncated,
    /// corrupt, refused as unsafe, or not returned by the store): why, naming the object. The
    /// other fields are then empty (`0`, `""`, `null`, `[]`) and a restore or export of it is
    /// refused the same way. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broken: Option<String>,
}

/// Who holds a home's lease (one writer per persistent agent across hosts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HomeLease {
    /// `<host>/<run_id>`.
    pub holder: String,
    /// When it ends unless renewed, ms since the Unix epoch.
    pub expires_ms: u64,
}

/// One persistent agent's home in the volume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HomeRecord {
    pub name: String,
    /// How many snapshots it has.
    pub snapshots: u64,
    /// The newest one.
    pub latest: Option<HomeSnapshot>,
    /// The live lease, if a host holds one.
    pub lease: Option<HomeLease>,
    /// This host's live run of the agent, if any.
    pub run_id: Option<String>,
    /// Why part of this home cannot be read, when a part cannot: its newest snapshot's manifest
    /// is truncated, corrupt or refused as unsafe (then `latest` is `null`), its lease record is
    /// unreadable (then `lease` is `null`), or the volume failed reading one of its objects. The
    /// text names the object and the cause. `null` for a home read whole. One broken home never
    /// fails `home_list`; it can still be deleted, or restored `--at` an older snapshot.
    pub broken: Option<String>,
}

/// What a `home_restore` or `home_import` produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HomeTransferReport {
    pub name: String,
    /// The snapshot read (export, restore with `to`) or written (import, restore).
    pub snapshot: HomeSnapshot,
    /// Where the files went or came from, when a path was involved.
    pub path: Option<String>,
    /// Bytes read or written, and the time it took (ms).
    pub bytes: u64,
    pub elapsed_ms: u64,
}

/// What `home_delete` removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HomeDeleteReport {
    pub name: String,
    /// Objects removed from the volume.
    pub objects: u64,
}

/// The host's volume, as capabilities show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VolumeCapabilities {
    /// `local` or `s3`.
    pub kind: String,
    /// Where homes are kept (`s3://bucket/prefix`, or a local path); never holds credentials.
    pub url: String,
    /// This host's id, as leases and snapshots name it.
    pub host: String,
}
