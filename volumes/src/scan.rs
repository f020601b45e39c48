//! One walk of a home directory, the stat-cache that spares re-hashing unchanged files, and
//! consistent reads of files that may be changing (including live SQLite databases).

use std::collections::HashMap;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{IoContext, Result, VolumeError};
use crate::manifest::{Kind, Root};
use crate::types::SkippedEntry;

/// Permission bits kept: set-uid and set-gid are never stored or restored.
pub(crate) const MODE_MASK: u32 = 0o1777;

/// Identity of a file on this host: what the stat-cache is keyed on (with the path).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StatKey {
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub ino: u64,
    /// For a SQLite database with a write-ahead log: the log's key folded into one number
    /// (its contents are part of the stored copy); 0 otherwise.
    pub aux: u64,
}

/// One walked entry.
#[derive(Clone, Debug)]
pub(crate) struct Walked {
    pub path: String,
    pub kind: Kind,
    pub mode: u32,
    pub size: u64,
    pub mtime_ns: i64,
    pub key: StatKey,
    pub target: Option<String>,
    /// A SQLite database with a `-wal` beside it: stored as a consistent copy.
    pub sqlite_wal: bool,
}

/// The result of a walk.
pub(crate) struct Walk {
    pub root: Root,
    pub entries: Vec<Walked>,
    pub skipped: Vec<SkippedEntry>,
}

fn mtime_ns(md: &fs::Metadata) -> i64 {
    md.mtime().saturating_mul(1_000_000_000).saturating_add(md.mtime_nsec())
}

fn ctime_ns(md: &fs::Metadata) -> i64 {
    md.ctime().saturating_mul(1_000_000_000).saturating_add(md.ctime_nsec())
}

pub(crate) fn key_of(md: &fs::Metadata) -> StatKey {
    StatKey { size: md.len(), mtime_ns: mtime_ns(md), ctime_ns: ctime_ns(md), ino: md.ino(), aux: 0 }
}

/// The exclude patterns; `D/**` also excludes `D` itself.
pub(crate) fn excludes(patterns: &[String]) -> Result<GlobSet> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        let bad = |e: globset::Error| VolumeError::InvalidName { name: p.clone(), why: format!("bad exclude pattern: {e}") };
        b.add(Glob::new(p).map_err(bad)?);
        if let Some(dir) = p.strip_suffix("/**") {
            if !dir.is_empty() {
                b.add(Glob::new(dir).map_err(bad)?);
            }
        }
    }
    b.build().map_err(|e| VolumeError::InvalidName { name: patterns.join(","), why: e.to_string() })
}

const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

fn is_sqlite(path: &Path) -> bool {
    let mut head = [0u8; 16];
    fs::File::open(path).and_then(|mut f| f.read_exact(&mut head)).is_ok() && &head == SQLITE_MAGIC
}

