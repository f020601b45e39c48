//! Checkpoints of a run's working folder at every turn boundary (issue 34): what the folder
//! held when turn N ended (checkpoint 0: before turn 1), made by the daemon itself, so changes
//! made through a shell are caught as well as an edit tool's, and no git is needed.
//!
//! # Layout (one directory per run)
//! ```text
//! objects/<sha256[..2]>/<sha256>   a file's contents, stored once (content-addressed)
//! turns/<turn, 10 digits>.json     the checkpoint: every entry with its sha256 and stat key
//! ```
//! A checkpoint walks the folder once (lstat only, the volumes crate's walk of homes, `scan.rs`,
//! excluded directories never entered) and reads only files whose stat key (size, mtime,
//! ctime, inode) differs from the previous checkpoint's, or that changed too close to it to
//! tell (the racy window, as git has). Contents already stored are not stored again. A folder
//! that did not change writes no byte: its checkpoint is a hard link to the previous one.
//!
//! Objects are written temp + rename without an fsync each (a checkpoint of 100 files stays
//! cheaper than `git commit`); every object is verified against its sha256 when it is read back
//! ([`Checkpoints::restore`], diffs), so a torn one after a power loss is an error, never a
//! wrong restore. The checkpoint file itself is written temp + fsync + rename.

mod changes;
mod merge;
mod objects;
mod restore;
mod watch;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use globset::GlobSet;
use serde::{Deserialize, Serialize};

use crate::beneath::Beneath;
use crate::error::{IoContext, Result, VolumeError};
use crate::manifest::Kind;
use crate::scan::{self, StatKey};

pub use changes::{ChangeKind, FileChange};
pub use merge::{Conflict, MergeReport};
pub use restore::RestoreReport;

/// What the operator's `checkpoint_exclude` replaces: directories of installed or built things
/// that a checkpoint leaves out (and a rewind leaves alone). `.git` is left out too: a rewind
/// restores the working files, not a repository's history.
pub const DEFAULT_EXCLUDE: &[&str] =
    &["**/.git/**", "**/node_modules/**", "**/target/**", "**/.venv/**", "**/__pycache__/**", WORKTREES_GLOB];

/// Where forks' worktrees live, relative to a Space's root (`agent_fork`): never part of a
/// checkpoint of the Space's own runs (also with an operator's `checkpoint_exclude`).
pub const WORKTREES_DIR: &str = ".spaces-worktrees";
const WORKTREES_GLOB: &str = ".spaces-worktrees/**";
const GIT_GLOB: &str = "**/.git/**";

/// The file naming the checkpoint a rewind restored the folder to, until the next is taken.
const HEAD: &str = "head";

/// Threads a checkpoint's walk uses: the CPUs, at most 4.
fn walk_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(4)
}

/// Whether `patterns` are valid exclude globs. Errors: `InvalidName` naming the bad one.
pub fn check_exclude(patterns: &[String]) -> Result<()> {
    scan::excludes(patterns).map(|_| ())
}

/// A file changed this close (ns) before a checkpoint may change again within the same
/// timestamp: it is read again at the next one rather than trusted by its stat key.
const RACY_NS: i64 = 50_000_000;

/// One entry of a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Item {
    pub path: String,
    pub kind: Kind,
    /// Permission bits.
    pub mode: u32,
    /// Bytes (files).
    pub size: u64,
    pub mtime_ns: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    pub key: StatKey,
    /// A file over [`MAX_STORED_BYTES`]: its contents are not stored (a rewind leaves it as it
    /// is), its size and mtime stand for them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub big: bool,
    /// The file (or symlink target) holds one of the run's secret values
    /// ([`Checkpoints::refuse`]): not stored, like a big file.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub secret: bool,
    /// A live SQLite database (a write-ahead log beside it) SQLite could not copy consistently
    /// (locked past [`SQLITE_BUSY`]): not stored, like a big file, so no rewind writes a main file
    /// without the commits its log holds.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub uncopied: bool,
}

/// How long a checkpoint waits for a live SQLite database's lock before leaving it unstored.
pub(crate) const SQLITE_BUSY: std::time::Duration = std::time::Duration::from_secs(1);

impl Item {
    /// Its contents are not in the checkpoint (too big, or holding a secret value).
    pub(crate) fn unstored(&self) -> bool {
        self.big || self.secret || self.uncopied
    }

