//! The sandbox's system-call filter, loaded by [`super::enter`] right before the program's exec
//! (with `no_new_privs`, which `seccompiler::apply_filter` sets).
//!
//! Everything is allowed except what a coding agent never needs and what would let a process
//! reach around its namespaces or the host's kernel: loading kernels and modules, eBPF, perf
//! events, `userfaultfd`, the kernel keyring, mounting (a nested user namespace could otherwise
//! build a view of its own), joining other namespaces (`setns`), swap, reboot, the kernel log,
//! process accounting, opening files by handle (the classic container escape), raw port I/O,
//! and pushing input into a terminal (`TIOCSTI`, `TIOCLINUX`): each fails with `EPERM`, the
//! program keeps running. The model is Codex's Linux sandbox and Docker's default profile; the
//! list is short on purpose, since a sandbox a harness cannot run in is one the operator turns
//! off.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule};

/// System calls refused outright.
const DENIED: &[i64] = &[
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_setns,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_syslog,
    libc::SYS_acct,
    libc::SYS_open_by_handle_at,
    libc::SYS_quotactl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// `ioctl` requests refused: faking terminal input.
#[allow(clippy::unnecessary_cast)] // the constants are c_ulong: u64 here, u32 elsewhere
const DENIED_IOCTLS: &[u64] = &[libc::TIOCSTI as u64, libc::TIOCLINUX as u64];

/// The filter for this machine's architecture. Errors: the architecture is not one seccompiler
/// knows (`x86_64`, `aarch64`, `riscv64`), or the filter does not compile (a bug).
pub fn filter() -> Result<BpfProgram, String> {
    let arch = std::env::consts::ARCH.try_into().map_err(|e| format!("no seccomp filter for {}: {e:?}", std::env::consts::ARCH))?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = DENIED.iter().map(|&n| (n, Vec::new())).collect();
    let ioctl = DENIED_IOCTLS
        .iter()
        .map(|&request| {
            SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, request)
                .and_then(|c| SeccompRule::new(vec![c]))
                .map_err(|e| format!("seccomp rule: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_ioctl, ioctl);
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)
        .map_err(|e| format!("seccomp filter: {e}"))?;
    filter.try_into().map_err(|e: seccompiler::BackendError| format!("seccomp filter: {e}"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    #[test]
    fn the_filter_compiles_for_this_machine() {
        let program = super::filter().unwrap();
        assert!(program.len() > super::DENIED.len(), "one test per denied call at least: {}", program.len());
    }
}
