//! [`Volume::save`]: a home's files into a new snapshot (only changed files read, only new
//! layers written), fenced by the lease.

use super::*;

impl Volume {
    /// Saves directory `dir` as a new snapshot of the lease's home, incrementally: one walk; a
    /// stat-cache in `cache_dir` keyed on (path, size, mtime, ctime, inode) spares re-hashing
    /// unchanged files; contents no layer of the latest snapshot holds go into one new layer;
    /// deleted files are absent from the new manifest. When files, skipped entries and
    /// `opts.meta` all equal the latest snapshot, nothing is written: the report's `snapshot` is
    /// that snapshot, `unchanged` is true and `uploaded_bytes` 0.
    ///
    /// Files are read consistently (stat, read, stat again, retry while it moves); a live SQLite
    /// database with a `-wal` beside it is stored as one consistent copy made by SQLite
    /// (`VACUUM INTO` from a read-only connection) and its `-wal`/`-shm` are listed as skipped.
    /// Sockets, FIFOs, devices, excluded paths and symlinks leaving the home are listed in
    /// `SnapshotInfo::skipped`.
    ///
    /// Fencing: the lease must be the home's current lease record before the commit (with a
    /// safety margin before expiry) and after it; if it was lost in between, the new manifest is
    /// deleted again. The manifest is written Create-only, so two writers never commit the same
    /// sequence number. Errors: `LeaseLost` (nothing committed), `Io`, `Store`, `Corrupt`.
    pub async fn save(&self, lease: &Lease, dir: &Path, opts: &SaveOptions, progress: &dyn Progress) -> Result<SaveReport> {
        self.save_as(lease, dir, opts, None, progress).await
    }

