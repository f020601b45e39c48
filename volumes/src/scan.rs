//! One walk of a home directory, the stat-cache that spares re-hashing unchanged files, and
//! consistent reads of files that may be changing (including live SQLite databases).

use std::collections::HashMap;
use std::fs;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use nix::fcntl::{openat, readlinkat, AtFlags, OFlag};
use nix::sys::stat::{fstat, fstatat, FileStat, Mode, SFlag};

use crate::beneath::{errno_io, Beneath, DIR_FLAGS, MODE_MASK};
use crate::error::{IoContext, Result, VolumeError};
use crate::manifest::{Kind, Root};
use crate::types::SkippedEntry;

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

/// The skipped-entry kinds of a SQLite database's write-ahead log (`X-wal`) and its index
/// (`X-shm`): parts of the database `X`, never files of their own.
pub(crate) const SQLITE_WAL: &str = "sqlite_wal";
pub(crate) const SQLITE_SHM: &str = "sqlite_shm";
/// Each side file's suffix and kind.
const SQLITE_SIDES: [(&str, &str); 2] = [("-wal", SQLITE_WAL), ("-shm", SQLITE_SHM)];

/// The first `n` bytes (fewer if the file is shorter) of `name` in directory `dir`, opened
/// without following a link; `None` if it cannot be read.
fn head_of(dir: BorrowedFd<'_>, name: &str, n: u64) -> Option<Vec<u8>> {
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let fd = openat(dir, name, flags, Mode::empty()).ok()?;
    let mut head = Vec::with_capacity(n as usize);
    fs::File::from(fd).take(n).read_to_end(&mut head).ok()?;
    Some(head)
}

/// Whether `name` in directory `dir` is a SQLite database.
fn is_sqlite(dir: BorrowedFd<'_>, name: &str) -> bool {
    head_of(dir, name, 16).is_some_and(|h| h.as_slice() == SQLITE_MAGIC)
}

/// Whether `name` in directory `dir` is a SQLite write-ahead log: empty, or starting with its
/// magic number (`0x377f0682` or `0x377f0683`, big-endian).
fn is_sqlite_wal(dir: BorrowedFd<'_>, name: &str) -> bool {
    head_of(dir, name, 4).is_some_and(|h| h.is_empty() || matches!(h.as_slice(), [0x37, 0x7f, 0x06, 0x82 | 0x83]))
}

/// What a walk keeps of an `lstat`.
struct Stat {
    fmt: SFlag,
    mode: u32,
    key: StatKey,
}

fn stat_of(st: &FileStat) -> Stat {
    Stat { fmt: SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT, mode: st.st_mode & MODE_MASK, key: key_of_stat(st) }
}

/// The stat-cache key of a raw `stat` (the same fields as [`key_of`]).
pub(crate) fn key_of_stat(st: &FileStat) -> StatKey {
    StatKey {
        size: st.st_size.max(0) as u64,
        mtime_ns: st.st_mtime.saturating_mul(1_000_000_000).saturating_add(st.st_mtime_nsec),
        ctime_ns: st.st_ctime.saturating_mul(1_000_000_000).saturating_add(st.st_ctime_nsec),
        ino: st.st_ino,
        aux: 0,
    }
}

/// Walks the home `dir` once (lstat only; no contents read except 16 bytes of SQLite
/// candidates), from its descriptor: every directory is opened `O_NOFOLLOW` from its parent's,
/// so a directory swapped for a symlink while the walk runs is never entered (it is left out of
/// this snapshot). Entries come parents first, children of a directory sorted by name.
pub(crate) fn walk(dir: &Beneath, exclude: &GlobSet) -> Result<Walk> {
    let st = fstat(dir.root_fd()).map_err(|e| errno_io(dir.path(), e))?;
    let st = stat_of(&st);
    let root = Root { mode: st.mode, mtime_ns: st.key.mtime_ns };
    let mut w = Walk { root, entries: Vec::new(), skipped: Vec::new() };
    walk_dir(dir.root_fd(), dir.path(), "", exclude, None, &mut w)?;
    skip_links_leaving(&mut w);
    Ok(w)
}

