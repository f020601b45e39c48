//! The operator's operations on persistent agents' homes (`home_list`, `home_snapshots`,
//! `home_export`, `home_import`, `home_restore`, `home_delete`, `home_move`; `spacesd home
//! ...`).
//!
//! Ownership (see [`super`]): an import keeps the home's owner (a new name imported from an
//! archive belongs to no Space until moved); a point-in-time restore back into the volume
//! rewinds files and session but keeps the current owner; `home_move` alone changes it.
//!
//! Paths are on the daemon's host and must be absolute (a relative path would be resolved
//! against the daemon's working directory, which is never what the caller meant). Changing a
//! home (import, restore back into the volume, delete) takes its lease for the operator
//! (`<host>/operator`) for the length of the call, so it is refused with `LEASE_HELD` while a
//! run, here or on another host, holds it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use spaces_sdk::{
    ErrorCode, HomeDeleteReport, HomeExportRequest, HomeImportRequest, HomeLease, HomeMoveReport, HomeRecord, HomeRestoreRequest,
    HomeSnapshot, HomeTransferReport,
};

use super::{operator_holder, snapshot_wire, space_of, volume_error, Homes, LogProgress};
use crate::error::{refuse, Result};

impl Homes {
    /// `home_list`: every home in the volume, with its lease and latest snapshot, and this
    /// host's run of it. A home the volume cannot read whole is listed with what could be read
    /// and `broken` saying what could not ([`spaces_volumes::Volume::homes`]). Errors:
    /// `INTERNAL` (listing the volume itself failed).
    pub async fn list(&self) -> Result<Vec<HomeRecord>> {
        let homes = self.volume().homes().await.map_err(|e| volume_error(e, "*"))?;
        Ok(homes
            .into_iter()
            .map(|h| HomeRecord {
                run_id: self.holding_run(&h.name),
                snapshots: h.snapshots,
                latest: h.latest.map(snapshot_wire),
                lease: h.lease.map(|l| HomeLease { holder: l.holder, expires_ms: l.expires_ms }),
                broken: h.broken,
                name: h.name,
            })
            .collect())
    }

    /// `home_snapshots`: oldest first; a snapshot whose manifest cannot be read is listed with
    /// its id and `broken` saying why. Errors: `INVALID_ARGUMENT` (no such home, bad name),
    /// `INTERNAL` (listing the home's snapshots failed).
    pub async fn snapshots(&self, name: &str) -> Result<Vec<HomeSnapshot>> {
        use spaces_volumes::ListedSnapshot;
        let list = self.volume().snapshot_listing(name).await.map_err(|e| volume_error(e, name))?;
        Ok(list
            .into_iter()
            .map(|l| match l {
                ListedSnapshot::Readable(s) => snapshot_wire(s),
                ListedSnapshot::Broken { id, why } => super::broken_snapshot_wire(name, id, why),
            })
            .collect())
    }

    /// `home_export`: snapshot `at` (default: the latest) as one `.tar.zst` at `path`, written
    /// to a temporary file and renamed. Errors: `INVALID_ARGUMENT` (relative path, no such home
    /// or snapshot), `INTERNAL` (the store, the file).
    pub async fn export(&self, req: &HomeExportRequest) -> Result<HomeTransferReport> {
        let path = absolute("path", &req.path)?;
        let started = Instant::now();
        let snap = self
            .volume()
            .export(&req.name, req.at.as_deref(), &path, &LogProgress::new(&req.name, "export"))
            .await
            .map_err(|e| volume_error(e, &req.name))?;
        let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        Ok(report(&req.name, snap, Some(&path), bytes, started))
    }

    /// `home_import`: the `.tar.zst` at `path` becomes the home's newest snapshot (a new home
    /// when it has none). Every entry is checked as a restore checks it. Errors: `LEASE_HELD`,
    /// `INVALID_ARGUMENT` (relative or missing path, an entry that would escape the home, a
    /// corrupt archive), `INTERNAL`.
    pub async fn import(&self, req: &HomeImportRequest) -> Result<HomeTransferReport> {
        let path = absolute("path", &req.path)?;
        if !path.is_file() {
            return Err(refuse(ErrorCode::InvalidArgument, format!("no archive at {}", path.display())));
        }
        let started = Instant::now();
        let meta = match self.latest(&req.name).await? {
            Some(s) => s.meta,
            None => serde_json::Value::Null,
        };
        let lease = self.operator_lease(&req.name).await?;
        let result = self.volume().import(&lease, &path, meta, &LogProgress::new(&req.name, "import")).await;
        let _ = lease.release().await;
        let snap = result.map_err(|e| volume_error(e, &req.name))?;
        let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        Ok(report(&req.name, snap, Some(&path), bytes, started))
    }