/// Walks `dir` once (lstat only; no contents read except 16 bytes of SQLite candidates).
/// Entries come parents first, children of a directory sorted by name.
pub(crate) fn walk(dir: &Path, exclude: &GlobSet) -> Result<Walk> {
    let md = fs::symlink_metadata(dir).at(dir)?;
    if !md.is_dir() {
        return Err(VolumeError::io(dir, std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory")));
    }
    let root = Root { mode: md.mode() & MODE_MASK, mtime_ns: mtime_ns(&md) };
    let mut w = Walk { root, entries: Vec::new(), skipped: Vec::new() };
    walk_dir(dir, "", exclude, &mut w)?;
    skip_links_leaving(&mut w);
    Ok(w)
}

/// Symlinks that read as inside yet resolve outside through other symlinks of the home (`up ->
/// loop/..` with `loop -> .`), or through too many, are listed as `symlink_outside`, as a
/// restore would refuse them ([`crate::manifest::resolve_link`]). Leaving them out changes no
/// other link's resolution: a link that passed through one of them left the home too.
fn skip_links_leaving(w: &mut Walk) {
    let leaving: std::collections::HashSet<String> = {
        let tree: HashMap<&str, (Kind, Option<&str>)> = w.entries.iter().map(|e| (e.path.as_str(), (e.kind, e.target.as_deref()))).collect();
        w.entries
            .iter()
            .filter(|e| e.kind == Kind::Symlink)
            .filter(|e| crate::manifest::resolve_link(&tree, &e.path, e.target.as_deref().unwrap_or_default()).is_err())
            .map(|e| e.path.clone())
            .collect()
    };
    if leaving.is_empty() {
        return;
    }
    w.entries.retain(|e| !leaving.contains(&e.path));
    let mut paths: Vec<String> = leaving.into_iter().collect();
    paths.sort();
    w.skipped.extend(paths.into_iter().map(|path| SkippedEntry { path, kind: "symlink_outside".into() }));
}

fn walk_dir(abs: &Path, rel: &str, exclude: &GlobSet, w: &mut Walk) -> Result<()> {
    let mut names: Vec<(String, PathBuf)> = Vec::new();
    for ent in fs::read_dir(abs).at(abs)? {
        let ent = ent.at(abs)?;
        let name = ent.file_name();
        let p = ent.path();
        match name.into_string() {
            Ok(n) => names.push((n, p)),
            Err(os) => {
                let shown = os.to_string_lossy();
                let path = if rel.is_empty() { shown.into_owned() } else { format!("{rel}/{shown}") };
                w.skipped.push(SkippedEntry { path, kind: "unsupported_name".into() });
            }
        }
    }
    names.sort();
    let present: std::collections::HashSet<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
    // SQLite side files: `X-wal`/`X-shm` beside a database `X` are folded into X's copy.
    let mut side: HashMap<String, &'static str> = HashMap::new();
    let mut with_wal: std::collections::HashSet<String> = Default::default();
    for (n, _) in &names {
        for (suffix, kind) in [("-wal", "sqlite_wal"), ("-shm", "sqlite_shm")] {
            if let Some(base) = n.strip_suffix(suffix) {
                if present.contains(base) && is_sqlite(&abs.join(base)) {
                    side.insert(n.clone(), kind);
                    if suffix == "-wal" {
                        with_wal.insert(base.to_string());
                    }
                }
            }
        }
    }
    for (name, p) in &names {
        let path = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
        if exclude.is_match(&path) {
            w.skipped.push(SkippedEntry { path, kind: "excluded".into() });
            continue;
        }
        let md = match fs::symlink_metadata(p) {
            Ok(md) => md,
            // Gone between readdir and lstat: it is simply not part of this snapshot.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(VolumeError::io(p, e)),
        };
        let ft = md.file_type();
        let base = |kind, target, sqlite_wal| Walked {
            path: path.clone(),
            kind,
            mode: md.mode() & MODE_MASK,
            size: if kind == Kind::File { md.len() } else { 0 },
            mtime_ns: mtime_ns(&md),
            key: key_of(&md),
            target,
            sqlite_wal,
        };
        if ft.is_dir() {
            w.entries.push(base(Kind::Dir, None, false));
            walk_dir(p, &path, exclude, w)?;
        } else if ft.is_file() {
            if let Some(kind) = side.get(name) {
                w.skipped.push(SkippedEntry { path, kind: (*kind).into() });
                continue;
            }
            let mut e = base(Kind::File, None, with_wal.contains(name));
            if e.sqlite_wal {
                if let Ok(wal) = fs::symlink_metadata(abs.join(format!("{name}-wal"))) {
                    let k = key_of(&wal);
                    let mut h = Sha256::new();
                    for v in [k.size as i64, k.mtime_ns, k.ctime_ns, k.ino as i64] {
                        h.update(v.to_le_bytes());
                    }
                    let d = h.finalize();
                    e.key.aux = u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]]) | 1;
                }
            }
            w.entries.push(e);
        } else if ft.is_symlink() {
            let target = fs::read_link(p).at(p)?;
            match target.into_os_string().into_string() {
                Ok(t) if crate::manifest::symlink_inside(&path, &t) => w.entries.push(base(Kind::Symlink, Some(t), false)),
                Ok(_) => w.skipped.push(SkippedEntry { path, kind: "symlink_outside".into() }),
                Err(_) => w.skipped.push(SkippedEntry { path, kind: "unsupported_name".into() }),
            }
        } else {
            let kind = if ft.is_socket() {
                "socket"
            } else if ft.is_fifo() {
                "fifo"
            } else if ft.is_char_device() {
                "char_device"
            } else if ft.is_block_device() {
                "block_device"
            } else {
                "unknown"
            };
            w.skipped.push(SkippedEntry { path, kind: kind.into() });
        }
    }
    Ok(())
}

