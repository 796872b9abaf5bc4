//! The bitmap page allocator for user pages (DESIGN.md, "Guest memory").
//!
//! Memory comes from a [`ChunkSource`] in 4 MiB-aligned chunks of 1024
//! pages. Page 0 of each chunk is its control page (layout in `control.rs`):
//! free-list links, a 64-bit L1 bitmap over a 16 x 64-bit L2 bitmap (bit set
//! = page free, so finding a free page is two `trailing_zeros` scans) and
//! 1024 `AtomicU16` reference counts. Pages 1..=1023 are handed out. The
//! control page of a page is the page address with the low 22 bits cleared.
//!
//! Nothing is ever written into a free page (no free-list pointer, no
//! poisoning), so the host may drop any free page with
//! `madvise(MADV_DONTNEED)` at any time; [`BitmapAllocator::for_each_free_run`]
//! lists them. A page's contents after [`BitmapAllocator::alloc`] are
//! unspecified (old data or zeroes).
//!
//! # Chunks
//! Held chunks with a free page sit on a doubly linked list (through the
//! control pages); `alloc` takes the first one, a chunk that fills up
//! leaves the list and one that gets a page back rejoins at the head. Only
//! when the list is empty is the source asked for a chunk. A chunk whose
//! pages are all free stays cached until more than [`FREE_CHUNK_CACHE`]
//! such chunks exist, then goes back to the source: alloc/free at a chunk
//! boundary does not thrash, and a cached chunk costs only its control page
//! once its free pages have been reclaimed.
//!
//! # Ownership check
//! Every call taking a page address first checks, without touching memory,
//! that it is page aligned, not a control page, and inside a held chunk:
//! held chunks are bits in a fixed window bitmap (`owned.rs`: 4096 chunks =
//! 16 GiB, 512 bytes, one range check plus one atomic load). Addresses not
//! from this allocator get [`AllocError::NotOwned`]; a double free, a
//! reference to a free page or a count going below zero get their own
//! errors. A page freed and handed out again cannot be told apart from the
//! old one (ABA), as with any allocator.
//!
//! # Concurrency
//! One lock, `inner` (a spin mutex over the list, the source and the
//! counters), taken by `alloc`, `free`, `stats`, `for_each_free_run`, by
//! `dec_ref` when the count reaches 0 and by a [`PageCache`] when it
//! refills or flushes. There is no other lock, so no order to respect;
//! never call back into the allocator from the `for_each_free_run` callback
//! (it runs under the lock). `inc_ref`, `dec_ref`, `refcount` and the page
//! cache's `alloc`/`free`/`dec_ref` are lock-free: they check ownership,
//! then touch the control page with one atomic at most. A racy misuse (a
//! reference taken on a page whose chunk is being released) may still reach
//! a control page after its chunk went back to the source; the
//! [`ChunkSource`] contract keeps that memory mapped and used by this
//! allocator only, and control pages are only ever written with atomics, so
//! such a call reads a retired control page (all counts 0) and gets an
//! error, never a fault or a data race.
//!
//! # Per-CPU page caches
//! A [`PageCache`] (one per CPU in a kernel) keeps up to [`CACHE_PAGES`]
//! pages reserved from the bitmaps: their bits are clear (in use) and their
//! counts 0. It refills by taking whole L2 words (up to 64 pages) in one
//! lock hold and flushes [`CACHE_BATCH`] pages back in one, so the common
//! single-page `alloc` + `free` touches no lock and makes one atomic
//! read-modify-write (the `free`'s count 1 -> 0). Reserved pages are not in
//! [`BitmapAllocator::for_each_free_run`]: drain the caches before a
//! reclaim. [`AllocStats`] counts them as in use.

mod cache;
#[cfg(test)]
mod cache_tests;
mod control;
mod list;
mod owned;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use core::fmt;
use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use spin::Mutex;

pub use cache::{CACHE_BATCH, CACHE_PAGES, PageCache};
use control::ControlPage;
use list::ChunkList;
use owned::OwnedChunks;
pub use owned::WINDOW_CHUNKS;

