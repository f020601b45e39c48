//! Watches that let a checkpoint of a folder nothing touched skip its walk (issue 34: an
//! unchanged 10,000-file folder in at most 20 ms).
//!
//! While a checkpoint walks the folder, every directory it enters gets an inotify watch before
//! it is listed ([`crate::scan::OnDir`]). Whatever changes in the folder after that (an entry
//! made, removed, renamed, written or its metadata changed, in any watched directory) queues an
//! event. At the next checkpoint, no event for the folder since that walk means nothing in it
//! changed: the checkpoint is the previous one, taken without a walk. Any event, a lost one (the
//! kernel's queue overflowed) or a watch that could not be put (the host's
//! `fs.inotify.max_user_watches`) means a full walk, as without watches.
//!
//! One inotify instance serves the whole daemon ([`Hub`]): runs in the same Space share a
//! directory's watch, and the host's per-user limit of instances (128 by default) is not spent
//! one per run. Events under excluded paths (`node_modules/`, a build's `target/`) do not count.
//!
//! Only folders on local file systems are trusted to a watch (ext2/3/4, xfs, btrfs, f2fs, tmpfs,
//! overlayfs; every directory on another device than the folder's is checked too): on network
//! and FUSE file systems (NFS, SMB, sshfs, WSL's drvfs/9p) another client's writes raise no
//! event, so a folder there is walked every time.
//!
//! What inotify does not see on a local file system either, and a watched checkpoint then
//! misses until the next walk: writes through a memory map (`mmap`), and changes (contents or
//! metadata) to a file of the folder made through a hard link whose other name is outside the
//! folder or under an excluded path (inotify(7), "Limitations and caveats").
//! `SPACES_CHECKPOINT_WATCH=0` makes every checkpoint walk.
//!
//! A walk's watches are the folder's directories as that walk found them: the watches of
//! directories it did not enter (moved out of the folder, or under an excluded path now) are
//! removed after it. A watch the host refuses (`fs.inotify.max_user_watches`) makes the folder
//! give up watching: its watches are removed, and every checkpoint walks.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use globset::GlobSet;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

/// What counts as a change of a watched directory's entries or of the directory itself.
fn mask() -> AddWatchFlags {
    AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_ATTRIB
        | AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
        | AddWatchFlags::IN_ONLYDIR
}

/// The daemon's one inotify instance and who watches what through it.
struct Hub {
    fd: Inotify,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Each watched directory: the watches (owners) that entered it, with its path in theirs.
    dirs: HashMap<WatchDescriptor, HashMap<u64, String>>,
    owners: HashMap<u64, Owner>,
}

struct Owner {
    exclude: GlobSet,
    /// Something changed (or may have) since the owner was last armed.
    changed: bool,
    /// The directories it watches.
    wds: HashSet<WatchDescriptor>,
    /// Those the walk since the last [`Watch::arm`] entered.
    entered: HashSet<WatchDescriptor>,
    /// The device of the folder's root, as the walk since the last arm found it.
    root_dev: Option<u64>,
    /// The host refused a watch: this folder is walked every time from now on.
    gave_up: bool,
    /// The SQLite side files the last walk found beside live databases, which a checkpoint's own
    /// consistent copy of the database touches ([`Watch::walked`]).
    sides: SqliteSides,
}

/// The side files of the live SQLite databases a walk found (`X-wal`, `X-shm` beside `X`).
#[derive(Debug, Default)]
pub(crate) struct SqliteSides {
    /// The logs: SQLite's reader opens one for writing and sets its mode, so only a write to
    /// it (a commit: `IN_MODIFY`), or its making, removal or renaming, counts.
    pub logs: HashSet<String>,
    /// The indexes: never part of a checkpoint (the log and the database are), and any reader
    /// writes them, so their events do not count.
    pub indexes: HashSet<String>,
}

impl SqliteSides {
    /// Whether an event of `mask` on `path` is a reader's touch, not a change.
    fn touched(&self, path: &str, mask: AddWatchFlags) -> bool {
        self.indexes.contains(path)
            || (self.logs.contains(path) && (mask & !(AddWatchFlags::IN_ATTRIB | AddWatchFlags::IN_CLOSE_WRITE)).is_empty())
    }
}