/// Nanoseconds since the Unix epoch, now.
pub(crate) fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// A row is trusted only when the file's last change (ctime) lies this long before it was
/// hashed: file timestamps come from a coarse clock, so a write in the same tick as the hash
/// could otherwise hide behind an equal key.
const RACY_NS: i64 = 50_000_000;

/// The stat-cache of one (volume, home, directory) on this host: `path -> (key, sha256, stored
/// size)`, plus the digest of the last snapshot this host saved or restored there, so an
/// unchanged home is recognised without reading the manifest from the store.
#[derive(Default, Serialize, Deserialize)]
pub(crate) struct StatCache {
    pub format: u32,
    pub last: Option<LastSnapshot>,
    pub rows: Vec<Row>,
    #[serde(skip)]
    index: HashMap<String, usize>,
}

/// The snapshot the directory last matched.
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct LastSnapshot {
    pub id: String,
    pub nonce: String,
    pub digest: String,
    pub info: crate::types::SnapshotInfo,
    /// The manifest object's ETag (or size when the store gives none): tells a snapshot id
    /// reused after a delete from the one remembered, from a listing alone.
    pub object_tag: String,
}

/// `(path, key, sha256, stored size, hashed_at_ns)`.
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct Row(pub String, pub StatKey, pub String, pub u64, pub i64);

impl StatCache {
    /// The cache file for `(url, home, dir)` under `cache_dir`.
    pub fn file(cache_dir: &Path, url: &str, home: &str, dir: &Path) -> PathBuf {
        let mut h = Sha256::new();
        h.update(url.as_bytes());
        h.update([0]);
        h.update(dir.as_os_str().as_encoded_bytes());
        let d = hex(&h.finalize());
        cache_dir.join("stat").join(format!("{home}-{}.json", &d[..16]))
    }

    /// Loads a cache file; a missing or unreadable one is an empty cache.
    pub fn load(file: &Path) -> StatCache {
        let mut c: StatCache = fs::read(file).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
        if c.format != 1 {
            c = StatCache::default();
        }
        c.index = c.rows.iter().enumerate().map(|(i, r)| (r.0.clone(), i)).collect();
        c
    }

    /// The cached `(sha256, stored size)` of `path` when its key matches and the row is trusted.
    pub fn lookup(&self, path: &str, key: &StatKey) -> Option<(&str, u64)> {
        let row = &self.rows[*self.index.get(path)?];
        (row.1 == *key && key.ctime_ns + RACY_NS < row.4).then_some((row.2.as_str(), row.3))
    }