/// Bytes per page.
pub const PAGE_SIZE: usize = 4096;
/// Bytes per chunk; chunks are aligned to their size.
pub const CHUNK_SIZE: usize = 4 << 20;
/// Pages per chunk, including the control page.
pub const PAGES_PER_CHUNK: usize = CHUNK_SIZE / PAGE_SIZE;
/// Pages per chunk that can be handed out (all but the control page).
pub const USABLE_PAGES_PER_CHUNK: usize = PAGES_PER_CHUNK - 1;
/// Fully free chunks kept before extra ones go back to the source.
pub const FREE_CHUNK_CACHE: usize = 2;

const CHUNK_MASK: usize = CHUNK_SIZE - 1;

/// What a bad call gets.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum AllocError {
    /// `free` of a page that is already free.
    DoubleFree,
    /// Not a usable page of a chunk this allocator holds: a foreign address,
    /// a control page, or an address that is not page aligned.
    NotOwned,
    /// `dec_ref` of a page whose count is already 0 (a free page).
    RefcountUnderflow,
    /// `inc_ref` of a page whose count is already `u16::MAX`.
    RefcountOverflow,
    /// `inc_ref` of a free page.
    NotAllocated,
    /// `free` of a page with more than one reference (use `dec_ref`).
    StillReferenced,
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::DoubleFree => "double free: the page is already free",
            Self::NotOwned => {
                "not a page of this allocator (foreign address, control page or misaligned)"
            }
            Self::RefcountUnderflow => "reference count underflow: the page is already free",
            Self::RefcountOverflow => "reference count overflow: the page has 65535 references",
            Self::NotAllocated => "cannot take a reference to a free page",
            Self::StillReferenced => "cannot free a page with other references (use dec_ref)",
        })
    }
}

impl core::error::Error for AllocError {}

/// A snapshot of the allocator's counters.
#[derive(Debug, PartialEq, Eq, Clone, Copy, Default)]
pub struct AllocStats {
    /// Chunks held (taken from the source and not given back).
    pub chunks: usize,
    /// Held chunks whose pages are all free (the cache, see [`FREE_CHUNK_CACHE`]).
    pub free_chunks: usize,
    /// Pages handed out and not yet freed.
    pub pages_in_use: usize,
    /// Free pages in held chunks (control pages not counted).
    pub pages_free: usize,
}

/// Where chunks come from.
///
/// # Safety
/// `alloc_chunk` returns `None` or the address of a [`CHUNK_SIZE`]-byte
/// region that is aligned to [`CHUNK_SIZE`], readable and writable through
/// that address, and used by nobody but the allocator until it is passed
/// back to `free_chunk`; it is not handed out again meanwhile. The memory
/// stays valid for as long as the allocator holds the chunk (the allocator
/// owns the source, so at least until the allocator is dropped). Chunks the
/// allocator is to track must lie in its ownership window (see
/// [`BitmapAllocator::with_window_base`]); others are given back.
///
/// A chunk given back with `free_chunk` may be handed out again (to the
/// same allocator), but its memory stays mapped, readable and writable, and
/// is used for nothing else, until the source is dropped: a racy misuse of
/// a lock-free call may still read the retired control page (see the
/// module's "Concurrency").
pub unsafe trait ChunkSource {
    /// A fresh chunk, or `None` when out of memory.
    fn alloc_chunk(&mut self) -> Option<usize>;
    /// Takes back a chunk returned by `alloc_chunk`.
    fn free_chunk(&mut self, chunk: usize);
}

/// Under the lock.
struct Inner<S> {
    source: S,
    /// Also keeps the free page and fully free chunk totals.
    list: ChunkList,
    chunks: usize,
}

/// The page allocator. See the module documentation.
pub struct BitmapAllocator<S: ChunkSource> {
    inner: Mutex<Inner<S>>,
    owned: OwnedChunks,
}

impl<S: ChunkSource> BitmapAllocator<S> {
    /// An allocator that takes chunks from `source`. The ownership window
    /// is centred on the first chunk it gets (chunks more than 8 GiB away
    /// from it are given back unused).
    pub const fn new(source: S) -> Self {
        Self::build(source, None)
    }

    /// An allocator whose ownership window is `[base, base + 16 GiB)`
    /// ([`WINDOW_CHUNKS`] chunks); the kernel passes the start of its
    /// direct map. Panics (at compile time in a `static`) if `base` is not
    /// 4 MiB aligned.
    pub const fn with_window_base(source: S, base: usize) -> Self {
        Self::build(source, Some(base))
    }

