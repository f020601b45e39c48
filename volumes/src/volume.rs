//! [`Volume`]: the operations on homes, snapshots and leases.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::{ObjectMeta, ObjectStoreExt};

use crate::beneath::Beneath;
use crate::bridge::{blocking, stream_into};
use crate::error::{IoContext, Result, VolumeError};
use crate::fsops::{self, Finish};
use crate::lease::{self, now_ms, Lease};
use crate::manifest::{Kind, Manifest, Root, FORMAT};
use crate::save::{self, NEW_LAYER};
use crate::scan::{self, LastSnapshot, StatCache};
use crate::store::{self, Created, Store};
use crate::types::*;

/// A volume: where homes are kept. Cheap to clone; share it between tasks.
#[derive(Clone)]
pub struct Volume {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    kind: VolumeKind,
    url: String,
    cache_dir: PathBuf,
    host: String,
    local_root: Option<PathBuf>,
}

impl std::fmt::Debug for Volume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Volume").field("url", &self.inner.url).field("host", &self.inner.host).finish()
    }
}

/// A snapshot manifest with the store's metadata of its object.
struct Fetched {
    manifest: Manifest,
    object: ObjectMeta,
}

fn parse_id(home: &str, id: &str) -> Result<u64> {
    let not_found = || VolumeError::SnapshotNotFound { home: home.to_string(), snapshot: id.to_string() };
    if id.is_empty() || id.len() > 20 || !id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(not_found());
    }
    id.parse().map_err(|_| not_found())
}

/// What identifies one version of a manifest object in a listing and in a GET alike.
fn object_tag(m: &ObjectMeta) -> String {
    match &m.e_tag {
        Some(t) => format!("{}:{t}", m.size),
        None => m.size.to_string(),
    }
}

impl Volume {
    /// Opens a volume. `url` is an absolute path or `file:///abs/dir` (a local directory, created
    /// if missing), or `s3://bucket/prefix` (an S3-compatible store; its settings come from the
    /// standard AWS variables in `env`: `AWS_ENDPOINT_URL` (or `AWS_ENDPOINT`),
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION` /
    /// `AWS_DEFAULT_REGION` (default `us-east-1`), `AWS_ALLOW_HTTP`; a plain `http://` endpoint
    /// is allowed when it is loopback or `AWS_ALLOW_HTTP=true`). `cache_dir` is a local directory
    /// this host owns for the stat-cache and temporary layers (created if missing). `host` is
    /// this host's id, recorded in snapshots and lease records.
    ///
    /// Errors: `InvalidUrl`, `Io` (creating the directories). Nothing is contacted yet.
    pub fn open(url: &str, env: &HashMap<String, String>, cache_dir: &Path, host: &str) -> Result<Volume> {
        let opened = store::open(url, env)?;
        std::fs::create_dir_all(cache_dir).at(cache_dir)?;
        Ok(Volume {
            inner: Arc::new(Inner {
                store: opened.store,
                kind: opened.kind,
                url: opened.url,
                cache_dir: cache_dir.to_path_buf(),
                host: host.to_string(),
                local_root: opened.local_root,
            }),
        })
    }

    /// The volume's URL, normalised (`file:///abs/dir` or `s3://bucket/prefix`); never holds
    /// credentials.
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// Which kind of store the volume is on.
    pub fn kind(&self) -> VolumeKind {
        self.inner.kind
    }

    /// The directory of a local volume (`None` on S3).
    pub fn local_root(&self) -> Option<&Path> {
        self.inner.local_root.as_deref()
    }

    fn store(&self) -> &Store {
        &self.inner.store
    }

    fn spool(&self) -> PathBuf {
        self.inner.cache_dir.join("tmp")
    }

    /// Where a new layer is written before it goes up: on a local volume, inside the volume
    /// directory (outside `homes/`), so the upload is a rename instead of a copy.
    fn layer_tmp(&self) -> PathBuf {
        match &self.inner.local_root {
            Some(root) => root.join(".spaces-tmp"),
            None => self.spool(),
        }
    }

