//! Memory syscalls: `mmap` (anonymous, file-backed private and shared), `munmap`, `mprotect`, `mremap`,
//! `brk`, `madvise`.

use qlib::layout::USER_END;

use alloc::vec::Vec;

use qlib::abi::{IoVec, MAX_IOVECS};

use core::sync::atomic::{AtomicU32, Ordering};

use crate::errno::{Errno, SysResult};
use crate::fs::special::Special;
use crate::fs::{Backing, File, HostKind, host};
use crate::mm::addr_space::AddrSpace;
use crate::mm::addr_space::{MMAP_MIN, MMAP_TOP};
use crate::mm::filemap;
use crate::mm::page_up;
use crate::mm::vma::{FileBacking, VmaKind};
use crate::process::Process;

/// The next `MAP_SHARED | MAP_ANONYMOUS` region id (`VmaKind::SharedAnon`).
static NEXT_SHARED_ANON: AtomicU32 = AtomicU32::new(1);
const MAP_SHARED: u64 = 0x01;
const MAP_PRIVATE: u64 = 0x02;
const MAP_FIXED: u64 = 0x10;
const MAP_ANONYMOUS: u64 = 0x20;
const MAP_POPULATE: u64 = 0x8000;
const MAP_FIXED_NOREPLACE: u64 = 0x10_0000;
const PROT_MASK: u64 = 0x7;

const MREMAP_MAYMOVE: u64 = 1;
const MREMAP_FIXED: u64 = 2;

/// Checks a user range: page-aligned start, non-empty, inside user space.
fn range(addr: u64, len: u64) -> Result<(u64, u64), Errno> {
    if addr & 0xfff != 0 {
        return Err(Errno::EINVAL);
    }
    let len = page_up(len).ok_or(Errno::ENOMEM)?;
    let end = addr.checked_add(len).ok_or(Errno::EINVAL)?;
    if len == 0 || end > USER_END {
        return Err(Errno::EINVAL);
    }
    Ok((addr, end))
}

/// `mmap(addr, len, prot, flags, fd, off)`.
pub fn mmap(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let (hint, len, prot, flags) = (a[0], a[1], a[2], a[3]);
    if flags & (MAP_SHARED | MAP_PRIVATE) == 0 || prot & !PROT_MASK != 0 {
        return Err(Errno::EINVAL);
    }
    let source = if flags & MAP_ANONYMOUS == 0 {
        file_source(p, a)?
    } else {
        None
    };
    // An open frozen file remembers its window range (`window_of`).
    let frozen = source
        .and_then(|_| p.files.get(a[4]).ok())
        .filter(|f| f.frozen.is_some());
    // A shared mapping of a file open for writing: the pages of the
    // file's shared object (`mm::sharedfile`).
    let shared_file = match source {
        Some(_) if flags & MAP_SHARED != 0 && p.files.get(a[4])?.writable() => {
            let file = p.files.get(a[4])?;
            Some(crate::mm::sharedfile::attach(&file)?)
        }
        _ => None,
    };
    let len = page_up(len).ok_or(Errno::ENOMEM)?;
    if len == 0 {
        return Err(Errno::EINVAL);
    }
    let mm = &mut p.mm;
    let start = if flags & (MAP_FIXED | MAP_FIXED_NOREPLACE) != 0 {
        let (start, end) = range(hint, len)?;
        if flags & MAP_FIXED_NOREPLACE != 0 && mm.vmas.overlaps(start, end) {
            return Err(Errno::EEXIST);
        }
        mm.unmap(start, end);
        start
    } else {
        let hinted = range(hint & !0xfff, len)
            .ok()
            .filter(|&(s, e)| s >= MMAP_MIN && !mm.vmas.overlaps(s, e));
        match hinted {
            Some((s, _)) => s,
            None => mm
                .vmas
                .find_free(len, MMAP_MIN.max(mm.brk_start + (1 << 30)), MMAP_TOP)
                .ok_or(Errno::ENOMEM)?,
        }
    };
    // A file's pages come from the host page cache when the window has
    // room for it (read-only, copied on write); else they are read in.
    let mapped = source
        .filter(|_| shared_file.is_none())
        .and_then(|(fd, off)| window_of(frozen.as_deref(), fd).map(|m| (m, off)));
    if let (Some(id), Some((_, off))) = (shared_file, source) {
        let kind = VmaKind::SharedFile {
            id,
            delta: off.wrapping_sub(start),
        };
        mm.add_vma(start, start + len, prot as u32, kind);
        if flags & MAP_POPULATE != 0 {
            mm.populate(start, start + len)?;
        }
    } else if let Some((m, off)) = mapped {
        let file_len = page_up(m.size.saturating_sub(off)).unwrap_or(0).min(len);
        let file = FileBacking {
            delta: (m.gpa + off).wrapping_sub(start),
            end: start + file_len,
        };
        mm.add_file_vma(start, start + len, prot as u32, file);
        if flags & MAP_POPULATE != 0 {
            mm.populate(start, start + len)?;
        }
    } else if let Some((fd, off)) = source {
        mm.add_vma(start, start + len, prot as u32, VmaKind::Anon);
        if let Err(e) = read_file_into(mm, start, start + len, fd, off) {
            mm.unmap(start, start + len);
            return Err(e);
        }
    } else {
        let kind = if flags & MAP_SHARED != 0 {
            VmaKind::SharedAnon {
                id: NEXT_SHARED_ANON.fetch_add(1, Ordering::Relaxed),
                delta: start.wrapping_neg(),
            }
        } else {
            VmaKind::Anon
        };
        mm.add_vma(start, start + len, prot as u32, kind);
        if flags & MAP_POPULATE != 0 {
            mm.populate(start, start + len)?;
        }
    }
    Ok(start as usize)
}

