//! Leases: one writer per home across hosts, on nothing but Create-only puts.
//!
//! The lease of a home is the sequence of records `homes/<home>/lease/<epoch>.json`; the record
//! with the highest epoch is the current state. Every acquire, renew and release writes the next
//! epoch with `PutMode::Create`, so of two hosts racing for the same epoch exactly one wins: a
//! compare-and-swap that works on a local directory too (LocalFileSystem has no
//! `PutMode::Update`), and needs no conditional delete (there is none): a release is a record
//! saying "released". A record holds a fresh nonce so a write whose reply was lost is recognised
//! as ours on read-back. Records older than the previous epoch are pruned, best effort.
//!
//! A lease is taken over only when the current record's `expires_ms` has passed on the taker's
//! clock, never sooner; hosts are assumed to have roughly synchronised clocks (the TTL must be
//! much longer than their skew). Writers check their lease before and after committing a
//! snapshot (fencing, see `Volume::save`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Result, VolumeError};
use crate::store::{self, Created, Store};
use crate::types::LeaseInfo;

/// One lease record as stored.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Record {
    pub home: String,
    pub holder: String,
    pub epoch: u64,
    pub expires_ms: u64,
    pub ttl_ms: u64,
    #[serde(default)]
    pub released: bool,
    pub written_ms: u64,
    /// The volume's host id that wrote the record.
    pub host: String,
    pub nonce: String,
}

impl Record {
    pub fn live(&self, now: u64) -> bool {
        !self.released && self.expires_ms > now
    }
    pub fn info(&self) -> LeaseInfo {
        LeaseInfo { home: self.home.clone(), holder: self.holder.clone(), epoch: self.epoch, expires_ms: self.expires_ms }
    }
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

pub(crate) fn nonce() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The current (highest-epoch) record of a home, if any.
pub(crate) async fn current(store: &Store, home: &str) -> Result<Option<Record>> {
    let records = store::list_numbered(store, &store::lease_dir(home)).await?;
    // The newest record may vanish under a concurrent prune only if a newer one exists: retry.
    for (epoch, meta) in records.iter().rev() {
        if let Some(bytes) = store::get_opt(store, &meta.location).await? {
            let rec: Record = serde_json::from_slice(&bytes)
                .map_err(|e| VolumeError::corrupt(format!("lease record {}", meta.location), e.to_string()))?;
            if rec.epoch != *epoch || rec.home != home {
                return Err(VolumeError::corrupt(format!("lease record {}", meta.location), "epoch or home does not match its name"));
            }
            return Ok(Some(rec));
        }
    }
    Ok(None)
}

/// Writes the record for `epoch`; `Taken` when another writer got that epoch first.
async fn write(store: &Store, rec: &Record) -> Result<Created> {
    let body = serde_json::to_vec_pretty(rec).map_err(|e| VolumeError::corrupt("lease record", e.to_string()))?;
    store::put_create(store, &store::lease_path(&rec.home, rec.epoch), body, &rec.nonce).await
}

/// Deletes records older than `keep_from` (best effort: a failure only leaves old records).
async fn prune(store: &Store, home: &str, keep_from: u64) {
    let Ok(records) = store::list_numbered(store, &store::lease_dir(home)).await else { return };
    for (epoch, meta) in records {
        if epoch < keep_from {
            let _ = store::delete(store, &meta.location).await;
        }
    }
}

/// A held lease on one home. Get one from `Volume::acquire`; keep it alive with
/// [`Lease::renew`] (well before `expires_ms`); give it back with [`Lease::release`]. Dropping it
/// without release leaves the lease to expire at `expires_ms`.
pub struct Lease {
    pub(crate) store: Store,
    pub(crate) host: String,
    pub(crate) rec: Record,
}

impl std::fmt::Debug for Lease {
    /// The lease record's public fields only (the store's configuration may hold credentials).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("home", &self.rec.home)
            .field("holder", &self.rec.holder)
            .field("epoch", &self.rec.epoch)
            .field("expires_ms", &self.rec.expires_ms)
            .finish()
    }
}

impl Lease {
    /// The home this lease is on.
    pub fn home(&self) -> &str {
        &self.rec.home
    }

    /// The lease as last written by this holder (epoch and expiry of its latest record).
    pub fn info(&self) -> LeaseInfo {
        self.rec.info()
    }

    /// Extends the lease by its TTL from now by writing the next epoch. Errors: `LeaseLost` when a
    /// newer record exists (someone took it over after expiry, or it was released), `Store`.
    pub async fn renew(&mut self) -> Result<()> {
        let next = self.next_record(false)?;
        self.rec = next_write(&self.store, next, &self.rec).await?;
        let keep_from = self.rec.epoch.saturating_sub(1);
        prune(&self.store, &self.rec.home, keep_from).await;
        Ok(())
    }

