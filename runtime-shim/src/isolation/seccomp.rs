//! The seccomp filter on the sandbox process (the VMM): it may make only
//! the system calls qvisor uses — KVM ioctls, memory management, threads
//! and signals, its stdio, eventfd/signalfd/poll, the control socket, and
//! the file calls it needs on the rootfs and its swap files. Everything
//! else (exec, mount, ptrace, bpf, keyctl, module loading, namespaces, new
//! sockets of other families…) fails with `EPERM`.
//!
//! Failing with an error rather than killing is deliberate while the VMM
//! grows: a call added to qvisor and missing here shows up as an error
//! message, not as a sandbox that vanished. The list was taken from
//! `strace -f` of the test programs (`qrun do`, control requests
//! included) plus the file, socket and timer calls of the design
//! (openat2, epoll, timerfd, fallocate for swap files).

use std::collections::BTreeMap;

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};

use super::IsolationError;

const ALLOWED: &[i64] = &[
    // KVM and devices.
    libc::SYS_ioctl,
    // Memory.
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mprotect,
    libc::SYS_mremap,
    libc::SYS_madvise,
    // Which guest pages are resident (a hibernated sandbox drops its zero
    // pages: `GuestRam::discard_zero_pages`).
    libc::SYS_mincore,
    libc::SYS_brk,
    libc::SYS_mlock,
    libc::SYS_munlock,
    // Threads, signals, time.
    libc::SYS_clone,
    libc::SYS_clone3,
    libc::SYS_futex,
    libc::SYS_set_robust_list,
    libc::SYS_rseq,
    libc::SYS_set_tid_address,
    libc::SYS_exit,
    libc::SYS_exit_group,
    libc::SYS_gettid,
    libc::SYS_getpid,
    libc::SYS_tgkill,
    libc::SYS_tkill,
    libc::SYS_rt_sigaction,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigreturn,
    // How the kernel resumes an interrupted poll or sleep with a timeout
    // (after a stop, a ptrace attach or a thawed freezer).
    libc::SYS_restart_syscall,
    libc::SYS_rt_sigtimedwait,
    libc::SYS_sigaltstack,
    libc::SYS_signalfd4,
    libc::SYS_eventfd2,
    libc::SYS_sched_getaffinity,
    libc::SYS_sched_yield,
    libc::SYS_getrandom,
    libc::SYS_prlimit64,
    libc::SYS_clock_gettime,
    libc::SYS_clock_nanosleep,
    libc::SYS_nanosleep,
    libc::SYS_timerfd_create,
    libc::SYS_timerfd_settime,
    libc::SYS_timerfd_gettime,
    libc::SYS_getuid,
    libc::SYS_geteuid,
    libc::SYS_getgid,
    libc::SYS_getegid,
    libc::SYS_uname,
    libc::SYS_prctl,
    libc::SYS_arch_prctl,
    // I/O multiplexing.
    libc::SYS_poll,
    libc::SYS_ppoll,
    libc::SYS_epoll_create1,
    libc::SYS_epoll_ctl,
    libc::SYS_epoll_wait,
    libc::SYS_epoll_pwait,
    libc::SYS_epoll_pwait2,
    // Files (stdio, rootfs, swap and REAP files, the exit file).
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_readv,
    libc::SYS_writev,
    libc::SYS_pread64,
    libc::SYS_pwrite64,
    libc::SYS_preadv,
    libc::SYS_pwritev,
    libc::SYS_preadv2,
    libc::SYS_pwritev2,
    libc::SYS_lseek,
    libc::SYS_open,
    libc::SYS_openat,
    libc::SYS_openat2,
    libc::SYS_close,
    libc::SYS_dup,
    libc::SYS_dup3,
    libc::SYS_fcntl,
    libc::SYS_fstat,
    libc::SYS_newfstatat,
    libc::SYS_statx,
    libc::SYS_access,
    libc::SYS_faccessat,
    libc::SYS_faccessat2,
    libc::SYS_readlinkat,
    libc::SYS_getdents64,
    libc::SYS_getcwd,
    libc::SYS_fallocate,
    libc::SYS_ftruncate,
    libc::SYS_fsync,
    libc::SYS_fdatasync,
    // The guest's statfs/fstatfs and sync/syncfs.
    libc::SYS_fstatfs,
    libc::SYS_syncfs,
    libc::SYS_unlink,
    libc::SYS_unlinkat,
    libc::SYS_rename,
    libc::SYS_renameat,
    libc::SYS_renameat2,
    libc::SYS_mkdirat,
    libc::SYS_symlinkat,
    libc::SYS_linkat,
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_fchown,
    libc::SYS_fchownat,
    libc::SYS_utimensat,
    libc::SYS_sendfile,
    libc::SYS_umask,
    libc::SYS_pipe2,
    // Sockets (the control socket; the guest's sockets).
    libc::SYS_socket,
    libc::SYS_socketpair,
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_accept4,
    libc::SYS_connect,
    libc::SYS_sendto,
    libc::SYS_recvfrom,
    libc::SYS_sendmsg,
    libc::SYS_recvmsg,
    libc::SYS_shutdown,
    libc::SYS_setsockopt,
    libc::SYS_getsockopt,
    libc::SYS_getsockname,
    libc::SYS_getpeername,
];

/// The compiled filter; `mount` and `umount2` too when `bind_mounts` (the VMM keeps
/// CAP_SYS_ADMIN: the guest's bind mounts, `sys_mount` in the guest).
pub fn program(bind_mounts: bool) -> Result<BpfProgram, IsolationError> {
    let extra: &[i64] = if bind_mounts {
        &[libc::SYS_mount, libc::SYS_umount2]
    } else {
        &[]
    };
    let rules: BTreeMap<i64, Vec<seccompiler::SeccompRule>> = ALLOWED
        .iter()
        .chain(extra)
        .map(|n| (*n, Vec::new()))
        .collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        TargetArch::x86_64,
    )
    .map_err(|e| IsolationError::Setup(format!("seccomp filter: {e}")))?;
    filter.try_into().map_err(|e: seccompiler::BackendError| {
        IsolationError::Setup(format!("seccomp filter: {e}"))
    })
}

/// Installs the filter on this (still single-threaded) process.
pub fn apply(bind_mounts: bool) -> Result<(), IsolationError> {
    let prog = program(bind_mounts)?;
    seccompiler::apply_filter(&prog).map_err(|e| IsolationError::Setup(format!("seccomp: {e}")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_filter_compiles() {
        assert!(super::program(false).is_ok_and(|p| !p.is_empty()));
        assert!(super::program(true).is_ok_and(|p| !p.is_empty()));
    }
}
