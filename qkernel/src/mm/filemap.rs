//! File pages from the host's page cache: the VMM maps a host file into the
//! file window (`qlib::layout::FILE_WINDOW_GPA`, `Call::MapFile`), and user
//! page tables map those pages read-only (`super::vma::FileBacking`); a
//! write to one copies it into guest RAM (`super::fault`). N sandboxes
//! running the same program then share its pages in the host page cache,
//! and hibernation drops them instead of swapping them (docs/memory.md).

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};

use qlib::abi::{Call, IoVec};
use qlib::layout::{FILE_WINDOW_GPA, FILE_WINDOW_SIZE};
use spin::Mutex;

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
    /// The pages are the host file's: after a file shrank on the host, the
    /// VMM gives zero pages past its new end (module `take_gone`).
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

/// Window ranges (GPA, end) whose files shrank on the host: they read as
/// zero pages now, and a user access is `SIGBUS` (`super::fault`).
static GONE: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());
/// [`GONE`] is not empty (the fault path's fast check).
static ANY_GONE: AtomicBool = AtomicBool::new(false);

/// Whether the window page `gpa` belongs to a file that shrank past it.
pub fn is_gone(gpa: u64) -> bool {
    ANY_GONE.load(Ordering::Relaxed) && GONE.lock().iter().any(|&(s, e)| gpa >= s && gpa < e)
}

/// Serves `control::WINDOW_GONE`: takes the ranges of files that shrank on
/// the host from the VMM and unmaps them from every address space, so the
/// next access faults and gets `SIGBUS` (Linux unmaps a truncated file's
/// pages the same way).
pub fn take_gone() {
    let buf: Box<[IoVec; 64]> = Box::new([IoVec { gpa: 0, len: 0 }; 64]);
    loop {
        let gpa = kva_to_gpa(buf.as_ptr() as u64);
        let n = hostcall::call(Call::WindowGone, [gpa, 64, 0, 0, 0, 0]);
        if n <= 0 {
            return;
        }
        let mut new = Vec::new();
        for i in 0..(n as usize).min(64) {
            // SAFETY: the VMM wrote `n` entries into `buf`; read volatile,
            // as it wrote them behind the compiler's back.
            let v = unsafe { core::ptr::read_volatile(buf.as_ptr().add(i)) };
            let end = v.gpa.saturating_add(v.len);
            if v.gpa >= FILE_WINDOW_GPA && end <= FILE_WINDOW_GPA + FILE_WINDOW_SIZE {
                new.push((v.gpa, end));
            }
        }
        GONE.lock().extend_from_slice(&new);
        ANY_GONE.store(true, Ordering::Relaxed);
        super::swap::unmap_everywhere(&|g| new.iter().any(|&(s, e)| g >= s && g < e));
        if n < 64 {
            return;
        }
    }
}