    /// Releases the lease by writing a `released` record as the next epoch (there is no
    /// conditional delete). Errors: `LeaseLost` when someone else's record came first, `Store`.
    pub async fn release(self) -> Result<()> {
        let next = self.next_record(true)?;
        let rec = next_write(&self.store, next, &self.rec).await?;
        prune(&self.store, &rec.home, rec.epoch.saturating_sub(1)).await;
        Ok(())
    }

    fn next_record(&self, released: bool) -> Result<Record> {
        let now = now_ms();
        Ok(Record {
            epoch: self.rec.epoch + 1,
            expires_ms: if released { now } else { now + self.rec.ttl_ms },
            released,
            written_ms: now,
            host: self.host.clone(),
            nonce: nonce(),
            ..self.rec.clone()
        })
    }

    /// Fencing check: Ok when this lease is still the current record and has at least `margin`
    /// left before expiry; `LeaseLost` otherwise.
    pub(crate) async fn check(&self, margin: Duration) -> Result<()> {
        let lost = || VolumeError::LeaseLost { home: self.rec.home.clone() };
        match current(&self.store, &self.rec.home).await? {
            Some(cur) if cur.epoch == self.rec.epoch && cur.nonce == self.rec.nonce && !cur.released => {
                if cur.expires_ms > now_ms() + margin.as_millis() as u64 {
                    Ok(())
                } else {
                    Err(lost())
                }
            }
            _ => Err(lost()),
        }
    }
}

/// Writes `next` (epoch = ours + 1) if ours is still the current record.
async fn next_write(store: &Store, next: Record, ours: &Record) -> Result<Record> {
    let lost = || VolumeError::LeaseLost { home: ours.home.clone() };
    match current(store, &ours.home).await? {
        Some(cur) if cur.epoch == ours.epoch && cur.nonce == ours.nonce => {}
        _ => return Err(lost()),
    }
    match write(store, &next).await? {
        Created::Mine => Ok(next),
        Created::Taken => Err(lost()),
    }
}

/// Takes the lease of `home` for `holder` (see `Volume::acquire`).
pub(crate) async fn acquire(store: &Store, host: &str, home: &str, holder: &str, ttl: Duration) -> Result<Lease> {
    let ttl_ms = (ttl.as_millis() as u64).max(1);
    for _ in 0..8 {
        let cur = current(store, home).await?;
        let now = now_ms();
        if let Some(cur) = &cur {
            if cur.live(now) && cur.holder != holder {
                return Err(VolumeError::LeaseHeld { home: home.to_string(), holder: cur.holder.clone(), expires_ms: cur.expires_ms });
            }
        }
        let epoch = cur.as_ref().map_or(1, |c| c.epoch + 1);
        let rec = Record {
            home: home.to_string(),
            holder: holder.to_string(),
            epoch,
            expires_ms: now + ttl_ms,
            ttl_ms,
            released: false,
            written_ms: now,
            host: host.to_string(),
            nonce: nonce(),
        };
        match write(store, &rec).await? {
            Created::Mine => {
                prune(store, home, epoch.saturating_sub(1)).await;
                return Ok(Lease { store: store.clone(), host: host.to_string(), rec });
            }
            // Someone wrote this epoch first: look again (they may hold it now).
            Created::Taken => continue,
        }
    }
    match current(store, home).await? {
        Some(cur) if cur.live(now_ms()) => {
            Err(VolumeError::LeaseHeld { home: home.to_string(), holder: cur.holder, expires_ms: cur.expires_ms })
        }
        _ => Err(VolumeError::Store { op: format!("acquire lease of {home}"), message: "lost the race for the lease record 8 times".into() }),
    }
}

/// The live lease of `home`, if any.
pub(crate) async fn info(store: &Store, home: &str) -> Result<Option<LeaseInfo>> {
    Ok(current(store, home).await?.filter(|r| r.live(now_ms())).map(|r| r.info()))
}

/// Writes a `released` record after the current one and prunes every older record (used by
/// `Volume::delete`). Returns how many records were deleted.
pub(crate) async fn release_and_prune(lease: &Lease) -> Result<u64> {
    let next = lease.next_record(true)?;
    let rec = next_write(&lease.store, next, &lease.rec).await?;
    let mut n = 0;
    for (epoch, meta) in store::list_numbered(&lease.store, &store::lease_dir(&rec.home)).await? {
        if epoch < rec.epoch {
            store::delete(&lease.store, &meta.location).await?;
            n += 1;
        }
    }
    Ok(n)
}
