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

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use qlib::abi::{Call, IoVec, POPULATE_MAX};
use qlib::bitmap_alloc::{
    AllocError, AllocStats, BitmapAllocator, CACHE_BATCH, CHUNK_SIZE, ChunkSource, PageCache,
};
use qlib::layout::DIRECT_MAP;
use spin::Mutex;

use super::gpa_to_kva;

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
    // One vCPU and no preemption of kernel code: a plain load and store.
    let net = FREED_NET.load(Ordering::Relaxed);
    FREED_NET.store(net.saturating_sub(1), Ordering::Relaxed);
    let gpa = va as u64 - DIRECT_MAP;
    if gpa >= BACKED_TO.load(Ordering::Relaxed) {
        back_ahead(gpa);
    }
    Some(gpa)
}

/// Fresh guest RAM is backed by the host a block at a time, when the
/// allocator first hands out a page of the block (docs/coldstart.md,
/// "Fresh memory backed ahead"): one host call instead of a host fault
/// inside the hypervisor's shadow fault for each page, and with the host
/// page present the hypervisor maps the neighbouring PTEs in the same
/// shadow fault. One cache refill (64 pages, a whole bitmap word, aligned)
/// is a block, so at most one block's worth is backed before it is used.
const BACK_BLOCK: u64 = (CACHE_BATCH * 4096) as u64;

/// The end of the highest block backed so far. Chunks come from the pool
/// in address order and a fresh chunk's words in order, so a page below
/// it was backed, or reused (resident since its first use), or skipped.
static BACKED_TO: AtomicU64 = AtomicU64::new(0);

/// Set when the host cannot populate (an old kernel): no more asking.
static BACK_OFF: AtomicBool = AtomicBool::new(false);

#[cold]
fn back_ahead(gpa: u64) {
    let block = gpa & !(BACK_BLOCK - 1);
    let end = block + BACK_BLOCK;
    // Another vCPU backing the same block (or a later one) does it.
    if BACKED_TO.fetch_max(end, Ordering::Relaxed) < end {
        back(block, BACK_BLOCK);
    }
}

