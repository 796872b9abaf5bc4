//! User pages: every user page comes from the bitmap page allocator
//! (`qlib::bitmap_alloc`), whose chunks are 4 MiB pieces of guest RAM seen
//! through the direct map. Page addresses handed to the rest of the kernel
//! are guest-physical.
//!
//! Allocation and the last reference's free go through the vCPU's page
//! cache ([`PageCache`]: up to 128 pages reserved from the bitmaps, refilled
//! and flushed a whole L2 word at a time), so a fault-around of 16 pages
//! takes the allocator lock at most once. Reclaim drains the cache first:
//! reserved pages are not free in the bitmaps. One vCPU: the cache's spin
//! lock is never contended (lock order: `CACHE` before the allocator's
//! own lock).

use core::sync::atomic::{AtomicU64, Ordering};

use qlib::abi::{Call, IoVec};
use qlib::bitmap_alloc::{
    AllocError, AllocStats, BitmapAllocator, CHUNK_SIZE, ChunkSource, PageCache,
};
use qlib::layout::DIRECT_MAP;
use spin::Mutex;

use super::gpa_to_kva;
use crate::hostcall;

/// Guest RAM handed out as chunks: a bump range plus a stack of returned
/// chunks.
pub struct ChunkPool;

static POOL_START: AtomicU64 = AtomicU64::new(0);
static POOL_NEXT: AtomicU64 = AtomicU64::new(0);
static POOL_END: AtomicU64 = AtomicU64::new(0);
/// Chunks given back (guest-physical), reused before the bump range.
static RETURNED: Mutex<([u64; 512], usize)> = Mutex::new(([0; 512], 0));

// SAFETY: chunks are 4 MiB-aligned pieces of guest RAM between the end of
// the kernel image and the boot data (set once by `init`), reached through
// the direct map (readable, writable); each is handed out once until it is
// returned.
unsafe impl ChunkSource for ChunkPool {
    fn alloc_chunk(&mut self) -> Option<usize> {
        let mut ret = RETURNED.lock();
        if ret.1 > 0 {
            ret.1 -= 1;
            return Some(gpa_to_kva(ret.0[ret.1]) as usize);
        }
        let next = POOL_NEXT.load(Ordering::Relaxed);
        if next + CHUNK_SIZE as u64 > POOL_END.load(Ordering::Relaxed) {
            return None;
        }
        POOL_NEXT.store(next + CHUNK_SIZE as u64, Ordering::Relaxed);
        Some(gpa_to_kva(next) as usize)
    }

    fn free_chunk(&mut self, chunk: usize) {
        let mut ret = RETURNED.lock();
        let n = ret.1;
        if n < ret.0.len() {
            ret.0[n] = chunk as u64 - DIRECT_MAP;
            ret.1 += 1;
        } else {
            // 512 chunks cover 2 GiB, the most guest RAM there is.
            log::error!(
                "chunk pool full: chunk {:#x} is lost",
                chunk as u64 - DIRECT_MAP
            );
        }
    }
}

static FRAMES: BitmapAllocator<ChunkPool> =
    BitmapAllocator::with_window_base(ChunkPool, DIRECT_MAP as usize);

/// The vCPU's page cache (module doc).
static CACHE: Mutex<PageCache<'static, ChunkPool>> = Mutex::new(PageCache::new(&FRAMES));

/// Gives the allocator the guest-physical range `[start, end)` (rounded
/// inwards to chunks).
pub fn init(start: u64, end: u64) {
    let chunk = CHUNK_SIZE as u64;
    POOL_START.store(start.next_multiple_of(chunk), Ordering::Relaxed);
    POOL_NEXT.store(start.next_multiple_of(chunk), Ordering::Relaxed);
    POOL_END.store(end & !(chunk - 1), Ordering::Relaxed);
}

/// A zero-filled user page (guest-physical), reference count 1.
///
/// Free pages are always zero here, so allocation writes nothing: a page
/// from a fresh chunk is untouched host memory (zero), a reclaimed page
/// comes back zero from the host, and [`put`] zeroes a page before the
/// last reference goes. This keeps the fault path from touching host
/// memory the program has not touched yet (each first touch costs the
/// host a fault).
pub fn alloc_zeroed() -> Option<u64> {
    let va = CACHE.lock().alloc()?;
    Some(va as u64 - DIRECT_MAP)
}

/// Drops one reference to a user page; the last one zeroes and frees it.
pub fn put(gpa: u64) {
    // Not a user frame: a kernel page mapped into user space
    // (`arch::user_return`), which unmapping only removes.
    if gpa < POOL_START.load(Ordering::Relaxed) || gpa >= POOL_END.load(Ordering::Relaxed) {
        return;
    }
    let va = gpa_to_kva(gpa) as usize;
    if FRAMES.refcount(va) == Ok(1) {
        // SAFETY: we hold the last reference to this page (one vCPU, so no
        // reference can be taken meanwhile); it lies in the direct map.
        unsafe { core::ptr::write_bytes(va as *mut u8, 0, 4096) };
    }
    if let Err(e) = CACHE.lock().dec_ref(va) {
        report(gpa, e);
    }
}

