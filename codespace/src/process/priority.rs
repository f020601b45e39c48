//! The CPU priority of agents and commands below the daemon's.
//!
//! On a busy host the agents a daemon supervises (and the commands they run) can use every core;
//! then each hop of a quiet run's line, a follow-up or a start waits for a CPU behind them. So
//! agents and commands run below the daemon and its shims: at `nice` [`agent_nice`] (default
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