    /// Puts a finished layer file in the store; returns the bytes sent.
    async fn put_layer(&self, home: &str, sha: &str, tmp: tempfile::NamedTempFile, len: u64) -> Result<u64> {
        let path = store::layer_path(home, sha);
        match &self.inner.local_root {
            // Same as LocalFileSystem's put (temp file, then rename), minus the copy.
            Some(root) => {
                let dest = root.join(path.as_ref());
                let parent = dest.parent().map(Path::to_path_buf).unwrap_or_else(|| root.clone());
                tokio::task::spawn_blocking(move || {
                    std::fs::create_dir_all(&parent).at(&parent)?;
                    tmp.persist(&dest).map_err(|e| VolumeError::io(&dest, e.error))?;
                    Ok::<_, VolumeError>(())
                })
                .await
                .map_err(|e| VolumeError::io(root, std::io::Error::other(e.to_string())))??;
                Ok(len)
            }
            None => store::upload_file(self.store(), &path, tmp.path()).await,
        }
    }

    async fn fetch(&self, home: &str, seq: u64) -> Result<Option<Fetched>> {
        let path = store::snapshot_path(home, seq);
        let got = match self.store().get(&path).await {
            Ok(g) => g,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(VolumeError::store(format!("get {path}"), e)),
        };
        let object = got.meta.clone();
        let bytes = got.bytes().await.map_err(|e| VolumeError::store(format!("get {path}"), e))?;
        let manifest = Manifest::parse(&bytes, &format!("snapshot {path}"))?;
        if manifest.id != format!("{seq:020}") || manifest.home != home {
            return Err(VolumeError::corrupt(format!("snapshot {path}"), "id or home does not match its name"));
        }
        Ok(Some(Fetched { manifest, object }))
    }

    /// The snapshot `at` (None: the latest) of `home`.
    async fn resolve(&self, home: &str, at: Option<&str>) -> Result<Fetched> {
        store::check_home(home)?;
        let list = store::list_numbered(self.store(), &store::snapshots_dir(home)).await?;
        if list.is_empty() {
            return Err(VolumeError::HomeNotFound { home: home.to_string() });
        }
        let seq = match at {
            Some(id) => parse_id(home, id)?,
            None => list.last().map(|(n, _)| *n).unwrap_or_default(),
        };
        self.fetch(home, seq).await?.ok_or_else(|| VolumeError::SnapshotNotFound { home: home.to_string(), snapshot: format!("{seq:020}") })
    }

    /// Every home in the volume that has a snapshot or a live lease, sorted by name. A home that
    /// cannot be read whole is listed all the same, with what could be read and `broken` naming
    /// what could not (its newest manifest truncated, corrupt or unsafe: `latest: None`; its
    /// lease record unreadable: `lease: None`; the store failing on one of its objects), so the
    /// other homes stay listable and it can still be deleted. Errors: `Store` (listing the
    /// volume's homes itself failed).
    pub async fn homes(&self) -> Result<Vec<HomeSummary>> {
        let root = store::homes_root();
        let listed = self.store().list_with_delimiter(Some(&root)).await.map_err(|e| VolumeError::store(format!("list {root}"), e))?;
        let mut names: Vec<String> = listed
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .filter(|n| store::check_home(n).is_ok())
            .collect();
        names.sort();
        let mut out = Vec::new();
        for name in names {
            let mut broken = Vec::new();
            let list = match store::list_numbered(self.store(), &store::snapshots_dir(&name)).await {
                Ok(list) => list,
                Err(e) => {
                    broken.push(e.to_string());
                    Vec::new()
                }
            };
            let lease = match lease::info(self.store(), &name).await {
                Ok(lease) => lease,
                Err(e) => {
                    broken.push(e.to_string());
                    None
                }
            };
            if list.is_empty() && lease.is_none() && broken.is_empty() {
                continue;
            }
            let latest = match list.last() {
                Some((seq, _)) => match self.fetch(&name, *seq).await {
                    Ok(f) => f.map(|f| f.manifest.info()),
                    Err(e) => {
                        broken.push(format!("newest snapshot: {e}"));
                        None
                    }
                },
                None => None,
            };
            let broken = (!broken.is_empty()).then(|| broken.join("; "));
            out.push(HomeSummary { name, snapshots: list.len() as u64, latest, lease, broken });
        }
        Ok(out)
    }

