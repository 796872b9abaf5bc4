//! Linux error numbers. Syscall handlers return `Result<usize, Errno>`;
//! `syscalls::dispatch` alone turns an `Errno` into `-errno`.

/// A Linux errno value.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(
    dead_code,
    reason = "the full set a syscall may return; not all used yet"
)]
#[expect(clippy::upper_case_acronyms, reason = "the Linux names")]
pub enum Errno {
    EPERM = 1,
    ENOENT = 2,
    ESRCH = 3,
    EINTR = 4,
    EIO = 5,
    E2BIG = 7,
    ENOEXEC = 8,
    EBADF = 9,
    ECHILD = 10,
    EAGAIN = 11,
    ENOMEM = 12,
    EACCES = 13,
    EFAULT = 14,
    EBUSY = 16,
    EEXIST = 17,
    ENODEV = 19,
    ENOTDIR = 20,
    EISDIR = 21,
    EINVAL = 22,
    EMFILE = 24,
    ENOTTY = 25,
    EFBIG = 27,
    ENOSPC = 28,
    ESPIPE = 29,
    EPIPE = 32,
    ERANGE = 34,
    ENAMETOOLONG = 36,
    ENOSYS = 38,
    ETIMEDOUT = 110,
    EOPNOTSUPP = 95,
}

/// The result of a syscall handler.
pub type SysResult = Result<usize, Errno>;
