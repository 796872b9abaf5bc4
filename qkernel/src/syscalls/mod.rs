//! The syscall table: one declarative list recording, next to each
//! handler, its support level and a note (after gVisor's `linux64.go`).
//! Anything not in the table returns `ENOSYS` and is logged once by name.

mod attrs;
pub mod cputime;
pub mod epoll_guest;
mod rw;
mod sys_bridge;
mod sys_caps;
pub mod sys_exec;
mod sys_file;
mod sys_futex;
mod sys_ids;
mod sys_ifreq;
mod sys_info;
mod sys_kill;
mod sys_legacy;
mod sys_mm;
mod sys_mount;
mod sys_mqueue;
mod sys_path;
mod sys_poll;
mod sys_prctl;
mod sys_proc;
mod sys_scm;
mod sys_signal;
mod sys_socket;
mod sys_stat;
mod sys_surface;
mod sys_sync;
mod sys_task;
mod sys_time;
mod sys_ucred;
mod sys_unshare;
mod sys_xattr;

use core::sync::atomic::{AtomicU64, Ordering};

pub use attrs::no_new_privs;
pub use sys_futex::key as futex_key;
pub use sys_proc::{nofile, rlimit};
pub use sys_ucred::closed as unix_closed;

use qlib::syscall_names;

use crate::errno::{Errno, SysResult};
use crate::process::{self, Process};

/// A handler: the process and the six argument registers.
pub type Handler = fn(&mut Process, &[u64; 6]) -> SysResult;

/// How complete a syscall is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Behaves as on Linux.
    Full,
    /// Works for the common cases; the note says what is missing.
    Partial,
    /// Accepted and recorded, with no effect yet.
    Stub,
}

/// One table entry.
#[derive(Clone, Copy)]
pub struct Entry {
    /// Syscall number.
    pub nr: usize,
    /// The handler.
    pub handler: Handler,
    /// Support level.
    pub support: Support,
    /// What is missing or special.
    pub note: &'static str,
}

const fn e(nr: usize, handler: Handler, support: Support, note: &'static str) -> Entry {
    Entry {
        nr,
        handler,
        support,
        note,
    }
}

use Support::{Full, Partial, Stub};