/// Called with each directory a walk enters (its descriptor and its `/`-separated path
/// relative to the walked root, `""` for the root) before the walk lists it: a checkpoint's
/// watch ([`crate::checkpoint`]) is put on it there, so no change after the listing is missed.
pub(crate) type OnDir<'a> = Option<&'a (dyn Fn(BorrowedFd<'_>, &str) + Sync)>;

/// Most top-level subtrees [`walk_parallel`] hands to its threads (each holds a descriptor).
const MAX_DEFERRED: usize = 64;

/// A directory whose subtree [`walk_parallel`] walks on a thread of its own: its descriptor,
/// paths, and where its entries go in the walk (right after its own entry).
struct Deferred {
    at: usize,
    fd: std::os::fd::OwnedFd,
    abs: PathBuf,
    rel: String,
}

/// [`walk`] with the subtrees of the top-level directories walked on up to `threads` threads
/// (a checkpoint of a large folder at every turn's end: the walk is the time it takes). The
/// entries come in the same order as [`walk`]'s; skipped entries may come in another order.
/// `on_dir` sees every directory entered ([`OnDir`]).
pub(crate) fn walk_parallel(dir: &Beneath, exclude: &GlobSet, threads: usize, on_dir: OnDir<'_>) -> Result<Walk> {
    let st = fstat(dir.root_fd()).map_err(|e| errno_io(dir.path(), e))?;
    let st = stat_of(&st);
    let root = Root { mode: st.mode, mtime_ns: st.key.mtime_ns };
    let mut w = Walk { root, entries: Vec::new(), skipped: Vec::new() };
    let mut deferred = Vec::new();
    walk_dir_at(dir.root_fd(), dir.path(), "", exclude, on_dir, &mut w, Some(&mut deferred))?;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Result<Walk>>>> = deferred.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, deferred.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(d) = deferred.get(i) else { break };
                let mut sub = Walk { root, entries: Vec::new(), skipped: Vec::new() };
                let walked = walk_dir(d.fd.as_fd(), &d.abs, &d.rel, exclude, on_dir, &mut sub).map(|()| sub);
                if let Ok(mut slot) = results[i].lock() {
                    *slot = Some(walked);
                }
            });
        }
    });
    // Each subtree right after its directory's entry.
    let mut entries = Vec::with_capacity(w.entries.len());
    let mut top = std::mem::take(&mut w.entries).into_iter().enumerate().peekable();
    for (d, slot) in deferred.iter().zip(results) {
        while let Some((_, e)) = top.next_if(|(i, _)| *i < d.at) {
            entries.push(e);
        }
        let sub = slot.into_inner().ok().flatten().unwrap_or_else(|| Ok(Walk { root, entries: Vec::new(), skipped: Vec::new() }))?;
        entries.extend(sub.entries);
        w.skipped.extend(sub.skipped);
    }
    entries.extend(top.map(|(_, e)| e));
    w.entries = entries;
    skip_links_leaving(&mut w);
    Ok(w)
}

fn walk_dir(fd: BorrowedFd<'_>, abs: &Path, rel: &str, exclude: &GlobSet, on_dir: OnDir<'_>, w: &mut Walk) -> Result<()> {
    walk_dir_at(fd, abs, rel, exclude, on_dir, w, None)
}

