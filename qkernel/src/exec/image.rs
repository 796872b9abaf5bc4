//! Reading a program for `execve` from the rootfs through the guest's own
//! host calls (the file is already open), after Linux's permission check.

use alloc::vec::Vec;

use qlib::abi::IoVec;
use qlib::exec_perm::may_exec;

use crate::errno::Errno;
use crate::fs::File;
use crate::fs::host;
use crate::fs::stat::{statx_mode, statx_owner, statx_size};
use crate::mm::filemap::{self, Mapped};
use crate::mm::kva_to_gpa;

/// Largest program or interpreter image read into the kernel heap when
/// the file window has no room for it.
pub const MAX_IMAGE: u64 = 64 << 20;

/// A program's bytes: its page-cache pages in the file window (the
/// loader then maps its segments from there), or a copy in the kernel heap.
pub enum Image {
    /// Mapped into the file window.
    Window(Mapped),
    /// Read into the heap.
    Heap(Vec<u8>),
}

impl core::ops::Deref for Image {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Self::Window(m) => m.bytes(),
            Self::Heap(v) => v,
        }
    }
}

/// Checks the caller may execute `file` and maps it (or reads it whole):
/// `EACCES` for a kernel file (none is executable), a non-regular file or a
/// missing x bit; `ENOMEM` when it must be read and is beyond
/// [`MAX_IMAGE`] or the kernel heap cannot hold it.
pub fn read(file: &File, ids: [u32; 4]) -> Result<Image, Errno> {
    let fd = file.host_fd().ok_or(Errno::EACCES)?;
    let sx = host::statx_fd(fd)?;
    if !may_exec(statx_mode(&sx), statx_owner(&sx), ids[1], ids[3]) {
        return Err(Errno::EACCES);
    }
    match filemap::map(fd) {
        Ok(m) => Ok(Image::Window(m)),
        Err(_) => read_heap(fd, statx_size(&sx)).map(Image::Heap),
    }
}

/// Reads `size` bytes of `fd` into the kernel heap.
fn read_heap(fd: i32, size: u64) -> Result<Vec<u8>, Errno> {
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
