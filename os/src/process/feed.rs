//! Writing to a process's stdin without blocking: the one loop both `write_stdin`
//! (`spaces-codespace`'s exec table) and the shim's raw input use.

use std::os::fd::OwnedFd;

use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

/// Why [`write_all`] stopped before the end.
#[derive(Debug)]
pub enum WriteStop {
    /// The deadline passed while the fd was full (the process is not reading).
    TimedOut,
    /// The write failed (`EPIPE` when the reader is gone).
    Failed(std::io::Error),
}

/// Write all of `data` to a non-blocking fd, waiting for room as needed (partial writes are
/// continued, case E13) but not past `deadline`. `written` counts the bytes that went through,
/// so the caller knows them however the write ends (also when the future is dropped).
///
/// Errors: [`WriteStop::TimedOut`] at the deadline, [`WriteStop::Failed`] with the OS's error.
pub async fn write_all(fd: &AsyncFd<OwnedFd>, data: &[u8], written: &mut usize, deadline: Instant) -> Result<(), WriteStop> {
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
