//! WAL checkpoints, on their own connection and thread, off the commit path.
//!
//! The writer never checkpoints ([`super::writer`]). This thread wakes every [`TICK`]:
//! - when transactions were committed since its last look, it runs
//!   `PRAGMA wal_checkpoint(PASSIVE)`: it copies what it can into the database without waiting
//!   for (or blocking) the writer or any reader, and fsyncs the WAL and the database;
//! - the writer starts the WAL over once a checkpoint copied all of it, and then cuts the file
//!   back to [`WAL_KEEP_BYTES`] (`journal_size_limit`): under a steady load that is what bounds
//!   the WAL, without holding off the writer;
//! - when the WAL file has grown past [`MAX_WAL_BYTES`] all the same (`PASSIVE` could not keep
//!   up, or readers kept it from restarting), it runs `PASSIVE`, and once that copied every
//!   frame, `TRUNCATE`, which waits
//!   for readers of old snapshots (holding off new writes for at most [`BOUNDED_WAIT`]) and
//!   then empties the WAL file: that is the bound on its size. Only the frames committed
//!   between the two are copied while the writer is held off (a `TRUNCATE` of the whole WAL
//!   held it off for the copy and the fsyncs: the 300-400 ms tail of the load bench);
//! - when nothing was committed for [`IDLE_AFTER`] and the WAL is not empty, it runs
//!   `TRUNCATE` once, so an idle daemon leaves a database file with nothing in its WAL.
//!
//! A checkpoint that cannot finish now (busy) is simply tried again on a later tick.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::error::Result;

/// How often the checkpointer looks at the WAL. It is also the most commits a power loss can
/// cost (see docs/architecture.md "Storage").
pub const TICK: Duration = Duration::from_millis(500);
/// Quiet time after which the WAL is truncated.
pub const IDLE_AFTER: Duration = Duration::from_secs(1);
/// WAL size past which a `TRUNCATE` checkpoint is forced even while busy: `PASSIVE`
/// checkpoints could not keep up (or readers kept the WAL from starting over).
pub const MAX_WAL_BYTES: u64 = 256 * 1024 * 1024;
/// Size the writer cuts the WAL file back to whenever it starts it over
/// (`journal_size_limit`), which needs no checkpoint that holds off the writer.
pub const WAL_KEEP_BYTES: u64 = 64 * 1024 * 1024;
/// How long a forced checkpoint waits for readers (and holds off the writer) at most.
pub const BOUNDED_WAIT: Duration = Duration::from_millis(200);

/// The checkpointer thread; stops when dropped (what is left in the WAL is checkpointed by the
/// next open).
pub(crate) struct Checkpointer {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts checkpointing the database at `path`, watching the writer's `commits` counter.
    pub(crate) fn start(path: &Path, commits: Arc<AtomicU64>) -> Result<Checkpointer> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(BOUNDED_WAIT)?;
        let wal = wal_path(path);
        let (stop, stopped) = mpsc::channel::<()>();
        let thread =
            std::thread::Builder::new().name("spacesd-checkpoint".to_owned()).spawn(move || run(&conn, &wal, &commits, &stopped))?;
        Ok(Checkpointer { stop: Some(stop), thread: Some(thread) })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn wal_path(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push("-wal");
    PathBuf::from(s)
}

fn run(conn: &Connection, wal: &Path, commits: &AtomicU64, stopped: &mpsc::Receiver<()>) {
    let mut seen = commits.load(Ordering::Relaxed);
    let mut last_change = Instant::now();
    let mut truncated = false;
    // Until the store is dropped (the sender goes away).
    while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(TICK) {
        let now = commits.load(Ordering::Relaxed);
        let wal_bytes = std::fs::metadata(wal).map_or(0, |m| m.len());
        if wal_bytes > MAX_WAL_BYTES {
            // PASSIVE first copies the frames without holding off the writer, twice (the second
            // copies what came during the first); the TRUNCATE that follows has only what was
            // committed in between to copy and sync while it blocks.
            truncated = checkpoint(conn, "PASSIVE") && checkpoint(conn, "PASSIVE") && checkpoint(conn, "TRUNCATE");
        } else if now != seen {
            checkpoint(conn, "PASSIVE");
            truncated = false;
        } else if !truncated && wal_bytes > 0 && last_change.elapsed() >= IDLE_AFTER {
            truncated = checkpoint(conn, "TRUNCATE");
        }
        if now != seen {
            seen = now;
            last_change = Instant::now();
        }
    }
}

/// Runs one checkpoint in `mode`; true when it was complete (nothing left in the WAL to copy).
fn checkpoint(conn: &Connection, mode: &str) -> bool {
    let r = conn
        .query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?)));
    match r {
        // (busy, frames in the WAL, frames checkpointed)
        Ok((busy, log, done)) => busy == 0 && log == done,
        Err(e) => {
            tracing::debug!("wal_checkpoint({mode}): {e}");
            false
        }
    }
}
