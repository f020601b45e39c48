//! Opening the object store from a volume URL, the object layout, and the few store primitives
//! the volume needs: plain puts of immutable blobs, Create-only puts of small records (which
//! tell "my retried write landed" from "someone else won" by a nonce inside the record), lists.
//!
//! Layout under the volume's root (a local directory, or `s3://bucket/prefix`):
//! ```text
//! homes/<home>/snapshots/<seq, 20 digits>.json   manifest, Create-only (one commit per seq)
//! homes/<home>/layers/<sha256 of the blob>.tar.zst  immutable layer, plain put
//! homes/<home>/lease/<epoch, 20 digits>.json     lease record, Create-only (epoch CAS)
//! ```

use std::collections::HashMap;
use std::path::Path as FsPath;
use std::sync::Arc;

use futures_util::TryStreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::error::{Result, VolumeError};
use crate::types::VolumeKind;

/// The store behind a volume, rooted at the volume's prefix.
pub(crate) type Store = Arc<dyn ObjectStore>;

/// An opened store: the store, its kind and the URL shown to users (no credentials).
pub(crate) struct Opened {
    pub store: Store,
    pub kind: VolumeKind,
    pub url: String,
    /// The directory of a local volume.
    pub local_root: Option<std::path::PathBuf>,
}

fn invalid(url: &str, why: impl Into<String>) -> VolumeError {
    VolumeError::InvalidUrl { url: redact(url), why: why.into() }
}

/// The URL without a `user:password@` part or a query string.
fn redact(url: &str) -> String {
    let url = url.split('?').next().unwrap_or_default();
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
            let authority = authority.rsplit('@').next().unwrap_or_default();
            if path.is_empty() && !rest.contains('/') {
                format!("{scheme}://{authority}")
            } else {
                format!("{scheme}://{authority}/{path}")
            }
        }
        None => url.to_string(),
    }
}

/// Opens the store a volume URL names (see `Volume::open`).
pub(crate) fn open(url: &str, env: &HashMap<String, String>) -> Result<Opened> {
    if let Some(rest) = url.strip_prefix("s3://") {
        return open_s3(url, rest, env);
    }
    let dir = match url.strip_prefix("file://") {
        Some(path) => path,
        None if url.contains("://") => return Err(invalid(url, "the scheme must be file:// or s3://")),
        None => url,
    };
    if !dir.starts_with('/') {
        return Err(invalid(url, "a local volume must be an absolute path"));
    }
    if dir.contains('%') || dir.contains('?') || dir.contains('#') {
        return Err(invalid(url, "percent-escapes, queries and fragments are not supported"));
    }
    std::fs::create_dir_all(dir).map_err(|e| VolumeError::io(dir, e))?;
    let fs = LocalFileSystem::new_with_prefix(dir).map_err(|e| invalid(url, e.to_string()))?.with_automatic_cleanup(true);
    let shown = dir.trim_end_matches('/');
    Ok(Opened {
        store: Arc::new(fs),
        kind: VolumeKind::Local,
        url: format!("file://{}", if shown.is_empty() { "/" } else { shown }),
        local_root: Some(dir.into()),
    })
}