impl Owner {
    fn new(exclude: GlobSet) -> Owner {
        Owner {
            exclude,
            changed: true,
            wds: HashSet::new(),
            entered: HashSet::new(),
            root_dev: None,
            gave_up: false,
            sides: SqliteSides::default(),
        }
    }
}

/// File systems on which every change to a watched directory raises an inotify event (local
/// ones: another machine's or a FUSE server's writes would raise none).
fn local(fs: nix::sys::statfs::FsType) -> bool {
    use nix::sys::statfs::*;
    [EXT4_SUPER_MAGIC, XFS_SUPER_MAGIC, BTRFS_SUPER_MAGIC, F2FS_SUPER_MAGIC, TMPFS_MAGIC, OVERLAYFS_SUPER_MAGIC].contains(&fs)
}

/// The hub, made at first use; `None` when the host gives no inotify instance (then every
/// checkpoint walks).
fn hub() -> Option<&'static Hub> {
    static HUB: OnceLock<Option<Hub>> = OnceLock::new();
    HUB.get_or_init(|| match Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC) {
        Ok(fd) => Some(Hub { fd, state: Mutex::new(State::default()) }),
        Err(e) => {
            tracing::warn!("checkpoints walk every folder: no inotify instance: {e}");
            None
        }
    })
    .as_ref()
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reads every queued event and marks the owners it concerns as changed.
    fn drain(&self, st: &mut State) {
        let State { dirs, owners } = st;
        loop {
            let events = match self.fd.read_events() {
                Ok(ev) if !ev.is_empty() => ev,
                Ok(_) | Err(nix::errno::Errno::EAGAIN) => return,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => {
                    // Unreadable: nothing can be trusted.
                    owners.values_mut().for_each(|o| o.changed = true);
                    return;
                }
            };
            for ev in events {
                if ev.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    owners.values_mut().for_each(|o| o.changed = true);
                    continue;
                }
                let gone = ev.mask.contains(AddWatchFlags::IN_IGNORED);
                let Some(watchers) = dirs.get(&ev.wd) else { continue };
                for (id, rel) in watchers {
                    let Some(owner) = owners.get_mut(id) else { continue };
                    if gone {
                        // The directory is gone or unmounted: its removal was an event of its parent.
                        owner.wds.remove(&ev.wd);
                        owner.entered.remove(&ev.wd);
                        owner.changed = true;
                        continue;
                    }
                    let path = match (&ev.name, rel.is_empty()) {
                        (Some(name), true) => name.to_string_lossy().into_owned(),
                        (Some(name), false) => format!("{rel}/{}", name.to_string_lossy()),
                        (None, _) => rel.clone(),
                    };
                    if path.is_empty() || !(owner.exclude.is_match(&path) || owner.sides.touched(&path, ev.mask)) {
                        owner.changed = true;
                    }
                }
                if gone {
                    dirs.remove(&ev.wd);
                }
            }
        }
    }
}

/// One folder's watch (a run's checkpoints, [`super::Checkpoints`]); its directories stop being
/// watched when it is dropped, unless another watch entered them too.
pub(crate) struct Watch {
    id: u64,
    hub: &'static Hub,
}