    /// `save`, or with `full` set (import, compact): no stat-cache, no reuse of earlier layers,
    /// and `full`'s skipped list instead of the walk's.
    pub(super) async fn save_as(
        &self,
        lease: &Lease,
        dir: &Path,
        opts: &SaveOptions,
        full: Option<Vec<SkippedEntry>>,
        progress: &dyn Progress,
    ) -> Result<SaveReport> {
        let started = Instant::now();
        let home = lease.home().to_string();
        lease.check(Duration::ZERO).await?;
        let dir_abs = std::fs::canonicalize(dir).at(dir)?;
        let list = store::list_numbered(self.store(), &store::snapshots_dir(&home)).await?;
        let latest = list.last().cloned();
        let cache_file = StatCache::file(&self.inner.cache_dir, self.url(), &home, &dir_abs);
        let (meta, globs) = (opts.meta.clone(), scan::excludes(&opts.exclude)?);
        let is_full = full.is_some();

        // One walk; with a warm cache and the same latest snapshot, this alone decides "unchanged".
        progress.update("walk", 0, None);
        let (walk, cache, quick, home_dir) = {
            let (dir_abs, cache_file, meta) = (dir_abs.clone(), cache_file.clone(), meta.clone());
            let full_skipped = full.clone();
            blocking(progress, move |_| {
                // Opened once: the walk and every read go beneath this descriptor.
                let home_dir = Arc::new(Beneath::open(&dir_abs)?);
                let mut walk = scan::walk(&home_dir, &globs)?;
                if let Some(s) = full_skipped {
                    walk.skipped = s;
                }
                let cache = if is_full { StatCache::default() } else { StatCache::load(&cache_file) };
                let quick = save::cached_entries(&walk, &cache).map(|e| save::digest(&walk.root, &e, &walk.skipped, &meta));
                Ok((walk, cache, quick, home_dir))
            })
            .await?
        };
        let walked = walk.entries.len() as u64 + walk.skipped.len() as u64;
        if let (false, Some(quick), Some(last), Some((seq, obj))) = (is_full, &quick, &cache.last, &latest) {
            if last.id == format!("{seq:020}") && &last.digest == quick && last.object_tag == object_tag(obj) {
                return Ok(SaveReport {
                    snapshot: last.info.clone(),
                    unchanged: true,
                    uploaded_bytes: 0,
                    walked,
                    hashed: 0,
                    elapsed_ms: started.elapsed().as_millis() as u64,
                });
            }
        }

        let prev = match &latest {
            Some((seq, _)) => self.fetch(&home, *seq).await?,
            None => None,
        };
        let spool = self.spool();
        let prepared = {
            let prev_m = if is_full { None } else { prev.as_ref().map(|p| p.manifest.clone()) };
            let (spool, layer_tmp) = (spool.clone(), self.layer_tmp());
            let secrets = crate::secrets::Scanner::new(&opts.refuse);
            let walk = Arc::new(walk);
            let w = walk.clone();
            let p = blocking(progress, move |progress| {
                std::fs::create_dir_all(&spool).at(&spool)?;
                save::prepare(&home_dir, &w, (!is_full).then_some(&cache), prev_m.as_ref(), &spool, &layer_tmp, &secrets, progress)
            })
            .await?;
            (p, walk)
        };
        let (mut prepared, walk) = prepared;
        let new_digest = save::digest(&walk.root, &prepared.entries, &walk.skipped, &meta);

        // Same as the latest snapshot: nothing to commit.
        if let (false, Some(prev)) = (is_full, &prev) {
            if save::manifest_digest(&prev.manifest) == new_digest {
                self.remember(&cache_file, prev, new_digest, std::mem::take(&mut prepared.rows)).await;
                return Ok(SaveReport {
                    snapshot: prev.manifest.info(),
                    unchanged: true,
                    uploaded_bytes: 0,
                    walked,
                    hashed: prepared.hashed,
                    elapsed_ms: started.elapsed().as_millis() as u64,
                });
            }
        }

        // Upload the new layer (immutable, content-addressed: a plain put).
        let mut uploaded = 0;
        let mut new_layer = None;
        if let Some((tmp, sha, len)) = prepared.layer.take() {
            progress.update("upload", 0, Some(len));
            uploaded += self.put_layer(&home, &sha, tmp, len).await?;
            progress.update("upload", len, Some(len));
            new_layer = Some(sha);
        }
        let mut layers: Vec<String> = Vec::new();
        for e in &mut prepared.entries {
            if e.layer.as_deref() == Some(NEW_LAYER) {
                e.layer = new_layer.clone();
            }
            if let Some(l) = &e.layer {
                if !layers.contains(l) {
                    layers.push(l.clone());
                }
            }
        }
        let seq = latest.as_ref().map_or(1, |(n, _)| n + 1);
        let manifest = Manifest {
            format: FORMAT,
            id: format!("{seq:020}"),
            home: home.clone(),
            created_ms: now_ms(),
            host: self.inner.host.clone(),
            parent: prev.as_ref().map(|p| p.manifest.id.clone()),
            lease_epoch: lease.info().epoch,
            nonce: lease::nonce(),
            meta,
            skipped: walk.skipped.clone(),
            root: walk.root,
            layers,
            entries: std::mem::take(&mut prepared.entries),
        };
        uploaded += self.commit(lease, &manifest).await?;
        if let Some(f) = self.fetch(&home, seq).await? {
            if !is_full {
                self.remember(&cache_file, &f, new_digest, prepared.rows).await;
            }
        }
        Ok(SaveReport {
            snapshot: manifest.info(),
            unchanged: false,
            uploaded_bytes: uploaded,
            walked,
            hashed: prepared.hashed,
            elapsed_ms: started.elapsed().as_millis() as u64,
        })
    }

    /// Commits a manifest under the lease: fence, Create-only put, fence again (undo if lost).
    /// Returns the bytes sent.
    pub(super) async fn commit(&self, lease: &Lease, manifest: &Manifest) -> Result<u64> {
        let home = &manifest.home;
        let lost = || VolumeError::LeaseLost { home: home.clone() };
        let ttl = lease.ttl_ms();
        lease.check(Duration::from_millis((ttl / 4).min(5_000))).await?;
        let body = serde_json::to_vec(manifest).map_err(|e| VolumeError::corrupt("manifest", e.to_string()))?;
        let len = body.len() as u64;
        let seq = parse_id(home, &manifest.id)?;
        let path = store::snapshot_path(home, seq);
        match store::put_create(self.store(), &path, body, &manifest.nonce).await? {
            Created::Mine => {}
            Created::Taken => return Err(lost()),
        }
        if let Err(e) = lease.check(Duration::ZERO).await {
            // Someone took the lease while we committed: take our snapshot back.
            let _ = store::delete(self.store(), &path).await;
            return Err(e);
        }
        Ok(len)
    }