/// The reference count of `gpa` if it is an allocated user page; 0 for a
/// free page, a chunk's control page or memory outside the pool.
pub fn user_refs(gpa: u64) -> u16 {
    let start = POOL_START.load(Ordering::Relaxed);
    if gpa < start
        || gpa >= POOL_END.load(Ordering::Relaxed)
        || gpa.is_multiple_of(CHUNK_SIZE as u64)
    {
        return 0;
    }
    FRAMES.refcount(gpa_to_kva(gpa) as usize).unwrap_or(0)
}

/// Drops one reference to a user page whose contents the host is about to
/// drop (hibernation: the page is in the swap file and the next reclaim
/// hands it back): no zeroing, which would only make the host allocate
/// memory for it again. Free pages read as zero once reclaimed.
pub fn put_swapped(gpa: u64) {
    if let Err(e) = CACHE.lock().dec_ref(gpa_to_kva(gpa) as usize) {
        report(gpa, e);
    }
}

/// Takes one more reference to a user page (file-window and kernel pages
/// are not counted: nothing frees them).
pub fn get(gpa: u64) {
    if gpa < POOL_START.load(Ordering::Relaxed) || gpa >= POOL_END.load(Ordering::Relaxed) {
        return;
    }
    if let Err(e) = FRAMES.inc_ref(gpa_to_kva(gpa) as usize) {
        report(gpa, e);
    }
}

fn report(gpa: u64, e: AllocError) {
    log::error!("page allocator: {e} (page {gpa:#x})");
    debug_assert!(false, "page allocator: {e} (page {gpa:#x})");
}

/// Allocator statistics; pages in the vCPU's cache count as free.
pub fn stats() -> AllocStats {
    let cache = CACHE.lock();
    let mut s = FRAMES.stats();
    s.pages_in_use -= cache.len();
    s.pages_free += cache.len();
    s
}

/// The page-aligned ranges of the boot-data images (`program`, `interp`),
/// each rounded up to the page the VMM padded it to (`qvisor::boot`
/// places every part on a page boundary); empty images and ranges outside
/// `[boot_data, mem_size)` are left out.
pub fn boot_image_ranges(images: [IoVec; 2], boot_data: u64, mem_size: u64) -> [IoVec; 2] {
    images.map(|v| {
        let end = v.gpa.checked_add(v.len).map(|e| e.next_multiple_of(4096));
        match end {
            Some(end)
                if v.len > 0
                    && v.gpa >= boot_data
                    && v.gpa.is_multiple_of(4096)
                    && end <= mem_size =>
            {
                IoVec {
                    gpa: v.gpa,
                    len: end - v.gpa,
                }
            }
            _ => IoVec { gpa: 0, len: 0 },
        }
    })
}

/// Hands the boot data's program and interpreter images back to the host
/// once the loader has copied their segments into user pages: nothing
/// reads them again (`execve` reads files), and they are the size of the
/// program (6.6 MiB for python3), held in guest RAM for the sandbox's life
/// otherwise, hibernated or not. The VMM drops their host pages (they read
/// back as zero). Returns the bytes handed back.
pub fn discard_boot_images(images: [IoVec; 2], boot_data: u64, mem_size: u64) -> u64 {
    let mut ranges = boot_image_ranges(images, boot_data, mem_size);
    // Non-empty ranges first: the VMM gets only those.
    ranges.sort_by_key(|r| r.len == 0);
    let n = ranges.iter().filter(|r| r.len > 0).count();
    if n == 0 {
        return 0;
    }
    let (gpa, _) = hostcall::iovecs(&ranges);
    let rc = hostcall::call(Call::Reclaim, [gpa, n as u64, 1, 0, 0, 0]);
    if rc < 0 {
        log::warn!("boot images not handed back: {rc}");
        return 0;
    }
    rc as u64
}

/// Calls `f(gpa, len)` for every chunk the allocator gave back to the pool.
pub fn for_each_returned_chunk(mut f: impl FnMut(u64, u64)) {
    let ret = RETURNED.lock();
    for &gpa in &ret.0[..ret.1] {
        f(gpa, CHUNK_SIZE as u64);
    }
}

/// Calls `f(gpa, len)` for every run of free pages (for reclaim), after
/// giving the cached pages back to the bitmaps.
pub fn for_each_free_run(mut f: impl FnMut(u64, u64)) {
    CACHE.lock().drain();
    FRAMES.for_each_free_run(|va, len| f(va as u64 - DIRECT_MAP, len as u64));
}