    const fn build(source: S, base: Option<usize>) -> Self {
        Self {
            inner: Mutex::new(Inner {
                source,
                list: ChunkList::new(),
                chunks: 0,
            }),
            owned: OwnedChunks::new(base),
        }
    }

    /// Allocates a page with reference count 1, or `None` if the source is
    /// out of chunks.
    #[inline]
    pub fn alloc(&self) -> Option<usize> {
        let mut inner = self.inner.lock();
        let chunk = match inner.list.first() {
            Some(chunk) => chunk,
            None => self.grow(&mut inner)?,
        };
        // SAFETY: chunks on the list are held and initialised, and we hold
        // the lock, so the chunk stays held while `cp` lives.
        let cp = unsafe { ControlPage::at(chunk) };
        let (index, left) = cp.take_page().expect("a chunk on the list has a free page");
        // The page came from the head, whose counts the list does not
        // total: nothing to update unless the chunk is now full.
        if left == 0 {
            inner.list.unlink(chunk);
        }
        // A free page's count is 0 and only changes under the lock: no
        // lock-free call raises a count from 0.
        cp.refcount(index).store(1, Release);
        drop(inner);
        Some(chunk + index * PAGE_SIZE)
    }

    /// Takes a chunk from the source, sets up its control page and puts it
    /// on the list.
    #[cold]
    #[inline(never)]
    fn grow(&self, inner: &mut Inner<S>) -> Option<usize> {
        let chunk = inner.source.alloc_chunk()?;
        if chunk == 0 || chunk & CHUNK_MASK != 0 || self.owned.contains(chunk) {
            // The source broke its contract; touch nothing.
            debug_assert!(false, "ChunkSource returned a bad chunk {chunk:#x}");
            return None;
        }
        if self.owned.slot_for_new(chunk).is_none() {
            inner.source.free_chunk(chunk);
            return None;
        }
        // SAFETY: by the `ChunkSource` contract the chunk is ours alone,
        // readable and writable, and it is 4 MiB aligned (checked above). It
        // is not in `owned` yet, so no lock-free reader can reach it, and we
        // hold the lock.
        unsafe { ControlPage::init(chunk) };
        self.owned.insert(chunk);
        inner.list.push_front(chunk);
        inner.chunks += 1;
        Some(chunk)
    }

    /// Frees `page`, whose reference count must be 1.
    #[inline]
    pub fn free(&self, page: usize) -> Result<(), AllocError> {
        let (chunk, index) = self.claim_last_ref(page)?;
        // We took the count to 0, so only we free the page, and its chunk
        // (with this page still marked in use) cannot be released first.
        self.release_page(&mut self.inner.lock(), chunk, index)
    }

    /// Moves free pages into `out` (reserving them: bit clear, count 0)
    /// under one lock hold, whole L2 words at a time from the head chunk,
    /// taking chunks from the source as needed. Returns how many, 0 only
    /// when the source is out of chunks.
    pub(super) fn reserve(&self, out: &mut [usize]) -> usize {
        let mut inner = self.inner.lock();
        let mut n = 0;
        while n < out.len() {
            let chunk = match inner.list.first() {
                Some(chunk) => chunk,
                None => match self.grow(&mut inner) {
                    Some(chunk) => chunk,
                    None => break,
                },
            };
            // SAFETY: chunks on the list are held and initialised, and we
            // hold the lock.
            let cp = unsafe { ControlPage::at(chunk) };
            let (first, mut bits, left) = cp
                .take_word(out.len() - n)
                .expect("a chunk on the list has a free page");
            if left == 0 {
                inner.list.unlink(chunk);
            }
            while bits != 0 {
                out[n] = chunk + (first + bits.trailing_zeros() as usize) * PAGE_SIZE;
                bits &= bits - 1;
                n += 1;
            }
        }
        n
    }

    /// Gives reserved pages (count 0, from [`Self::reserve`] or freed into
    /// a cache) back to the bitmaps under one lock hold. A page that is not
    /// reserved is skipped; the first such error is returned.
    pub(super) fn unreserve(&self, pages: &[usize]) -> Result<(), AllocError> {
        let mut inner = self.inner.lock();
        let mut result = Ok(());
        for &page in pages {
            let r = self
                .locate(page)
                .and_then(|(chunk, index)| self.release_page(&mut inner, chunk, index));
            if result.is_ok() {
                result = r;
            }
        }
        result
    }