    /// What "unchanged" compares: kind, mode, contents (an unstored file's size and mtime),
    /// link target.
    fn same_as(&self, other: &Item) -> bool {
        let contents = if self.unstored() || other.unstored() {
            // (An uncopied live database's commits may be in its log only: its key's `aux`.)
            self.unstored() == other.unstored()
                && self.size == other.size
                && self.mtime_ns == other.mtime_ns
                && (!self.uncopied || self.key.aux == other.key.aux)
        } else {
            self.sha256 == other.sha256
        };
        self.kind == other.kind && self.mode == other.mode && contents && self.target == other.target
    }
}

/// Files bigger than this (bytes, 64 MiB; a live SQLite database with its write-ahead log) are
/// not copied into checkpoints: a data set in the folder must not fill the state dir at every
/// turn. They show as changed (binary) in diffs by
/// their size and mtime, and a rewind leaves them alone.
pub const MAX_STORED_BYTES: u64 = 64 << 20;

/// A checkpoint as stored.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Snapshot {
    pub format: u32,
    pub turn: u32,
    /// When it was taken, ns since the Unix epoch.
    pub taken_ns: i64,
    /// The checkpoint the folder started the turn from when it is not the one before (the one
    /// a rewind restored); `None`: the turn before (or none, for the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<u32>,
    /// Sorted by path, parents before children.
    pub entries: Vec<Item>,
}

impl Snapshot {
    fn index(&self) -> HashMap<&str, &Item> {
        self.entries.iter().map(|e| (e.path.as_str(), e)).collect()
    }
}

/// What [`Checkpoints::take`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointReport {
    /// The turn the checkpoint is of (0: before the first turn).
    pub turn: u32,
    /// Regular files in the folder (excluded ones not counted).
    pub files: u64,
    /// Bytes of new contents stored by this checkpoint (0 when nothing changed).
    pub stored_bytes: u64,
    /// What changed since the previous checkpoint (empty for the first one), sorted by path.
    pub changes: Vec<FileChange>,
}

/// The checkpoints of one run's working folder, in `dir` (see the module doc).
pub struct Checkpoints {
    dir: PathBuf,
    exclude: GlobSet,
    /// The latest checkpoint, kept after it is taken or read (the next one compares with it).
    last: Option<Snapshot>,
    /// The secret values no checkpoint stores ([`Self::refuse`]).
    refuse: crate::secrets::Scanner,
    /// Watches on the folder's directories ([`Self::watch`]).
    watch: Option<watch::Watch>,
    /// The checkpoint whose walk armed [`Self::watch`]: the folder it walked, the folder's
    /// (device, inode) then, and its turn.
    watched: Option<Watched>,
    /// Walks of the folder so far (checkpoints the watch spared one do not count).
    pub(crate) walks: u64,
}

/// See [`Checkpoints::watched`].
#[derive(Debug, PartialEq)]
struct Watched {
    folder: PathBuf,
    root: (u64, u64),
    turn: u32,
}

/// What [`read_for_checkpoint`] found.
enum Read {
    Got(scan::Content, String, StatKey),
    /// Vanished (or became something else) since the walk.
    Gone,
    /// A live SQLite database SQLite could not copy ([`Item::uncopied`]).
    Uncopied,
}

/// A file's contents for a checkpoint: a live SQLite database (`wal_key`: the walk's key of
/// it) through SQLite's consistent copy, never its main file alone; any other file read
/// consistently ([`scan::read_stable`]).
fn read_for_checkpoint(root: &Beneath, rel: &str, wal_key: Option<StatKey>, spool: &Path) -> Result<Read> {
    if let Some(key) = wal_key {
        return Ok(match scan::sqlite_copy(root, rel, spool, SQLITE_BUSY) {
            Some((content, sha)) => Read::Got(content, sha, key),
            None => Read::Uncopied,
        });
    }
    Ok(match scan::read_stable(root, rel, spool)? {
        Some((c, sha, key)) => Read::Got(c, sha, key),
        None => Read::Gone,
    })
}

/// The (device, inode) of the folder `root` opened.
fn identity(root: &Beneath) -> Result<(u64, u64)> {
    let st = nix::sys::stat::fstat(root.root_fd()).map_err(|e| crate::beneath::errno_io(root.path(), e))?;
    Ok((st.st_dev, st.st_ino))
}

impl std::fmt::Debug for Checkpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpoints").field("dir", &self.dir).finish()
    }
}

