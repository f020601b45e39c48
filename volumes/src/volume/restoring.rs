//! [`Volume::restore`], [`Volume::export`] and [`Volume::import`]: a snapshot into a folder or
//! an archive file, and an archive file into a new snapshot.

use super::*;

impl Volume {
    /// Restores snapshot `at` (an id; `None` = latest) of `home` into `target`. It is built in a
    /// fresh staging directory beside `target` (same file system), every entry checked (no `..`,
    /// absolute paths, links leaving the home, entries through symlinks, or other entry types:
    /// `Unsafe`), every file verified against its sha256 and every layer against its name
    /// (`Corrupt`), modes applied after contents (directories last, deepest first), then swapped
    /// in by rename (target → backup, staging → target, backup removed). The parent of `target`
    /// must exist. Any failure leaves `target` exactly as it was. A stale `*-wal`/`*-shm` of the
    /// previous copy is gone with it (the restored database is self-contained). Also primes the
    /// stat-cache for `target`, so saving it right back is an unchanged save.
    /// Errors: `HomeNotFound`, `SnapshotNotFound`, `Unsafe`, `Corrupt`, `Store`, `Io`.
    pub async fn restore(&self, home: &str, at: Option<&str>, target: &Path, progress: &dyn Progress) -> Result<RestoreReport> {
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let f = self.resolve(home, at).await?;
            let (staging, root) = fsops::staging_beside(target, "restore")?;
            let m = Arc::new(f.manifest.clone());
            let built = self.build(m.clone(), Arc::new(root), progress).await;
            match built {
                Ok((files, bytes)) => {
                    let (s2, t2) = (staging.clone(), target.to_path_buf());
                    let swapped = blocking(progress, move |_| fsops::swap_in(&s2, &t2)).await;
                    if let Err(e) = swapped {
                        self.discard(staging).await;
                        return Err(e);
                    }
                    self.prime_cache(&f, target).await;
                    return Ok(RestoreReport {
                        snapshot: f.manifest.info(),
                        files,
                        bytes,
                        elapsed_ms: started.elapsed().as_millis() as u64,
                    });
                }
                Err(e) => {
                    self.discard(staging).await;
                    // The latest snapshot may have been compacted away under us: once more.
                    let missing = matches!(&e, VolumeError::Corrupt { why, .. } if why == "missing from the store");
                    if at.is_none() && missing && attempt < 2 {
                        continue;
                    }
                    return Err(e);
                }
            }
        }
    }

    /// After a restore: the stat-cache of `target` says it matches snapshot `f`.
    pub(super) async fn prime_cache(&self, f: &Fetched, target: &Path) {
        let Ok(dir) = std::fs::canonicalize(target) else { return };
        let file = StatCache::file(&self.inner.cache_dir, self.url(), &f.manifest.home, &dir);
        let m = f.manifest.clone();
        let rows = tokio::task::spawn_blocking(move || {
            let now = scan::now_ns();
            m.entries
                .iter()
                .filter(|e| e.kind == Kind::File)
                .filter_map(|e| {
                    let md = std::fs::symlink_metadata(dir.join(&e.path)).ok()?;
                    Some(scan::Row(e.path.clone(), scan::key_of(&md), e.sha256.clone()?, e.size, now))
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        self.remember(&file, f, save::manifest_digest(&f.manifest), rows).await;
    }

    /// Writes snapshot `at` (None = latest) of `home` as one self-contained `.tar.zst` at `file`:
    /// the manifest first (`.spaces-snapshot.json`), then every entry with its mode and mtime.
    /// Written to a temp file beside `file`, fsynced, renamed. Errors: as `restore`.
    pub async fn export(&self, home: &str, at: Option<&str>, file: &Path, progress: &dyn Progress) -> Result<SnapshotInfo> {
        let f = self.resolve(home, at).await?;
        let (staging, root) = fsops::staging_beside(file, "export")?;
        let root = Arc::new(root);
        let m = Arc::new(f.manifest);
        let built = self.build(m.clone(), root.clone(), progress).await;
        let result = match built {
            Ok(_) => {
                let (m2, s2, file2) = (m.clone(), root, file.to_path_buf());
                blocking(progress, move |p| crate::layer::write_export(&m2, &s2, &file2, p)).await
            }
            Err(e) => Err(e),
        };
        self.discard(staging).await;
        result.map(|_| m.info())
    }

    /// Makes a `.tar.zst` (an export, or any plain tar.zst of a home directory) a new full
    /// snapshot (one layer) of the lease's home, with `meta`. The archive is unpacked into a
    /// staging directory under `cache_dir` with the same refusals as `restore` (`Unsafe`, naming
    /// the entry); an export's files are checked against its manifest; a truncated or corrupt
    /// archive fails with `Corrupt`. Errors also: `LeaseLost`, `Store`, `Io`.
    pub async fn import(&self, lease: &Lease, file: &Path, meta: serde_json::Value, progress: &dyn Progress) -> Result<SnapshotInfo> {
        lease.check(Duration::ZERO).await?;
        let spool = self.spool();
        std::fs::create_dir_all(&spool).at(&spool)?;
        let (staging, root) = fsops::staging_beside(&spool.join("import"), "import")?;
        let result = self.import_from(lease, file, &staging, root, meta, progress).await;
        self.discard(staging).await;
        result
    }

    pub(super) async fn import_from(
        &self,
        lease: &Lease,
        file: &Path,
        staging: &Path,
        s2: Beneath,
        meta: serde_json::Value,
        progress: &dyn Progress,
    ) -> Result<SnapshotInfo> {
        let file2 = file.to_path_buf();
        blocking(progress, move |p| {
            let (mut fin, root) = crate::layer::unpack_import(&file2, &s2, p)?;
            let root = root.unwrap_or(Root { mode: 0o700, mtime_ns: scan::now_ns() });
            fsops::apply_metadata(&s2, root, &mut fin)
        })
        .await?;
        let report = self.save_as(lease, staging, &SaveOptions { meta, ..SaveOptions::default() }, Some(Vec::new()), progress).await?;
        Ok(report.snapshot)
    }
}
