//! The one writer: a dedicated thread that owns the database's write connection.
//!
//! Every write of the daemon (event batches with their journal positions, run and turn rows,
//! Spaces) is a job sent to this thread through a channel. The thread takes the first job
//! waiting, then every other job already queued (up to [`MAX_JOBS_PER_COMMIT`]), and runs them
//! all in one transaction: group commit. Each job runs inside its own savepoint, so a failing
//! job is rolled back alone and the others still commit. Only after `COMMIT` returns does a
//! job's caller get its answer (through a oneshot, or a blocking channel for synchronous
//! callers), and only then does its `after` hook run (the event log publishes the run's new
//! last seq there): nobody is told about a write a reader could not yet see.
//!
//! Small jobs go first, in a group of their own. While any job of at most [`SMALL_JOB_BYTES`]
//! waits (a quiet run's line, a status change, a turn start), a group takes every such job and
//! nothing else; otherwise it takes the bigger ones (a noisy agent's batch of output) in arrival
//! order until it holds [`GROUP_BYTES`]; what is left waits for the next group. So a quiet run's
//! line waits for at most the group being committed (at most about [`GROUP_BYTES`] of rows),
//! not for every batch the noisy runs queued before it, and its own commit writes no big batch. Jobs are only reordered across callers: every caller
//! waits for a job's answer before it sends its next (`Writer::call` blocks,
//! `Writer::call_async` is awaited), so a run's events, its journal position and its status
//! keep the order the run's actor gave them.
//!
//! The writer never checkpoints (`wal_autocheckpoint=0`): [`super::checkpoint`] does, on its own
//! connection and thread, so no commit pays for copying the WAL into the database or for the
//! fsyncs that go with it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use rusqlite::Connection;

use crate::error::{Error, Result};

/// Most jobs run in one transaction; more waiting ones go in the next.
pub const MAX_JOBS_PER_COMMIT: usize = 1024;
/// A job this size or smaller (its rows' bytes) is small: it goes ahead of bigger ones.
pub const SMALL_JOB_BYTES: usize = 16 * 1024;
/// Once a group holds this many bytes of rows, bigger jobs wait for the next one.
pub const GROUP_BYTES: usize = 64 * 1024;

/// Where a job's answer goes once its transaction is over.
pub(crate) enum Reply<R> {
    /// A synchronous caller blocked on the receiving end.
    Blocking(mpsc::SyncSender<Result<R>>),
    /// An async caller awaiting the receiving end.
    Async(tokio::sync::oneshot::Sender<Result<R>>),
}

impl<R> Reply<R> {
    fn send(self, r: Result<R>) {
        match self {
            Reply::Blocking(tx) => drop(tx.send(r)),
            Reply::Async(tx) => drop(tx.send(r)),
        }
    }
}

/// One unit of work for the writer: run inside the group's transaction, then told how the
/// commit went.
trait Job: Send {
    /// Runs the job's statements; false when they failed (its savepoint is then rolled back).
    fn run(&mut self, conn: &Connection) -> bool;
    /// The group's transaction is over: `commit` is its outcome.
    fn finish(self: Box<Self>, commit: std::result::Result<(), &Failed>);
    /// The job's own statements failed for want of space ([`Error::is_disk_full`]).
    fn failed_full(&self) -> bool {
        false
    }
    /// About how many bytes the job writes (for the group's size).
    fn bytes(&self) -> usize;
}

struct Call<R, F, A> {
    bytes: usize,
    f: Option<F>,
    result: Option<Result<R>>,
    after: Option<A>,
    reply: Reply<R>,
}

impl<R, F, A> Job for Call<R, F, A>
where
    R: Send,
    F: FnOnce(&Connection) -> Result<R> + Send,
    A: FnOnce(&R) + Send,
{
    fn run(&mut self, conn: &Connection) -> bool {
        let r = match self.f.take() {
            Some(f) => f(conn),
            None => Err(Error::Writer("a write job ran twice".to_owned())),
        };
        let ok = r.is_ok();
        self.result = Some(r);
        ok
    }

    fn finish(self: Box<Self>, commit: std::result::Result<(), &Failed>) {
        let Call { result, after, reply, .. } = *self;
        let r = match (commit, result) {
            (_, Some(Err(e))) => Err(e),
            (Err(Failed { why, full: true }), _) => Err(Error::DiskFull(why.clone())),
            (Err(Failed { why, .. }), _) => Err(Error::Writer(why.clone())),
            (Ok(()), None) => Err(Error::Writer("the write was not run".to_owned())),
            (Ok(()), Some(Ok(v))) => {
                if let Some(after) = after {
                    after(&v);
                }
                Ok(v)
            }
        };
        reply.send(r);
    }

    fn bytes(&self) -> usize {
        self.bytes
    }

    fn failed_full(&self) -> bool {
        matches!(&self.result, Some(Err(e)) if e.is_disk_full())
    }
}