fn open_s3(url: &str, rest: &str, env: &HashMap<String, String>) -> Result<Opened> {
    if rest.contains('?') || rest.contains('#') {
        return Err(invalid(url, "queries and fragments are not supported; use the AWS_* settings"));
    }
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.contains('@') || bucket.contains(':') {
        return Err(invalid(url, "credentials belong in AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, not the URL"));
    }
    if bucket.is_empty() {
        return Err(invalid(url, "the bucket name is missing"));
    }
    let prefix = prefix.trim_matches('/');
    if prefix.split('/').any(|p| p == "." || p == "..") {
        return Err(invalid(url, "the prefix may not hold `.` or `..` parts"));
    }
    let get = |k: &str| env.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
    let mut builder = AmazonS3Builder::new()
        .with_bucket_name(bucket)
        .with_region(get("AWS_REGION").or_else(|| get("AWS_DEFAULT_REGION")).unwrap_or("us-east-1"));
    if let Some(key) = get("AWS_ACCESS_KEY_ID") {
        builder = builder.with_access_key_id(key);
    }
    if let Some(secret) = get("AWS_SECRET_ACCESS_KEY") {
        builder = builder.with_secret_access_key(secret);
    }
    if let Some(token) = get("AWS_SESSION_TOKEN") {
        builder = builder.with_token(token);
    }
    let allow_http = get("AWS_ALLOW_HTTP").is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    if let Some(endpoint) = get("AWS_ENDPOINT_URL").or_else(|| get("AWS_ENDPOINT")) {
        if let Some(after) = endpoint.strip_prefix("http://") {
            let host = after.split('/').next().unwrap_or_default();
            let host = host.rsplit('@').next().unwrap_or_default();
            let host = if host.starts_with('[') {
                host.split(']').next().unwrap_or_default().trim_start_matches('[')
            } else {
                host.split(':').next().unwrap_or_default()
            };
            let loopback = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
            if !loopback && !allow_http {
                return Err(invalid(
                    url,
                    format!("plain http endpoint {endpoint:?} is only allowed on loopback or with AWS_ALLOW_HTTP=true"),
                ));
            }
            builder = builder.with_allow_http(true);
        } else if !endpoint.starts_with("https://") {
            return Err(invalid(url, format!("endpoint {endpoint:?} must start with http:// or https://")));
        }
        builder = builder.with_endpoint(endpoint);
    }
    let s3 = builder.build().map_err(|e| invalid(url, e.to_string()))?;
    let store: Store = if prefix.is_empty() { Arc::new(s3) } else { Arc::new(PrefixStore::new(s3, prefix)) };
    let shown = if prefix.is_empty() { format!("s3://{bucket}") } else { format!("s3://{bucket}/{prefix}") };
    Ok(Opened { store, kind: VolumeKind::S3, url: shown, local_root: None })
}

/// Checks a home name: `[A-Za-z0-9._-]{1,64}`, not starting with `.`.
pub(crate) fn check_home(name: &str) -> Result<()> {
    let bad = |why: &str| Err(VolumeError::InvalidName { name: name.to_string(), why: why.to_string() });
    if name.is_empty() || name.len() > 64 {
        return bad("must be 1 to 64 characters");
    }
    if name.starts_with('.') {
        return bad("must not start with '.'");
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-') {
        return bad("may hold only A-Z a-z 0-9 . _ -");
    }
    Ok(())
}

/// Object paths of one home.
pub(crate) fn homes_root() -> Path {
    Path::from("homes")
}
pub(crate) fn home_root(home: &str) -> Path {
    Path::from(format!("homes/{home}"))
}
pub(crate) fn snapshots_dir(home: &str) -> Path {
    Path::from(format!("homes/{home}/snapshots"))
}
pub(crate) fn snapshot_path(home: &str, seq: u64) -> Path {
    Path::from(format!("homes/{home}/snapshots/{seq:020}.json"))
}
pub(crate) fn layer_path(home: &str, sha: &str) -> Path {
    Path::from(format!("homes/{home}/layers/{sha}.tar.zst"))
}
pub(crate) fn layers_dir(home: &str) -> Path {
    Path::from(format!("homes/{home}/layers"))
}
pub(crate) fn lease_dir(home: &str) -> Path {
    Path::from(format!("homes/{home}/lease"))
}
pub(crate) fn lease_path(home: &str, epoch: u64) -> Path {
    Path::from(format!("homes/{home}/lease/{epoch:020}.json"))
}

