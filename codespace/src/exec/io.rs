//! The tasks around a process: output collection, reaping, the time limit, and stdin writes.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::process::Child;
use tokio::sync::oneshot;

use super::handle::Handle;
use super::Termination;
use spaces_os::process::{read_output, OutputSink};

/// The pipe buffer asked for on a pipe-mode command's output (`F_SETPIPE_SZ`, 1 MiB: the
/// default `/proc/sys/fs/pipe-max-size`). With the default 64 KiB a fast producer fills the pipe
/// whenever the collector is off the CPU for a few tens of µs and then blocks, and every such
/// stall costs it and the collector a wake-up (docs/benchmarks.md, "`read_process` draining a
/// fast producer"). The collector still reads at most [`COLLECT_READ`] at a time, so one push
/// never exceeds half of the default window.
pub(crate) const OUTPUT_PIPE_BYTES: usize = 1024 * 1024;

/// Bytes the collector asks for per `read(2)`: half the default window (256 KiB), so a reader
/// woken by one push finds it whole in the ring.
pub(crate) const COLLECT_READ: usize = 128 * 1024;

/// Read `fd` into the handle's ring until EOF, or until `drain` after `exit` fired (then read
/// what is ready and stop: [`spaces_os::process::read_output`]), then mark collection finished.
pub(crate) async fn collect(handle: Arc<Handle>, fd: Arc<AsyncFd<OwnedFd>>, exit: oneshot::Receiver<()>, drain: Duration) {
    let exited = async move {
        let _ = exit.await;
    };
    let cut_short = read_output(&fd, exited, drain, None, COLLECT_READ, &mut Ring(&handle)).await;
    handle.finish(cut_short);
}

/// The handle's output ring as a place [`read_output`] writes to.
///
/// A push that wakes a waiting `read` is followed by `sched_yield(2)`: the collector offers its
/// CPU so the woken reader runs now, before the collector's next read, not after the rest of
/// the collector's time slice. Without it, on a machine with fewer free cores than busy threads
/// (producer, collector, reader) the woken reader waited 1 to 5 ms for a CPU while the
/// collector went on reading a fast producer at GB/s, and the ring (256 KiB) had moved on by
/// megabytes when it got there (docs/benchmarks.md, "`read_process` draining a fast
/// producer"). The yield does not wait for the reader: with nobody else runnable on this CPU it
/// returns at once, and the collector reads on either way. A reader that is a task on the same
/// runtime worker runs after this poll anyway; the yield matters for one on another thread.
struct Ring<'a>(&'a Handle);

impl OutputSink for Ring<'_> {
    fn push(&mut self, bytes: &[u8]) {
        if self.0.push(bytes) {
            std::thread::yield_now();
        }
    }
}

/// Reap the child, record its status, then tell the collector.
pub(crate) async fn reap(handle: Arc<Handle>, mut child: Child, exited: oneshot::Sender<()>) {
    let status = child.wait().await;
    handle.record_exit(status);
    let _ = exited.send(());
}

/// Stop the process when `limit` passes (termination `timeout`). The limit covers the whole
/// tree: what the process left running in the background when it exited is ended at the limit
/// too (the recorded exit stays).
pub(crate) async fn time_limit(handle: Arc<Handle>, limit: Duration, grace: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(limit) => handle.terminate(Termination::Timeout, grace).await,
        _ = handle.settled() => {}
    }
}
