//! Placeholder interface of spaces-volumes (replaced by the implementation before merge).
#![allow(missing_docs, clippy::unused_async)]
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Clone)]
pub struct Volume;
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VolumeKind { Local, S3 }
#[derive(Debug)]
pub struct Lease;
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LeaseInfo { pub home: String, pub holder: String, pub epoch: u64, pub expires_ms: u64 }
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SnapshotInfo { pub id: String, pub home: String, pub created_ms: u64, pub host: String,
    pub files: u64, pub bytes: u64, pub layers: u32, pub meta: serde_json::Value, pub skipped: Vec<SkippedEntry> }
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SkippedEntry { pub path: String, pub kind: String }
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HomeSummary { pub name: String, pub snapshots: u64, pub latest: Option<SnapshotInfo>, pub lease: Option<LeaseInfo> }
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SaveOptions { pub meta: serde_json::Value, pub exclude: Vec<String> }
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SaveReport { pub snapshot: SnapshotInfo, pub unchanged: bool, pub uploaded_bytes: u64, pub walked: u64, pub hashed: u64, pub elapsed_ms: u64 }
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RestoreReport { pub snapshot: SnapshotInfo, pub files: u64, pub bytes: u64, pub elapsed_ms: u64 }
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DeleteReport { pub home: String, pub objects: u64 }
pub trait Progress: Send + Sync { fn update(&self, step: &str, done_bytes: u64, total_bytes: Option<u64>); }
pub struct NoProgress;
impl Progress for NoProgress { fn update(&self, _: &str, _: u64, _: Option<u64>) {} }
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("invalid name {name}: {why}")] InvalidName { name: String, why: String },
    #[error("invalid url {url}: {why}")] InvalidUrl { url: String, why: String },
    #[error("no home {home}")] HomeNotFound { home: String },
    #[error("no snapshot {snapshot} of {home}")] SnapshotNotFound { home: String, snapshot: String },
    #[error("lease of {home} held by {holder} until {expires_ms}")] LeaseHeld { home: String, holder: String, expires_ms: u64 },
    #[error("lease of {home} lost")] LeaseLost { home: String },
    #[error("unsafe entry {entry}: {why}")] Unsafe { entry: String, why: String },
    #[error("corrupt {what}: {why}")] Corrupt { what: String, why: String },
    #[error("store {op}: {message}")] Store { op: String, message: String },
    #[error("{path}: {source}")] Io { path: PathBuf, source: std::io::Error },
}
type R<T> = Result<T, VolumeError>;
impl Volume {
    pub fn open(_url: &str, _env: &HashMap<String, String>, _cache_dir: &Path, _host: &str) -> R<Volume> { todo!() }
    pub fn url(&self) -> &str { todo!() }
    pub fn kind(&self) -> VolumeKind { todo!() }
    pub async fn homes(&self) -> R<Vec<HomeSummary>> { todo!() }
    pub async fn snapshots(&self, _home: &str) -> R<Vec<SnapshotInfo>> { todo!() }
    pub async fn latest(&self, _home: &str) -> R<Option<SnapshotInfo>> { todo!() }
    pub async fn save(&self, _lease: &Lease, _dir: &Path, _opts: &SaveOptions, _progress: &dyn Progress) -> R<SaveReport> { todo!() }
    pub async fn restore(&self, _home: &str, _at: Option<&str>, _target: &Path, _progress: &dyn Progress) -> R<RestoreReport> { todo!() }
    pub async fn export(&self, _home: &str, _at: Option<&str>, _file: &Path, _progress: &dyn Progress) -> R<SnapshotInfo> { todo!() }
    pub async fn import(&self, _lease: &Lease, _file: &Path, _meta: serde_json::Value, _progress: &dyn Progress) -> R<SnapshotInfo> { todo!() }
    pub async fn delete(&self, _lease: Lease) -> R<DeleteReport> { todo!() }
    pub async fn compact(&self, _lease: &Lease, _keep: usize) -> R<SnapshotInfo> { todo!() }
    pub async fn acquire(&self, _home: &str, _holder: &str, _ttl: Duration) -> R<Lease> { todo!() }
    pub async fn lease_info(&self, _home: &str) -> R<Option<LeaseInfo>> { todo!() }
}
impl Lease {
    pub fn home(&self) -> &str { todo!() }
    pub fn info(&self) -> LeaseInfo { todo!() }
    pub async fn renew(&mut self) -> R<()> { todo!() }
    pub async fn release(self) -> R<()> { todo!() }
}