/// The number in a `<20 digits>.json` object name.
pub(crate) fn seq_of(location: &Path) -> Option<u64> {
    let name = location.filename()?;
    let digits = name.strip_suffix(".json")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Every object under `dir`.
pub(crate) async fn list(store: &Store, dir: &Path) -> Result<Vec<ObjectMeta>> {
    store.list(Some(dir)).try_collect().await.map_err(|e| VolumeError::store(format!("list {dir}"), e))
}

/// The `<20 digits>.json` records under `dir`, ascending by number.
pub(crate) async fn list_numbered(store: &Store, dir: &Path) -> Result<Vec<(u64, ObjectMeta)>> {
    let mut out: Vec<(u64, ObjectMeta)> = list(store, dir).await?.into_iter().filter_map(|m| seq_of(&m.location).map(|n| (n, m))).collect();
    out.sort_by_key(|(n, _)| *n);
    Ok(out)
}

/// The object's bytes; `Ok(None)` when it does not exist.
pub(crate) async fn get_opt(store: &Store, path: &Path) -> Result<Option<bytes::Bytes>> {
    match store.get(path).await {
        Ok(r) => match r.bytes().await {
            Ok(b) => Ok(Some(b)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(VolumeError::store(format!("get {path}"), e)),
        },
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(VolumeError::store(format!("get {path}"), e)),
    }
}

/// Outcome of a Create-only put.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Created {
    /// Our record is there (written now, or by an earlier attempt that timed out but landed).
    Mine,
    /// Someone else's record holds the name.
    Taken,
}

/// Puts `body` at `path` only if nothing is there. `nonce` is a unique string inside `body`:
/// after `AlreadyExists` or any other error, the record at `path` is read back and compared, so
/// a retried or timed-out write that landed counts as ours, and someone else's as `Taken`.
pub(crate) async fn put_create(store: &Store, path: &Path, body: Vec<u8>, nonce: &str) -> Result<Created> {
    let opts = PutOptions { mode: PutMode::Create, ..Default::default() };
    let err = match store.put_opts(path, PutPayload::from(body), opts).await {
        Ok(_) => return Ok(Created::Mine),
        Err(e) => e,
    };
    let already = matches!(err, object_store::Error::AlreadyExists { .. });
    match get_opt(store, path).await? {
        Some(found) if contains(&found, nonce.as_bytes()) => Ok(Created::Mine),
        Some(_) => Ok(Created::Taken),
        None if already => Ok(Created::Taken),
        None => Err(VolumeError::store(format!("put {path}"), err)),
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// Deletes `path`; a missing object counts as deleted.
pub(crate) async fn delete(store: &Store, path: &Path) -> Result<()> {
    match store.delete(path).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(VolumeError::store(format!("delete {path}"), e)),
    }
}

/// Uploads a local file as `path` (plain put; multipart above 16 MiB). Returns bytes sent.
pub(crate) async fn upload_file(store: &Store, path: &Path, file: &FsPath) -> Result<u64> {
    use tokio::io::AsyncReadExt;
    const PART: usize = 16 << 20;
    let mut f = tokio::fs::File::open(file).await.map_err(|e| VolumeError::io(file, e))?;
    let len = f.metadata().await.map_err(|e| VolumeError::io(file, e))?.len();
    if len <= PART as u64 {
        let mut buf = Vec::with_capacity(len as usize);
        f.read_to_end(&mut buf).await.map_err(|e| VolumeError::io(file, e))?;
        store.put(path, PutPayload::from(buf)).await.map_err(|e| VolumeError::store(format!("put {path}"), e))?;
        return Ok(len);
    }
    let upload = store.put_multipart(path).await.map_err(|e| VolumeError::store(format!("put {path}"), e))?;
    let mut writer = object_store::WriteMultipart::new_with_chunk_size(upload, PART);
    let mut sent = 0u64;
    let failed: VolumeError = loop {
        let mut buf = vec![0u8; PART];
        let mut filled = 0;
        let mut read_err = None;
        while filled < PART {
            match f.read(&mut buf[filled..]).await {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) => {
                    read_err = Some(VolumeError::io(file, e));
                    break;
                }
            }
        }
        if let Some(e) = read_err {
            break e;
        }
        if filled == 0 {
            return match writer.finish().await {
                Ok(_) => Ok(sent),
                Err(e) => Err(VolumeError::store(format!("put {path}"), e)),
            };
        }
        buf.truncate(filled);
        if let Err(e) = writer.wait_for_capacity(4).await {
            break VolumeError::store(format!("put {path}"), e);
        }
        writer.put(bytes::Bytes::from(buf));
        sent += filled as u64;
    };
    // Leave no half-uploaded parts behind.
    let _ = writer.abort().await;
    Err(failed)
}
