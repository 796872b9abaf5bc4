//! Reading a program for `execve` from the rootfs through the guest's own
//! host calls (the file is already open), after Linux's permission check.

use alloc::vec::Vec;

use qlib::abi::IoVec;
use qlib::exec_perm::may_exec;

use crate::errno::Errno;
use crate::fs::File;
use crate::fs::host;
use crate::fs::stat::{statx_mode, statx_owner, statx_size};
use crate::mm::kva_to_gpa;

/// Largest program or interpreter image read (as the VMM's cap).
pub const MAX_IMAGE: u64 = 64 << 20;

/// Checks the caller may execute `file` and reads it whole: `EACCES` for
/// a kernel file (none is executable), a non-regular file or a missing x
/// bit; `ENOMEM` beyond [`MAX_IMAGE`] or when the kernel heap cannot hold
/// it.
pub fn read(file: &File, ids: [u32; 4]) -> Result<Vec<u8>, Errno> {
    let fd = file.host_fd().ok_or(Errno::EACCES)?;
    let sx = host::statx_fd(fd)?;
    if !may_exec(statx_mode(&sx), statx_owner(&sx), ids[1], ids[3]) {
        return Err(Errno::EACCES);
    }
    let size = statx_size(&sx);
    if size > MAX_IMAGE {
        return Err(Errno::ENOMEM);
    }
    let size = size as usize;
    let mut buf = Vec::new();
    buf.try_reserve_exact(size).map_err(|_| Errno::ENOMEM)?;
    buf.resize(size, 0);
    let mut done = 0;
    while done < size {
        let rest = &buf[done..];
        let iov = [IoVec {
            gpa: kva_to_gpa(rest.as_ptr() as u64),
            len: rest.len() as u64,
        }];
        // The heap lies in the kernel image: physically contiguous.
        let n = host::io(fd, &iov, Some(done as u64), 0)?;
        if n == 0 {
            break; // the file shrank
        }
        done += n.min(size - done);
    }
    buf.truncate(done);
    if let Some(b) = buf.first() {
        // SAFETY: `b` is a live byte of `buf`, which the VMM wrote; one
        // volatile read keeps the compiler from assuming it unchanged.
        unsafe { core::ptr::read_volatile(b) };
    }
    Ok(buf)
}
