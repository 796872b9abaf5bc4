//! Writable `MAP_SHARED` file mappings (docs/memory.md, "Shared file
//! mappings"): one object per host file (device, inode) holds guest pages
//! for the file's pages that some mapping touched; every shared mapping of
//! the file in the sandbox (any process, any `mmap` call, a fork's copy)
//! maps those same pages writable, so writes through one are seen by all.
//!
//! Coherence with the file:
//! - `read`/`pread`/`readv`/`sendfile` of the file, `fsync`, `msync` and
//!   `munmap` write the object's changed pages back to the host file first
//!   (a page is written when its contents differ from what was last read
//!   or written; bytes past the file's end never are);
//! - `write`/`pwrite`/`ftruncate`/`fallocate` write back first, then read
//!   every page of the object again, so the mappings see the new bytes;
//! - the last mapping gone, process exit, the sandbox's end and
//!   hibernation write back everything.
//!
//! A change made on the host by another process is seen only by pages not
//! loaded yet, and a read-only `MAP_SHARED` mapping through a read-only fd
//! (the file window) sees the object's writes once they are written back.
//! An access to a page wholly past the file's end is `SIGBUS` (checked
//! against the size seen at the last write-back or write).
//!
//! Lock: [`REG`] is never held across a host call (a control request served
//! at a host call's return may hibernate, which writes back).

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use qlib::abi::{IoVec, MAX_IOVECS};
use qlib::io_abi::io;
use spin::Mutex;

use super::{frames, gpa_to_kva};
use crate::errno::Errno;
use crate::fs::{File, HostKind, host};

/// What identifies a host file: device (major, minor) and inode.
type Key = (u32, u32, u64);

/// One page of the object: its frame and a hash of the contents the host
/// file has (as last read or written).
#[derive(Clone, Copy)]
struct Page {
    gpa: u64,
    hash: u64,
}

struct Object {
    /// Keeps the host fd open while mappings exist (never read).
    _file: Arc<File>,
    fd: i32,
    key: Key,
    /// File size as last seen.
    size: u64,
    /// Page index -> page (the object holds one frame reference each).
    pages: BTreeMap<u64, Page>,
    /// VMAs naming the object, in every address space.
    vmas: usize,
}

struct Registry {
    next: u32,
    objs: BTreeMap<u32, Object>,
    /// Every frame an object holds (hibernation leaves them in place).
    frames: BTreeSet<u64>,
}

static REG: Mutex<Registry> = Mutex::new(Registry {
    next: 1,
    objs: BTreeMap::new(),
    frames: BTreeSet::new(),
});
/// Objects alive (the fast path of the read/write hooks).
static COUNT: AtomicUsize = AtomicUsize::new(0);
/// Some object lost its last VMA: [`reap`] has work.
static REAP: AtomicBool = AtomicBool::new(false);

fn key_of(fd: i32) -> Result<(Key, u64), Errno> {
    let st = host::statx_fd(fd)?;
    let u32_at = |o: usize| u32::from_le_bytes([st[o], st[o + 1], st[o + 2], st[o + 3]]);
    let u64_at = |o: usize| u64::from(u32_at(o)) | (u64::from(u32_at(o + 4)) << 32);
    // struct statx: stx_ino at 32, stx_size at 40, stx_dev_major/minor at
    // 136/140.
    Ok(((u32_at(136), u32_at(140), u64_at(32)), u64_at(40)))
}