/// Asks the host to back the page-aligned guest RAM `[gpa, gpa + len)`
/// now (at most [`POPULATE_MAX`] of it), unless it cannot or the sandbox
/// is hibernated (its memory stays dropped). Also for the kernel heap's
/// growth (`super::heap`).
pub fn back(gpa: u64, len: u64) {
    if BACK_OFF.load(Ordering::Relaxed) || super::swap::asleep() {
        return;
    }
    let args = [gpa, len.min(POPULATE_MAX), 0, 0, 0, 0];
    if crate::hostcall::hint(Call::Populate, args).is_some_and(|rc| rc < 0) {
        log::debug!("the host cannot back guest RAM ahead: not asking again");
        BACK_OFF.store(true, Ordering::Relaxed);
    }
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
    match CACHE.lock().dec_ref(va) {
        Ok(0) => note_freed(gpa),
        Ok(_) => {}
        Err(e) => report(gpa, e),
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

/// Pages the running program must have freed (net of what it allocated
/// since) before the guest hands free memory back to the host on its own:
/// 2 MiB. One `Reclaim` host call (~30 us) then covers at least 2 MiB, and
/// a program that allocates and frees less than that in a loop never pays
/// a host call (nor the host faults that refill dropped pages).
pub const RETURN_THRESHOLD_PAGES: u64 = 512;

/// Pages freed since the last hand-back minus pages allocated since, never
/// below 0 (an allocation burst must not hide the frees that follow it).
static FREED_NET: AtomicU64 = AtomicU64::new(0);

/// Chunks of the pool (bit `i`: the chunk at `POOL_START + i * 4 MiB`) in
/// which a page was freed since the last hand-back: 512 chunks cover 2 GiB,
/// the most guest RAM there is.
static DIRTY: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];

fn note_freed(gpa: u64) {
    let i = (gpa - POOL_START.load(Ordering::Relaxed)) / CHUNK_SIZE as u64;
    if let Some(word) = DIRTY.get(i as usize / 64) {
        word.fetch_or(1 << (i % 64), Ordering::Relaxed);
    }
    FREED_NET.fetch_add(1, Ordering::Relaxed);
    FREED_SINCE.fetch_add(1, Ordering::Relaxed);
}

/// `pages` became heap slack (`super::slack`): they count toward a
/// hand-back as freed pages do.
pub fn note_slack(pages: u64) {
    FREED_NET.fetch_add(pages, Ordering::Relaxed);
    FREED_SINCE.fetch_add(pages, Ordering::Relaxed);
}

/// `pages` of heap slack went back into the heap: as an allocation.
pub fn note_slack_reused(pages: u64) {
    let net = FREED_NET.load(Ordering::Relaxed);
    FREED_NET.store(net.saturating_sub(pages), Ordering::Relaxed);
}

/// Pages freed since the last hand-back, allocations not subtracted: what
/// decides a (deferred) hand-back before a wait. A request that frees and
/// reallocates its memory leaves a low net count but its free pages are
/// still there once it waits.
static FREED_SINCE: AtomicU64 = AtomicU64::new(0);

/// Whether enough freed pages have gathered to hand them back before the
/// next wait ([`RETURN_THRESHOLD_PAGES`]).
#[inline]
pub fn return_due() -> bool {
    FREED_SINCE.load(Ordering::Relaxed) >= RETURN_THRESHOLD_PAGES
}

/// Pages freed (net) that go back at once, at the next syscall, rather
/// than at the next wait: 64 MiB. Below that a running program keeps its
/// freed pages until it waits: handing them back while it runs made it
/// fault every page in again on the host when it reused them.
pub const RETURN_URGENT_PAGES: u64 = 16_384;

/// Whether so many freed pages have gathered that they go back now
/// ([`RETURN_URGENT_PAGES`]).
#[inline]
pub fn return_urgent() -> bool {
    FREED_NET.load(Ordering::Relaxed) >= RETURN_URGENT_PAGES
}

/// Appends to `out` the free memory of every chunk a page was freed in
/// since the last call (its free runs if the allocator still holds it, the
/// whole chunk if it went back to the pool), after giving the vCPU's cached
/// pages back to the bitmaps; contiguous ranges are merged. Resets the
/// count. Nothing may allocate until the ranges are handed back (one vCPU:
/// the caller makes its host calls straight away).
pub fn take_freed_runs(out: &mut alloc::vec::Vec<IoVec>) {
    FREED_NET.store(0, Ordering::Relaxed);
    FREED_SINCE.store(0, Ordering::Relaxed);
    CACHE.lock().drain();
    let start = POOL_START.load(Ordering::Relaxed);
    let mut push = |gpa: u64, len: u64| match out.last_mut() {
        Some(last) if last.gpa + last.len == gpa => last.len += len,
        _ => out.push(IoVec { gpa, len }),
    };
    for (w, word) in DIRTY.iter().enumerate() {
        let mut bits = word.swap(0, Ordering::Relaxed);
        while bits != 0 {
            let i = w as u64 * 64 + u64::from(bits.trailing_zeros());
            bits &= bits - 1;
            let chunk = start + i * CHUNK_SIZE as u64;
            let held = FRAMES.for_each_free_run_in(gpa_to_kva(chunk) as usize, |va, len| {
                push(va as u64 - DIRECT_MAP, len as u64)
            });
            if !held {
                // Back in the pool: every page of it is free (a chunk goes
                // back only when all its pages are), its control page
                // retired; it reads as zeros once dropped, which is how a
                // fresh chunk starts.
                push(chunk, CHUNK_SIZE as u64);
            }
        }
    }
}

/// Forgets the freed pages gathered so far: a full reclaim hands back
/// every free page anyway.
pub fn forget_freed() {
    FREED_NET.store(0, Ordering::Relaxed);
    FREED_SINCE.store(0, Ordering::Relaxed);
    for word in &DIRTY {
        word.store(0, Ordering::Relaxed);
    }
}