    /// Adds a reference to an allocated page; returns the new count.
    pub fn inc_ref(&self, page: usize) -> Result<u16, AllocError> {
        let (cp, _, index) = self.lookup(page)?;
        match cp
            .refcount(index)
            .fetch_update(Relaxed, Relaxed, |c| match c {
                0 => None,
                c => c.checked_add(1),
            }) {
            Ok(old) => Ok(old + 1),
            Err(0) => Err(AllocError::NotAllocated),
            Err(_) => Err(AllocError::RefcountOverflow),
        }
    }

    /// Drops a reference; returns the remaining count. At 0 the page is
    /// freed.
    pub fn dec_ref(&self, page: usize) -> Result<u16, AllocError> {
        let (chunk, index, left) = self.drop_ref(page)?;
        if left == 0 {
            // We took the count to 0, so only we free the page, and its
            // chunk (with this page still marked in use) cannot be released
            // before we do.
            self.release_page(&mut self.inner.lock(), chunk, index)?;
        }
        Ok(left)
    }

    /// The reference count of `page`: 0 if it is free.
    pub fn refcount(&self, page: usize) -> Result<u16, AllocError> {
        let (cp, _, index) = self.lookup(page)?;
        Ok(cp.refcount(index).load(Acquire))
    }

    /// Calls `f(start, len)` (addresses and lengths in bytes) for every
    /// maximal run of contiguous free pages in held chunks, in ascending
    /// address order; runs would merge across a chunk boundary, but the next
    /// chunk's control page always separates them. Control pages are never
    /// included. `f` runs under the allocator lock, so the pages stay free
    /// while it runs (safe to `madvise` them); it must not call the
    /// allocator.
    pub fn for_each_free_run(&self, mut f: impl FnMut(usize, usize)) {
        let _inner = self.inner.lock();
        let mut run: Option<(usize, usize)> = None;
        self.owned.for_each(|chunk| {
            // SAFETY: the chunk is in the ownership record and we hold the
            // lock, so it is held and initialised and stays so.
            let cp = unsafe { ControlPage::at(chunk) };
            cp.for_each_free_run(|first, count| {
                let (start, len) = (chunk + first * PAGE_SIZE, count * PAGE_SIZE);
                run = match run {
                    Some((s, l)) if s + l == start => Some((s, l + len)),
                    Some((s, l)) => {
                        f(s, l);
                        Some((start, len))
                    }
                    None => Some((start, len)),
                };
            });
        });
        if let Some((s, l)) = run {
            f(s, l);
        }
    }

    /// Calls `f(start, len)` for every maximal run of free pages in the one
    /// chunk at `chunk` (4 MiB aligned), in ascending order, under the lock
    /// as [`Self::for_each_free_run`]. Returns false, calling nothing, if
    /// the chunk is not held (never taken, or given back to the source).
    pub fn for_each_free_run_in(&self, chunk: usize, mut f: impl FnMut(usize, usize)) -> bool {
        let _inner = self.inner.lock();
        if chunk & CHUNK_MASK != 0 || !self.owned.contains(chunk) {
            return false;
        }
        // SAFETY: the chunk is in the ownership record and we hold the lock,
        // so it is held and initialised and stays so.
        let cp = unsafe { ControlPage::at(chunk) };
        cp.for_each_free_run(|first, count| f(chunk + first * PAGE_SIZE, count * PAGE_SIZE));
        true
    }

    /// The current counters.
    pub fn stats(&self) -> AllocStats {
        let inner = self.inner.lock();
        let pages_free = inner.list.free_pages();
        AllocStats {
            chunks: inner.chunks,
            free_chunks: inner.list.free_chunks(),
            pages_in_use: inner.chunks * USABLE_PAGES_PER_CHUNK - pages_free,
            pages_free,
        }
    }

    /// Splits `page` into (chunk, index) after checking that it is a usable
    /// page of a held chunk. Touches no chunk memory.
    #[inline]
    fn locate(&self, page: usize) -> Result<(usize, usize), AllocError> {
        let (chunk, index) = Self::split(page)?;
        if !self.owned.contains(chunk) {
            return Err(AllocError::NotOwned);
        }
        Ok((chunk, index))
    }

