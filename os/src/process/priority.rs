//! The CPU priority of agents and commands below the daemon's.
//!
//! On a busy host the agents a daemon supervises (and the commands they run) can use every core;
//! then each hop of a quiet run's line, a follow-up or a start waits for a CPU behind them. So
//! agents and commands run below the daemon and its shims (a busy tree's shim goes with it): at `nice` [`agent_nice`] (default
//! [`DEFAULT_AGENT_NICE`]; `SPACES_AGENT_NICE` / `agent_nice` in the daemon's config, 0 turns
//! it off). Under a shim (every run's agent, `exec_command` where shims are available) a process
//! starts at the daemon's priority and its tree is lowered once it proves CPU-hungry
//! ([`super::demote`]): one that mostly waits, for the model or for a follow-up, then starts and
//! answers as fast as the daemon. Without a shim (a command run directly, a harness install) it
//! starts at [`agent_nice`] (`lower_in_child`, between fork and exec). Each such process leads
//! its own session, and with the kernel's autogroup scheduling
//! (`/proc/sys/kernel/sched_autogroup_enabled`) a session's weight comes from its autogroup, not
//! from `nice`: its autogroup gets the same nice value (`/proc/self/autogroup`). Raising a nice value needs no privilege; a failure to set it
//! leaves the process at the daemon's priority and is not an error. Measured in
//! docs/benchmarks.md ("The hot path under load").

use std::sync::atomic::{AtomicI32, Ordering};

use nix::libc;

/// The default nice value of agents and commands (the daemon's is unchanged, usually 0).
pub const DEFAULT_AGENT_NICE: i32 = 10;

static AGENT_NICE: AtomicI32 = AtomicI32::new(DEFAULT_AGENT_NICE);

/// The nice value agents and commands run at once lowered: 0 (as the daemon) to 19 (lowest).
pub fn agent_nice() -> i32 {
    AGENT_NICE.load(Ordering::Relaxed)
}

/// Set [`agent_nice`] for processes started from now on (clamped to 0..=19).
pub fn set_agent_nice(nice: i32) {
    AGENT_NICE.store(nice.clamp(0, 19), Ordering::Relaxed);
}

/// In a forked child before exec, after `setsid`: lower this process's priority and its new
/// autogroup's to `nice` (> 0), or keep the inherited one when it is already lower. Only
/// async-signal-safe system calls on stack values; errors are ignored (see the module doc).
///
/// # Safety
/// Called between fork and exec only (see [`super::spawn`]'s `pre_exec` note).
pub(super) unsafe fn lower_in_child(nice: i32) {
    if nice <= 0 {
        return;
    }
    // SAFETY: plain system calls on integers and static or stack buffers.
    unsafe {
        // Never above the daemon's own priority (root could raise it): at least its nice value.
        let nice = nice.min(19).max(libc::getpriority(libc::PRIO_PROCESS, 0));
        libc::setpriority(libc::PRIO_PROCESS, 0, nice);
        let fd = libc::open(c"/proc/self/autogroup".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd >= 0 {
            let digits = [b'0' + (nice / 10) as u8, b'0' + (nice % 10) as u8];
            let text: &[u8] = if nice >= 10 { &digits } else { &digits[1..] };
            libc::write(fd, text.as_ptr().cast(), text.len());
            libc::close(fd);
        }
    }
}

/// Lower thread `tid` (a thread id; a process id names its main thread) to `nice`, or keep it
/// where it is when it is already lower: a priority is never raised. Raising a nice value needs
/// no privilege; a failure leaves the thread as it was and is not an error.
pub fn lower_thread(tid: i32, nice: i32) {
    // SAFETY: plain system calls on integers.
    unsafe {
        *libc::__errno_location() = 0;
        let current = libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t);
        if *libc::__errno_location() == 0 && current < nice {
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice);
        }
    }
}

/// The time slice asked for by [`ask_short_slice`], in ns: the shortest the kernel allows.
pub const SHORT_SLICE_NS: u64 = 100_000;