/// Host file `fd`'s range in the file window: remembered by an open frozen
/// file (docs/coldstart.md), else asked of the VMM at every `mmap`; `None`
/// when the window has no room.
fn window_of(frozen: Option<&File>, fd: i32) -> Option<filemap::Mapped> {
    let z = frozen.and_then(|f| f.frozen.as_ref());
    if let Some(m) = z.and_then(|z| z.mapped()) {
        return Some(m);
    }
    let m = filemap::map(fd).ok()?;
    if let Some(z) = z {
        z.set_mapped(m);
    }
    Some(m)
}

/// For a file mapping: the host fd and offset to read it from, or `None`
/// when the mapping is anonymous after all (`/dev/zero`).
///
/// Private and read-only shared mappings get the host file's page-cache
/// pages (`mm::filemap`), or, when the file window is full, copies made at
/// map time; a shared mapping of a file open for writing gets the file's
/// shared object (`mm::sharedfile`), and one with `PROT_WRITE` of a file
/// not open for writing is `EACCES`, as on Linux.
fn file_source(p: &Process, a: &[u64; 6]) -> Result<Option<(i32, u64)>, Errno> {
    let file = p.files.get(a[4])?;
    if a[5] & 0xfff != 0 {
        return Err(Errno::EINVAL);
    }
    if !file.readable() {
        return Err(Errno::EACCES);
    }
    match &file.backing {
        Backing::Special(Special::Zero) => Ok(None),
        Backing::Host {
            fd,
            kind: HostKind::File,
        } => {
            if a[3] & MAP_SHARED != 0 && a[2] & 2 != 0 && !file.writable() {
                return Err(Errno::EACCES);
            }
            Ok(Some((*fd, a[5])))
        }
        _ => Err(Errno::ENODEV),
    }
}

/// Maps every page of `[start, end)` and reads the file at `off` into
/// them (bytes past the end of the file stay zero).
fn read_file_into(
    mm: &mut AddrSpace,
    start: u64,
    end: u64,
    fd: i32,
    off: u64,
) -> Result<(), Errno> {
    mm.populate(start, end)?;
    let mut iov: Vec<IoVec> = Vec::new();
    let mut at = start;
    let mut file_off = off;
    while at < end {
        let gpa = mm.pt.get(at).addr();
        match iov.last_mut() {
            Some(last) if last.gpa + last.len == gpa => last.len += 4096,
            _ => iov.push(IoVec { gpa, len: 4096 }),
        }
        at += 4096;
        if iov.len() as u64 >= MAX_IOVECS || at == end {
            let want: u64 = iov.iter().map(|v| v.len).sum();
            let got = host::io(fd, &iov, Some(file_off), 0)? as u64;
            iov.clear();
            file_off += want;
            if got < want {
                break; // end of file: the rest stays zero
            }
        }
    }
    Ok(())
}

/// `munmap(addr, len)`.
pub fn munmap(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let (start, end) = range(a[0], a[1])?;
    p.mm.unmap(start, end);
    Ok(0)
}

/// `mprotect(addr, len, prot)`.
pub fn mprotect(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[2] & !PROT_MASK & !0x0300_0000 != 0 {
        return Err(Errno::EINVAL);
    }
    if a[1] == 0 && a[0] & 0xfff == 0 {
        return Ok(0);
    }
    let (start, end) = range(a[0], a[1])?;
    p.mm.protect(start, end, (a[2] & PROT_MASK) as u32)?;
    Ok(0)
}