impl Checkpoints {
    /// The checkpoints kept in `dir` (made if missing), leaving out what matches `exclude`
    /// (globs over `/`-separated paths relative to the folder; `D/**` also leaves out `D`).
    /// Errors: `InvalidName` for a bad pattern, `Io`.
    pub fn open(dir: &Path, exclude: &[String]) -> Result<Checkpoints> {
        std::fs::create_dir_all(dir.join("turns")).at(dir)?;
        std::fs::create_dir_all(dir.join("objects")).at(dir)?;
        // Whatever the operator lists: never a repository's history, never forks' worktrees.
        let mut patterns = exclude.to_vec();
        patterns.extend([GIT_GLOB.to_owned(), WORKTREES_GLOB.to_owned()]);
        Ok(Checkpoints {
            dir: dir.to_path_buf(),
            exclude: scan::excludes(&patterns)?,
            last: None,
            refuse: crate::secrets::Scanner::new(&[]),
            watch: None,
            watched: None,
            walks: 0,
        })
    }

    /// Watch the folder between checkpoints (inotify, `watch.rs`): a checkpoint of a folder in
    /// which nothing changed since the last one is then taken without walking it. Without
    /// inotify on the host every checkpoint walks, as before.
    pub fn watch(&mut self) {
        self.watch = watch::Watch::new(self.exclude.clone());
    }

    /// Never store a file or symlink target holding any of `values` (the run's secrets, in
    /// each spelling): such a file is recorded by its size and mtime only, shows as binary in
    /// diffs, and a rewind leaves it as it is. The state dir then holds no secret of the run.
    pub fn refuse(&mut self, values: &[crate::types::SecretValue]) {
        self.refuse = crate::secrets::Scanner::new(values);
    }