/// The syscalls implemented so far.
pub static ENTRIES: &[Entry] = &[
    e(0, sys_file::read, Full, ""),
    e(1, sys_file::write, Full, ""),
    e(2, sys_file::open, Full, "paths resolve inside the rootfs"),
    e(3, sys_file::close, Full, ""),
    e(4, sys_stat::stat, Full, ""),
    e(5, sys_stat::fstat, Full, ""),
    e(6, sys_stat::lstat, Full, ""),
    e(7, sys_poll::poll, Full, "waits in the VMM"),
    e(8, sys_file::lseek, Full, ""),
    e(
        9,
        sys_mm::mmap,
        Partial,
        "files MAP_PRIVATE (read at map time)",
    ),
    e(10, sys_mm::mprotect, Full, ""),
    e(11, sys_mm::munmap, Full, ""),
    e(12, sys_mm::brk, Full, ""),
    e(
        13,
        sys_signal::rt_sigaction,
        Full,
        "handlers run (signal::deliver)",
    ),
    e(14, sys_signal::rt_sigprocmask, Full, ""),
    e(
        15,
        sys_signal::rt_sigreturn,
        Full,
        "served by trap::syscall_handler, which has the registers",
    ),
    e(
        16,
        sys_file::ioctl,
        Partial,
        "TCGETS, TIOCGWINSZ, FIONREAD, FIONBIO, FIOCLEX",
    ),
    e(17, sys_file::pread64, Full, ""),
    e(18, sys_file::pwrite64, Full, ""),
    e(19, sys_file::readv, Full, ""),
    e(20, sys_file::writev, Full, ""),
    e(21, sys_stat::access, Full, ""),
    e(22, sys_poll::pipe, Full, "guest pipe"),
    e(23, sys_poll::select, Full, "waits in the VMM"),
    e(
        24,
        sys_task::sched_yield,
        Full,
        "runs the other runnable tasks",
    ),
    e(25, sys_mm::mremap, Partial, "anonymous mappings"),
    e(
        26,
        sys_surface::msync,
        Full,
        "writes shared file mappings back",
    ),
    e(
        28,
        sys_mm::madvise,
        Partial,
        "DONTNEED/FREE drop pages; the rest are hints",
    ),
    e(32, sys_file::dup, Full, ""),
    e(33, sys_file::dup2, Full, ""),
    e(34, sys_kill::pause, Full, ""),
    e(35, sys_time::nanosleep, Full, "the vCPU sleeps in the host"),
    e(36, sys_time::getitimer, Full, ""),
    e(37, sys_time::alarm, Full, "a host timerfd posts SIGALRM"),
    e(
        38,
        sys_time::setitimer,
        Partial,
        "VIRTUAL/PROF go off at the first accounting point after (a slice)",
    ),
    e(39, sys_task::getpid, Full, ""),
    e(40, sys_file::sendfile, Partial, "between host fds"),
    e(
        41,
        sys_socket::socket,
        Full,
        "AF_INET, AF_INET6, AF_UNIX host sockets",
    ),
    e(42, sys_socket::connect, Full, ""),
    e(43, sys_socket::accept, Full, ""),
    e(44, sys_socket::sendto, Full, ""),
    e(45, sys_socket::recvfrom, Full, ""),
    e(
        46,
        sys_socket::sendmsg,
        Partial,
        "SCM_RIGHTS (16 fds at most)",
    ),
    e(
        47,
        sys_socket::recvmsg,
        Partial,
        "SCM_RIGHTS; no SCM_CREDENTIALS",
    ),
    e(48, sys_socket::shutdown, Full, ""),
    e(49, sys_socket::bind, Full, ""),
    e(50, sys_socket::listen, Full, ""),
    e(51, sys_socket::getsockname, Full, ""),
    e(52, sys_socket::getpeername, Full, ""),
    e(53, sys_socket::socketpair, Full, "AF_UNIX"),
    e(54, sys_socket::setsockopt, Full, "values up to 256 bytes"),
    e(55, sys_socket::getsockopt, Full, "values up to 256 bytes"),
    e(
        56,
        sys_task::sys_clone,
        Partial,
        "threads need CLONE_FILES and CLONE_FS",
    ),
    e(57, sys_task::sys_fork, Full, "copy-on-write"),
    e(
        58,
        sys_task::sys_vfork,
        Partial,
        "shares through mmshare if the parent has threads",
    ),
    e(
        59,
        sys_exec::execve,
        Full,
        "one thread; set-user-ID bits not honoured",
    ),
    e(60, sys_task::sys_exit, Full, "the calling thread"),
    e(61, sys_task::wait4, Full, ""),
    e(62, sys_task::kill, Full, ""),
    e(63, sys_proc::uname, Full, ""),
    e(
        72,
        sys_file::fcntl,
        Partial,
        "record locks always granted (one process)",
    ),
    e(
        73,
        sys_proc::sched_yield,
        Stub,
        "flock: one process, always granted",
    ),
    e(74, sys_sync::fsync, Full, "host fsync"),
    e(75, sys_sync::fdatasync, Full, "host fdatasync"),
    e(76, sys_path::truncate, Full, ""),
    e(77, sys_file::ftruncate, Full, ""),
    e(78, sys_legacy::getdents, Full, "getdents64's entries"),
    e(79, sys_path::getcwd, Full, ""),
    e(80, sys_path::chdir, Full, ""),
    e(81, sys_path::fchdir, Full, ""),
    e(82, sys_path::rename, Full, ""),
    e(83, sys_path::mkdir, Full, ""),
    e(84, sys_path::rmdir, Full, ""),
    e(85, sys_file::creat, Full, ""),
    e(86, sys_path::link, Full, ""),
    e(87, sys_path::unlink, Full, ""),
    e(88, sys_path::symlink, Full, ""),
    e(89, sys_path::readlink, Full, ""),
    e(90, sys_path::chmod, Full, ""),
    e(91, sys_path::fchmod, Full, ""),
    e(92, sys_path::chown, Full, ""),
    e(93, sys_path::fchown, Full, ""),
    e(94, sys_path::lchown, Full, ""),
    e(95, sys_path::umask, Full, ""),
    e(96, sys_time::gettimeofday, Full, ""),
    e(97, sys_proc::getrlimit, Partial, "as prlimit64"),
    e(
        98,
        sys_info::getrusage,
        Partial,
        "CPU times and RSS; no fault or I/O counts",
    ),
    e(99, sys_info::sysinfo, Full, ""),
    e(100, sys_info::times, Full, ""),
    e(102, sys_proc::getuid, Full, ""),
    e(
        103,
        sys_info::syslog,
        Full,
        "EPERM: not the container's log",
    ),
    e(104, sys_proc::getgid, Full, ""),
    e(
        105,
        sys_ids::setuid,
        Partial,
        "the saved id follows the effective one",
    ),
    e(
        106,
        sys_ids::setgid,
        Partial,
        "the saved id follows the effective one",
    ),
    e(107, sys_proc::geteuid, Full, ""),
    e(108, sys_proc::getegid, Full, ""),
    e(109, sys_task::setpgid, Full, ""),
    e(110, sys_task::getppid, Full, "0 for pid 1"),
    e(111, sys_task::getpgrp, Full, ""),
    e(112, sys_task::setsid, Full, ""),
    e(
        113,
        sys_ids::setreuid,
        Partial,
        "the saved id follows the effective one",
    ),
    e(
        114,
        sys_ids::setregid,
        Partial,
        "the saved id follows the effective one",
    ),
    e(115, sys_ids::getgroups, Full, ""),
    e(116, sys_ids::setgroups, Full, "root only (CAP_SETGID)"),
    e(
        117,
        sys_ids::setresuid,
        Partial,
        "the saved id follows the effective one",
    ),
    e(118, sys_ids::getresuid, Full, ""),
    e(
        119,
        sys_ids::setresgid,
        Partial,
        "the saved id follows the effective one",
    ),
    e(120, sys_ids::getresgid, Full, ""),
    e(121, sys_task::getpgid, Full, ""),
    e(124, sys_task::getsid, Full, ""),
    e(
        125,
        sys_caps::capget,
        Partial,
        "the caller's own process only",
    ),
    e(
        126,
        sys_caps::capset,
        Partial,
        "the caller's own process only",
    ),
    e(127, sys_signal::rt_sigpending, Full, ""),
    e(128, sys_kill::rt_sigtimedwait, Full, ""),
    e(130, sys_kill::rt_sigsuspend, Full, ""),
    e(
        131,
        sys_signal::sigaltstack,
        Partial,
        "SS_AUTODISARM ignored",
    ),
    e(132, sys_legacy::utime, Full, "as utimensat"),
    e(
        133,
        sys_surface::mknod,
        Partial,
        "FIFOs, regular files; devices EPERM",
    ),
    e(
        135,
        sys_info::personality,
        Partial,
        "recorded; flags have no effect",
    ),
    e(137, sys_info::statfs, Full, "the rootfs's host filesystem"),
    e(138, sys_info::fstatfs, Full, ""),
    e(140, sys_ids::getpriority, Full, "one process"),
    e(141, sys_ids::setpriority, Full, "no CAP_SYS_NICE"),
    e(142, sys_ids::sched_setparam, Full, ""),
    e(143, sys_ids::sched_getparam, Full, ""),
    e(144, sys_ids::sched_setscheduler, Full, "real-time: EPERM"),
    e(145, sys_ids::sched_getscheduler, Full, ""),
    e(146, sys_ids::sched_get_priority_max, Full, ""),
    e(147, sys_ids::sched_get_priority_min, Full, ""),
    e(148, sys_ids::sched_rr_get_interval, Full, "100 ms"),
    e(
        157,
        sys_prctl::prctl,
        Partial,
        "common options; others EINVAL",
    ),
    e(158, sys_proc::arch_prctl, Partial, "FS and GS base"),
    e(160, sys_proc::setrlimit, Partial, "as prlimit64"),
    e(
        161,
        sys_surface::chroot,
        Partial,
        "to / only; elsewhere EPERM",
    ),
    e(162, sys_sync::sync, Full, "syncfs of the rootfs"),
    e(164, sys_info::set_time, Full, "EPERM: no CAP_SYS_TIME"),
    e(
        165,
        sys_mount::mount,
        Partial,
        "bind mounts inside the rootfs with CAP_SYS_ADMIN; other file systems ENODEV",
    ),
    e(
        166,
        sys_mount::umount2,
        Partial,
        "mounts inside the rootfs with CAP_SYS_ADMIN; a final symlink is not followed",
    ),
    e(
        170,
        sys_surface::sethostname,
        Full,
        "the sandbox's UTS namespace; EPERM without CAP_SYS_ADMIN",
    ),
    e(
        171,
        sys_surface::setdomainname,
        Full,
        "the sandbox's UTS namespace; EPERM without CAP_SYS_ADMIN",
    ),
    e(186, sys_task::gettid, Full, ""),
    e(191, sys_xattr::path_xattr, Stub, "EOPNOTSUPP: no xattrs"),
    e(192, sys_xattr::path_xattr, Stub, "EOPNOTSUPP: no xattrs"),
    e(193, sys_xattr::fd_xattr, Stub, "EOPNOTSUPP: no xattrs"),
    e(194, sys_xattr::path_xattr, Stub, "EOPNOTSUPP: no xattrs"),
    e(195, sys_xattr::path_xattr, Stub, "EOPNOTSUPP: no xattrs"),
    e(196, sys_xattr::fd_xattr, Stub, "EOPNOTSUPP: no xattrs"),
    e(200, sys_task::tkill, Full, ""),
    e(201, sys_time::time, Full, ""),
    e(
        202,
        sys_futex::futex,
        Partial,
        "no priority-inheritance ops (ENOSYS)",
    ),
    e(
        203,
        sys_task::sched_setaffinity,
        Partial,
        "CPU 0 alone pins; no pinning to a secondary",
    ),
    e(
        204,
        sys_task::sched_getaffinity,
        Full,
        "the vCPUs that run tasks",
    ),
    e(213, sys_poll::epoll_create, Full, ""),
    e(217, sys_file::getdents64, Full, ""),
    e(218, sys_proc::set_tid_address, Full, ""),
    e(221, sys_xattr::fadvise64, Stub, "advice ignored"),
    e(227, sys_info::set_time, Full, "EPERM: no CAP_SYS_TIME"),
    e(228, sys_time::clock_gettime, Full, ""),
    e(229, sys_time::clock_getres, Full, ""),
    e(230, sys_time::clock_nanosleep, Full, ""),
    e(231, sys_task::exit_group, Full, ""),
    e(232, sys_poll::epoll_wait, Full, "waits in the VMM"),
    e(
        233,
        sys_poll::epoll_ctl,
        Full,
        "host fds only (EPERM otherwise)",
    ),
    e(234, sys_task::tgkill, Full, ""),
    e(235, sys_legacy::utimes, Full, "as utimensat"),
    e(
        240,
        sys_mqueue::mq_open,
        Partial,
        "guest queues; no permission checks",
    ),
    e(241, sys_mqueue::mq_unlink, Full, ""),
    e(242, sys_mqueue::mq_timedsend, Full, ""),
    e(243, sys_mqueue::mq_timedreceive, Full, ""),
    e(
        244,
        sys_mqueue::mq_notify,
        Partial,
        "SIGEV_SIGNAL, SIGEV_NONE",
    ),
    e(245, sys_mqueue::mq_getsetattr, Full, ""),
    e(
        247,
        sys_task::waitid,
        Partial,
        "P_ALL, P_PID, P_PGID; no P_PIDFD",
    ),
    e(251, sys_ids::ioprio_set, Full, "recorded; RT: EPERM"),
    e(252, sys_ids::ioprio_get, Full, ""),
    e(
        257,
        sys_file::openat,
        Full,
        "paths resolve inside the rootfs",
    ),
    e(258, sys_path::mkdirat, Full, ""),
    e(
        259,
        sys_surface::mknodat,
        Partial,
        "FIFOs, regular files; devices EPERM",
    ),
    e(260, sys_path::fchownat, Full, ""),
    e(261, sys_legacy::futimesat, Full, "as utimensat"),
    e(262, sys_stat::newfstatat, Full, ""),
    e(263, sys_path::unlinkat, Full, ""),
    e(264, sys_path::renameat, Full, ""),
    e(265, sys_path::linkat, Partial, "flags ignored"),
    e(266, sys_path::symlinkat, Full, ""),
    e(267, sys_path::readlinkat, Full, ""),
    e(268, sys_path::fchmodat, Full, ""),
    e(269, sys_stat::faccessat, Full, ""),
    e(270, sys_poll::pselect6, Full, ""),
    e(271, sys_poll::ppoll, Full, ""),
    e(
        272,
        sys_unshare::unshare,
        Partial,
        "CLONE_FILES, CLONE_FS; namespaces EPERM",
    ),
    e(
        273,
        sys_proc::set_robust_list,
        Full,
        "released at thread exit",
    ),
    e(274, sys_proc::get_robust_list, Partial, "own thread only"),
    e(280, sys_path::utimensat, Full, ""),
    e(281, sys_poll::epoll_pwait, Full, ""),
    e(283, sys_poll::timerfd_create, Full, "host timerfd"),
    e(284, sys_poll::eventfd, Full, "host eventfd"),
    e(285, sys_surface::fallocate, Full, "host fallocate"),
    e(286, sys_poll::timerfd_settime, Full, ""),
    e(287, sys_poll::timerfd_gettime, Full, ""),
    e(288, sys_socket::accept4, Full, ""),
    e(290, sys_poll::eventfd2, Full, "host eventfd"),
    e(291, sys_poll::epoll_create1, Full, "host epoll"),
    e(292, sys_file::dup3, Full, ""),
    e(293, sys_poll::pipe2, Full, "guest pipe"),
    e(295, sys_file::preadv, Full, ""),
    e(296, sys_file::pwritev, Full, ""),
    e(
        299,
        sys_socket::recvmmsg,
        Partial,
        "as with MSG_WAITFORONE: never waits after the first datagram",
    ),
    e(
        302,
        sys_proc::prlimit64,
        Partial,
        "one set for the sandbox; RLIMIT_NOFILE enforced, others reported",
    ),
    e(306, sys_sync::syncfs, Full, ""),
    e(
        307,
        sys_socket::sendmmsg,
        Partial,
        "sends after the first never block: a partial count instead",
    ),
    e(309, sys_info::getcpu, Full, "the running vCPU, node 0"),
    e(316, sys_path::renameat2, Full, ""),
    e(318, sys_proc::getrandom, Full, ""),
    e(
        319,
        sys_surface::memfd_create,
        Partial,
        "host memfd; no seals",
    ),
    e(322, sys_exec::execveat, Full, "as execve"),
    e(332, sys_stat::statx, Full, ""),
    e(334, sys_proc::rseq, Stub, "ENOSYS: glibc runs without it"),
    e(435, sys_task::clone3, Partial, "no pidfd, set_tid, cgroup"),
    e(439, sys_stat::faccessat2, Full, ""),
];

