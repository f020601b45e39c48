//! The tasks around a process: output collection, reaping, the time limit, and stdin writes.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::process::Child;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::handle::Handle;
use super::Termination;
use crate::process::read_now;

const READ_BUF: usize = 64 * 1024;
/// At the drain deadline, read at most this much more (a descendant that never stops writing
/// must not keep collection open forever).
const FINAL_DRAIN_MAX: usize = 4 * 1024 * 1024;

/// Read `fd` into the handle's ring until EOF, or until `drain` after `exit` fired (then read
/// what is ready and stop), then mark collection finished.
pub(crate) async fn collect(
    handle: Arc<Handle>,
    fd: Arc<AsyncFd<OwnedFd>>,
    mut exit: oneshot::Receiver<()>,
    drain: Duration,
) {
    let mut buf = vec![0u8; READ_BUF];
    let mut deadline: Option<Instant> = None;
    let mut cut_short = false;
    loop {
        tokio::select! {
            ready = fd.readable() => {
                let Ok(mut guard) = ready else { break };
                match read_now(fd.get_ref(), &mut buf) {
                    Ok(None) => guard.clear_ready(),
                    Ok(Some(0)) | Err(_) => break,
                    Ok(Some(n)) => handle.push(&buf[..n]),
                }
            }
            _ = &mut exit, if deadline.is_none() => {
                deadline = Some(Instant::now() + drain);
            }
            _ = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                let mut budget = FINAL_DRAIN_MAX;
                while budget > 0 {
                    match read_now(fd.get_ref(), &mut buf) {
                        Ok(Some(n)) if n > 0 => {
                            handle.push(&buf[..n]);
                            budget = budget.saturating_sub(n);
                        }
                        Ok(Some(0)) | Err(_) => break,
                        // A descendant still holds the output open: stop here.
                        Ok(None) | Ok(Some(_)) => {
                            cut_short = true;
                            break;
                        }
                    }
                }
                cut_short |= budget == 0;
                break;
            }
        }
    }
    handle.finish(cut_short);
}

/// Reap the child, record its status, then tell the collector.
pub(crate) async fn reap(handle: Arc<Handle>, mut child: Child, exited: oneshot::Sender<()>) {
    let status = child.wait().await;
    handle.record_exit(status);
    let _ = exited.send(());
}

/// Stop the process when `limit` passes (termination `timeout`).
pub(crate) async fn time_limit(handle: Arc<Handle>, limit: Duration, grace: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(limit) => handle.terminate(Termination::Timeout, grace).await,
        _ = handle.exited() => {}
    }
}

/// Why [`write_all`] stopped before the end.
#[derive(Debug)]
pub(crate) enum WriteStop {
    /// The deadline passed while the fd was full (the process is not reading).
    TimedOut,
    /// The write failed (`EPIPE` when the reader is gone).
    Failed(std::io::Error),
}

/// Write all of `data` to a non-blocking fd, waiting for room as needed (partial writes are
/// continued, case E13) but not past `deadline`. `written` counts the bytes that went through,
/// so the caller knows them however the write ends (also when the future is dropped).
pub(crate) async fn write_all(
    fd: &AsyncFd<OwnedFd>,
    data: &[u8],
    written: &mut usize,
    deadline: Instant,
) -> Result<(), WriteStop> {
    while *written < data.len() {
        let mut guard = match tokio::time::timeout_at(deadline, fd.writable()).await {
            Ok(ready) => ready.map_err(WriteStop::Failed)?,
            Err(_) => return Err(WriteStop::TimedOut),
        };
        match nix::unistd::write(fd.get_ref(), &data[*written..]) {
            Ok(n) => *written += n,
            Err(nix::errno::Errno::EAGAIN) => guard.clear_ready(),
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(WriteStop::Failed(e.into())),
        }
    }
    Ok(())
}
