//! The seccomp side of the sandbox: whether the kernel has seccomp, and the BPF filters a child
//! installs against new processes, sockets and kernel-state changes.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Whether the kernel has seccomp: `PR_GET_SECCOMP` fails with `EINVAL` without it.
pub(super) fn seccomp_available() -> bool {
    rustix::thread::secure_computing_mode().is_ok()
}

/// The seccomp filter: default allow; no new processes (`fork`, `vfork`, `clone` without
/// `CLONE_THREAD` ⇒ `EPERM`; `clone3` ⇒ `ENOSYS`, so libc falls back to `clone`), no sockets
/// (`socket` ⇒ `EACCES`; `socketpair` stays for event loops' self-pipes), no `io_uring` (it
/// would bypass the filter; libuv falls back on `ENOSYS`), and none of the calls that change
/// namespaces, mounts, kernel state or trace other processes.
///
/// Syscall numbers come from `libc`'s tables: neither rustix nor seccompiler exports them.
pub(super) fn build_filter() -> Result<Vec<BpfProgram>, seccompiler::BackendError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)?;
    let errno = |e: rustix::io::Errno| e.raw_os_error() as u32;
    let eperm = errno(rustix::io::Errno::PERM);
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let clone_without_thread = SeccompRule::new(vec![SeccompCondition::new(
        0,
        SeccompCmpArgLen::Qword,
        SeccompCmpOp::MaskedEq(libc::CLONE_THREAD as u64),
        0,
    )?])?;
    rules.insert(libc::SYS_clone, vec![clone_without_thread]);
    let denied: &[i64] = &[
        #[cfg(target_arch = "x86_64")]
        libc::SYS_fork,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_vfork,
        libc::SYS_execveat,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_kexec_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_reboot,
    ];
    for &nr in denied {
        rules.insert(nr, Vec::new());
    }
    let mut errno_rules: BTreeMap<i64, (u32, Vec<SeccompRule>)> =
        rules.into_iter().map(|(nr, r)| (nr, (eperm, r))).collect();
    let enosys = errno(rustix::io::Errno::NOSYS);
    errno_rules.insert(libc::SYS_clone3, (enosys, Vec::new()));
    errno_rules.insert(libc::SYS_io_uring_setup, (enosys, Vec::new()));
    errno_rules.insert(
        libc::SYS_socket,
        (errno(rustix::io::Errno::ACCESS), Vec::new()),
    );
    // One seccompiler filter has one match action: one filter per errno. The kernel runs every
    // installed filter and takes the most restrictive answer.
    let mut by_errno: BTreeMap<u32, BTreeMap<i64, Vec<SeccompRule>>> = BTreeMap::new();
    for (nr, (errno, r)) in errno_rules {
        by_errno.entry(errno).or_default().insert(nr, r);
    }
    by_errno
        .into_iter()
        .map(|(errno, rules)| {
            let filter = SeccompFilter::new(
                rules,
                SeccompAction::Allow,
                SeccompAction::Errno(errno),
                arch,
            )?;
            filter.try_into()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_compiles_for_this_machine() {
        let filters = build_filter().unwrap();
        assert_eq!(
            filters.len(),
            3,
            "one filter per errno: EPERM, EACCES, ENOSYS"
        );
        assert!(filters.iter().all(|f| !f.is_empty()));
    }
}
