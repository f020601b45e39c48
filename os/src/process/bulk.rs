//! The bulk lane: CPU-heavy work on a large batch runs on threads below the daemon's priority.
//!
//! Under load most of the daemon's CPU goes to the backlog of a few noisy agents: journal
//! records parsed, lines normalized, rows serialized and compressed, a batch at a time. Done on
//! a runtime worker at the daemon's priority, each such batch makes every quiet run's line, every
//! follow-up and every start wait behind it. [`spawn`] moves such a batch to the lane: a pool of
//! long-lived threads (one per CPU, `rayon-core`) at nice [`BULK_NICE`] with the kernel's default
//! time slice (Linux keeps both per thread). Within the daemon's share of the CPU the kernel
//! then runs a woken runtime worker first, and the batch uses what is left. Small batches (a
//! quiet run's line) stay where they are.
//!
//! The caller sends owned work and awaits it, so its runtime worker goes on with its other tasks
//! on the same thread (a noisy run's journal reads, its batches of lines, its chunks). The lane
//! was entered with `block_in_place` before, which hands the worker's core to another thread,
//! started when none is idle: on a cgroup v1 host a thread start waits behind every cgroup move
//! (docs/benchmarks.md, "the bulk lane awaited").
//!
//! The threads live as long as the process: a thread per batch cost its start (a stack mapped
//! and unmapped, a TLB shootdown on every CPU, the priority set again) and a new zstd context
//! for every batch, about a seventh of the lane's CPU under load (docs/benchmarks.md, "Chunked
//! rows and a lasting bulk lane").

use nix::libc;

/// The nice value of the bulk lane's threads (the daemon's is usually 0).
pub const BULK_NICE: i32 = 10;

/// Batches of at least this many records or events go to the bulk lane (a caller's rule of
/// thumb: a quiet run's batch holds one or two).
pub const BULK_MIN_ITEMS: usize = 16;

/// Lower the calling thread (only it) to [`BULK_NICE`], or keep its nice value when it is already
/// lower, with the kernel's default time slice (not the short one of the daemon's threads it
/// may inherit: [`super::priority::ask_short_slice`]). Raising a nice value needs no
/// privilege; a failure leaves the thread as it was.
pub fn lower_this_thread() {
    // SAFETY: gettid has no preconditions.
    super::priority::lower_thread(unsafe { libc::gettid() }, BULK_NICE);
    super::priority::ask_default_slice();
}

/// Whether the caller runs inside a multi-thread tokio runtime, where
/// `tokio::task::block_in_place` may announce a blocking wait (it panics elsewhere).
pub fn on_multi_thread_runtime() -> bool {
    tokio::runtime::Handle::try_current().is_ok_and(|h| matches!(h.runtime_flavor(), tokio::runtime::RuntimeFlavor::MultiThread))
}

/// The lane's threads, started on first use; `None` when they could not be started.
fn pool() -> Option<&'static rayon_core::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon_core::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(2, usize::from);
        rayon_core::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|_| "spacesd-bulk".to_owned())
            .start_handler(|_| lower_this_thread())
            .build()
            .ok()
    })
    .as_ref()
}

/// Run `work` on a thread of the bulk lane and await what it returns, without holding the
/// caller's thread meanwhile: the runtime worker goes on with its other tasks, and no thread
/// takes over its core. `work` must own what it uses: give it its inputs and have it hand them back with its result.
/// A panic in `work` is resumed here. Outside a multi-thread tokio runtime, or when the lane's
/// threads could not be started, `work` runs here, at once.
pub async fn spawn<R: Send + 'static>(work: impl FnOnce() -> R + Send + 'static) -> R {
    let Some(pool) = pool().filter(|_| on_multi_thread_runtime()) else { return work() };
    let (tx, rx) = tokio::sync::oneshot::channel();
    pool.spawn(move || {
        // Caught, so the lane never sees a panic (rayon aborts the process on one).
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)));
    });
    match rx.await {
        Ok(Ok(r)) => r,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        // The lane dropped the job unrun: it only does so while the process exits.
        Err(_) => std::future::pending().await,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn my_nice() -> i32 {
        // SAFETY: plain system calls on integers.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_runs_on_a_lower_priority_thread_and_hands_back_what_it_was_given() {
        let before = my_nice();
        // The caller stands for a daemon thread with a short slice; the bulk thread must not keep it.
        let slice_of = || {
            let text = std::fs::read_to_string("/proc/thread-self/sched").unwrap_or_default();
            text.lines().find_map(|l| l.strip_prefix("se.slice")?.split(':').nth(1)?.trim().parse::<u64>().ok())
        };
        let short = super::super::priority::ask_short_slice();
        let mut seen = Vec::new();
        let (seen, nice, slice) = spawn(move || {
            seen.push(1);
            (seen, my_nice(), slice_of())
        })
        .await;
        assert_eq!(seen, [1]);
        assert!(nice >= BULK_NICE.max(before), "the bulk thread ran at nice {nice}");
        assert_eq!(my_nice(), before, "the caller's own priority is unchanged");
        if short {
            assert_ne!(slice, Some(super::super::priority::SHORT_SLICE_NS), "the bulk thread has the default slice");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_lanes_threads_last_across_batches() {
        let mut ids = Vec::new();
        for _ in 0..20 {
            ids.push(spawn(|| std::thread::current().id()).await);
        }
        ids.sort_by_key(|id| format!("{id:?}"));
        ids.dedup();
        let threads = std::thread::available_parallelism().map_or(2, usize::from);
        assert!(ids.len() <= threads, "20 batches ran on {} threads, not on the lane's {threads}", ids.len());
        assert!(!ids.contains(&std::thread::current().id()));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn on_a_current_thread_runtime_work_runs_in_place() {
        let here = std::thread::current().id();
        assert_eq!(spawn(|| std::thread::current().id()).await, here);
    }

    /// While a spawned batch runs on the lane, the only runtime worker goes on with its other
    /// tasks (it is not blocked, and no other thread took its core), and the batch's result
    /// and its inputs come back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn spawned_work_leaves_the_worker_free_and_hands_back_what_it_was_given() {
        let on_worker = || tokio::spawn(async { std::thread::current().id() });
        let worker = on_worker().await.unwrap();
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let input = vec![1u32, 2, 3];
        let batch = tokio::spawn(spawn(move || {
            wait.recv().unwrap();
            let sum: u32 = input.iter().sum();
            (input, sum, std::thread::current().id())
        }));
        // The batch waits on the lane; other tasks still run on the same worker thread (with
        // `block_in_place` its core would have moved to another thread).
        tokio::task::yield_now().await;
        assert_eq!(on_worker().await.unwrap(), worker, "the worker's core moved to another thread");
        release.send(()).unwrap();
        let (input, sum, lane) = batch.await.unwrap();
        assert_eq!((input, sum), (vec![1, 2, 3], 6));
        assert_ne!(lane, worker);
        assert_eq!(on_worker().await.unwrap(), worker);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_in_the_work_reaches_the_caller() {
        // The default hook would print this deliberate panic and its backtrace in a passing
        // run (issue 32); every other panic still goes to it.
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let deliberate = info.payload().downcast_ref::<&str>().is_some_and(|m| m.contains("a deliberate panic in the bulk lane"));
            if !deliberate {
                default(info);
            }
        }));
        let caught = tokio::spawn(spawn(|| -> u32 {
            panic!("a deliberate panic in the bulk lane (this test checks it reaches the awaiting task)")
        }))
        .await;
        assert!(caught.unwrap_err().is_panic());
    }
}