    /// Writes the cache atomically (temp + rename). Failures are ignored: the cache is advisory.
    pub fn store(file: &Path, last: Option<LastSnapshot>, rows: Vec<Row>) {
        let c = StatCache { format: 1, last, rows, index: HashMap::new() };
        let Some(parent) = file.parent() else { return };
        let _ = fs::create_dir_all(parent);
        let Ok(tmp) = tempfile::NamedTempFile::new_in(parent) else { return };
        let mut w = std::io::BufWriter::with_capacity(1 << 20, tmp);
        if serde_json::to_writer(&mut w, &c).is_ok() {
            if let Ok(tmp) = w.into_inner() {
                let _ = tmp.persist(file);
            }
        }
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// File contents read consistently, in memory or spooled to a temp file.
pub(crate) enum Content {
    Mem(Vec<u8>),
    Spool(tempfile::NamedTempFile),
}

/// Files up to this size are read into memory; bigger ones are spooled to `cache_dir`.
const MEM_LIMIT: u64 = 8 << 20;
const ATTEMPTS: usize = 6;

/// Reads `abs` so the bytes are one consistent version of the file: stat, read, stat again,
/// retry while size/mtime/ctime/inode moved. Returns the bytes, their sha256 and the key seen.
/// A file still changing after several attempts fails the save with an `Io` error (a torn copy is
/// never stored). A file that vanished returns `Ok(None)`.
pub(crate) fn read_stable(abs: &Path, spool_dir: &Path) -> Result<Option<(Content, String, StatKey)>> {
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            std::thread::sleep(std::time::Duration::from_millis(20 << attempt));
        }
        let mut f = match fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
            .open(abs)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(VolumeError::io(abs, e)),
        };
        let before = f.metadata().at(abs)?;
        if !before.is_file() {
            return Ok(None);
        }
        let mut h = Sha256::new();
        let content = if before.len() <= MEM_LIMIT {
            let mut buf = Vec::with_capacity(before.len() as usize);
            f.read_to_end(&mut buf).at(abs)?;
            h.update(&buf);
            Content::Mem(buf)
        } else {
            let mut tmp = tempfile::NamedTempFile::new_in(spool_dir).at(spool_dir)?;
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let n = f.read(&mut buf).at(abs)?;
                if n == 0 {
                    break;
                }
                h.update(&buf[..n]);
                tmp.write_all(&buf[..n]).at(tmp.path())?;
            }
            tmp.flush().at(tmp.path())?;
            Content::Spool(tmp)
        };
        let after = fs::symlink_metadata(abs);
        let len = match &content {
            Content::Mem(b) => b.len() as u64,
            Content::Spool(t) => t.as_file().metadata().at(t.path())?.len(),
        };
        let k0 = key_of(&before);
        if let Ok(after) = after {
            if key_of(&after) == k0 && len == k0.size {
                return Ok(Some((content, hex(&h.finalize()), k0)));
            }
        }
    }
    Err(VolumeError::io(
        abs,
        std::io::Error::other(format!("the file kept changing while being read ({ATTEMPTS} attempts); no torn copy is stored")),
    ))
}

use std::os::unix::fs::OpenOptionsExt;

/// A consistent copy of a live SQLite database in WAL mode: `VACUUM INTO` a temp file from a
/// read-only connection (one read transaction: the committed state, WAL included; the
/// database's own files are not changed, and no checkpoint runs). `None` if SQLite cannot read
/// it (then the caller stores the files as they are).
pub(crate) fn sqlite_copy(db: &Path, spool_dir: &Path) -> Option<(Content, String)> {
    use rusqlite::OpenFlags;
    let dir = tempfile::tempdir_in(spool_dir).ok()?;
    let out = dir.path().join("copy.db");
    let conn = rusqlite::Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX).ok()?;
    conn.busy_timeout(std::time::Duration::from_secs(10)).ok()?;
    let target = out.to_str()?;
    if let Err(e) = conn.execute("VACUUM INTO ?1", [target]) {
        tracing::warn!(db = %db.display(), error = %e, "consistent copy of a SQLite database failed; storing its files as they are");
        return None;
    }
    drop(conn);
    let mut tmp = tempfile::NamedTempFile::new_in(spool_dir).ok()?;
    let mut src = fs::File::open(&out).ok()?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = src.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        tmp.write_all(&buf[..n]).ok()?;
    }
    tmp.flush().ok()?;
    Some((Content::Spool(tmp), hex(&h.finalize())))
}

impl StatCache {
    /// When the row of `path` was hashed (ns), if there is one.
    pub fn row_time(&self, path: &str) -> Option<i64> {
        self.index.get(path).map(|&i| self.rows[i].4)
    }
}
