//! `sync`, `syncfs`, `fsync`, `fdatasync`: flushed on the host, errors
//! (`EIO`, `EINVAL` on a pipe or socket) passed back as Linux reports
//! them.

use qlib::io_abi::{fd as fdop, path as pathop};

use crate::errno::{Errno, SysResult};
use crate::fs::{Backing, host};
use crate::process::Process;

/// The host fd behind `fd`, `None` for the kernel's own files, `EBADF`.
fn host_fd(p: &Process, fd: u64) -> Result<Option<i32>, Errno> {
    Ok(match p.files.get(fd)?.backing {
        Backing::Host { fd, .. } => Some(fd),
        Backing::Special(_)
        | Backing::Pipe(_)
        | Backing::Netlink(_)
        | Backing::Tty(_)
        | Backing::MQueue(_) => None,
    })
}

/// `fsync(fd)`: the kernel's own files (devices, `/proc`) have nothing
/// to flush and say `EINVAL`, as Linux's do.
pub fn fsync(p: &mut Process, a: &[u64; 6]) -> SysResult {
    crate::mm::sharedfile::before_io(&*p.files.get(a[0])?);
    match host_fd(p, a[0])? {
        Some(fd) => host::fd_op(fdop::FSYNC, fd, 0, 0, 0, 0),
        None => Err(Errno::EINVAL),
    }
}

/// `fdatasync(fd)`.
pub fn fdatasync(p: &mut Process, a: &[u64; 6]) -> SysResult {
    crate::mm::sharedfile::before_io(&*p.files.get(a[0])?);
    match host_fd(p, a[0])? {
        Some(fd) => host::fd_op(fdop::FDATASYNC, fd, 0, 0, 0, 0),
        None => Err(Errno::EINVAL),
    }
}

/// `syncfs(fd)`.
pub fn syncfs(p: &mut Process, a: &[u64; 6]) -> SysResult {
    match host_fd(p, a[0])? {
        Some(fd) => host::fd_op(fdop::SYNCFS, fd, 0, 0, 0, 0),
        None => Ok(0),
    }
}

/// `sync()`: flushes the rootfs's filesystem; never fails.
pub fn sync(_p: &mut Process, _a: &[u64; 6]) -> SysResult {
    crate::mm::sharedfile::sync_all();
    if let Err(e) = host::path_op(pathop::SYNCFS, "/", 0, 0, 0) {
        log::debug!("sync: syncfs of the rootfs: {e:?}");
    }
    Ok(0)
}
