//! Small helpers for host syscalls made on the guest's behalf.

use std::os::fd::{FromRawFd, OwnedFd};

/// The calling thread's errno.
pub fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// A host syscall's return value as a host-call result: itself, or
/// `-errno` when negative.
pub fn ret(rc: i64) -> i64 {
    if rc < 0 { -(errno() as i64) } else { rc }
}

/// `-e` for an errno value.
pub const fn err(e: i32) -> i64 {
    -(e as i64)
}

/// Wraps a fresh descriptor returned by a host syscall.
pub fn owned(fd: i64) -> Result<OwnedFd, i64> {
    if fd < 0 {
        return Err(-(errno() as i64));
    }
    let fd = i32::try_from(fd).map_err(|_| err(libc::EBADF))?;
    // SAFETY: `fd` was just returned by the kernel and nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
