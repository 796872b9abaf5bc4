//! File pages from the host's page cache: the VMM maps a host file into the
//! file window (`qlib::layout::FILE_WINDOW_GPA`, `Call::MapFile`), and user
//! page tables map those pages read-only (`super::vma::FileBacking`); a
//! write to one copies it into guest RAM (`super::fault`). N sandboxes
//! running the same program then share its pages in the host page cache,
//! and hibernation drops them instead of swapping them (docs/memory.md).

use alloc::boxed::Box;

use qlib::abi::Call;
use qlib::layout::{FILE_WINDOW_GPA, FILE_WINDOW_SIZE};

use super::{gpa_to_kva, kva_to_gpa};
use crate::errno::Errno;
use crate::hostcall;

/// A host file mapped into the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapped {
    /// Window GPA of the file's byte 0.
    pub gpa: u64,
    /// The file's size as mapped.
    pub size: u64,
}

impl Mapped {
    /// The file's bytes, read through the direct map.
    ///
    /// The pages are the host file's: a file truncated on the host after it
    /// was mapped makes a read past its new end stop the sandbox (the host
    /// has no page to give), never the VMM.
    pub fn bytes(&self) -> &'static [u8] {
        // SAFETY: `[gpa, gpa + size)` lies in the file window (checked in
        // `map`), which the direct map covers and which is never unmapped
        // or written while the guest runs (read-only host mapping).
        unsafe {
            core::slice::from_raw_parts(gpa_to_kva(self.gpa) as *const u8, self.size as usize)
        }
    }

    /// The `Mapped` whose bytes `image` is, if it is a window mapping.
    pub fn of(image: &[u8]) -> Option<Self> {
        let gpa = kva_to_gpa(image.as_ptr() as u64);
        let end = gpa.checked_add(image.len() as u64)?;
        (gpa >= FILE_WINDOW_GPA && end <= FILE_WINDOW_GPA + FILE_WINDOW_SIZE && !image.is_empty())
            .then_some(Self {
                gpa,
                size: image.len() as u64,
            })
    }
}

/// Maps the regular host file `fd` into the window (once per file and
/// sandbox, the VMM remembers it). `ENOMEM` when the window is full,
/// `ENODEV` for anything but a regular file.
pub fn map(fd: i32) -> Result<Mapped, Errno> {
    let size = Box::new(0u64);
    let size_gpa = kva_to_gpa(&*size as *const u64 as u64);
    let rc = hostcall::call(Call::MapFile, [fd as u64, size_gpa, 0, 0, 0, 0]);
    if rc < 0 {
        return Err(Errno((-rc) as i32));
    }
    // SAFETY: the VMM wrote the u64; one volatile read sees it.
    let size = unsafe { core::ptr::read_volatile(&*size) };
    let gpa = rc as u64;
    match gpa.checked_add(size) {
        Some(end) if gpa >= FILE_WINDOW_GPA && end <= FILE_WINDOW_GPA + FILE_WINDOW_SIZE => {
            Ok(Mapped { gpa, size })
        }
        _ => Err(Errno::EIO),
    }
}