    /// The snapshots of `home`, oldest first; any one that cannot be read fails the whole call
    /// ([`Volume::snapshot_listing`] lists it instead). Errors: `InvalidName`, `HomeNotFound` (no
    /// snapshot), `Store`, `Corrupt`, `Unsafe`.
    pub async fn snapshots(&self, home: &str) -> Result<Vec<SnapshotInfo>> {
        self.snapshot_listing(home)
            .await?
            .into_iter()
            .map(|l| match l {
                ListedSnapshot::Readable(s) => Ok(s),
                ListedSnapshot::Broken { id, why } => Err(VolumeError::corrupt(format!("snapshot {id} of home {home:?}"), why)),
            })
            .collect()
    }

    /// Every snapshot of `home`, oldest first, each readable or [`ListedSnapshot::Broken`] with
    /// why (a truncated, corrupt or unsafe manifest, or the store failing to return it): one
    /// broken manifest never hides the others. A snapshot dropped by a concurrent compaction is
    /// left out. Errors: `InvalidName`, `HomeNotFound` (no snapshot), `Store` (listing the
    /// home's snapshots failed).
    pub async fn snapshot_listing(&self, home: &str) -> Result<Vec<ListedSnapshot>> {
        store::check_home(home)?;
        let list = store::list_numbered(self.store(), &store::snapshots_dir(home)).await?;
        if list.is_empty() {
            return Err(VolumeError::HomeNotFound { home: home.to_string() });
        }
        let mut out = Vec::with_capacity(list.len());
        for (seq, _) in list {
            match self.fetch(home, seq).await {
                Ok(Some(f)) => out.push(ListedSnapshot::Readable(f.manifest.info())),
                Ok(None) => {}
                Err(e) => out.push(ListedSnapshot::Broken { id: format!("{seq:020}"), why: e.to_string() }),
            }
        }
        Ok(out)
    }

    /// The newest snapshot of `home`, `None` if it has none. Errors: `InvalidName`, `Store`,
    /// `Corrupt`.
    pub async fn latest(&self, home: &str) -> Result<Option<SnapshotInfo>> {
        match self.resolve(home, None).await {
            Ok(f) => Ok(Some(f.manifest.info())),
            Err(VolumeError::HomeNotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

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
    async fn save_as(
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
    async fn commit(&self, lease: &Lease, manifest: &Manifest) -> Result<u64> {
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
    async fn remember(&self, cache_file: &Path, f: &Fetched, digest: String, rows: Vec<scan::Row>) {
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
    async fn build(&self, m: Arc<Manifest>, staging: Arc<Beneath>, progress: &dyn Progress) -> Result<(u64, u64)> {
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
    async fn discard(&self, staging: PathBuf) {
        let _ = tokio::task::spawn_blocking(move || fsops::force_remove(&staging)).await;
    }

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
    async fn prime_cache(&self, f: &Fetched, target: &Path) {
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

    async fn import_from(
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

    /// Takes the lease of `home` for `holder` (e.g. `host-a/run-1234`) for `ttl`, by writing the
    /// next lease record Create-only. Another holder's live lease → `LeaseHeld` naming it and
    /// its expiry (Unix ms); an expired or released lease is taken over; the same holder's live
    /// lease is taken again (a new epoch: an older `Lease` object of it is then superseded).
    /// Errors: `InvalidName`, `LeaseHeld`, `Store`.
    pub async fn acquire(&self, home: &str, holder: &str, ttl: Duration) -> Result<Lease> {
        store::check_home(home)?;
        lease::acquire(self.store(), &self.inner.host, home, holder, ttl).await
    }

    /// The live lease of `home`; `None` if free, expired or released. Errors: `InvalidName`,
    /// `Store`, `Corrupt`.
    pub async fn lease_info(&self, home: &str) -> Result<Option<LeaseInfo>> {
        store::check_home(home)?;
        lease::info(self.store(), home).await
    }
}