    /// Splits `page` into (chunk, index) if it is page aligned and not a
    /// control page; says nothing about ownership.
    #[inline]
    fn split(page: usize) -> Result<(usize, usize), AllocError> {
        let (chunk, index) = (page & !CHUNK_MASK, (page & CHUNK_MASK) / PAGE_SIZE);
        if !page.is_multiple_of(PAGE_SIZE) || index == 0 {
            return Err(AllocError::NotOwned);
        }
        Ok((chunk, index))
    }

    /// `locate` for lock-free calls.
    #[inline]
    fn lookup(&self, page: usize) -> Result<(&ControlPage, usize, usize), AllocError> {
        let (chunk, index) = self.locate(page)?;
        // SAFETY: the chunk is in the ownership record, so its control page
        // was initialised; if the chunk goes back to the source meanwhile
        // (only a racy misuse lets that happen to a page the caller
        // references), the `ChunkSource` contract keeps its memory mapped
        // and ours until the source, owned by `self`, is dropped.
        let cp = unsafe { ControlPage::at(chunk) };
        Ok((cp, chunk, index))
    }

    /// Drops one reference to `page` lock-free: returns its chunk, index
    /// and the count left. The caller frees the page at 0.
    #[inline]
    fn drop_ref(&self, page: usize) -> Result<(usize, usize, u16), AllocError> {
        let (cp, chunk, index) = self.lookup(page)?;
        let old = cp
            .refcount(index)
            .fetch_update(AcqRel, Acquire, |c| c.checked_sub(1))
            .map_err(|_| AllocError::RefcountUnderflow)?;
        Ok((chunk, index, old - 1))
    }

    /// Takes count 1 -> 0 for a `free` (lock-free): exactly one of racing
    /// `free`s and `inc_ref`s wins. Returns the chunk and index.
    #[inline]
    fn claim_last_ref(&self, page: usize) -> Result<(usize, usize), AllocError> {
        let (cp, chunk, index) = self.lookup(page)?;
        match cp.refcount(index).compare_exchange(1, 0, AcqRel, Acquire) {
            Ok(_) => Ok((chunk, index)),
            Err(0) => Err(AllocError::DoubleFree),
            Err(_) => Err(AllocError::StillReferenced),
        }
    }

    /// Marks page `index` of held `chunk` free (its count is already 0),
    /// and moves the chunk onto the list or back to the source as needed.
    #[inline]
    fn release_page(
        &self,
        inner: &mut Inner<S>,
        chunk: usize,
        index: usize,
    ) -> Result<(), AllocError> {
        // SAFETY: the chunk is held (the page being freed is still marked in
        // use, and chunks with a page in use are never released) and we hold
        // the lock.
        let cp = unsafe { ControlPage::at(chunk) };
        let Some(now) = cp.put_page(index) else {
            return Err(AllocError::DoubleFree);
        };
        if now == 1 {
            // It was full, hence off the list.
            inner.list.push_front(chunk);
            return Ok(());
        }
        inner.list.page_returned(chunk, now);
        if now == USABLE_PAGES_PER_CHUNK && inner.list.free_chunks() > FREE_CHUNK_CACHE {
            self.try_release(inner, chunk);
        }
        Ok(())
    }

    /// Gives the fully free `chunk` back to the source.
    #[cold]
    #[inline(never)]
    fn try_release(&self, inner: &mut Inner<S>, chunk: usize) {
        self.owned.remove(chunk);
        inner.list.unlink(chunk);
        // SAFETY: we still hold the chunk (it has not gone to the source
        // yet) and the lock.
        unsafe { ControlPage::at(chunk) }.retire();
        inner.chunks -= 1;
        inner.source.free_chunk(chunk);
    }
}

impl<S: ChunkSource> Drop for BitmapAllocator<S> {
    /// Gives every held chunk back to the source, pages in use or not.
    fn drop(&mut self) {
        let inner = self.inner.get_mut();
        let owned = &self.owned;
        owned.for_each(|chunk| {
            // SAFETY: `&mut self`: nobody else uses the allocator, and the
            // chunk is held until `free_chunk` below.
            unsafe { ControlPage::at(chunk) }.retire();
            owned.remove(chunk);
            inner.source.free_chunk(chunk);
        });
    }
}
