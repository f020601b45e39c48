//! What an operator does to a home besides saving and restoring it: [`Volume::set_meta`],
//! [`Volume::delete`], [`Volume::compact`].

use super::*;

impl Volume {
    /// Commits a new snapshot of the lease's home with the latest snapshot's entries and layers
    /// and `meta` instead of its meta (the owner's record changed): no file is read, no layer
    /// written. Errors: `LeaseLost`, `HomeNotFound`, `Store`, `Corrupt`.
    pub async fn set_meta(&self, lease: &Lease, meta: serde_json::Value) -> Result<SnapshotInfo> {
        lease.check(Duration::ZERO).await?;
        let home = lease.home().to_string();
        let latest = self.resolve(&home, None).await?;
        let seq = parse_id(&home, &latest.manifest.id)? + 1;
        let manifest = Manifest {
            id: format!("{seq:020}"),
            created_ms: now_ms(),
            host: self.inner.host.clone(),
            parent: Some(latest.manifest.id.clone()),
            lease_epoch: lease.info().epoch,
            nonce: lease::nonce(),
            meta,
            ..latest.manifest
        };
        self.commit(lease, &manifest).await?;
        Ok(manifest.info())
    }

    /// Deletes every object of the lease's home (manifests, then layers), then releases the
    /// lease: a `released` record is written and older lease records removed (the last record
    /// stays so a stale holder can never reuse an old epoch). Errors: `LeaseLost`, `Store`.
    pub async fn delete(&self, lease: Lease) -> Result<DeleteReport> {
        lease.check(Duration::ZERO).await?;
        let home = lease.home().to_string();
        let mut objects = 0;
        for dir in [store::snapshots_dir(&home), store::layers_dir(&home)] {
            for meta in store::list(self.store(), &dir).await? {
                store::delete(self.store(), &meta.location).await?;
                objects += 1;
            }
        }
        // Anything else under the home but the lease records (e.g. a future kind of object).
        for meta in store::list(self.store(), &store::home_root(&home)).await? {
            if !meta.location.as_ref().starts_with(store::lease_dir(&home).as_ref()) {
                store::delete(self.store(), &meta.location).await?;
                objects += 1;
            }
        }
        objects += lease::release_and_prune(&lease).await?;
        Ok(DeleteReport { home, objects })
    }

    /// Rewrites the latest snapshot of the lease's home as one full layer (a new snapshot with
    /// the same entries and meta; skipped when it already reads one layer), then deletes
    /// manifests older than the newest `keep` (at least 1) and every layer none of the kept
    /// snapshots references. A restore running meanwhile either finished reading its layers or
    /// fails cleanly with `Corrupt` (target untouched); a restore of "latest" retries once.
    /// Errors: `LeaseLost`, `HomeNotFound`, `Store`, `Corrupt`, `Io`.
    pub async fn compact(&self, lease: &Lease, keep: usize) -> Result<SnapshotInfo> {
        lease.check(Duration::ZERO).await?;
        let home = lease.home().to_string();
        let latest = self.resolve(&home, None).await?;
        let mut info = latest.manifest.info();
        if latest.manifest.layers.len() > 1 {
            let spool = self.spool();
            std::fs::create_dir_all(&spool).at(&spool)?;
            let (staging, root) = fsops::staging_beside(&spool.join("compact"), "compact")?;
            let progress = NoProgress;
            let built = self.build(Arc::new(latest.manifest.clone()), Arc::new(root), &progress).await;
            let saved = match built {
                Ok(_) => {
                    let opts = SaveOptions { meta: latest.manifest.meta.clone(), ..SaveOptions::default() };
                    self.save_as(lease, &staging, &opts, Some(latest.manifest.skipped.clone()), &progress).await
                }
                Err(e) => Err(e),
            };
            self.discard(staging).await;
            info = saved?.snapshot;
        }
        // Prune: manifests beyond `keep`, then layers no kept manifest needs.
        let list = store::list_numbered(self.store(), &store::snapshots_dir(&home)).await?;
        let keep = keep.max(1);
        let cut = list.len().saturating_sub(keep);
        let mut needed = std::collections::HashSet::new();
        for (seq, _) in &list[cut..] {
            if let Some(f) = self.fetch(&home, *seq).await? {
                needed.extend(f.manifest.layers);
            }
        }
        lease.check(Duration::ZERO).await?;
        for (_, meta) in &list[..cut] {
            store::delete(self.store(), &meta.location).await?;
        }
        for meta in store::list(self.store(), &store::layers_dir(&home)).await? {
            let name = meta.location.filename().unwrap_or_default();
            let sha = name.strip_suffix(".tar.zst").unwrap_or(name);
            if !needed.contains(sha) {
                store::delete(self.store(), &meta.location).await?;
            }
        }
        Ok(info)
    }
}
