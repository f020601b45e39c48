//! `fdatasync` off the shim's loop.
//!
//! The shim's one thread reads its agent's output and journals it. On ext4 (`data=ordered`) an
//! `fdatasync` commits the file system's journal, and that commit first writes out the dirty
//! data of every file in the transaction, other runs' journals, logs and databases included: on
//! a busy host one sync took 60 to 80 ms, and the shim read nothing from its agent meanwhile
//! (docs/benchmarks.md, "A bench that no longer lowers its daemon, and syncs off the shim's
//! loop"). The periodic syncs ([`super::journal::SYNC_EVERY`]) therefore run here, on a thread
//! of the shim's own, while the loop goes on reading and journaling; the syncs that guard an
//! exit stay on the loop (they are rare, and what they guard must be on disk before it is
//! reported).

use std::fs::File;
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};

/// The syncs of one writer's file: whether anything was written since the last one, whether
/// one was asked of the thread, and the thread that `fdatasync`s the files it is handed, one at
/// a time (started at the first request).
pub struct Syncer {
    tx: Option<SyncSender<File>>,
    /// Written to since the last sync (or request).
    dirty: bool,
    /// A sync was asked of the thread since the last [`Self::now`]: the next one syncs even with
    /// nothing new written (that one may not have finished).
    asked: bool,
    /// What a sync does: `File::sync_data` (`fdatasync`); a test hands in one it can watch.
    sync: fn(&File) -> std::io::Result<()>,
}

impl Default for Syncer {
    fn default() -> Self {
        Self { tx: None, dirty: false, asked: false, sync: File::sync_data }
    }
}

impl Syncer {
    /// Something was written to the file.
    pub fn wrote(&mut self) {
        self.dirty = true;
    }

    /// The periodic sync: if anything was written since the last one, ask the thread to
    /// `fdatasync` `file` and return at once.
    pub fn soon(&mut self, file: &File) -> std::io::Result<()> {
        if self.dirty {
            self.request(file)?;
            self.dirty = false;
            self.asked = true;
        }
        Ok(())
    }

    /// The sync that guards what is reported next: `fdatasync` `file` here, now, if anything
    /// was written or a sync asked of the thread may not have finished. Blocks until it is on
    /// disk.
    pub fn now(&mut self, file: &File) -> std::io::Result<()> {
        if self.dirty || self.asked {
            (self.sync)(file)?;
            self.dirty = false;
            self.asked = false;
        }
        Ok(())
    }

