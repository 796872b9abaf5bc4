//! The syscall table: one declarative list recording, next to each
//! handler, its support level and a note (after gVisor's `linux64.go`).
//! Anything not in the table returns `ENOSYS` and is logged once by name.

mod sys_io;
mod sys_mm;
mod sys_proc;
mod sys_signal;
mod sys_time;

use core::sync::atomic::{AtomicU64, Ordering};

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
    e(0, sys_io::read, Partial, "fds 0-2 only (host stdio)"),
    e(1, sys_io::write, Partial, "fds 1-2 only (host stdio)"),
    e(3, sys_io::close, Partial, "fds 0-2 only"),
    e(5, sys_io::fstat, Partial, "fds 0-2 only"),
    e(
        7,
        sys_io::poll,
        Partial,
        "fds 0-2 only, forwarded to the host",
    ),
    e(8, sys_io::lseek, Partial, "stdio is not seekable: ESPIPE"),
    e(
        9,
        sys_mm::mmap,
        Partial,
        "anonymous only; files come with the I/O work",
    ),
    e(10, sys_mm::mprotect, Full, ""),
    e(11, sys_mm::munmap, Full, ""),
    e(12, sys_mm::brk, Full, ""),
    e(
        13,
        sys_signal::rt_sigaction,
        Stub,
        "recorded; delivery comes later",
    ),
    e(
        14,
        sys_signal::rt_sigprocmask,
        Stub,
        "recorded; delivery comes later",
    ),
    e(16, sys_io::ioctl, Partial, "TCGETS and TIOCGWINSZ on stdio"),
    e(19, sys_io::readv, Partial, "fd 0 only"),
    e(20, sys_io::writev, Partial, "fds 1-2 only"),
    e(24, sys_proc::sched_yield, Full, "one thread"),
    e(25, sys_mm::mremap, Partial, "anonymous mappings"),
    e(
        28,
        sys_mm::madvise,
        Partial,
        "DONTNEED/FREE drop pages; the rest are hints",
    ),
    e(35, sys_time::nanosleep, Full, "the vCPU sleeps in the host"),
    e(39, sys_proc::getpid, Full, "pid 1"),
    e(
        60,
        sys_proc::exit_group,
        Full,
        "one thread: ends the program",
    ),
    e(63, sys_proc::uname, Full, ""),
    e(96, sys_time::gettimeofday, Full, ""),
    e(102, sys_proc::getuid, Full, ""),
    e(104, sys_proc::getgid, Full, ""),
    e(107, sys_proc::geteuid, Full, ""),
    e(108, sys_proc::getegid, Full, ""),
    e(110, sys_proc::getppid, Full, "0: the sandbox has no parent"),
    e(
        131,
        sys_signal::sigaltstack,
        Stub,
        "recorded; delivery comes later",
    ),
    e(158, sys_proc::arch_prctl, Partial, "FS and GS base"),
    e(186, sys_proc::gettid, Full, ""),
    e(201, sys_time::time, Full, ""),
    e(
        202,
        sys_proc::futex,
        Partial,
        "one thread: WAKE wakes nobody, WAIT can only time out",
    ),
    e(204, sys_proc::sched_getaffinity, Full, "one vCPU"),
    e(218, sys_proc::set_tid_address, Full, ""),
    e(228, sys_time::clock_gettime, Full, ""),
    e(229, sys_time::clock_getres, Full, ""),
    e(230, sys_time::clock_nanosleep, Full, ""),
    e(231, sys_proc::exit_group, Full, ""),
    e(
        262,
        sys_io::newfstatat,
        Partial,
        "AT_EMPTY_PATH on fds 0-2 only",
    ),
    e(273, sys_proc::set_robust_list, Stub, "recorded"),
    e(
        302,
        sys_proc::prlimit64,
        Partial,
        "own process; limits are recorded, not enforced",
    ),
    e(318, sys_proc::getrandom, Full, ""),
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

/// Runs syscall `nr`; returns the value for RAX (`-errno` on failure).
pub fn dispatch(nr: u64, args: &[u64; 6]) -> u64 {
    crate::control::serve_pending();
    let result = match usize::try_from(nr).ok().and_then(lookup) {
        Some(entry) => {
            if entry.support != Full {
                log_once(entry.nr, |name| {
                    log::debug!("{name}: {:?} support: {}", entry.support, entry.note)
                });
            }
            process::with(|p| (entry.handler)(p, args))
        }
        None => {
            log_unimplemented(nr);
            Err(Errno::ENOSYS)
        }
    };
    match result {
        Ok(v) => v as u64,
        Err(e) => (-i64::from(e.0)) as u64,
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
