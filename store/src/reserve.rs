//! The state dir's reserve: room kept on its disk for the writes that end runs when it fills.
//!
//! A file of [`RESERVE_BYTES`] (`<state dir>/disk-reserve`, allocated, never read) sits in the
//! state dir. When a write there finds the disk full (the event writer's transaction, a run's
//! journal, its `output.log`), the reserve is given up ([`Reserve::release`]): the events that
//! end the runs' turns, naming the disk, and the runs' new states then have room to be stored.
//! Once writes succeed again (space was freed), the reserve is made again, at most once every
//! [`RENEW_EVERY`] ([`Reserve::renew`]). Without room for it at start, the daemon runs without
//! (and tries again the same way).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Size of the reserve, in bytes: a few hundred event batches and run updates in the database's
/// WAL, with the runs' last journal records.
pub const RESERVE_BYTES: u64 = 4 * 1024 * 1024;
/// Least time between two attempts to make the reserve again.
pub const RENEW_EVERY: Duration = Duration::from_secs(2);
/// The reserve's file name in the state dir.
pub const FILE: &str = "disk-reserve";

/// The reserve of one state dir.
pub struct Reserve {
    path: PathBuf,
    bytes: u64,
    /// Whether the file holds its room now, and when it was last given up or tried.
    state: Mutex<(bool, Option<Instant>)>,
}

impl Reserve {
    /// The reserve of `dir`, made now if there is room for `bytes` (see [`Reserve::held`]).
    pub fn make(dir: &Path, bytes: u64) -> Reserve {
        let reserve = Reserve { path: dir.join(FILE), bytes, state: Mutex::new((false, None)) };
        let made = reserve.try_make();
        *reserve.lock() = (made, (!made).then(Instant::now));
        reserve
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (bool, Option<Instant>)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the reserve holds its room now.
    pub fn held(&self) -> bool {
        self.lock().0
    }

    /// The disk is full: give the reserve's room back to the state dir (once; later calls do
    /// nothing until it is made again). Returns whether room was given back now.
    pub fn release(&self) -> bool {
        let mut state = self.lock();
        if !state.0 {
            return false;
        }
        *state = (false, Some(Instant::now()));
        drop(state);
        match std::fs::remove_file(&self.path) {
            Ok(()) => {
                tracing::warn!(
                    "the disk of the state dir is full: its reserve of {} KiB ({}) was given up so that runs can end with a reason",
                    self.bytes / 1024,
                    self.path.display()
                );
                true
            }
            Err(e) => {
                tracing::warn!("the disk of the state dir is full, and its reserve {} could not be given up: {e}", self.path.display());
                false
            }
        }
    }

    /// A write succeeded: make the reserve again if it was given up, at most once every
    /// [`RENEW_EVERY`]. Without room for it, it stays given up.
    pub fn renew(&self) {
        let mut state = self.lock();
        if state.0 || state.1.is_some_and(|at| at.elapsed() < RENEW_EVERY) {
            return;
        }
        let made = self.try_make();
        *state = (made, (!made).then(Instant::now));
    }

    /// Make the file with its room allocated; false (and no file) when there is no room.
    fn try_make(&self) -> bool {
        let made = (|| -> std::io::Result<()> {
            use std::os::unix::fs::OpenOptionsExt;
            let file = std::fs::OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(&self.path)?;
            if !spaces_os::disk::allocate(&file, 0, self.bytes)? {
                // No allocation ahead on this file system: the room is written out.
                use std::io::Write;
                let zeros = vec![0u8; 64 * 1024];
                let mut left = self.bytes;
                let mut w = &file;
                while left > 0 {
                    let n = left.min(zeros.len() as u64) as usize;
                    w.write_all(&zeros[..n])?;
                    left -= n as u64;
                }
            }
            Ok(())
        })();
        if made.is_err() {
            let _ = std::fs::remove_file(&self.path);
        }
        made.is_ok()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_is_given_up_once_and_made_again_after_its_pause() {
        let dir = tempfile::tempdir().unwrap();
        let reserve = Reserve::make(dir.path(), 64 * 1024);
        let path = dir.path().join(FILE);
        assert!(reserve.held() && path.exists());
        use std::os::unix::fs::MetadataExt;
        assert!(std::fs::metadata(&path).unwrap().blocks() * 512 >= 64 * 1024, "its room is allocated");
        assert!(reserve.release(), "given up");
        assert!(!path.exists() && !reserve.held());
        assert!(!reserve.release(), "only once");
        reserve.renew();
        assert!(!reserve.held(), "not made again before its pause");
        *reserve.lock() = (false, Some(Instant::now() - RENEW_EVERY));
        reserve.renew();
        assert!(reserve.held() && path.exists(), "made again once writes succeed after the pause");
    }
}
