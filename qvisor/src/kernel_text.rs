//! The guest kernel's read-only pages (code and constants) straight from
//! the host's page cache: the kernel image is part of the qrun binary
//! (`KERNEL_IMAGE`, page-aligned in it), so its whole read-only pages are
//! mapped from `/proc/self/exe` over their place in guest RAM (private,
//! never written) instead of being copied there. Every sandbox on the host
//! then shares one copy of ~1 MiB of kernel code, as processes share the
//! text of one program; a copy would count whole in each sandbox's PSS.
//!
//! Whatever fails here (no `/proc`, an unaligned image, a binary on a file
//! system that cannot be mapped) leaves the copy the caller makes: only
//! density is at stake, never correctness.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::fd::AsRawFd;

use crate::guest_mem::GuestRam;

/// The file offset in `/proc/self/exe` of the byte at `addr` of this
/// process, if a mapping of the executable holds it.
fn exe_offset(addr: u64, exe: &File) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let meta = exe.metadata().ok()?;
    let maps = File::open("/proc/self/maps").ok()?;
    for line in BufReader::new(maps).lines() {
        let line = line.ok()?;
        let mut f = line.split_whitespace();
        let (range, _perms, offset, _dev, inode) =
            (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
        let (start, end) = range.split_once('-')?;
        let start = u64::from_str_radix(start, 16).ok()?;
        let end = u64::from_str_radix(end, 16).ok()?;
        if addr < start || addr >= end || inode.parse::<u64>().ok()? != meta.ino() {
            continue;
        }
        return Some(u64::from_str_radix(offset, 16).ok()? + (addr - start));
    }
    None
}

/// Maps the bytes `image` (a page-aligned, whole-page part of this
/// process's executable) over guest RAM at `gpa`; whether it did (else
/// the caller copies them).
pub fn map(ram: &GuestRam, gpa: u64, image: &'static [u8]) -> bool {
    match try_map(ram, gpa, image) {
        Ok(()) => true,
        Err(why) => {
            log::debug!("kernel pages at {gpa:#x} copied, not mapped: {why}");
            false
        }
    }
}

fn try_map(ram: &GuestRam, gpa: u64, image: &'static [u8]) -> Result<(), String> {
    let addr = image.as_ptr() as u64;
    let len = image.len() as u64;
    if !addr.is_multiple_of(4096) || !gpa.is_multiple_of(4096) || !len.is_multiple_of(4096) {
        return Err("not page-aligned".into());
    }
    ram.check_range(gpa, len).map_err(|_| "outside guest RAM")?;
    let host = ram.host_base() + gpa;
    let exe = File::open("/proc/self/exe").map_err(|e| format!("/proc/self/exe: {e}"))?;
    let offset = exe_offset(addr, &exe).ok_or("not found in /proc/self/maps")?;
    if !offset.is_multiple_of(4096) {
        return Err(format!("file offset {offset:#x} not page-aligned"));
    }
    let off = libc::off_t::try_from(offset).map_err(|_| "offset too large")?;
    // SAFETY: `host` is `len` bytes of our own guest-RAM mapping, page
    // aligned (checked above), which no Rust object lives in; the guest
    // has not run yet. MAP_FIXED replaces those pages with a private
    // mapping of the executable's bytes, writable as guest RAM must be
    // (a write would only make a private copy).
    let p = unsafe {
        libc::mmap(
            host as *mut libc::c_void,
            len as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_FIXED,
            exe.as_raw_fd(),
            off,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(format!("mmap: {}", std::io::Error::last_os_error()));
    }
    // The mapping replaced guest RAM whatever happens next: check that it
    // holds the image (the first and last words of each page would do;
    // the first page and the last are enough to catch a wrong offset).
    let (mut head, mut tail) = ([0u8; 64], [0u8; 64]);
    let read =
        ram.read_bytes(gpa, &mut head).is_ok() && ram.read_bytes(gpa + len - 64, &mut tail).is_ok();
    if !read || head[..] != image[..64] || tail[..] != image[image.len() - 64..] {
        // Put the bytes there the usual way (a private copy).
        ram.write_bytes(gpa, image).map_err(|_| "rewrite failed")?;
        return Err("mapped bytes differ from the image (copied instead)".into());
    }
    ram.note_file_backed(gpa, len);
    Ok(())
}