    /// Stores the stat-cache of a directory that now matches snapshot `f`.
    pub(super) async fn remember(&self, cache_file: &Path, f: &Fetched, digest: String, rows: Vec<scan::Row>) {
        let last = LastSnapshot {
            id: f.manifest.id.clone(),
            nonce: f.manifest.nonce.clone(),
            digest,
            info: f.manifest.info(),
            object_tag: object_tag(&f.object),
        };
        let file = cache_file.to_path_buf();
        let _ = tokio::task::spawn_blocking(move || StatCache::store(&file, Some(last), rows)).await;
    }

    /// Builds snapshot `m` in the empty directory `staging` (checked as a whole first: no link
    /// resolving outside through others, no entry beneath a symlink, in any order): directories
    /// and symlinks, parents first, then each layer streamed and unpacked with every check, then
    /// modes and times (directories last, deepest first). Everything is made through the
    /// staging directory's descriptor, never through a symlink ([`Beneath`]). `m` was checked
    /// when it was parsed (`Manifest::parse` runs `Manifest::check`). Returns (files, bytes).
    pub(super) async fn build(&self, m: Arc<Manifest>, staging: Arc<Beneath>, progress: &dyn Progress) -> Result<(u64, u64)> {
        let total: u64 = m.entries.iter().filter(|e| e.kind == Kind::File).map(|e| e.size).sum();
        {
            let (m, staging) = (m.clone(), staging.clone());
            blocking(progress, move |_| {
                let mut made: Vec<&crate::manifest::Entry> = m.entries.iter().filter(|e| e.kind != Kind::File).collect();
                made.sort_by_key(|e| e.path.matches('/').count());
                for e in made {
                    match e.kind {
                        Kind::Dir => staging.mkdir(&e.path)?,
                        Kind::Symlink => staging.symlink(&e.path, e.target.as_deref().unwrap_or_default())?,
                        Kind::File => {}
                    }
                }
                Ok(())
            })
            .await?;
        }
        let mut files = 0;
        let mut done = 0u64;
        for layer in &m.layers {
            let mut wants: HashMap<String, Vec<usize>> = HashMap::new();
            for (i, e) in m.entries.iter().enumerate() {
                if e.kind == Kind::File && e.layer.as_ref() == Some(layer) {
                    wants.entry(e.src.clone().unwrap_or_else(|| e.path.clone())).or_default().push(i);
                }
            }
            if wants.is_empty() {
                continue;
            }
            let path = store::layer_path(&m.home, layer);
            let got = match self.store().get(&path).await {
                Ok(g) => g,
                Err(object_store::Error::NotFound { .. }) => {
                    return Err(VolumeError::corrupt(format!("layer {layer}"), "missing from the store"))
                }
                Err(e) => return Err(VolumeError::store(format!("get {path}"), e)),
            };
            let (m2, staging2, layer2) = (m.clone(), staging.clone(), layer.clone());
            let (n, d) = stream_into(got.into_stream(), progress, move |reader, progress| {
                let mut meter = crate::layer::Meter { progress, done, total };
                let n = crate::layer::unpack_layer(reader, &layer2, &m2, &wants, &staging2, &mut meter)?;
                Ok((n, meter.done))
            })
            .await?;
            files += n;
            done = d;
        }
        let expected = m.entries.iter().filter(|e| e.kind == Kind::File).count() as u64;
        if files != expected {
            return Err(VolumeError::corrupt(format!("snapshot {}", m.id), format!("{files} of {expected} files found in its layers")));
        }
        let (m2, staging2) = (m.clone(), staging.clone());
        blocking(progress, move |_| {
            let mut fin: Vec<Finish> =
                m2.entries.iter().map(|e| Finish { path: e.path.clone(), kind: e.kind, mode: e.mode, mtime_ns: e.mtime_ns }).collect();
            fsops::apply_metadata(&staging2, m2.root, &mut fin)
        })
        .await?;
        Ok((files, total))
    }

    /// Removes a staging directory (read-only parts included), off the async threads.
    pub(super) async fn discard(&self, staging: PathBuf) {
        let _ = tokio::task::spawn_blocking(move || fsops::force_remove(&staging)).await;
    }
}