/// Ask the kernel's EEVDF scheduler (Linux 6.12 and later) for a short time slice for the calling
/// thread (only it): [`SHORT_SLICE_NS`] instead of the default (1.4 ms on 2 cores). A thread
/// with a shorter slice gets an earlier deadline, so on waking it preempts a CPU-bound task
/// with a longer one instead of waiting for that task's slice to end; its share of the CPU
/// stays what its nice value gives. `sched_setattr(2)` with `SCHED_OTHER`, the thread's nice
/// value unchanged and `sched_runtime` as the slice; it needs no privilege. Threads and
/// processes it starts inherit the slice: the bulk lane's threads ([`super::bulk`]) and the
/// processes of [`super::spawn`] take the default back ([`ask_default_slice`]). Returns whether
/// the kernel took the request; older kernels ignore the slice. A failure leaves the thread as
/// it was and is not an error.
pub fn ask_short_slice() -> bool {
    set_slice(SHORT_SLICE_NS)
}

/// Give the calling thread the kernel's default time slice back (see [`ask_short_slice`]).
/// Only system calls on stack values: safe between fork and exec. Returns whether the kernel
/// took it.
pub fn ask_default_slice() -> bool {
    set_slice(0)
}

/// `sched_setattr(2)` of the calling thread: `SCHED_OTHER` at its current nice value, with
/// `runtime_ns` as its slice (0: the default).
fn set_slice(runtime_ns: u64) -> bool {
    /// `struct sched_attr` as of its first version (`SCHED_ATTR_SIZE_VER0`, 48 bytes).
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        sched_policy: u32,
        sched_flags: u64,
        sched_nice: i32,
        sched_priority: u32,
        sched_runtime: u64,
        sched_deadline: u64,
        sched_period: u64,
    }
    // SAFETY: plain system calls; `attr` is a valid, fully initialised `sched_attr` of the size
    // it states, alive for the call.
    unsafe {
        let tid = libc::gettid();
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t);
        if *libc::__errno_location() != 0 {
            return false;
        }
        let attr = SchedAttr {
            size: std::mem::size_of::<SchedAttr>() as u32,
            sched_policy: libc::SCHED_OTHER as u32,
            sched_flags: 0,
            sched_nice: nice,
            sched_priority: 0,
            sched_runtime: runtime_ns,
            sched_deadline: 0,
            sched_period: 0,
        };
        libc::syscall(libc::SYS_sched_setattr, tid, &attr as *const SchedAttr, 0u32) == 0
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// `se.slice` of the calling thread in `/proc/thread-self/sched`, in ns (kernels with EEVDF).
    fn slice_of_this_thread() -> Option<u64> {
        let text = std::fs::read_to_string("/proc/thread-self/sched").unwrap();
        text.lines().find_map(|l| l.strip_prefix("se.slice")?.split(':').nth(1)?.trim().parse().ok())
    }

    #[test]
    fn a_thread_that_asks_for_a_short_slice_gets_it_keeps_its_nice_value_and_can_give_it_back() {
        std::thread::spawn(|| {
            // SAFETY: plain system calls on integers.
            let nice_before = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
            let default = slice_of_this_thread();
            let took = ask_short_slice();
            let nice_after = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
            assert_eq!(nice_after, nice_before, "the nice value is unchanged");
            match default {
                // An EEVDF kernel shows each thread's slice: the request took, and shows.
                Some(default) => {
                    assert!(took, "sched_setattr refused the slice: {}", std::io::Error::last_os_error());
                    assert_eq!(slice_of_this_thread(), Some(SHORT_SLICE_NS), "the default was {default} ns");
                    // A thread started from here inherits it, and can give it back.
                    let child =
                        std::thread::spawn(|| (slice_of_this_thread(), ask_default_slice(), slice_of_this_thread())).join().unwrap();
                    assert_eq!(
                        child,
                        (Some(SHORT_SLICE_NS), true, Some(default)),
                        "a new thread inherits the slice; the default comes back"
                    );
                }
                // An older kernel has no per-thread slice to show or to set.
                None => assert!(!took || slice_of_this_thread().is_none()),
            }
        })
        .join()
        .unwrap();
    }
}