    /// Ask for an `fdatasync` of `file` (of what was written to it up to now) on the syncer's
    /// thread, and return at once. Two syncs may wait while another runs; a request made while
    /// both wait is dropped (the blocking [`Self::now`] at the end covers it). A sync that fails is logged (the next one tries again). Errors: the file could not be duplicated (`dup`); when the thread
    /// cannot start, the sync runs here instead.
    fn request(&mut self, file: &File) -> std::io::Result<()> {
        let copy = file.try_clone()?;
        let sync = self.sync;
        let tx = match &self.tx {
            Some(tx) => tx.clone(),
            None => {
                let (tx, rx) = sync_channel::<File>(2);
                let started = std::thread::Builder::new().name("shim-sync".into()).spawn(move || {
                    for file in rx {
                        if let Err(e) = sync(&file) {
                            crate::disk::say(format_args!("fdatasync failed: {e}"));
                        }
                    }
                });
                if started.is_err() {
                    return sync(&copy);
                }
                self.tx = Some(tx.clone());
                tx
            }
        };
        match tx.try_send(copy) {
            Ok(()) | Err(TrySendError::Full(_)) => Ok(()),
            Err(TrySendError::Disconnected(copy)) => {
                self.tx = None;
                sync(&copy)
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::io::Write;

    use std::sync::{Condvar, Mutex};

    /// The threads the watched syncs ran on, in order, and whether syncs may finish yet: a sync
    /// records its thread's name, then waits until the test lets syncs finish.
    static SEEN: Mutex<(Vec<String>, bool)> = Mutex::new((Vec::new(), false));
    static CHANGED: Condvar = Condvar::new();

    /// Marks, in [`SEEN`], the end of a thread that ran a watched sync (the syncer's thread
    /// ends once its channel is closed and every sync handed to it has run).
    struct ExitMark;
    impl Drop for ExitMark {
        fn drop(&mut self) {
            if let Ok(mut seen) = SEEN.lock() {
                seen.0.push(EXITED.to_owned());
                CHANGED.notify_all();
            }
        }
    }
    thread_local! { static EXIT_MARK: ExitMark = const { ExitMark }; }
    const EXITED: &str = "<thread ended>";

    fn watched_sync(_: &File) -> std::io::Result<()> {
        if std::thread::current().name() == Some("shim-sync") {
            EXIT_MARK.with(|_| {});
        }
        let name = std::thread::current().name().unwrap_or("").to_owned();
        let mut seen = SEEN.lock().unwrap();
        seen.0.push(name);
        CHANGED.notify_all();
        // Held until the test lets syncs finish, 10 s at most: a sync on the test's own thread
        // (the fault this test catches) fails the test instead of hanging it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !seen.1 && std::time::Instant::now() < deadline {
            seen = CHANGED.wait_timeout(seen, std::time::Duration::from_millis(50)).unwrap().0;
        }
        seen.1 = true;
        Ok(())
    }

    /// Waits (at most 10 s) until `done` holds of what the syncs saw, and returns it.
    fn seen_when(done: impl Fn(&[String]) -> bool) -> Vec<String> {
        let mut seen = SEEN.lock().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !done(&seen.0) && std::time::Instant::now() < deadline {
            seen = CHANGED.wait_timeout(seen, std::time::Duration::from_millis(50)).unwrap().0;
        }
        seen.0.clone()
    }

    /// 50 requests return while the first sync is still running (it is held until the test lets
    /// it go): no request waits for a sync. The syncs run on the thread `shim-sync`, never on
    /// the caller's; while one runs, at most two more wait and the rest are dropped (`now`
    /// covers them). `now` syncs on the caller's thread, once something was asked or written.
    #[test]
    fn a_request_returns_at_once_and_the_sync_runs_on_the_syncers_thread() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = File::create(dir.path().join("f")).unwrap();
        let mut syncer = Syncer { sync: watched_sync, ..Syncer::default() };
        for i in 0..50 {
            writeln!(file, "line {i}").unwrap();
            syncer.wrote();
            syncer.soon(&file).unwrap();
        }
        // Every request has returned; the first sync is running, held.
        let running = seen_when(|s| !s.is_empty());
        assert_eq!(running, ["shim-sync"], "one sync runs, on the syncer's thread, and holds the others");
        SEEN.lock().unwrap().1 = true;
        CHANGED.notify_all();
        // Dropped, the syncer closes its channel: the thread runs what waits, then ends.
        drop(syncer);
        let all = seen_when(|s| s.last().is_some_and(|t| t == EXITED));
        assert_eq!(all.last().map(String::as_str), Some(EXITED), "the syncer's thread ended: {all:?}");
        let syncs = &all[..all.len() - 1];
        assert!(syncs.iter().all(|t| t == "shim-sync"), "{all:?}");
        assert!((1..=3).contains(&syncs.len()), "the one running and at most two waiting, not one per request: {all:?}");

        // `now` syncs on the caller's thread, and only when something was written or asked.
        let mut syncer = Syncer { sync: watched_sync, ..Syncer::default() };
        syncer.now(&file).unwrap();
        let count = SEEN.lock().unwrap().0.len();
        assert_eq!(count, all.len(), "nothing written or asked: no sync");
        syncer.wrote();
        syncer.now(&file).unwrap();
        let me = std::thread::current().name().unwrap_or("").to_owned();
        assert_eq!(SEEN.lock().unwrap().0[count..], [me], "now synced once, on the caller's thread");
    }
}