/// One directory of a walk: its entries, and its subdirectories' walked at once, or (with
/// `deferred`) left for [`walk_parallel`].
fn walk_dir_at(
    fd: BorrowedFd<'_>,
    abs: &Path,
    rel: &str,
    exclude: &GlobSet,
    on_dir: OnDir<'_>,
    w: &mut Walk,
    mut deferred: Option<&mut Vec<Deferred>>,
) -> Result<()> {
    if let Some(f) = on_dir {
        f(fd, rel);
    }
    let mut names: Vec<String> = Vec::new();
    {
        let listing = fd.try_clone_to_owned().at(abs)?;
        let mut dir = nix::dir::Dir::from_fd(listing).map_err(|e| errno_io(abs, e))?;
        for ent in dir.iter() {
            let ent = ent.map_err(|e| errno_io(abs, e))?;
            let raw = ent.file_name().to_bytes();
            if raw == b"." || raw == b".." {
                continue;
            }
            match std::str::from_utf8(raw) {
                Ok(n) => names.push(n.to_string()),
                Err(_) => {
                    let shown = String::from_utf8_lossy(raw);
                    let path = if rel.is_empty() { shown.into_owned() } else { format!("{rel}/{shown}") };
                    w.skipped.push(SkippedEntry { path, kind: "unsupported_name".into() });
                }
            }
        }
    }
    names.sort();
    let present: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
    // SQLite side files: `X-wal`/`X-shm` beside a database `X` are folded into X's copy.
    let mut side: HashMap<String, &'static str> = HashMap::new();
    let mut with_wal: std::collections::HashSet<String> = Default::default();
    for n in &names {
        for (suffix, kind) in SQLITE_SIDES {
            if let Some(base) = n.strip_suffix(suffix) {
                if present.contains(base) && is_sqlite(fd, base) && (kind == SQLITE_SHM || is_sqlite_wal(fd, n)) {
                    side.insert(n.clone(), kind);
                    if kind == SQLITE_WAL {
                        with_wal.insert(base.to_string());
                    }
                }
            }
        }
    }
    for name in &names {
        let path = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
        if exclude.is_match(&path) {
            // A database's log and index are parts of it, not files of their own, even when a
            // pattern (`*-wal`) names them: a restore of the database must know they are there.
            let regular = || fstatat(fd, name.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|st| stat_of(&st).fmt == SFlag::S_IFREG);
            let kind = side.get(name).filter(|_| regular()).copied().unwrap_or("excluded");
            w.skipped.push(SkippedEntry { path, kind: kind.into() });
            continue;
        }
        let p = abs.join(name);
        let st = match fstatat(fd, name.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => stat_of(&st),
            // Gone between readdir and lstat: it is simply not part of this snapshot.
            Err(nix::errno::Errno::ENOENT) => continue,
            Err(e) => return Err(errno_io(&p, e)),
        };
        let base = |st: &Stat, kind, target, sqlite_wal| Walked {
            path: path.clone(),
            kind,
            mode: st.mode,
            size: if kind == Kind::File { st.key.size } else { 0 },
            mtime_ns: st.key.mtime_ns,
            key: st.key,
            target,
            sqlite_wal,
        };
        if st.fmt == SFlag::S_IFDIR {
            let sub = match openat(fd, name.as_str(), DIR_FLAGS, Mode::empty()) {
                Ok(sub) => sub,
                // Replaced (by a symlink, a file) or gone since the lstat: not in this snapshot.
                Err(nix::errno::Errno::ELOOP | nix::errno::Errno::ENOTDIR | nix::errno::Errno::ENOENT) => continue,
                Err(e) => return Err(errno_io(&p, e)),
            };
            // What is walked is the directory opened, whatever the name pointed at before.
            let st = stat_of(&fstat(&sub).map_err(|e| errno_io(&p, e))?);
            w.entries.push(base(&st, Kind::Dir, None, false));
            // At most `MAX_DEFERRED` subtrees wait with their descriptor open; the rest are
            // walked here.
            match deferred.as_deref_mut().filter(|later| later.len() < MAX_DEFERRED) {
                Some(later) => later.push(Deferred { at: w.entries.len(), fd: sub, abs: p, rel: path }),
                None => walk_dir(sub.as_fd(), &p, &path, exclude, on_dir, w)?,
            }
        } else if st.fmt == SFlag::S_IFREG {
            if let Some(kind) = side.get(name) {
                w.skipped.push(SkippedEntry { path, kind: (*kind).into() });
                continue;
            }
            let mut e = base(&st, Kind::File, None, with_wal.contains(name));
            if e.sqlite_wal {
                if let Ok(wal) = fstatat(fd, format!("{name}-wal").as_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                    let k = key_of_stat(&wal);
                    let mut h = Sha256::new();
                    for v in [k.size as i64, k.mtime_ns, k.ctime_ns, k.ino as i64] {
                        h.update(v.to_le_bytes());
                    }
                    let d = h.finalize();
                    e.key.aux = u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]]) | 1;
                }
            }
            w.entries.push(e);
        } else if st.fmt == SFlag::S_IFLNK {
            let target = match readlinkat(fd, name.as_str()) {
                Ok(t) => t,
                Err(nix::errno::Errno::ENOENT | nix::errno::Errno::EINVAL) => continue,
                Err(e) => return Err(errno_io(&p, e)),
            };
            match target.into_string() {
                Ok(t) if crate::manifest::symlink_inside(&path, &t) => w.entries.push(base(&st, Kind::Symlink, Some(t), false)),
                Ok(_) => w.skipped.push(SkippedEntry { path, kind: "symlink_outside".into() }),
                Err(_) => w.skipped.push(SkippedEntry { path, kind: "unsupported_name".into() }),
            }
        } else {
            let kind = if st.fmt == SFlag::S_IFSOCK {
                "socket"
            } else if st.fmt == SFlag::S_IFIFO {
                "fifo"
            } else if st.fmt == SFlag::S_IFCHR {
                "char_device"
            } else if st.fmt == SFlag::S_IFBLK {
                "block_device"
            } else {
                "unknown"
            };
            w.skipped.push(SkippedEntry { path, kind: kind.into() });
        }
    }
    Ok(())
}