    /// Turns that have a checkpoint, oldest first.
    pub fn turns(&self) -> Result<Vec<u32>> {
        let dir = self.dir.join("turns");
        let mut turns: Vec<u32> =
            std::fs::read_dir(&dir).at(&dir)?.filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".json")?.parse().ok()).collect();
        turns.sort_unstable();
        Ok(turns)
    }

    fn turn_file(&self, turn: u32) -> PathBuf {
        self.dir.join("turns").join(format!("{turn:010}.json"))
    }

    /// Checkpoint `turn` as stored. Errors: `SnapshotNotFound` when there is none, `Corrupt`.
    pub(crate) fn load(&self, turn: u32) -> Result<Snapshot> {
        if let Some(last) = self.last.as_ref().filter(|s| s.turn == turn) {
            return Ok(last.clone());
        }
        let file = self.turn_file(turn);
        let bytes = match std::fs::read(&file) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(VolumeError::SnapshotNotFound { home: self.dir.display().to_string(), snapshot: format!("turn {turn}") })
            }
            Err(e) => return Err(VolumeError::io(file, e)),
        };
        let mut snap: Snapshot =
            serde_json::from_slice(&bytes).map_err(|e| VolumeError::corrupt(format!("checkpoint of turn {turn}"), e.to_string()))?;
        // A hard link to an earlier checkpoint (nothing changed) names that turn inside.
        snap.turn = turn;
        Ok(snap)
    }

    /// The checkpoint the folder was at before `turn`: the one a rewind restored (the `head`
    /// file), else the latest before `turn`, if any.
    fn previous(&mut self, turn: u32) -> Result<Option<Snapshot>> {
        let head = std::fs::read_to_string(self.dir.join(HEAD)).ok().and_then(|t| t.trim().parse::<u32>().ok()).filter(|t| *t < turn);
        // Taken, not copied: the checkpoint being made replaces it as the last one.
        if self.last.as_ref().is_some_and(|s| s.turn < turn && head.is_none_or(|h| h == s.turn)) {
            return Ok(self.last.take());
        }
        if let Some(h) = head {
            return self.load(h).map(Some);
        }
        match self.turns()?.into_iter().rev().find(|t| *t < turn) {
            Some(t) => self.load(t).map(Some),
            None => Ok(None),
        }
    }

    /// The checkpoint turn `turn` started from when a rewind made it other than `turn - 1`;
    /// `None`: `turn - 1` (or `turn` has no checkpoint). Errors: `Corrupt`, `Io`.
    pub fn base_of(&self, turn: u32) -> Result<Option<u32>> {
        match self.load(turn) {
            Ok(s) => Ok(s.base),
            Err(VolumeError::SnapshotNotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Take the checkpoint of `folder` after turn `turn` (0: before the first turn). Blocking:
    /// call it from `spawn_blocking` on a large folder. Errors: `Io` (the folder cannot be
    /// walked or a file read), `Corrupt` (an earlier checkpoint unreadable).
    pub fn take(&mut self, folder: &Path, turn: u32) -> Result<CheckpointReport> {
        let prev = self.previous(turn)?;
        let root = Beneath::open(folder)?;
        let root_id = identity(&root)?;
        // Nothing changed since the walk of `prev` armed the watch (and the path still names
        // the folder that walk found): no walk needed.
        let armed =
            self.watched.take() == Some(Watched { folder: folder.to_path_buf(), root: root_id, turn: prev.as_ref().map_or(0, |p| p.turn) });
        match prev {
            Some(p) if armed && self.watch.as_ref().is_some_and(watch::Watch::quiet) => {
                return self.take_unchanged(folder, turn, p, root_id);
            }
            _ => {}
        }
        self.walks += 1;
        if let Some(w) = &self.watch {
            w.arm();
        }
        let on_dir = self.watch.as_ref().map(|w| move |fd: std::os::fd::BorrowedFd<'_>, rel: &str| w.enter(fd, rel));
        let walk = scan::walk_parallel(&root, &self.exclude, walk_threads(), on_dir.as_ref().map(|f| f as _))?;
        if let Some(w) = &self.watch {
            let of = |kind: &str| walk.skipped.iter().filter(|s| s.kind == kind).map(|s| s.path.clone()).collect();
            w.walked(watch::SqliteSides { logs: of(scan::SQLITE_WAL), indexes: of(scan::SQLITE_SHM) });
        }
        let known: HashMap<&str, &Item> = prev.as_ref().map(Snapshot::index).unwrap_or_default();
        let taken_ns = scan::now_ns();
        let objects = objects::Objects::new(&self.dir);
        let (mut entries, mut stored_bytes, mut files) = (Vec::with_capacity(walk.entries.len()), 0u64, 0u64);
        for w in walk.entries {
            let wal_key = w.sqlite_wal.then_some(w.key);
            let mut item = Item {
                path: w.path,
                kind: w.kind,
                mode: w.mode,
                size: w.size,
                mtime_ns: w.mtime_ns,
                sha256: None,
                target: w.target,
                key: w.key,
                big: false,
                secret: false,
                uncopied: false,
            };
            if item.target.as_deref().is_some_and(|t| self.refuse.in_bytes(t.as_bytes()).is_some()) {
                item.target = None;
                item.secret = true;
            }
            // A live database's copy holds its log too: the two count together.
            let log_bytes =
                if w.sqlite_wal { root.lstat(&format!("{}-wal", item.path)).map_or(0, |st| st.st_size.max(0) as u64) } else { 0 };
            if w.kind == Kind::File && w.size.saturating_add(log_bytes) > MAX_STORED_BYTES {
                files += 1;
                item.big = true;
            } else if w.kind == Kind::File {
                files += 1;
                // A live SQLite database is copied again at every walk: its log's stat key
                // (folded into the walk's) can stay the same across a commit.
                let trusted = known.get(item.path.as_str()).filter(|p| {
                    !w.sqlite_wal
                        && p.kind == Kind::File
                        && p.key == w.key
                        && w.key.ctime_ns + RACY_NS < prev.as_ref().map_or(0, |s| s.taken_ns)
                });
                match trusted {
                    Some(p) => {
                        // What the last checkpoint knew of it, unstored (a secret) included.
                        item.sha256 = p.sha256.clone();
                        item.secret = p.secret;
                    }
                    None => match read_for_checkpoint(&root, &item.path, wal_key, &objects.spool_dir())? {
                        Read::Uncopied => item.uncopied = true,
                        Read::Got(content, _, key) if self.holds_secret(&content)? => {
                            item.secret = true;
                            item.key = key;
                            item.size = key.size;
                        }
                        Read::Got(content, sha, key) => {
                            stored_bytes += objects.put(&sha, content)?;
                            item.sha256 = Some(sha);
                            item.key = key;
                            item.size = key.size;
                        }
                        // Gone (or made a symlink) since the walk: not in this checkpoint.
                        Read::Gone => continue,
                    },
                }
            }
            entries.push(item);
        }
        // Recorded only when it is not the turn before (after a rewind).
        let base = prev.as_ref().map(|p| p.turn).filter(|b| b + 1 != turn);
        let snap = Snapshot { format: 1, turn, taken_ns, base, entries };
        let unchanged = prev.as_ref().is_some_and(|p| {
            p.entries.len() == snap.entries.len() && p.entries.iter().zip(&snap.entries).all(|(a, b)| a.path == b.path && a.same_as(b))
        });
        let changes = match &prev {
            Some(p) if !unchanged => changes::between(&objects, p, &snap)?,
            _ => Vec::new(),
        };
        let linked = prev.as_ref().is_some_and(|p| unchanged && p.base.is_none() && snap.base.is_none() && self.link(p.turn, turn).is_ok());
        if !linked {
            // (A hard link keeps the linked checkpoint's `base`: written instead when it differs.)
            self.write(&snap)?;
        }
        let _ = std::fs::remove_file(self.dir.join(HEAD));
        self.last = Some(snap);
        if self.watch.is_some() {
            self.watched = Some(Watched { folder: folder.to_path_buf(), root: root_id, turn });
        }
        Ok(CheckpointReport { turn, files, stored_bytes, changes })
    }

    /// [`Self::take`] when the watch saw nothing change since checkpoint `prev` was walked: the
    /// same entries, no walk, no byte read; a hard link to `prev`'s file when it can be.
    fn take_unchanged(&mut self, folder: &Path, turn: u32, prev: Snapshot, root: (u64, u64)) -> Result<CheckpointReport> {
        let base = Some(prev.turn).filter(|b| b + 1 != turn);
        let linked = prev.base.is_none() && base.is_none() && self.link(prev.turn, turn).is_ok();
        // The walk's time stays: files changed just before it are still read at the next walk.
        let snap = Snapshot { turn, base, ..prev };
        if !linked {
            self.write(&snap)?;
        }
        let _ = std::fs::remove_file(self.dir.join(HEAD));
        let files = snap.entries.iter().filter(|e| e.kind == Kind::File).count() as u64;
        self.last = Some(snap);
        self.watched = Some(Watched { folder: folder.to_path_buf(), root, turn });
        Ok(CheckpointReport { turn, files, stored_bytes: 0, changes: Vec::new() })
    }

    /// Whether `content` holds a refused value ([`Self::refuse`]).
    fn holds_secret(&self, content: &scan::Content) -> Result<bool> {
        if self.refuse.is_empty() {
            return Ok(false);
        }
        match content {
            scan::Content::Mem(bytes) => Ok(self.refuse.in_bytes(bytes).is_some()),
            scan::Content::Spool(tmp) => {
                let mut f = std::fs::File::open(tmp.path()).at(tmp.path())?;
                Ok(self.refuse.in_reader(&mut f).at(tmp.path())?.is_some())
            }
        }
    }

    /// Turn `to`'s checkpoint as a hard link to turn `from`'s.
    fn link(&self, from: u32, to: u32) -> Result<()> {
        let (src, dst) = (self.turn_file(from), self.turn_file(to));
        let _ = std::fs::remove_file(&dst);
        std::fs::hard_link(&src, &dst).at(&dst)
    }

    fn write(&self, snap: &Snapshot) -> Result<()> {
        let file = self.turn_file(snap.turn);
        let dir = self.dir.join("turns");
        let mut tmp = tempfile::NamedTempFile::new_in(&dir).at(&dir)?;
        {
            let mut w = std::io::BufWriter::with_capacity(1 << 20, tmp.as_file_mut());
            serde_json::to_writer(&mut w, snap).map_err(|e| VolumeError::io(&file, std::io::Error::other(e)))?;
            std::io::Write::flush(&mut w).at(&file)?;
        }
        tmp.as_file().sync_all().at(&file)?;
        tmp.persist(&file).map_err(|e| VolumeError::io(&file, e.error))?;
        Ok(())
    }

    /// What changed from checkpoint `from` to checkpoint `to`, sorted by path, and the unified
    /// diff of it (3 lines of context; a binary file is named, never dumped). Errors:
    /// `SnapshotNotFound` for a turn without a checkpoint, `Corrupt`.
    pub fn diff(&self, from: u32, to: u32) -> Result<(Vec<FileChange>, String)> {
        let (a, b) = (self.load(from)?, self.load(to)?);
        changes::with_diff(&objects::Objects::new(&self.dir), &a, &b)
    }

    /// Make `folder` what it was at checkpoint `turn`: contents and modes of every file,
    /// directory and symlink; entries made later removed; excluded paths left alone. Each file
    /// is replaced in one rename. Blocking. Errors: `SnapshotNotFound`, `Corrupt` (a stored
    /// content does not match its sha256: that file and those after it are not written),
    /// `Unsafe` (a symlink now stands where a directory must be entered), `Io`.
    pub fn restore(&mut self, folder: &Path, turn: u32) -> Result<RestoreReport> {
        let snap = self.load(turn)?;
        // What the folder held when the watch was armed is no longer what it holds.
        self.watched = None;
        let report = self.restore_snapshot(folder, &snap)?;
        // The next checkpoint compares with what the folder now holds (also after a restart).
        let head = self.dir.join(HEAD);
        std::fs::write(&head, format!("{turn}\n")).at(&head)?;
        self.last = Some(Snapshot { taken_ns: 0, ..snap });
        Ok(report)
    }

    /// Make the empty (or new) folder `folder` what checkpoint `turn` holds, without making it
    /// this run's folder (a fork's worktree): as [`Self::restore`], leaving this run's own
    /// checkpoints as they are. Blocking. Errors: as [`Self::restore`].
    pub fn copy_to(&self, folder: &Path, turn: u32) -> Result<RestoreReport> {
        self.restore_snapshot(folder, &self.load(turn)?)
    }

    fn restore_snapshot(&self, folder: &Path, snap: &Snapshot) -> Result<RestoreReport> {
        restore::restore(&objects::Objects::new(&self.dir), folder, &self.exclude, snap)
    }

    /// Bring into `ours` what `theirs` changed since checkpoint `base_turn` (a fork's folder
    /// and its parent's, the fork point): a three-way merge per file, all or nothing (see
    /// [`MergeReport`]). Blocking. Errors: `SnapshotNotFound`, `Corrupt`, `Unsafe`, `Io`.
    pub fn merge(&self, base_turn: u32, theirs: &Path, ours: &Path) -> Result<MergeReport> {
        let base = self.load(base_turn)?;
        let objects = objects::Objects::new(&self.dir);
        merge::merge(&objects, &base, theirs, ours, &self.exclude, &objects.spool_dir())
    }

    /// Keep the checkpoints of the newest `keep` turns and the contents they need; older
    /// checkpoints and contents no kept one needs are deleted. Errors: `Io`, `Corrupt`.
    pub fn prune(&mut self, keep: usize) -> Result<()> {
        let turns = self.turns()?;
        if turns.len() <= keep {
            return Ok(());
        }
        let (old, newest) = turns.split_at(turns.len() - keep);
        // Also kept: pinned checkpoints (a fork's point), the one a rewind restored, and the
        // bases the kept ones were taken against.
        let mut kept: std::collections::BTreeSet<u32> = newest.iter().copied().collect();
        kept.extend(self.pinned());
        kept.extend(std::fs::read_to_string(self.dir.join(HEAD)).ok().and_then(|t| t.trim().parse::<u32>().ok()));
        for t in newest {
            kept.extend(self.base_of(*t)?);
        }
        for t in old.iter().filter(|t| !kept.contains(t)) {
            let _ = std::fs::remove_file(self.turn_file(*t));
        }
        let mut needed = std::collections::HashSet::new();
        for t in kept.iter().filter(|t| turns.contains(t)) {
            for e in self.load(*t)?.entries {
                needed.extend(e.sha256);
            }
        }
        objects::Objects::new(&self.dir).keep_only(&needed)
    }

    /// Keep checkpoint `turn` through every prune (a fork was made from it). Errors: `Io`.
    pub fn pin(&self, turn: u32) -> Result<()> {
        let dir = self.dir.join("pins");
        std::fs::create_dir_all(&dir).at(&dir)?;
        std::fs::write(dir.join(turn.to_string()), b"").at(&dir)
    }

    fn pinned(&self) -> Vec<u32> {
        std::fs::read_dir(self.dir.join("pins"))
            .map(|rd| rd.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
            .unwrap_or_default()
    }

    /// Bytes the checkpoints take on disk (objects and checkpoint files).
    pub fn disk_bytes(&self) -> u64 {
        objects::du(&self.dir)
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod watch_tests;
