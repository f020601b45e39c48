//! Giving freed memory back to the system.
//!
//! The C allocator keeps what a process frees for its next allocations. After a burst (a
//! thousand runs stopped), the daemon's resident memory stayed near its peak although most of
//! it was free (issue 30). [`give_back`] asks glibc to return the free pages of every arena
//! (`malloc_trim(3)`); it is a no-op with another C library.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long [`give_back_soon`] waits before it trims, so a burst of frees is trimmed once.
pub const TRIM_AFTER: Duration = Duration::from_secs(5);

/// Return the free pages of every heap to the system. Blocks for a few milliseconds per
/// hundred MB of heap: call it off the async runtime's workers.
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks and trims the allocator's own free lists; it takes no
    // pointer and is thread-safe in glibc.
    unsafe {
        nix::libc::malloc_trim(0);
    }
}

/// [`give_back`] [`TRIM_AFTER`] from now, on a blocking thread, unless a trim is already
/// waiting (it will see these frees too): for a caller that frees much at times (a run's actor
/// that retired). Needs a Tokio runtime.
pub fn give_back_soon() {
    static WAITING: AtomicBool = AtomicBool::new(false);
    if WAITING.swap(true, Ordering::AcqRel) {
        return;
    }
    tokio::spawn(async {
        tokio::time::sleep(TRIM_AFTER).await;
        // Frees from here on schedule the next trim.
        WAITING.store(false, Ordering::Release);
        let _ = tokio::task::spawn_blocking(give_back).await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory a burst freed is given back: a trim after freeing 64 MiB of small blocks lowers
    /// the process's resident size (glibc keeps it otherwise).
    #[test]
    fn a_trim_gives_back_what_a_burst_freed() {
        let rss = || procfs_rss_kib();
        let blocks: Vec<Vec<u8>> = (0..64 * 1024).map(|i| vec![(i % 251) as u8; 1000]).collect();
        let keep: Vec<Vec<u8>> = blocks.iter().step_by(4096).cloned().collect();
        let full = rss();
        drop(blocks);
        give_back();
        let after = rss();
        assert!(after + 32 * 1024 < full, "resident {full} KiB before the trim, {after} KiB after");
        drop(keep);
    }

    fn procfs_rss_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next()?.parse().ok()).unwrap_or(0)
    }
}