/// Why a group's transaction failed (its `BEGIN`, a savepoint or its `COMMIT`): everything in it
/// was rolled back.
#[derive(Debug)]
pub(crate) struct Failed {
    /// The message, naming the step.
    why: String,
    /// For want of space (`SQLITE_FULL`).
    full: bool,
}

impl Failed {
    fn new(step: &str, e: &rusqlite::Error) -> Failed {
        Failed { why: format!("{step}: {e}"), full: crate::error::db_full(e) }
    }
}

/// The handle to the writer thread. Dropping it lets the thread finish the queued jobs and end.
pub(crate) struct Writer {
    tx: Option<mpsc::Sender<Box<dyn Job>>>,
    thread: Option<JoinHandle<()>>,
    /// Transactions committed so far (the checkpointer reads it to tell busy from idle).
    pub(crate) commits: Arc<AtomicU64>,
}

impl Writer {
    /// Starts the writer thread over `conn` (already opened in WAL mode with the schema applied).
    #[cfg(test)]
    pub(crate) fn start(conn: Connection) -> Result<Writer> {
        Self::start_reserved(conn, None)
    }

    /// Starts the writer thread over `conn` (already opened in WAL mode with the schema applied),
    /// with the state dir's `reserve`: given up when a transaction finds the
    /// disk full, made again once transactions commit ([`super::reserve`]).
    pub(crate) fn start_reserved(mut conn: Connection, reserve: Option<Arc<super::reserve::Reserve>>) -> Result<Writer> {
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        // SQLite's busy timeout sleeps in growing steps of up to 100 ms, so a writer held off by
        // a forced checkpoint went on up to 100 ms after the lock was free (stalls of 0.7 s and
        // more under the load bench). Retry every millisecond instead, as long as the timeout.
        conn.busy_handler(Some(retry_every_ms))?;
        // When the writer starts the WAL over (after a checkpoint copied all of it), the file
        // is cut back to this size: the WAL stays bounded without a blocking TRUNCATE.
        conn.pragma_update(None, "journal_size_limit", super::checkpoint::WAL_KEEP_BYTES as i64)?;
        let (tx, rx) = mpsc::channel::<Box<dyn Job>>();
        let commits = Arc::new(AtomicU64::new(0));
        let counter = commits.clone();
        let thread = std::thread::Builder::new().name("spacesd-writer".to_owned()).spawn(move || {
            // Every commit a reader waits for runs here: a short slice, as the runtime's threads.
            spaces_os::process::priority::ask_short_slice();
            run(conn, rx, &counter, reserve.as_deref())
        })?;
        Ok(Writer { tx: Some(tx), thread: Some(thread), commits })
    }

    /// Queues `f` for the next transaction; once it committed, `after` runs on the writer
    /// thread and the value goes to `reply`.
    /// `bytes` is about what it writes (its place in the queue: see the module doc).
    pub(crate) fn submit<R, F, A>(&self, bytes: usize, f: F, after: A, reply: Reply<R>)
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
        A: FnOnce(&R) + Send + 'static,
    {
        let job: Box<dyn Job> = Box::new(Call { bytes, f: Some(f), result: None, after: Some(after), reply });
        let Some(tx) = self.tx.as_ref() else { return };
        if let Err(mpsc::SendError(job)) = tx.send(job) {
            job.finish(Err(&Failed { why: "the event writer has stopped".to_owned(), full: false }));
        }
    }

    /// Runs `f` (a small write) in the writer's next transaction and blocks until it committed.
    /// For synchronous callers and rare writes; the hot path awaits [`Writer::call_async`]. On
    /// a worker of a multi-thread tokio runtime the wait is announced (`block_in_place`), so the
    /// runtime moves its other tasks to another thread meanwhile.
    pub(crate) fn call<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
    {
        let (tx, rx) = mpsc::sync_channel(1);
        self.submit(0, f, |_: &R| {}, Reply::Blocking(tx));
        crate::fsutil::blocking(|| rx.recv().map_err(|_| Error::Writer("the event writer has stopped".to_owned())))?
    }

