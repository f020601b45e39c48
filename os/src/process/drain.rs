//! Reading a process's output to its end ([`read_output`]), the one rule for both the daemon's
//! own commands (`exec`) and a shim's raw output: read until EOF; once the process has exited,
//! wait at most a drain time for EOF (a descendant left in the background may hold the output
//! open), then take what is ready, at most [`FINAL_DRAIN_MAX`] more, and stop: the output was
//! cut short.

use std::future::Future;
use std::os::fd::OwnedFd;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::time::{Instant, Interval};

use super::read_now;

/// Bytes a shim asks for per `read(2)` ([`read_output`]'s `read_bytes`): a segment file holds
/// at least this much.
pub const READ_BUF: usize = 64 * 1024;
/// At the drain deadline, read at most this much more (a descendant that never stops writing
/// must not keep collection open forever).
pub const FINAL_DRAIN_MAX: usize = 4 * 1024 * 1024;

/// Where [`read_output`] puts what it reads.
pub trait OutputSink {
    /// The next bytes of the output, in order.
    fn push(&mut self, bytes: &[u8]);
    /// Called every `tick` of [`read_output`] while it reads (to sync a file, say).
    fn tick(&mut self) {}
}

/// Read the non-blocking `fd` into `sink` until EOF, or until `drain` after `exited` resolved
/// (see the module doc), calling [`OutputSink::tick`] every `tick` if given; each `read(2)` asks
/// for up to `read_bytes` (at least 1), so one [`OutputSink::push`] gets at most that many.
/// Returns whether the output was cut short (`false` at EOF or a read error).
pub async fn read_output(
    fd: &AsyncFd<OwnedFd>,
    exited: impl Future<Output = ()>,
    drain: Duration,
    tick: Option<Duration>,
    read_bytes: usize,
    sink: &mut impl OutputSink,
) -> bool {
    let mut buf = vec![0u8; read_bytes.max(1)];
    let mut deadline: Option<Instant> = None;
    let mut ticks = tick.map(tokio::time::interval);
    tokio::pin!(exited);
    loop {
        tokio::select! {
            ready = fd.readable() => {
                let Ok(mut guard) = ready else { return false };
                match read_now(fd.get_ref(), &mut buf) {
                    Ok(None) => guard.clear_ready(),
                    Ok(Some(0)) | Err(_) => return false,
                    Ok(Some(n)) => sink.push(&buf[..n]),
                }
            }
            _ = &mut exited, if deadline.is_none() => deadline = Some(Instant::now() + drain),
            _ = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                return final_drain(fd, &mut buf, sink);
            }
            _ = next_tick(&mut ticks) => sink.tick(),
        }
    }
}

/// What is ready now, at most [`FINAL_DRAIN_MAX`]; true when output was left unread.
fn final_drain(fd: &AsyncFd<OwnedFd>, buf: &mut [u8], sink: &mut impl OutputSink) -> bool {
    let mut budget = FINAL_DRAIN_MAX;
    while budget > 0 {
        match read_now(fd.get_ref(), buf) {
            Ok(Some(n)) if n > 0 => {
                sink.push(&buf[..n]);
                budget = budget.saturating_sub(n);
            }
            Ok(Some(_)) | Err(_) => return false,
            // A descendant still holds the output open: stop here.
            Ok(None) => return true,
        }
    }
    true
}

async fn next_tick(ticks: &mut Option<Interval>) {
    match ticks {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending::<()>().await,
    }
}
