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
//! Jobs from one caller run in the order they were sent (the channel is FIFO and the thread
//! runs a group in order), so a run's events, its journal position and its status keep the
//! order the run's actor gave them.
//!
//! The writer never checkpoints (`wal_autocheckpoint=0`): [`super::checkpoint`] does, on its own
//! connection and thread, so no commit pays for copying the WAL into the database or for the
//! fsyncs that go with it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use rusqlite::Connection;

use crate::error::{Error, Result};

/// Most jobs run in one transaction; more waiting ones go in the next.
pub const MAX_JOBS_PER_COMMIT: usize = 1024;

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
    fn finish(self: Box<Self>, commit: std::result::Result<(), &str>);
}

struct Call<R, F, A> {
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

    fn finish(self: Box<Self>, commit: std::result::Result<(), &str>) {
        let Call { result, after, reply, .. } = *self;
        let r = match (commit, result) {
            (_, Some(Err(e))) => Err(e),
            (Err(why), _) => Err(Error::Writer(why.to_owned())),
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
    pub(crate) fn start(conn: Connection) -> Result<Writer> {
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        let (tx, rx) = mpsc::channel::<Box<dyn Job>>();
        let commits = Arc::new(AtomicU64::new(0));
        let counter = commits.clone();
        let thread = std::thread::Builder::new()
            .name("spacesd-writer".to_owned())
            .spawn(move || run(conn, rx, &counter))?;
        Ok(Writer { tx: Some(tx), thread: Some(thread), commits })
    }

    /// Queues `f` for the next transaction; once it committed, `after` runs on the writer
    /// thread and the value goes to `reply`.
    pub(crate) fn submit<R, F, A>(&self, f: F, after: A, reply: Reply<R>)
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
        A: FnOnce(&R) + Send + 'static,
    {
        let job: Box<dyn Job> = Box::new(Call { f: Some(f), result: None, after: Some(after), reply });
        let Some(tx) = self.tx.as_ref() else { return };
        if let Err(mpsc::SendError(job)) = tx.send(job) {
            job.finish(Err("the event writer has stopped"));
        }
    }

    /// Runs `f` in the writer's next transaction and blocks until it committed. For synchronous
    /// callers and rare writes; the hot path awaits [`Writer::call_async`].
    pub(crate) fn call<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
    {
        let (tx, rx) = mpsc::sync_channel(1);
        self.submit(f, |_: &R| {}, Reply::Blocking(tx));
        rx.recv().map_err(|_| Error::Writer("the event writer has stopped".to_owned()))?
    }

    /// [`Writer::call`] for async callers, with `after` run on the writer thread once committed.
    pub(crate) async fn call_async<R, F, A>(&self, f: F, after: A) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
        A: FnOnce(&R) + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(f, after, Reply::Async(tx));
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

/// The writer thread: one transaction per wake-up, over every job waiting.
fn run(conn: Connection, rx: mpsc::Receiver<Box<dyn Job>>, commits: &AtomicU64) {
    let mut jobs: Vec<Box<dyn Job>> = Vec::new();
    while let Ok(first) = rx.recv() {
        jobs.push(first);
        while jobs.len() < MAX_JOBS_PER_COMMIT {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let outcome = commit_group(&conn, &mut jobs);
        if outcome.is_ok() {
            commits.fetch_add(1, Ordering::Relaxed);
        }
        let why = outcome.as_ref().err().map(String::as_str);
        for job in jobs.drain(..) {
            job.finish(why.map_or(Ok(()), Err));
        }
    }
}

/// Runs `jobs` in one transaction, each in its own savepoint. Errors: the message of a failed
/// `BEGIN`/`COMMIT` (everything was rolled back).
fn commit_group(conn: &Connection, jobs: &mut [Box<dyn Job>]) -> std::result::Result<(), String> {
    conn.execute_batch("BEGIN IMMEDIATE").map_err(|e| format!("cannot begin a transaction: {e}"))?;
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
            return Err(format!("transaction aborted: {e}"));
        }
    }
    if let Err(e) = conn.execute_batch("COMMIT") {
        let _ = conn.execute_batch("ROLLBACK");
        return Err(format!("commit failed: {e}"));
    }
    Ok(())
}