const TABLE_SIZE: usize = syscall_names::COUNT;

static LOGGED: [AtomicU64; TABLE_SIZE.div_ceil(64)] =
    [const { AtomicU64::new(0) }; TABLE_SIZE.div_ceil(64)];

fn lookup(nr: usize) -> Option<&'static Entry> {
    // The table is small and sorted: binary search.
    ENTRIES
        .binary_search_by_key(&nr, |e| e.nr)
        .ok()
        .map(|i| &ENTRIES[i])
}

/// Runs syscall `nr`; returns the value for RAX (`-errno` on failure). A
/// syscall entered with a handled signal pending (from a control request
/// served here) is not run: it is restarted after the handler
/// (`-ERESTARTNOINTR`), so a blocking call cannot miss the signal.
pub fn dispatch(nr: u64, args: &[u64; 6]) -> u64 {
    let t0 = crate::stats::start();
    crate::control::serve_pending();
    let result = if crate::signal::interrupts() {
        Err(Errno::ERESTARTNOINTR)
    } else if let Some(denied) = crate::seccomp::check(nr, args) {
        denied
    } else {
        run(nr, args)
    };
    // Shared file objects whose last mapping went are written back and
    // freed here, outside any address-space operation.
    crate::mm::sharedfile::reap();
    crate::stats::syscall(nr, t0);
    match result {
        Ok(v) => v as u64,
        Err(e) => (-i64::from(e.0)) as u64,
    }
}