/// Symlinks that read as inside yet resolve outside through other symlinks of the home (`up ->
/// loop/..` with `loop -> .`), or through too many, are listed as `symlink_outside`, as a
/// restore would refuse them ([`crate::manifest::resolve_link`]). Leaving them out changes no
/// other link's resolution: a link that passed through one of them left the home too.
fn skip_links_leaving(w: &mut Walk) {
    let leaving: std::collections::HashSet<String> = {
        let tree: HashMap<&str, (Kind, Option<&str>)> =
            w.entries.iter().map(|e| (e.path.as_str(), (e.kind, e.target.as_deref()))).collect();
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
pub(crate) fn read_stable(home: &Beneath, rel: &str, spool_dir: &Path) -> Result<Option<(Content, String, StatKey)>> {
    let abs = &home.path().join(rel);
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            std::thread::sleep(std::time::Duration::from_millis(20 << attempt));
        }
        // Reached beneath the home without following a symlink; one that became a symlink (or
        // sits beneath one now) is, like a vanished file, not part of this snapshot.
        let mut f = match home.open_file(rel) {
            Ok(f) => f,
            Err(VolumeError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(VolumeError::Unsafe { .. }) => return Ok(None),
            Err(e) => return Err(e),
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
        let after = home.lstat(rel);
        let len = match &content {
            Content::Mem(b) => b.len() as u64,
            Content::Spool(t) => t.as_file().metadata().at(t.path())?.len(),
        };
        let k0 = key_of(&before);
        if let Ok(after) = after {
            if key_of_stat(&after) == k0 && len == k0.size {
                return Ok(Some((content, hex(&h.finalize()), k0)));
            }
        }
    }
    Err(VolumeError::io(
        abs,
        std::io::Error::other(format!("the file kept changing while being read ({ATTEMPTS} attempts); no torn copy is stored")),
    ))
}

/// [`read_stable`] of the walked file `rel`; for a SQLite database with a write-ahead log
/// beside it (`wal_key`: the walk's key of it, [`Walked::sqlite_wal`]) its consistent copy
/// through SQLite itself ([`sqlite_copy`], returned with `wal_key`), else its bytes as they
/// are. `Ok(None)`: the file vanished. Errors: as [`read_stable`].
pub(crate) fn read_consistent(
    home: &Beneath,
    rel: &str,
    wal_key: Option<StatKey>,
    spool_dir: &Path,
) -> Result<Option<(Content, String, StatKey)>> {
    if let Some(key) = wal_key {
        if let Some((content, sha)) = sqlite_copy(home, rel, spool_dir, std::time::Duration::from_secs(10)) {
            return Ok(Some((content, sha, key)));
        }
    }
    read_stable(home, rel, spool_dir)
}

/// Replaces or removes the SQLite database `rel` through `change`, with its write-ahead log and
/// index (`X-wal`, `X-shm`, listed by the walk as `sqlite_wal`/`sqlite_shm` in `skipped`) gone
/// with it: a newer log beside an older database would be replayed into it. The side files are
/// renamed aside first, removed once `change` succeeded, and put back if it failed, so a failed
/// write never leaves the old database without its log. Errors: `change`'s, `Io`, `Unsafe`.
pub(crate) fn without_sqlite_sides(home: &Beneath, rel: &str, skipped: &[SkippedEntry], change: impl FnOnce() -> Result<()>) -> Result<()> {
    let mut aside: Vec<(String, String)> = Vec::new();
    let mut moved = Ok(());
    for (suffix, kind) in SQLITE_SIDES {
        let side = format!("{rel}{suffix}");
        if skipped.iter().any(|s| s.kind == kind && s.path == side) {
            let name = format!(".spaces-aside-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
            match home.rename_beside(&side, &name) {
                Ok(()) => aside.push((side, name)),
                Err(VolumeError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    moved = Err(e);
                    break;
                }
            }
        }
    }
    let done = moved.and_then(|()| change());
    let dir = rel.rsplit_once('/').map(|(d, _)| format!("{d}/"));
    // Every side file is seen to before an error is returned.
    let mut tidied = Ok(());
    for (side, name) in aside {
        let at = format!("{}{name}", dir.as_deref().unwrap_or_default());
        if done.is_ok() {
            let removed = home.remove(&at, false);
            tidied = tidied.and(removed);
        } else {
            let back = side.rsplit('/').next().unwrap_or(&side);
            let _ = home.rename_beside(&at, back);
        }
    }
    done.and(tidied)
}

/// A consistent copy of a live SQLite database in WAL mode: `VACUUM INTO` a temp file from a
/// read-only connection (one read transaction: the committed state, WAL included; the
/// database's contents are not changed, and no checkpoint runs; SQLite may make or reset its
/// `-shm` index, as any reader does). `None` if SQLite cannot read
/// it (then the caller stores the files as they are).
///
/// SQLite takes a path: it is used only while it names the directory reached beneath the home
/// without following a symlink, checked before and after the copy, and the database itself is
/// opened `SQLITE_OPEN_NOFOLLOW` (else `None`: the caller reads the file through its
/// descriptor instead).
pub(crate) fn sqlite_copy(home: &Beneath, rel: &str, spool_dir: &Path, busy: std::time::Duration) -> Option<(Content, String)> {
    use rusqlite::OpenFlags;
    let db = home.path().join(rel);
    if !home.path_is_beneath(rel) {
        return None;
    }
    let dir = tempfile::tempdir_in(spool_dir).ok()?;
    let out = dir.path().join("copy.db");
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = rusqlite::Connection::open_with_flags(&db, flags).ok()?;
    conn.busy_timeout(busy).ok()?;
    let target = out.to_str()?;
    if let Err(e) = conn.execute("VACUUM INTO ?1", [target]) {
        tracing::warn!(db = %db.display(), error = %e, "consistent copy of a SQLite database failed; storing its files as they are");
        return None;
    }
    drop(conn);
    if !home.path_is_beneath(rel) {
        return None;
    }
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// A directory swapped for a symlink to another place after the walk: the save reads nothing
    /// through it (the file is left out of the snapshot), and a walk never enters it.
    #[test]
    fn a_save_never_reads_through_a_directory_swapped_for_a_symlink() {
        let tmp = tempfile::tempdir().unwrap();
        let (home, outside, spool) = (tmp.path().join("home"), tmp.path().join("outside"), tmp.path().join("spool"));
        for d in [&home.join("d"), &outside, &spool] {
            fs::create_dir_all(d).unwrap();
        }
        fs::write(home.join("d/notes.txt"), b"inside").unwrap();
        fs::write(outside.join("notes.txt"), b"OUTSIDE").unwrap();
        let root = Beneath::open(&home).unwrap();
        let w = walk(&root, &excludes(&[]).unwrap()).unwrap();
        assert_eq!(w.entries.iter().map(|e| e.path.as_str()).collect::<Vec<_>>(), ["d", "d/notes.txt"]);

        fs::rename(home.join("d"), tmp.path().join("d.old")).unwrap();
        std::os::unix::fs::symlink(&outside, home.join("d")).unwrap();
        assert!(read_stable(&root, "d/notes.txt", &spool).unwrap().is_none());
        assert!(sqlite_copy(&root, "d/notes.txt", &spool, std::time::Duration::from_secs(1)).is_none());
        assert!(!root.path_is_beneath("d/notes.txt"));
        let w = walk(&root, &excludes(&[]).unwrap()).unwrap();
        assert!(w.entries.iter().all(|e| !e.path.starts_with("d/")), "the walk entered the symlink");
        assert_eq!(w.skipped.iter().map(|s| s.kind.as_str()).collect::<Vec<_>>(), ["symlink_outside"]);
    }
}

#[cfg(test)]
mod parallel_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_parallel_walk_lists_the_same_entries_in_the_same_order() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..300 {
            let sub = dir.path().join(format!("d{}/s{}", i % 7, i % 3));
            std::fs::create_dir_all(&sub).unwrap();
            std::fs::write(sub.join(format!("f{i}")), "x").unwrap();
        }
        std::fs::write(dir.path().join("top.txt"), "t").unwrap();
        std::fs::create_dir_all(dir.path().join("node_modules/x")).unwrap();
        std::os::unix::fs::symlink("top.txt", dir.path().join("d1/link")).unwrap();
        let root = Beneath::open(dir.path()).unwrap();
        let ex = excludes(&["**/node_modules/**".to_owned()]).unwrap();
        let one = walk(&root, &ex).unwrap();
        for threads in [1, 2, 4] {
            let many = walk_parallel(&root, &ex, threads, None).unwrap();
            let paths = |w: &Walk| w.entries.iter().map(|e| (e.path.clone(), e.kind)).collect::<Vec<_>>();
            assert_eq!(paths(&many), paths(&one), "{threads} threads");
            assert_eq!(many.skipped, one.skipped);
        }
    }
}
