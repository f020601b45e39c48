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
#[derive(Default)]
pub struct Syncer {
    tx: Option<SyncSender<File>>,
    /// Written to since the last sync (or request).
    dirty: bool,
    /// A sync was asked of the thread since the last [`Self::now`]: the next one syncs even with
    /// nothing new written (that one may not have finished).
    asked: bool,
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
            file.sync_data()?;
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
        let tx = match &self.tx {
            Some(tx) => tx.clone(),
            None => {
                let (tx, rx) = sync_channel::<File>(2);
                let started = std::thread::Builder::new().name("shim-sync".into()).spawn(move || {
                    for file in rx {
                        if let Err(e) = file.sync_data() {
                            eprintln!("fdatasync failed: {e}");
                        }
                    }
                });
                if started.is_err() {
                    return copy.sync_data();
                }
                self.tx = Some(tx.clone());
                tx
            }
        };
        match tx.try_send(copy) {
            Ok(()) | Err(TrySendError::Full(_)) => Ok(()),
            Err(TrySendError::Disconnected(copy)) => {
                self.tx = None;
                copy.sync_data()
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_request_returns_at_once_and_the_sync_runs_on_the_syncers_thread() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = File::create(dir.path().join("f")).unwrap();
        let mut syncer = Syncer::default();
        for i in 0..50 {
            writeln!(file, "line {i}").unwrap();
            syncer.request(&file).unwrap();
        }
        // The thread is the shim's own, named for `ps`/`top` (it names itself as it starts).
        let names = || -> Vec<String> {
            std::fs::read_dir("/proc/self/task")
                .unwrap()
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .map(|n| n.trim().to_owned())
                .collect()
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !names().iter().any(|t| t == "shim-sync") && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(names().iter().any(|t| t == "shim-sync"), "{:?}", names());
        drop(syncer);
        assert_eq!(std::fs::read_to_string(dir.path().join("f")).unwrap().lines().count(), 50);
    }
}