/// `mremap(old, old_len, new_len, flags, new_addr)`.
pub fn mremap(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let (old, old_len, new_len, flags, new_addr) = (a[0], a[1], a[2], a[3], a[4]);
    if flags & !(MREMAP_MAYMOVE | MREMAP_FIXED) != 0
        || (flags & MREMAP_FIXED != 0 && flags & MREMAP_MAYMOVE == 0)
    {
        return Err(Errno::EINVAL);
    }
    let (old, old_end) = range(old, old_len)?;
    let new_len = page_up(new_len).ok_or(Errno::ENOMEM)?;
    if new_len == 0 {
        return Err(Errno::EINVAL);
    }
    let mm = &mut p.mm;
    let vma = *mm.vmas.find(old).ok_or(Errno::EFAULT)?;
    if old_end > vma.end {
        return Err(Errno::EFAULT);
    }
    // The kernel's pages (the vDSO, vvar) do not move or grow.
    if vma.kind == VmaKind::Kernel {
        return Err(Errno::EINVAL);
    }
    let old_len = old_end - old;
    if flags & MREMAP_FIXED == 0 {
        if new_len <= old_len {
            mm.unmap(old + new_len, old_end);
            return Ok(old as usize);
        }
        let grow_end = old.checked_add(new_len).ok_or(Errno::ENOMEM)?;
        if grow_end <= USER_END && !mm.vmas.overlaps(old_end, grow_end) {
            mm.add_vma(old_end, grow_end, vma.prot, vma.kind);
            return Ok(old as usize);
        }
        if flags & MREMAP_MAYMOVE == 0 {
            return Err(Errno::ENOMEM);
        }
    }
    let dest = if flags & MREMAP_FIXED != 0 {
        let (s, e) = range(new_addr, new_len)?;
        if s < old_end && old < e {
            return Err(Errno::EINVAL);
        }
        mm.unmap(s, e);
        s
    } else {
        mm.vmas
            .find_free(new_len, MMAP_MIN.max(mm.brk_start + (1 << 30)), MMAP_TOP)
            .ok_or(Errno::ENOMEM)?
    };
    let keep = old_len.min(new_len);
    match vma.file {
        // The file pages move with the mapping.
        Some(f) => {
            let end = if f.end <= old {
                dest
            } else {
                dest.saturating_add(f.end - old)
            };
            let delta = f.delta.wrapping_add(old).wrapping_sub(dest);
            mm.add_file_vma(dest, dest + new_len, vma.prot, FileBacking { delta, end });
        }
        None => {
            // A shared file mapping keeps its file offsets at the new place.
            let kind = match vma.kind {
                VmaKind::SharedFile { id, delta } => VmaKind::SharedFile {
                    id,
                    delta: delta.wrapping_add(old).wrapping_sub(dest),
                },
                VmaKind::SharedAnon { id, delta } => VmaKind::SharedAnon {
                    id,
                    delta: delta.wrapping_add(old).wrapping_sub(dest),
                },
                k => k,
            };
            mm.add_vma(dest, dest + new_len, vma.prot, kind);
        }
    }
    mm.move_pages(old, dest, keep)?;
    mm.unmap(old, old_end);
    Ok(dest as usize)
}

/// `brk(addr)`.
pub fn brk(p: &mut Process, a: &[u64; 6]) -> SysResult {
    Ok(p.mm.set_brk(a[0]) as usize)
}

const MADV_FREE: u64 = 8;
const MADV_DONTNEED: u64 = 4;

/// `madvise(addr, len, advice)`.
pub fn madvise(p: &mut Process, a: &[u64; 6]) -> SysResult {
    if a[0] & 0xfff != 0 {
        return Err(Errno::EINVAL);
    }
    if a[1] == 0 {
        return Ok(0);
    }
    let (start, end) = range(a[0], a[1])?;
    match a[2] {
        MADV_DONTNEED | MADV_FREE => {
            if !p.mm.vmas.covers(start, end) {
                return Err(Errno::ENOMEM);
            }
            // Not the kernel's pages (the vDSO, vvar): as Linux's
            // special mappings.
            if p.mm
                .vmas
                .iter_range(start, end)
                .any(|v| v.kind == VmaKind::Kernel)
            {
                return Err(Errno::EINVAL);
            }
            p.mm.discard(start, end);
            Ok(0)
        }
        _ => Ok(0),
    }
}