    /// [`Writer::call`] for async callers, with `after` run on the writer thread once committed;
    /// `bytes` is about what it writes.
    pub(crate) async fn call_async<R, F, A>(&self, bytes: usize, f: F, after: A) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
        A: FnOnce(&R) + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(bytes, f, after, Reply::Async(tx));
        rx.await.map_err(|_| Error::Writer("the event writer has stopped".to_owned()))?
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The writer's busy handler: wait 1 ms and retry, for about
/// [`spaces_codespace::sqlite::BUSY_TIMEOUT_MS`] in all.
fn retry_every_ms(attempt: i32) -> bool {
    std::thread::sleep(std::time::Duration::from_millis(1));
    u64::try_from(attempt).unwrap_or(0) < spaces_codespace::sqlite::BUSY_TIMEOUT_MS
}

/// The writer thread: one transaction per wake-up, over the jobs [`next_group`] picks.
/// A group that failed for want of space gives up the `reserve`, so the writes that end the
/// runs find room; one that commits makes it again ([`super::reserve::Reserve::renew`]).
fn run(conn: Connection, rx: mpsc::Receiver<Box<dyn Job>>, commits: &AtomicU64, reserve: Option<&super::reserve::Reserve>) {
    let mut waiting: VecDeque<Box<dyn Job>> = VecDeque::new();
    let mut jobs: Vec<Box<dyn Job>> = Vec::new();
    loop {
        if waiting.is_empty() {
            match rx.recv() {
                Ok(job) => waiting.push_back(job),
                Err(_) => return,
            }
        }
        while let Ok(job) = rx.try_recv() {
            waiting.push_back(job);
        }
        next_group(&mut waiting, &mut jobs);
        let outcome = commit_group(&conn, &mut jobs);
        if outcome.is_ok() {
            commits.fetch_add(1, Ordering::Relaxed);
        }
        let full = outcome.as_ref().err().is_some_and(|f| f.full) || jobs.iter().any(|j| j.failed_full());
        if let Some(reserve) = reserve {
            if full {
                reserve.release();
            } else if outcome.is_ok() {
                reserve.renew();
            }
        }
        let failed = outcome.as_ref().err();
        for job in jobs.drain(..) {
            job.finish(failed.map_or(Ok(()), Err));
        }
    }
}

/// Moves the next group from `waiting` into `group`: every small job, then bigger ones in
/// arrival order while the group holds less than [`GROUP_BYTES`] (at least one job), at most
/// [`MAX_JOBS_PER_COMMIT`] in all.
fn next_group(waiting: &mut VecDeque<Box<dyn Job>>, group: &mut Vec<Box<dyn Job>>) {
    let mut rest = VecDeque::with_capacity(waiting.len());
    for job in waiting.drain(..) {
        if group.len() < MAX_JOBS_PER_COMMIT && job.bytes() <= SMALL_JOB_BYTES {
            group.push(job);
        } else {
            rest.push_back(job);
        }
    }
    if !group.is_empty() {
        // Small jobs commit on their own: a quiet run's line never waits for a noisy batch's
        // rows to be written in its own transaction, only for the group being committed.
        *waiting = rest;
        return;
    }
    let mut bytes = 0;
    while let Some(job) = rest.pop_front() {
        if group.len() >= MAX_JOBS_PER_COMMIT || (!group.is_empty() && bytes >= GROUP_BYTES) {
            rest.push_front(job);
            break;
        }
        bytes += job.bytes();
        group.push(job);
    }
    *waiting = rest;
}

/// Runs `jobs` in one transaction, each in its own savepoint. Errors: why a failed
/// `BEGIN`/`COMMIT` (everything was rolled back).
fn commit_group(conn: &Connection, jobs: &mut [Box<dyn Job>]) -> std::result::Result<(), Failed> {
    conn.execute_batch("BEGIN IMMEDIATE").map_err(|e| Failed::new("cannot begin a transaction", &e))?;
    for job in jobs.iter_mut() {
        let step = (|| -> rusqlite::Result<()> {
            conn.prepare_cached("SAVEPOINT job")?.execute([])?;
            if !job.run(conn) {
                conn.prepare_cached("ROLLBACK TO job")?.execute([])?;
            }
            conn.prepare_cached("RELEASE job")?.execute([]).map(drop)
        })();
        if let Err(e) = step {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(Failed::new("transaction aborted", &e));
        }
    }
    if let Err(e) = conn.execute_batch("COMMIT") {
        let _ = conn.execute_batch("ROLLBACK");
        return Err(Failed::new("commit failed", &e));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// A job known by its size alone.
    struct Weighed(usize);

    impl Job for Weighed {
        fn run(&mut self, _: &Connection) -> bool {
            true
        }
        fn finish(self: Box<Self>, _: std::result::Result<(), &Failed>) {}
        fn bytes(&self) -> usize {
            self.0
        }
    }

    fn sizes(jobs: impl IntoIterator<Item = Box<dyn Job>>) -> Vec<usize> {
        jobs.into_iter().map(|j| j.bytes()).collect()
    }

    #[test]
    fn small_jobs_go_first_alone_and_big_ones_fill_a_group_up_to_its_size_in_arrival_order() {
        let big = GROUP_BYTES / 2 + 1;
        let mut waiting: VecDeque<Box<dyn Job>> =
            [big, 1, big + 1, 2, big + 2].into_iter().map(|b| Box::new(Weighed(b)) as Box<dyn Job>).collect();
        let mut group = Vec::new();
        next_group(&mut waiting, &mut group);
        assert_eq!(sizes(group.drain(..)), vec![1, 2], "the small jobs first, in a group of their own");
        next_group(&mut waiting, &mut group);
        assert_eq!(sizes(group.drain(..)), vec![big, big + 1], "then bigs until the group is full");
        assert_eq!(sizes(waiting.iter().map(|j| Box::new(Weighed(j.bytes())) as Box<dyn Job>)), vec![big + 2]);
        // A small job that arrived meanwhile goes before the big one left.
        waiting.push_back(Box::new(Weighed(3)));
        next_group(&mut waiting, &mut group);
        assert_eq!(sizes(group.drain(..)), vec![3]);
        next_group(&mut waiting, &mut group);
        assert_eq!(sizes(group.drain(..)), vec![big + 2]);
        assert!(waiting.is_empty());
        // A job bigger than a group still goes, alone.
        waiting.push_back(Box::new(Weighed(GROUP_BYTES * 4)));
        waiting.push_back(Box::new(Weighed(GROUP_BYTES * 4 + 1)));
        next_group(&mut waiting, &mut group);
        assert_eq!(sizes(group.drain(..)), vec![GROUP_BYTES * 4]);
    }

    #[test]
    fn a_write_held_off_by_another_connection_retries_until_the_lock_is_free() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        let conn = spaces_codespace::sqlite::open(&path, "NORMAL").unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
        let writer = Writer::start(conn).unwrap();
        // Another connection (the checkpointer, say) holds the write lock for a while.
        let other = spaces_codespace::sqlite::open(&path, "NORMAL").unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let (locked_tx, locked_rx) = mpsc::channel();
        let holder = std::thread::spawn(move || {
            locked_rx.recv().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(50));
            other.execute_batch("COMMIT").unwrap();
        });
        locked_tx.send(()).unwrap();
        let n = writer.call(|c| Ok(c.execute("INSERT INTO t VALUES (1)", [])?)).unwrap();
        assert_eq!(n, 1, "the write waited for the lock and committed");
        holder.join().unwrap();
        assert!(retry_every_ms(0), "a busy write is retried");
        assert!(!retry_every_ms(i32::MAX), "until the timeout");
    }

