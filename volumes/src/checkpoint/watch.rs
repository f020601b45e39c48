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
//! What inotify does not see, and a watched checkpoint then misses until the next walk: writes
//! through a memory map (`mmap`), and writes to a file in the folder through a hard link that
//! lives outside it (inotify(7), "Limitations and caveats"). `SPACES_CHECKPOINT_WATCH=0` makes
//! every checkpoint walk.

use std::collections::HashMap;
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
    /// The directories it watches: each watch and the directory's (device, inode).
    wds: HashMap<WatchDescriptor, (u64, u64)>,
    /// The same, by (device, inode): a walk re-entering a directory still watched under the
    /// same path puts no watch again.
    by_inode: HashMap<(u64, u64), WatchDescriptor>,
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
                        if let Some(inode) = owner.wds.remove(&ev.wd) {
                            owner.by_inode.remove(&inode);
                        }
                        owner.changed = true;
                        continue;
                    }
                    let path = match (&ev.name, rel.is_empty()) {
                        (Some(name), true) => name.to_string_lossy().into_owned(),
                        (Some(name), false) => format!("{rel}/{}", name.to_string_lossy()),
                        (None, _) => rel.clone(),
                    };
                    if path.is_empty() || !owner.exclude.is_match(&path) {
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
        hub.lock().owners.insert(id, Owner { exclude, changed: true, wds: HashMap::new(), by_inode: HashMap::new() });
        Some(Watch { id, hub })
    }

    /// Start watching afresh, just before a walk: what happened until now is forgotten (the
    /// walk sees it). Directories the walk enters are added with [`Self::enter`].
    pub fn arm(&self) {
        let mut st = self.hub.lock();
        self.hub.drain(&mut st);
        if let Some(o) = st.owners.get_mut(&self.id) {
            o.changed = false;
        }
    }

    /// Watch directory `dir` (`rel`: its path in the folder), called before it is listed. A
    /// watch that cannot be put (the host's limit) marks the folder as changed: the next
    /// checkpoint walks.
    pub fn enter(&self, dir: BorrowedFd<'_>, rel: &str) {
        let Ok(st) = nix::sys::stat::fstat(dir) else {
            return self.unwatched(rel, "fstat failed");
        };
        let inode = (st.st_dev, st.st_ino);
        {
            // Watched already, under this path (a watch lives until its IN_IGNORED is read,
            // and [`Self::arm`] read every event queued before this walk).
            let st = self.hub.lock();
            let same = st.owners.get(&self.id).and_then(|o| o.by_inode.get(&inode)).and_then(|wd| st.dirs.get(wd)?.get(&self.id));
            if same.is_some_and(|r| r == rel) {
                return;
            }
        }
        // Through the descriptor: the directory the walk opened, whatever its name points at now.
        let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
        let added = self.hub.fd.add_watch(path.as_str(), mask());
        let mut st = self.hub.lock();
        match added {
            Ok(wd) => {
                st.dirs.entry(wd).or_default().insert(self.id, rel.to_owned());
                if let Some(o) = st.owners.get_mut(&self.id) {
                    if let Some(old) = o.wds.insert(wd, inode).filter(|old| *old != inode) {
                        o.by_inode.remove(&old);
                    }
                    o.by_inode.insert(inode, wd);
                }
            }
            Err(e) => {
                drop(st);
                self.unwatched(rel, &e.to_string());
            }
        }
    }

    /// A directory the walk entered has no watch: the folder counts as changed.
    fn unwatched(&self, rel: &str, why: &str) {
        if let Some(o) = self.hub.lock().owners.get_mut(&self.id).filter(|o| !o.changed) {
            tracing::debug!("checkpoint watch of {rel:?} not put: {why}");
            o.changed = true;
        }
    }

    /// Whether nothing in the folder changed since [`Self::arm`] (and every directory the walk
    /// entered got its watch).
    pub fn quiet(&self) -> bool {
        let mut st = self.hub.lock();
        self.hub.drain(&mut st);
        st.owners.get(&self.id).is_some_and(|o| !o.changed)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut st = self.hub.lock();
        let Some(owner) = st.owners.remove(&self.id) else { return };
        for wd in owner.wds.into_keys() {
            let last = st.dirs.get_mut(&wd).is_some_and(|w| {
                w.remove(&self.id);
                w.is_empty()
            });
            if last {
                st.dirs.remove(&wd);
                let _ = self.hub.fd.rm_watch(wd);
            }
        }
    }
}