/// FNV-1a over a page, 8 bytes at a time.
fn hash(gpa: u64) -> u64 {
    // SAFETY: `gpa` is a whole user page in the direct map, held by the
    // object; reading it races with nothing (one vCPU).
    let words = unsafe { core::slice::from_raw_parts(gpa_to_kva(gpa) as *const u64, 512) };
    words.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &w| {
        (h ^ w).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The object for the regular host file behind `file` (made if there is
/// none); its id goes in the VMA (`VmaKind::SharedFile`).
pub fn attach(file: &Arc<File>) -> Result<u32, Errno> {
    let fd = match (file.host_fd(), file.host_kind()) {
        (Some(fd), Some(HostKind::File)) => fd,
        _ => return Err(Errno::ENODEV),
    };
    let (key, size) = key_of(fd)?;
    let mut reg = REG.lock();
    if let Some((&id, o)) = reg.objs.iter_mut().find(|(_, o)| o.key == key) {
        o.size = size;
        return Ok(id);
    }
    let id = reg.next;
    reg.next = reg.next.checked_add(1).ok_or(Errno::ENOMEM)?;
    reg.objs.insert(
        id,
        Object {
            _file: file.clone(),
            fd,
            key,
            size,
            pages: BTreeMap::new(),
            vmas: 0,
        },
    );
    COUNT.fetch_add(1, Ordering::Relaxed);
    // A mapping that fails after this leaves the object for `reap`.
    REAP.store(true, Ordering::Relaxed);
    Ok(id)
}

/// A VMA naming object `id` was added to an address space.
pub fn vma_added(id: u32) {
    if let Some(o) = REG.lock().objs.get_mut(&id) {
        o.vmas += 1;
    }
}

/// A VMA naming object `id` left an address space; the object goes at the
/// next [`reap`] if it was the last.
pub fn vma_removed(id: u32) {
    if let Some(o) = REG.lock().objs.get_mut(&id) {
        o.vmas = o.vmas.saturating_sub(1);
        if o.vmas == 0 {
            REAP.store(true, Ordering::Relaxed);
        }
    }
}

/// Writes back and frees every object no VMA names any more (after a
/// syscall, at exit).
pub fn reap() {
    if !REAP.swap(false, Ordering::Relaxed) {
        return;
    }
    let dead: Vec<u32> = REG
        .lock()
        .objs
        .iter()
        .filter(|(_, o)| o.vmas == 0)
        .map(|(&id, _)| id)
        .collect();
    for id in dead {
        flush(id);
        let gone = {
            let mut reg = REG.lock();
            match reg.objs.get(&id) {
                Some(o) if o.vmas == 0 => {
                    let o = reg.objs.remove(&id);
                    if let Some(o) = &o {
                        for p in o.pages.values() {
                            reg.frames.remove(&p.gpa);
                        }
                    }
                    o
                }
                _ => None,
            }
        };
        if let Some(o) = gone {
            COUNT.fetch_sub(1, Ordering::Relaxed);
            for p in o.pages.values() {
                frames::put(p.gpa);
            }
            // `o.file` dropped here: the host fd closes with its last user.
        }
    }
}

/// The file size object `id` last saw (`None`: no such object).
pub fn size(id: u32) -> Option<u64> {
    REG.lock().objs.get(&id).map(|o| o.size)
}

/// Whether `gpa` is a page of some object (hibernation keeps those).
pub fn owns(gpa: u64) -> bool {
    COUNT.load(Ordering::Relaxed) != 0 && REG.lock().frames.contains(&gpa)
}

/// Loads the missing pages `[first, end)` (page indexes) of object `id`
/// that lie within the file, in as few host reads as contiguity allows.
pub fn prefetch(id: u32, first: u64, end: u64) -> Result<(), Errno> {
    let (fd, want) = {
        let reg = REG.lock();
        let o = reg.objs.get(&id).ok_or(Errno::EFAULT)?;
        let file_pages = o.size.div_ceil(4096);
        let want: Vec<u64> = (first..end.min(file_pages))
            .filter(|i| !o.pages.contains_key(i))
            .collect();
        (o.fd, want)
    };
    // Contiguous runs of page indexes: one read each (up to MAX_IOVECS).
    let mut i = 0;
    while i < want.len() {
        let mut run: Vec<(u64, u64)> = Vec::new();
        while i < want.len()
            && (run.is_empty() || want[i] == run[run.len() - 1].0 + 1)
            && (run.len() as u64) < MAX_IOVECS
        {
            let Some(gpa) = frames::alloc_zeroed() else {
                run.iter().for_each(|&(_, gpa)| frames::put(gpa));
                return Err(Errno::ENOMEM);
            };
            run.push((want[i], gpa));
            i += 1;
        }
        let iov: Vec<IoVec> = run
            .iter()
            .map(|&(_, gpa)| IoVec { gpa, len: 4096 })
            .collect();
        if let Err(e) = host::io(fd, &iov, Some(run[0].0 * 4096), 0) {
            run.iter().for_each(|&(_, gpa)| frames::put(gpa));
            return Err(e);
        }
        let mut reg = REG.lock();
        let Registry {
            objs, frames: set, ..
        } = &mut *reg;
        let Some(o) = objs.get_mut(&id) else {
            drop(reg);
            run.iter().for_each(|&(_, gpa)| frames::put(gpa));
            return Err(Errno::EFAULT);
        };
        for (idx, gpa) in run {
            if o.pages.contains_key(&idx) {
                frames::put(gpa);
                continue;
            }
            o.pages.insert(
                idx,
                Page {
                    gpa,
                    hash: hash(gpa),
                },
            );
            set.insert(gpa);
        }
    }
    Ok(())
}

/// The frame of page `idx` of object `id`, with one more reference for the
/// caller's PTE; `None` when the page is past the file's end.
pub fn page(id: u32, idx: u64) -> Result<Option<u64>, Errno> {
    let get = || -> Result<Option<Option<u64>>, Errno> {
        let reg = REG.lock();
        let o = reg.objs.get(&id).ok_or(Errno::EFAULT)?;
        if idx >= o.size.div_ceil(4096) {
            return Ok(Some(None));
        }
        Ok(o.pages.get(&idx).map(|p| {
            frames::get(p.gpa);
            Some(p.gpa)
        }))
    };
    if let Some(r) = get()? {
        return Ok(r);
    }
    prefetch(id, idx, idx + 1)?;
    get()?.ok_or(Errno::EFAULT)
}

/// Writes the changed pages of object `id` back to its file (clipped to
/// the file's current size). Errors are logged: a write-back has no caller
/// to tell (as Linux's background write-back).
pub fn flush(id: u32) {
    let Some(fd) = REG.lock().objs.get(&id).map(|o| o.fd) else {
        return;
    };
    let Ok((_, size)) = key_of(fd) else {
        return;
    };
    let dirty: Vec<(u64, u64, u64)> = {
        let mut reg = REG.lock();
        let Some(o) = reg.objs.get_mut(&id) else {
            return;
        };
        o.size = size;
        o.pages
            .iter_mut()
            .filter(|(i, _)| **i * 4096 < size)
            .filter_map(|(&i, p)| {
                let h = hash(p.gpa);
                (h != p.hash).then(|| {
                    p.hash = h;
                    (i, p.gpa, (size - i * 4096).min(4096))
                })
            })
            .collect()
    };
    let mut k = 0;
    while k < dirty.len() {
        let start = dirty[k].0;
        let mut iov: Vec<IoVec> = Vec::new();
        while k < dirty.len()
            && dirty[k].0 == start + iov.len() as u64
            && (iov.len() as u64) < MAX_IOVECS
        {
            iov.push(IoVec {
                gpa: dirty[k].1,
                len: dirty[k].2,
            });
            k += 1;
        }
        if let Err(e) = host::io(fd, &iov, Some(start * 4096), io::WRITE) {
            log::warn!("shared file mapping: write-back at page {start}: {e:?}");
        }
    }
}

/// Reads every loaded page of object `id` from the file again (after a
/// write through a file descriptor); bytes past the end read as zero.
fn reload(id: u32) {
    let Some(fd) = REG.lock().objs.get(&id).map(|o| o.fd) else {
        return;
    };
    let Ok((_, size)) = key_of(fd) else {
        return;
    };
    let (pages, gone) = {
        let mut reg = REG.lock();
        let Registry {
            objs, frames: set, ..
        } = &mut *reg;
        let Some(o) = objs.get_mut(&id) else {
            return;
        };
        o.size = size;
        // Pages wholly past the new end leave the object and every
        // mapping: an access there is SIGBUS, as on Linux.
        let gone = o.pages.split_off(&size.div_ceil(4096));
        let gone: BTreeSet<u64> = gone.values().map(|p| p.gpa).collect();
        gone.iter().for_each(|g| {
            set.remove(g);
        });
        let pages: Vec<(u64, u64)> = o.pages.iter().map(|(&i, p)| (i, p.gpa)).collect();
        (pages, gone)
    };
    if !gone.is_empty() {
        super::swap::unmap_everywhere(&|g| gone.contains(&g));
        gone.iter().for_each(|&g| frames::put(g));
    }
    for &(i, gpa) in &pages {
        let got = if i * 4096 < size {
            host::io(fd, &[IoVec { gpa, len: 4096 }], Some(i * 4096), 0).unwrap_or(0) as u64
        } else {
            0
        };
        if got < 4096 {
            // SAFETY: the tail of a whole user page held by the object.
            unsafe {
                core::ptr::write_bytes((gpa_to_kva(gpa) + got) as *mut u8, 0, (4096 - got) as usize)
            };
        }
    }
    let mut reg = REG.lock();
    if let Some(o) = reg.objs.get_mut(&id) {
        for (i, gpa) in pages {
            if let Some(p) = o.pages.get_mut(&i).filter(|p| p.gpa == gpa) {
                p.hash = hash(gpa);
            }
        }
    }
}

/// Before I/O through `file`: the object of its host file, written back.
/// Returns the object to pass to [`after_write`] for a write.
pub fn before_io(file: &File) -> Option<u32> {
    if COUNT.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let fd = match (file.host_fd(), file.host_kind()) {
        (Some(fd), Some(HostKind::File)) => fd,
        _ => return None,
    };
    let (key, _) = key_of(fd).ok()?;
    let id = REG
        .lock()
        .objs
        .iter()
        .find(|(_, o)| o.key == key)
        .map(|(&id, _)| id)?;
    flush(id);
    Some(id)
}

/// After a write through a file descriptor: the mappings see it.
pub fn after_write(id: Option<u32>) {
    if let Some(id) = id {
        reload(id);
    }
}

/// Writes back every object (sandbox end, hibernation, `sync`).
pub fn sync_all() {
    if COUNT.load(Ordering::Relaxed) == 0 {
        return;
    }
    let ids: Vec<u32> = REG.lock().objs.keys().copied().collect();
    for id in ids {
        flush(id);
    }
}
