//! Persistent agents' homes on this host's volume (API reference, "Words": volume, persistent
//! agent; `home` of `agent_start`).
//!
//! [`Homes`] is the daemon's handle on the volume (`spaces_volumes`): a local directory by
//! default (`<state dir>/volume`), or an S3-compatible store shared by many hosts
//! (`spacesd serve --volume s3://bucket/prefix`). It holds the **leases** of the homes this
//! host's runs use, one writer per persistent agent across hosts: taken when a run starts
//! (refused with `LEASE_HELD` naming the holder and the expiry), renewed every third of the TTL
//! while the run lives, a failed renewal retried with backoff well inside the TTL ([`renew`]),
//! released when it stops or finishes. A host that died loses its leases when they expire,
//! never sooner; a restarted daemon takes its runs' leases back at once (same holder
//! `<host>/<run_id>`). A home whose newest snapshot reads more than
//! [`COMPACT_AFTER_LAYERS`] layers is compacted after the save that made it.
//!
//! A home **belongs to a Space**: the one named in its newest snapshot's record
//! ([`meta::AgentMeta::space`]), that is the Space of the run that created it (or of the last
//! explicit move). Only runs of that Space may take its lease ([`Homes::claim`]): a run of
//! another Space, whoever asks for it (a tool caller's token, a run's own process, the operator),
//! is refused `FORBIDDEN`. A home whose newest record names no Space (an archive imported under
//! a new name) belongs to no Space and is refused the same way until the operator gives it one
//! with `home_move` ([`ops`]). A home with no snapshot yet is new: the first run that saves it
//! makes it its Space's.
//!
//! Saves refuse the run's secret values ([`Homes::save`]'s `secrets`: the run's `env` values,
//! forwarded provider keys, MCP server secrets, the daemon's own secrets): a file of the home
//! holding one is not uploaded, and the save fails naming the file.
//!
//! The run side (restore before the first turn, save after every turn) is in
//! `supervisor::persist`; the operator's operations (list, snapshots, export, import,
//! point-in-time restore, delete, move) are in [`ops`].

pub mod meta;
pub mod ops;
pub mod renew;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use spaces_sdk::home::SkippedEntry as SkippedEntryWire;
use spaces_sdk::{ErrorCode, HomeSnapshot, VolumeCapabilities};
use spaces_volumes::{Lease, Progress, SaveOptions, SaveReport, SnapshotInfo, Volume, VolumeError, VolumeKind};

use crate::config::Config;
use crate::error::{refuse, Error, Result};

/// A save that leaves the newest snapshot reading more layers than this compacts the home in
/// the background of that save (one full layer), keeping [`KEEP_SNAPSHOTS`] restorable.
pub const COMPACT_AFTER_LAYERS: u32 = 16;

/// Snapshots a background compaction keeps restorable (point-in-time restore reaches them).
pub const KEEP_SNAPSHOTS: usize = 20;

/// The lease holder id of an operator's own transfers (`home_import`, `home_restore`,
/// `home_delete`) on host `host`.
fn operator_holder(host: &str) -> String {
    format!("{host}/operator")
}

/// Who a home belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// No snapshot yet: the Space of the first run that saves it will own it.
    New,
    /// The Space named in its newest snapshot's record.
    Space(String),
    /// Its newest snapshot's record names no Space (imported under a new name): nobody's until
    /// the operator moves it to a Space.
    Nobody,
}

/// The Space a snapshot's record names, if any.
pub fn space_of(meta: &serde_json::Value) -> Option<&str> {
    meta.get("space").and_then(serde_json::Value::as_str).filter(|s| !s.is_empty())
}

/// Refuses (`FORBIDDEN`) a run of Space `space` using home `home` of owner `owner`. The message
/// never names the owning Space (the caller may be another Space's).
fn check_owner(home: &str, owner: &Owner, space: &str) -> Result<()> {
    let why = match owner {
        Owner::New => return Ok(()),
        Owner::Space(s) if s == space => return Ok(()),
        Owner::Space(_) => "belongs to another Space: a persistent agent's home stays with the Space that created it",
        Owner::Nobody => "belongs to no Space yet (its newest snapshot was imported without an agent record)",
    };
    Err(refuse(
        ErrorCode::Forbidden,
        format!(
            "the persistent agent {home:?} {why}; it cannot run in Space {space:?} unless the operator moves it there \
             (`spacesd home move {home} --space {space}`)"
        ),
    ))
}

