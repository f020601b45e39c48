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

mod admin;
mod restoring;
mod saving;

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
