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
///
/// Every method takes `&self` but `release`: a renewal may run while a save holds the same
/// lease (the save's fencing checks read the record the renewal wrote). A renewal cut off
/// before its answer (a timeout around [`Lease::renew`], a lost reply) is not forgotten: the
/// records this holder wrote but never saw confirmed are kept, and whichever of them the store
/// holds as the current record is recognised as this holder's own by the next renewal or check,
/// so an outage never turns into "lost" by itself.
pub struct Lease {
    pub(crate) store: Store,
    pub(crate) host: String,
    home: String,
    ttl_ms: u64,
    state: std::sync::Mutex<State>,
}

/// What a holder knows of its lease.
struct State {
    /// The newest record of this holder known to be stored.
    rec: Record,
    /// Records written (or being written) after `rec` whose write was not seen to land.
    unconfirmed: Vec<Record>,
}

impl std::fmt::Debug for Lease {
    /// The lease record's public fields only (the store's configuration may hold credentials).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rec = self.state().rec.clone();
        f.debug_struct("Lease")
            .field("home", &rec.home)
            .field("holder", &rec.holder)
            .field("epoch", &rec.epoch)
            .field("expires_ms", &rec.expires_ms)
            .finish()
    }
}

impl Lease {
    fn new(store: Store, host: String, rec: Record) -> Lease {
        Lease {
            store,
            host,
            home: rec.home.clone(),
            ttl_ms: rec.ttl_ms,
            state: std::sync::Mutex::new(State { rec, unconfirmed: Vec::new() }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The TTL this lease was taken with, in milliseconds.
    pub(crate) fn ttl_ms(&self) -> u64 {
        self.ttl_ms
    }

    /// The home this lease is on.
    pub fn home(&self) -> &str {
        &self.home
    }

    /// The lease as last written by this holder (epoch and expiry of its latest record known
    /// to be stored).
    pub fn info(&self) -> LeaseInfo {
        self.state().rec.info()
    }

    /// Extends the lease by its TTL from now by writing the next epoch. Safe to cut off (e.g.
    /// by a timeout) and call again: a record an earlier call wrote is recognised as this
    /// holder's. A lease whose expiry passed is renewed too while no one else wrote a newer
    /// record (nobody else could have saved meanwhile). Errors: `LeaseLost` when a newer
    /// record of someone else exists (taken over after expiry, released, or the same holder
    /// acquired it again), `Store` (retrying may help).
    pub async fn renew(&self) -> Result<()> {
        let rec = self.advance(false).await?;
        prune(&self.store, &rec.home, rec.epoch.saturating_sub(1)).await;
        Ok(())
    }

    /// Releases the lease by writing a `released` record as the next epoch (there is no
    /// conditional delete). Errors: `LeaseLost` when someone else's record came first, `Store`.
    pub async fn release(self) -> Result<()> {
        let rec = self.advance(true).await?;
        prune(&self.store, &rec.home, rec.epoch.saturating_sub(1)).await;
        Ok(())
    }

    /// The next record after `rec` (not written yet), remembered as unconfirmed.
    fn next_record(&self, released: bool) -> Record {
        let now = now_ms();
        let mut st = self.state();
        let next = Record {
            epoch: st.rec.epoch + 1,
            expires_ms: if released { now } else { now + st.rec.ttl_ms },
            released,
            written_ms: now,
            host: self.host.clone(),
            nonce: nonce(),
            ..st.rec.clone()
        };
        st.unconfirmed.push(next.clone());
        next
    }

    /// Whether `cur` (the store's current record) is this holder's own: its known record, or
    /// one it wrote without seeing the write land (then that one becomes the known record).
    fn own(&self, cur: &Record) -> bool {
        let mut st = self.state();
        if cur.epoch == st.rec.epoch && cur.nonce == st.rec.nonce {
            return true;
        }
        match st.unconfirmed.iter().position(|r| r.epoch == cur.epoch && r.nonce == cur.nonce) {
            Some(i) => {
                st.rec = st.unconfirmed.swap_remove(i);
                st.unconfirmed.clear();
                true
            }
            None => false,
        }
    }

    /// `next` landed: it is the known record now.
    fn confirm(&self, next: &Record) {
        let mut st = self.state();
        if next.epoch > st.rec.epoch {
            st.rec = next.clone();
        }
        st.unconfirmed.clear();
    }

    /// Writes the next epoch (a renewal, or a release) if the current record is this holder's.
    async fn advance(&self, released: bool) -> Result<Record> {
        let lost = || VolumeError::LeaseLost { home: self.home.clone() };
        // A `Taken` write may be an earlier, cut-off write of ours landing late: look again.
        for _ in 0..4 {
            match current(&self.store, &self.home).await? {
                Some(cur) if self.own(&cur) => {}
                _ => return Err(lost()),
            }
            let next = self.next_record(released);
            match write(&self.store, &next).await? {
                Created::Mine => {
                    self.confirm(&next);
                    return Ok(next);
                }
                Created::Taken => continue,
            }
        }
        Err(lost())
    }

    /// Fencing check: Ok when this lease is still the current record and has at least `margin`
    /// left before expiry; `LeaseLost` otherwise.
    pub(crate) async fn check(&self, margin: Duration) -> Result<()> {
        let lost = || VolumeError::LeaseLost { home: self.home.clone() };
        match current(&self.store, &self.home).await? {
            Some(cur) if !cur.released && self.own(&cur) => {
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
                return Ok(Lease::new(store.clone(), host.to_string(), rec));
            }
            // Someone wrote this epoch first: look again (they may hold it now).
            Created::Taken => continue,
        }
    }
    match current(store, home).await? {
        Some(cur) if cur.live(now_ms()) => {
            Err(VolumeError::LeaseHeld { home: home.to_string(), holder: cur.holder, expires_ms: cur.expires_ms })
        }
        _ => {
            Err(VolumeError::Store { op: format!("acquire lease of {home}"), message: "lost the race for the lease record 8 times".into() })
        }
    }
}

/// The live lease of `home`, if any.
pub(crate) async fn info(store: &Store, home: &str) -> Result<Option<LeaseInfo>> {
    Ok(current(store, home).await?.filter(|r| r.live(now_ms())).map(|r| r.info()))
}

/// Writes a `released` record after the current one and prunes every older record (used by
/// `Volume::delete`). Returns how many records were deleted.
pub(crate) async fn release_and_prune(lease: &Lease) -> Result<u64> {
    let rec = lease.advance(true).await?;
    let mut n = 0;
    for (epoch, meta) in store::list_numbered(&lease.store, &store::lease_dir(&rec.home)).await? {
        if epoch < rec.epoch {
            store::delete(&lease.store, &meta.location).await?;
            n += 1;
        }
    }
    Ok(n)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use object_store::local::LocalFileSystem;

    use super::*;

    fn local() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store: Store = Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap());
        (dir, store)
    }

    /// A renewal cut off after its record landed (a timeout around `renew`, a lost reply): the
    /// next renewal and the fencing check know that record as the holder's own.
    #[tokio::test]
    async fn a_renewal_whose_record_landed_unseen_is_recognised_as_ours() {
        let (_dir, store) = local();
        let lease = acquire(&store, "host-a", "agent", "host-a/run-1", Duration::from_secs(30)).await.unwrap();
        let landed = lease.next_record(false);
        assert_eq!(write(&store, &landed).await.unwrap(), Created::Mine);
        assert_eq!(lease.info().epoch, 1, "the holder never saw it land");

        lease.check(Duration::ZERO).await.unwrap();
        assert_eq!(lease.info().epoch, 2, "the check adopted the landed record");
        lease.renew().await.unwrap();
        assert_eq!(lease.info().epoch, 3);
        assert_eq!(current(&store, "agent").await.unwrap().unwrap().nonce, lease.state().rec.nonce);
    }

    /// Two cut-off renewals, the second of which landed: the next one continues from it.
    #[tokio::test]
    async fn of_several_unseen_renewals_the_one_stored_is_adopted() {
        let (_dir, store) = local();
        let lease = acquire(&store, "host-a", "agent", "host-a/run-1", Duration::from_secs(30)).await.unwrap();
        let _never_landed = lease.next_record(false);
        let landed = lease.next_record(false);
        assert_eq!(write(&store, &landed).await.unwrap(), Created::Mine);
        lease.renew().await.unwrap();
        assert_eq!(lease.info().epoch, 3);
    }

    /// Someone else's newer record is never mistaken for ours, whatever we tried to write.
    #[tokio::test]
    async fn another_holders_record_is_lost_not_adopted() {
        let (_dir, store) = local();
        let lease = acquire(&store, "host-a", "agent", "host-a/run-1", Duration::from_secs(30)).await.unwrap();
        let _tried = lease.next_record(false);
        let theirs = Record { holder: "host-b/run-2".into(), host: "host-b".into(), nonce: nonce(), ..lease.next_record(false) };
        assert_eq!(write(&store, &theirs).await.unwrap(), Created::Mine);
        assert!(matches!(lease.renew().await, Err(VolumeError::LeaseLost { .. })));
        assert!(matches!(lease.check(Duration::ZERO).await, Err(VolumeError::LeaseLost { .. })));
    }

    /// An expired lease nobody took is renewed (no one else could have written meanwhile).
    #[tokio::test]
    async fn an_expired_lease_nobody_took_is_renewed() {
        let (_dir, store) = local();
        let lease = acquire(&store, "host-a", "agent", "host-a/run-1", Duration::from_millis(50)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert!(matches!(lease.check(Duration::ZERO).await, Err(VolumeError::LeaseLost { .. })));
        lease.renew().await.unwrap();
        lease.check(Duration::ZERO).await.unwrap();
    }
}