    /// `home_restore`: with `to`, snapshot `at` (default: the latest) into that directory
    /// (replaced atomically; the volume is unchanged); without it, snapshot `at` becomes the
    /// home's newest snapshot again (the next run starts from it). Errors: `LEASE_HELD`
    /// (without `to`), `INVALID_ARGUMENT` (relative `to`, no such home or snapshot, an unsafe or
    /// corrupt snapshot), `INTERNAL`.
    pub async fn restore(&self, req: &HomeRestoreRequest) -> Result<HomeTransferReport> {
        let started = Instant::now();
        let progress = LogProgress::new(&req.name, "restore");
        if let Some(to) = &req.to {
            let to = absolute("to", to)?;
            let parent = to.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("/"));
            std::fs::create_dir_all(&parent)?;
            let r = self.volume().restore(&req.name, req.at.as_deref(), &to, &progress).await.map_err(|e| volume_error(e, &req.name))?;
            return Ok(report(&req.name, r.snapshot, Some(&to), r.bytes, started));
        }
        let lease = self.operator_lease(&req.name).await?;
        let result = async {
            // The owner stays the current one: a restore rewinds files and session, not who may
            // use the home.
            let owner = self.latest(&req.name).await?.and_then(|s| space_of(&s.meta).map(str::to_owned));
            let staging = tempfile::Builder::new().prefix(".restore-").tempdir_in(self.scratch_dir()?)?;
            let target = staging.path().join("home");
            let r =
                self.volume().restore(&req.name, req.at.as_deref(), &target, &progress).await.map_err(|e| volume_error(e, &req.name))?;
            let opts = spaces_volumes::SaveOptions { meta: with_owner(r.snapshot.meta.clone(), owner.as_deref()), ..Default::default() };
            let saved = self.volume().save(&lease, &target, &opts, &progress).await.map_err(|e| volume_error(e, &req.name))?;
            Ok::<_, crate::error::Error>((saved.snapshot, r.bytes))
        }
        .await;
        let _ = lease.release().await;
        let (snap, bytes) = result?;
        Ok(report(&req.name, snap, None, bytes, started))
    }

    /// `home_delete`: every snapshot and layer of the home (one whose newest snapshot is corrupt
    /// or refused included). Errors: `LEASE_HELD` (a run holds it), `INVALID_ARGUMENT` (no such
    /// home), `INTERNAL`.
    pub async fn delete(&self, name: &str) -> Result<HomeDeleteReport> {
        use spaces_volumes::VolumeError;
        // A home whose newest snapshot is corrupt or refused (hostile) can be deleted too.
        match self.volume().latest(name).await {
            Ok(None) => return Err(volume_error(VolumeError::HomeNotFound { home: name.to_owned() }, name)),
            Ok(Some(_)) | Err(VolumeError::Corrupt { .. } | VolumeError::Unsafe { .. }) => {}
            Err(e) => return Err(volume_error(e, name)),
        }
        let lease = self.operator_lease(name).await?;
        let r = self.volume().delete(lease).await.map_err(|e| volume_error(e, name))?;
        Ok(HomeDeleteReport { name: r.home, objects: r.objects })
    }

    /// `home_move`: the home of `name` belongs to Space `space` from now on (a new snapshot of
    /// the same files whose record names `space`; its `cwd` is dropped: the new Space's root).
    /// Nothing is written when it already belongs to `space`. Takes the home's lease for the
    /// call. Errors: `LEASE_HELD` (a run holds it), `INVALID_ARGUMENT` (no such home),
    /// `INTERNAL`.
    pub async fn move_to(&self, name: &str, space: &str) -> Result<HomeMoveReport> {
        if self.latest(name).await?.is_none() {
            return Err(volume_error(spaces_volumes::VolumeError::HomeNotFound { home: name.to_owned() }, name));
        }
        let lease = self.operator_lease(name).await?;
        let result = async {
            let latest = self
                .latest(name)
                .await?
                .ok_or_else(|| volume_error(spaces_volumes::VolumeError::HomeNotFound { home: name.to_owned() }, name))?;
            let from = space_of(&latest.meta).map(str::to_owned);
            if from.as_deref() == Some(space) {
                return Ok((from, latest));
            }
            let mut meta = with_owner(latest.meta.clone(), Some(space));
            if let Some(m) = meta.as_object_mut() {
                m.remove("cwd");
            }
            let snap = self.volume().set_meta(&lease, meta).await.map_err(|e| volume_error(e, name))?;
            Ok::<_, crate::error::Error>((from, snap))
        }
        .await;
        let _ = lease.release().await;
        let (from, snap) = result?;
        Ok(HomeMoveReport { name: name.to_owned(), space: space.to_owned(), from, snapshot: snapshot_wire(snap) })
    }

    async fn operator_lease(&self, name: &str) -> Result<spaces_volumes::Lease> {
        self.volume().acquire(name, &operator_holder(self.host()), self.lease_ttl()).await.map_err(|e| volume_error(e, name))
    }

    /// The daemon's private directory for staging a restore (`<state dir>/volume-staging`).
    fn scratch_dir(&self) -> std::io::Result<PathBuf> {
        spaces_store::fsutil::create_private_dir(&self.scratch)?;
        Ok(self.scratch.clone())
    }
}

/// A snapshot's record naming `owner` as its Space (none: no `space`). A record that is not an
/// object (an imported archive's) becomes one.
fn with_owner(meta: serde_json::Value, owner: Option<&str>) -> serde_json::Value {
    let mut m = match (meta, owner) {
        (serde_json::Value::Object(m), _) => m,
        (other, None) => return other,
        (_, Some(_)) => serde_json::Map::new(),
    };
    match owner {
        Some(s) => m.insert("space".to_owned(), serde_json::Value::String(s.to_owned())),
        None => m.remove("space"),
    };
    serde_json::Value::Object(m)
}

fn absolute(field: &str, path: &str) -> Result<PathBuf> {
    let p = PathBuf::from(path);
    if !p.is_absolute() {
        return Err(refuse(
            ErrorCode::InvalidArgument,
            format!("{field} {path:?} must be an absolute path on the daemon's host (the CLI makes it absolute for you)"),
        ));
    }
    Ok(p)
}

fn report(name: &str, snap: spaces_volumes::SnapshotInfo, path: Option<&Path>, bytes: u64, started: Instant) -> HomeTransferReport {
    HomeTransferReport {
        name: name.to_owned(),
        snapshot: snapshot_wire(snap),
        path: path.map(|p| p.display().to_string()),
        bytes,
        elapsed_ms: started.elapsed().as_millis() as u64,
    }
}