/// A lease this host holds for one of its runs.
struct Held {
    run_id: String,
    lease: Arc<Lease>,
    /// The task keeping it renewed ([`renew::keep`]).
    renewal: tokio::task::JoinHandle<()>,
}

/// Where news of a run's lease goes: `(run_id, note)`, a `notice` for the run.
pub type LeaseNews = Box<dyn Fn(&str, renew::LeaseNote) + Send + Sync>;

/// The volume and the leases this host holds.
pub struct Homes {
    /// This value itself, for the renewal tasks (which never keep it alive).
    me: Weak<Homes>,
    volume: Volume,
    host: String,
    /// The TTL of the leases this host takes.
    ttl: Duration,
    /// Where the renewal tasks tell runs about their leases ([`Homes::on_lease_news`]).
    news: OnceLock<LeaseNews>,
    /// Private scratch space for the operator's restores (`<state dir>/volume-staging`).
    scratch: PathBuf,
    held: Mutex<HashMap<String, Held>>,
    /// One save or transfer at a time per home.
    busy: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Homes {
    /// Open the configured volume (`cfg.volume`) with this host's id; S3 settings come from the
    /// daemon's `AWS_*` environment. Errors: an invalid URL or host id file.
    pub fn open(cfg: &Config) -> anyhow::Result<Arc<Homes>> {
        let host = cfg.host_id()?;
        let env: HashMap<String, String> = std::env::vars().filter(|(k, _)| k.starts_with("AWS_")).collect();
        let cache = cfg.volume_cache_dir();
        let volume =
            Volume::open(&cfg.volume, &env, &cache, &host).map_err(|e| anyhow::anyhow!("cannot open the volume {}: {e}", cfg.volume))?;
        let scratch = cfg.state_dir.join("volume-staging");
        let ttl = Duration::from_millis(cfg.lease_ttl_ms);
        let homes = Arc::new_cyclic(|me| Homes {
            me: me.clone(),
            volume,
            host,
            ttl,
            news: OnceLock::new(),
            scratch,
            held: Mutex::new(HashMap::new()),
            busy: Mutex::new(HashMap::new()),
        });
        Ok(homes)
    }

    /// Send what the renewal tasks have to tell a run about its lease (renewals failing, working
    /// again, the lease lapsed or lost: [`renew`]) to `news`; until this is called it is only
    /// logged. Only the first call counts.
    pub fn on_lease_news(&self, news: LeaseNews) {
        if self.news.set(news).is_err() {
            tracing::warn!("lease news already goes elsewhere");
        }
    }

    /// The TTL of the leases this host takes (`SPACES_LEASE_TTL_MS`, default [`crate::config::LEASE_TTL`]).
    pub fn lease_ttl(&self) -> Duration {
        self.ttl
    }

    /// Tell run `run_id` `note` (lease news), and log it.
    fn tell(&self, run_id: &str, note: renew::LeaseNote) {
        tracing::info!("run {run_id}: {}", note.detail);
        if let Some(news) = self.news.get() {
            news(run_id, note);
        }
    }

    /// Whether run `run_id` still holds `home` with this very lease.
    fn holds(&self, home: &str, run_id: &str, lease: &Arc<Lease>) -> bool {
        self.held_map().get(home).is_some_and(|h| h.run_id == run_id && Arc::ptr_eq(&h.lease, lease))
    }

    /// Drop `home`'s held lease if it is this very one (it was lost).
    fn forget(&self, home: &str, lease: &Arc<Lease>) {
        let mut map = self.held_map();
        if map.get(home).is_some_and(|h| Arc::ptr_eq(&h.lease, lease)) {
            map.remove(home);
        }
    }

    fn held_map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn busy_lock(&self, home: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.busy.lock().unwrap_or_else(|p| p.into_inner()).entry(home.to_owned()).or_default().clone()
    }

    /// What capabilities show: kind, URL (no credentials) and this host's id.
    pub fn capabilities(&self) -> VolumeCapabilities {
        let kind = match self.volume.kind() {
            VolumeKind::Local => "local",
            VolumeKind::S3 => "s3",
        };
        VolumeCapabilities { kind: kind.into(), url: self.volume.url().to_owned(), host: self.host.clone() }
    }

    /// This host's id.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The lease holder id of run `run_id` on this host: `<host>/<run_id>`.
    pub fn holder(&self, run_id: &str) -> String {
        format!("{}/{run_id}", self.host)
    }

    /// The run of this host holding `home`'s lease, if any.
    pub fn holding_run(&self, home: &str) -> Option<String> {
        self.held_map().get(home).map(|h| h.run_id.clone())
    }

    /// Who `home` belongs to. Errors: `INVALID_ARGUMENT` for a bad name, `INTERNAL` for the
    /// store.
    pub async fn owner(&self, home: &str) -> Result<Owner> {
        Ok(match self.latest(home).await? {
            None => Owner::New,
            Some(s) => space_of(&s.meta).map_or(Owner::Nobody, |s| Owner::Space(s.to_owned())),
        })
    }

    /// Take `home`'s lease for run `run_id` of Space `space` (a no-op when that run holds it
    /// already). The home must be new or belong to `space`: checked before the lease is taken
    /// (so another Space's caller learns nothing of its holder) and again once it is held (so
    /// a move cannot slip in between). Errors: `FORBIDDEN` (another Space's home, or nobody's);
    /// `LEASE_HELD` naming the holder and the expiry; `INVALID_ARGUMENT` for a bad name;
    /// `INTERNAL` when the store cannot be reached.
    pub async fn claim(&self, home: &str, run_id: &str, space: &str) -> Result<()> {
        if self.held_map().get(home).is_some_and(|h| h.run_id == run_id) {
            return Ok(());
        }
        check_owner(home, &self.owner(home).await?, space)?;
        let lease = self.volume.acquire(home, &self.holder(run_id), self.ttl).await.map_err(|e| volume_error(e, home))?;
        let owned = match self.owner(home).await {
            Ok(owner) => check_owner(home, &owner, space),
            Err(e) => Err(e),
        };
        if let Err(e) = owned {
            if let Err(le) = lease.release().await {
                tracing::warn!("home {home}: lease not released ({le}); it ends at its expiry");
            }
            return Err(e);
        }
        let lease = Arc::new(lease);
        let renewal = tokio::spawn(renew::keep(self.me.clone(), run_id.to_owned(), lease.clone(), renew::Schedule::for_ttl(self.ttl)));
        if let Some(old) = self.held_map().insert(home.to_owned(), Held { run_id: run_id.to_owned(), lease, renewal }) {
            // Another run of this host held it (its lease, now superseded, is never renewed).
            old.renewal.abort();
        }
        Ok(())
    }

    /// Release `home`'s lease if run `run_id` holds it (written as a new lease record, so
    /// another host may take it at once). Failures are logged: the lease then ends at expiry.
    pub async fn release(&self, home: &str, run_id: &str) {
        let held = {
            let mut map = self.held_map();
            match map.get(home) {
                Some(h) if h.run_id == run_id => map.remove(home),
                _ => None,
            }
        };
        let Some(held) = held else { return };
        let _busy = self.busy_lock(home).lock_owned().await;
        // The renewal task lets go of its handle on the lease before the release is written.
        held.renewal.abort();
        let _ = held.renewal.await;
        let lease = match Arc::try_unwrap(held.lease) {
            Ok(lease) => lease,
            Err(_) => {
                tracing::warn!("home {home}: lease still in use; it ends at its expiry");
                return;
            }
        };
        if let Err(e) = lease.release().await {
            tracing::warn!("home {home}: lease not released ({e}); it ends at its expiry");
        }
    }

    /// The newest snapshot of `home`, if it has any. Errors: `INVALID_ARGUMENT` for a bad
    /// name, `INTERNAL` for the store.
    pub async fn latest(&self, home: &str) -> Result<Option<SnapshotInfo>> {
        self.volume.latest(home).await.map_err(|e| volume_error(e, home))
    }

    /// Restore the newest snapshot of `home` into `target` (staged, then swapped in; `target`'s
    /// parent must exist). `None` when the home has no snapshot yet (a new persistent agent).
    /// Errors: an unsafe or corrupt snapshot (`INVALID_ARGUMENT` naming the entry), the store.
    pub async fn restore_latest(&self, home: &str, target: &Path) -> Result<Option<SnapshotInfo>> {
        let _busy = self.busy_lock(home).lock_owned().await;
        match self.volume.restore(home, None, target, &LogProgress::new(home, "restore")).await {
            Ok(report) => Ok(Some(report.snapshot)),
            Err(VolumeError::HomeNotFound { .. }) => Ok(None),
            Err(e) => Err(volume_error(e, home)),
        }
    }

    /// Save `dir` as `home`'s next snapshot for run `run_id` (which must hold the lease: it is
    /// taken again if this daemon restarted, for the Space its record names), leaving out
    /// `exclude` globs; `meta` is the persistent agent's record. A file (or path) holding one of
    /// the `secrets` values is not uploaded: the save fails naming it, and stores nothing. An
    /// unchanged home uploads nothing. A lease found lost at the commit (it lapsed, or was
    /// taken) is taken again once and the save tried again: that works when no other holder has
    /// it. Errors: `LEASE_HELD` (another run or host holds the home, named), `FORBIDDEN` (the
    /// home was moved to another Space), `INVALID_ARGUMENT` (a secret value in a file), the
    /// store, the files.
    pub async fn save(
        &self,
        home: &str,
        run_id: &str,
        dir: &Path,
        exclude: &[&str],
        meta: serde_json::Value,
        secrets: Vec<spaces_volumes::SecretValue>,
    ) -> Result<SaveReport> {
        let space = space_of(&meta).unwrap_or_default().to_owned();
        let opts = SaveOptions { meta, exclude: exclude.iter().map(|s| (*s).to_owned()).collect(), refuse: secrets };
        let mut taken_again = false;
        loop {
            self.claim(home, run_id, &space).await?;
            let _busy = self.busy_lock(home).lock_owned().await;
            let lease = self.held_map().get(home).filter(|h| h.run_id == run_id).map(|h| h.lease.clone());
            let Some(lease) = lease else {
                return Err(refuse(ErrorCode::LeaseHeld, format!("home {home:?}: run {run_id} no longer holds its lease")));
            };
            let report = match self.volume.save(&lease, dir, &opts, &LogProgress::new(home, "save")).await {
                Ok(report) => report,
                Err(e @ VolumeError::LeaseLost { .. }) => {
                    self.forget(home, &lease);
                    if taken_again {
                        return Err(volume_error(e, home));
                    }
                    tracing::info!("home {home}: run {run_id}'s lease was lost at the save; taking it again");
                    taken_again = true;
                    continue;
                }
                Err(e) => return Err(volume_error(e, home)),
            };
            if report.snapshot.layers > COMPACT_AFTER_LAYERS {
                // Restores read every layer of a snapshot: keep that number small.
                if let Err(e) = self.volume.compact(&lease, KEEP_SNAPSHOTS).await {
                    tracing::warn!("home {home}: compaction failed ({e}); the next save tries again");
                }
            }
            return Ok(report);
        }
    }

    /// The volume, for the operator's operations.
    fn volume(&self) -> &Volume {
        &self.volume
    }

    /// The directory of a local volume (protected from Space roots), if it is one.
    pub fn local_dir(&self) -> Option<&Path> {
        self.volume.local_root()
    }
}

/// A volume error as the caller's error: `LEASE_HELD` naming the holder and when the lease
/// ends; bad names, unknown homes or snapshots, unsafe or corrupt archives as
/// `INVALID_ARGUMENT` saying what to do; store and file failures as `INTERNAL`.
pub fn volume_error(e: VolumeError, home: &str) -> Error {
    match e {
        VolumeError::LeaseHeld { holder, expires_ms, .. } => {
            let left = expires_ms.saturating_sub(spaces_store::now_ms()) / 1000;
            refuse(
                ErrorCode::LeaseHeld,
                format!(
                    "the persistent agent {home:?} is in use: {holder} holds its lease until {expires_ms} (ms since the epoch, \
                     {left} s from now, renewed while that run lives); stop that run, or wait for the lease to expire"
                ),
            )
        }
        VolumeError::LeaseLost { .. } => refuse(
            ErrorCode::LeaseHeld,
            format!("the lease of the persistent agent {home:?} was taken over by another host (this one was gone past its expiry)"),
        ),
        VolumeError::InvalidName { name, why } => {
            refuse(ErrorCode::InvalidArgument, format!("invalid persistent agent name {name:?}: {why}"))
        }
        VolumeError::HomeNotFound { home } => refuse(
            ErrorCode::InvalidArgument,
            format!("no persistent agent named {home:?} in this host's volume; `spacesd home list` shows the ones there are"),
        ),
        VolumeError::SnapshotNotFound { home, snapshot } => refuse(
            ErrorCode::InvalidArgument,
            format!("the home {home:?} has no snapshot {snapshot:?}; `spacesd home snapshots {home}` lists them"),
        ),
        VolumeError::Unsafe { entry, why } => {
            refuse(ErrorCode::InvalidArgument, format!("refused: entry {entry:?} would escape the home ({why}); nothing was changed"))
        }
        VolumeError::Secret { path, name } => refuse(
            ErrorCode::InvalidArgument,
            format!(
                "the file {path:?} of the home holds the value of {name}, a secret of the run; the home was not saved \
                 (nothing was uploaded) until that file no longer holds it"
            ),
        ),
        VolumeError::Corrupt { what, why } => {
            refuse(ErrorCode::InvalidArgument, format!("refused: {what} is truncated or corrupt ({why}); nothing was changed"))
        }
        other => Error::Api(spaces_sdk::ApiError::new(ErrorCode::Internal, format!("volume: {other}"))),
    }
}

/// A snapshot as the wire shows it.
pub fn snapshot_wire(s: SnapshotInfo) -> HomeSnapshot {
    HomeSnapshot {
        id: s.id,
        name: s.home,
        created_ms: s.created_ms,
        host: s.host,
        files: s.files,
        bytes: s.bytes,
        layers: s.layers,
        meta: s.meta,
        skipped: s.skipped.into_iter().map(|e| SkippedEntryWire { path: e.path, kind: e.kind }).collect(),
        broken: None,
    }
}

/// A snapshot of `home` whose manifest cannot be read, on the wire: its id and why, every other
/// field empty ([`HomeSnapshot::broken`]).
pub fn broken_snapshot_wire(home: &str, id: String, why: String) -> HomeSnapshot {
    HomeSnapshot {
        id,
        name: home.to_owned(),
        created_ms: 0,
        host: String::new(),
        files: 0,
        bytes: 0,
        layers: 0,
        meta: serde_json::Value::Null,
        skipped: Vec::new(),
        broken: Some(why),
    }
}

/// Progress of a long transfer in the daemon's log, at most every 2 s.
pub struct LogProgress {
    what: String,
    last: Mutex<Instant>,
}

impl LogProgress {
    /// Progress of `step` on `home`.
    pub fn new(home: &str, step: &str) -> Self {
        LogProgress { what: format!("home {home}: {step}"), last: Mutex::new(Instant::now()) }
    }
}

impl Progress for LogProgress {
    fn update(&self, step: &str, done_bytes: u64, total_bytes: Option<u64>) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if last.elapsed() < Duration::from_secs(2) {
            return;
        }
        *last = Instant::now();
        match total_bytes {
            Some(t) => tracing::info!("{} ({step}): {done_bytes} of {t} bytes", self.what),
            None => tracing::info!("{} ({step}): {done_bytes} bytes", self.what),
        }
    }
}