impl Watch {
    /// A watch leaving out events under what `exclude` matches; `None` without inotify.
    pub fn new(exclude: GlobSet) -> Option<Watch> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let hub = hub()?;
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        hub.lock().owners.insert(id, Owner::new(exclude));
        Some(Watch { id, hub })
    }

    /// Start watching afresh, just before a walk: what happened until now is forgotten (the
    /// walk sees it). Directories the walk enters are added with [`Self::enter`], and
    /// [`Self::walked`] ends the walk.
    pub fn arm(&self) {
        let mut st = self.hub.lock();
        self.hub.drain(&mut st);
        if let Some(o) = st.owners.get_mut(&self.id) {
            o.changed = o.gave_up;
            o.entered.clear();
            o.root_dev = None;
        }
    }

    /// Watch directory `dir` (`rel`: its path in the folder, `""` for the folder itself), called
    /// before it is listed. A directory on a file system that is not local, or a watch the host
    /// refuses, marks the folder as changed: the next checkpoint walks.
    pub fn enter(&self, dir: BorrowedFd<'_>, rel: &str) {
        let Ok(st) = nix::sys::stat::fstat(dir) else {
            return self.unwatched(rel, "fstat failed", false);
        };
        let dev = st.st_dev;
        let mut hub = self.hub.lock();
        let Some(owner) = hub.owners.get_mut(&self.id) else { return };
        // Known changed already (a directory not watchable, the host's limit): the next
        // checkpoint walks whatever is watched, so no more watches are spent on this walk.
        if owner.gave_up || owner.changed {
            return;
        }
        // The root's file system, and any other device met below it, must be local.
        let root_dev = *owner.root_dev.get_or_insert(dev);
        if (rel.is_empty() || dev != root_dev) && !nix::sys::statfs::fstatfs(dir).is_ok_and(|fs| local(fs.filesystem_type())) {
            drop(hub);
            return self.unwatched(rel, "not a local file system", false);
        }
        // Through the descriptor: the directory the walk opened, whatever its name points at
        // now. Under the hub's lock, so no other watch's drop or drain comes between the kernel's
        // watch and its record here.
        let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
        match self.hub.fd.add_watch(path.as_str(), mask()) {
            Ok(wd) => {
                hub.dirs.entry(wd).or_default().insert(self.id, rel.to_owned());
                if let Some(o) = hub.owners.get_mut(&self.id) {
                    o.wds.insert(wd);
                    o.entered.insert(wd);
                }
            }
            Err(e) => {
                let full = e == nix::errno::Errno::ENOSPC;
                drop(hub);
                self.unwatched(rel, &e.to_string(), full);
            }
        }
    }

    /// A directory the walk entered has no watch: the folder counts as changed. `give_up`: the
    /// host's limit of watches is reached; this folder's watches are removed and it is walked
    /// every time from now on.
    fn unwatched(&self, rel: &str, why: &str, give_up: bool) {
        let mut st = self.hub.lock();
        let Some(o) = st.owners.get_mut(&self.id) else { return };
        if !o.changed || give_up {
            tracing::debug!("checkpoint watch of {rel:?} not put: {why}");
        }
        o.changed = true;
        if give_up && !o.gave_up {
            tracing::warn!("checkpoints of a folder walk every time: the host's inotify watches are used up ({why})");
            o.gave_up = true;
            let wds: Vec<WatchDescriptor> = o.wds.drain().collect();
            o.entered.clear();
            self.hub.release(&mut st, self.id, wds);
        }
    }

    /// The walk since [`Self::arm`] is over: watches of directories it did not enter (moved out
    /// of the folder, under an excluded path now) are removed. `sides`: the SQLite side files
    /// it found, whose reader's touches do not count from now on ([`SqliteSides`]).
    pub fn walked(&self, sides: SqliteSides) {
        let mut st = self.hub.lock();
        let Some(o) = st.owners.get_mut(&self.id) else { return };
        o.sides = sides;
        let stale: Vec<WatchDescriptor> = o.wds.difference(&o.entered).copied().collect();
        for wd in &stale {
            o.wds.remove(wd);
        }
        self.hub.release(&mut st, self.id, stale);
    }

    /// Whether nothing in the folder changed since [`Self::arm`] (and every directory the walk
    /// entered got its watch).
    pub fn quiet(&self) -> bool {
        let mut st = self.hub.lock();
        self.hub.drain(&mut st);
        st.owners.get(&self.id).is_some_and(|o| !o.changed)
    }
}

#[cfg(test)]
impl Watch {
    /// The directories this watch holds a watch on.
    pub fn watched_dirs(&self) -> usize {
        self.hub.lock().owners.get(&self.id).map_or(0, |o| o.wds.len())
    }
}

impl Hub {
    /// Owner `id` no longer watches `wds`; a directory no owner watches loses its watch.
    fn release(&self, st: &mut State, id: u64, wds: Vec<WatchDescriptor>) {
        for wd in wds {
            let last = st.dirs.get_mut(&wd).is_some_and(|w| {
                w.remove(&id);
                w.is_empty()
            });
            if last {
                st.dirs.remove(&wd);
                let _ = self.fd.rm_watch(wd);
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut st = self.hub.lock();
        let Some(owner) = st.owners.remove(&self.id) else { return };
        self.hub.release(&mut st, self.id, owner.wds.into_iter().collect());
    }
}