    /// A transaction that finds the disk full (SQLite's page limit reached: `SQLITE_FULL`, as
    /// on a full disk) fails with an error that says so, and gives up the state dir's reserve;
    /// writes that fit still commit.
    #[test]
    fn a_full_disk_is_a_typed_error_and_gives_up_the_reserve() {
        let dir = tempfile::tempdir().unwrap();
        let conn = spaces_codespace::sqlite::open(&dir.path().join("w.db"), "NORMAL").unwrap();
        conn.execute_batch("CREATE TABLE t (x BLOB)").unwrap();
        let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
        conn.pragma_update(None, "max_page_count", pages + 2).unwrap();
        let reserve = Arc::new(super::super::reserve::Reserve::make(dir.path(), 64 * 1024));
        assert!(reserve.held());
        let writer = Writer::start_reserved(conn, Some(reserve.clone())).unwrap();
        writer.call(|c| Ok(c.execute("INSERT INTO t VALUES (x'00')", [])?)).unwrap();
        assert!(reserve.held(), "a write that fits keeps the reserve");
        let err = writer.call(|c| Ok(c.execute("INSERT INTO t VALUES (zeroblob(1000000))", [])?)).unwrap_err();
        assert!(err.is_disk_full(), "{err}");
        assert!(!reserve.held(), "the reserve was given up");
        assert_eq!(writer.call(|c| Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))?)).unwrap(), 1);
    }

    #[test]
    fn a_blocking_write_from_a_runtime_worker_commits_and_answers() {
        let dir = tempfile::tempdir().unwrap();
        let conn = spaces_codespace::sqlite::open(&dir.path().join("w.db"), "NORMAL").unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
        let writer = Arc::new(Writer::start(conn).unwrap());
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
        let w = writer.clone();
        let n =
            rt.block_on(
                async move { tokio::spawn(async move { w.call(|c| Ok(c.execute("INSERT INTO t VALUES (1)", [])?)) }).await.unwrap() },
            );
        assert_eq!(n.unwrap(), 1);
    }
}