/// Whether syscall `nr` interrupted by a signal whose handler has
/// `SA_RESTART` is restarted (Linux: waits with a timeout, `pause` and
/// `rt_sigsuspend` return `EINTR` whatever the flags say).
pub fn restartable(nr: u64) -> bool {
    // poll, select, pause, nanosleep, rt_sigsuspend, clock_nanosleep,
    // epoll_wait, pselect6, ppoll, epoll_pwait, epoll_pwait2.
    !matches!(
        nr,
        7 | 23 | 34 | 35 | 130 | 230 | 232 | 270 | 271 | 281 | 441
    )
}

fn run(nr: u64, args: &[u64; 6]) -> SysResult {
    match usize::try_from(nr).ok().and_then(lookup) {
        Some(entry) => {
            if entry.support != Full {
                log_once(entry.nr, |name| {
                    log::debug!("{name}: {:?} support: {}", entry.support, entry.note)
                });
            }
            crate::task::cpu::syscall_entry();
            let clock = cputime::SyscallClock::start();
            let r = process::with(|p| (entry.handler)(p, args));
            clock.stop();
            let r = crate::task::finish_syscall(r, || process::with(|p| (entry.handler)(p, args)));
            crate::task::cpu::syscall_exit();
            r
        }
        None => {
            log_unimplemented(nr);
            Err(Errno::ENOSYS)
        }
    }
}

/// Runs `f(name)` the first time syscall `nr` gets here.
fn log_once(nr: usize, f: impl FnOnce(&str)) {
    if nr < TABLE_SIZE {
        let bit = 1u64 << (nr % 64);
        if LOGGED[nr / 64].fetch_or(bit, Ordering::Relaxed) & bit != 0 {
            return;
        }
    }
    f(syscall_names::name(nr).unwrap_or("?"));
}

fn log_unimplemented(nr: u64) {
    log_once(nr as usize, |name| {
        log::warn!("unimplemented syscall {nr} ({name}): ENOSYS")
    });
}

/// Whether the table is sorted by number (binary search needs it).
pub fn table_is_sorted() -> bool {
    ENTRIES.windows(2).all(|w| w[0].nr < w[1].nr)
}
