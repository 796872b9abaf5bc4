//! A per-CPU page cache in front of the bitmaps (module doc of `mod.rs`,
//! "Per-CPU page caches").
//!
//! The cache is a stack of reserved pages: bit clear in their chunk's L2
//! word (so nobody else allocates them) and count 0 (so a second `free`,
//! an `inc_ref` or a `dec_ref` of one is refused exactly as for a free
//! page). `alloc` pops one and sets its count to 1; `free` takes the count
//! from 1 to 0 with one compare-and-swap and pushes the page. When empty it
//! reserves up to [`CACHE_BATCH`] pages in one lock hold, whole L2 words at
//! a time, which only a bitmap allows; when full it gives the
//! [`CACHE_BATCH`] oldest back in one.
//!
//! A cache is one CPU's: it needs `&mut`, so a kernel keeps one per CPU
//! and uses it with that CPU's interrupts (or at least the allocating
//! paths) kept out. Dropping it gives its pages back.

use core::sync::atomic::Ordering::Release;

use super::control::ControlPage;
use super::{AllocError, BitmapAllocator, ChunkSource};

/// Pages a cache holds at most.
pub const CACHE_PAGES: usize = 128;
/// Pages moved per refill or flush.
pub const CACHE_BATCH: usize = 64;

const _: () = assert!(CACHE_BATCH > 0 && CACHE_BATCH <= CACHE_PAGES);

/// One CPU's stack of reserved pages. See the module documentation.
pub struct PageCache<'a, S: ChunkSource> {
    alloc: &'a BitmapAllocator<S>,
    len: usize,
    pages: [usize; CACHE_PAGES],
}

impl<'a, S: ChunkSource> PageCache<'a, S> {
    /// An empty cache over `alloc`.
    pub const fn new(alloc: &'a BitmapAllocator<S>) -> Self {
        Self {
            alloc,
            len: 0,
            pages: [0; CACHE_PAGES],
        }
    }

    /// Allocates a page with reference count 1, or `None` if the source is
    /// out of chunks (and the cache empty).
    #[inline]
    pub fn alloc(&mut self) -> Option<usize> {
        if self.len == 0 {
            self.len = self.alloc.reserve(&mut self.pages[..CACHE_BATCH]);
            if self.len == 0 {
                return None;
            }
        }
        self.len -= 1;
        let page = self.pages[self.len];
        // SAFETY: the page is reserved by this cache, so its chunk is held
        // and initialised and stays so while the page is out.
        let cp = unsafe { ControlPage::at(page & !super::CHUNK_MASK) };
        // A reserved page's count is 0, and no call raises a count from 0:
        // a plain store hands the page over.
        cp.refcount((page & super::CHUNK_MASK) / super::PAGE_SIZE)
            .store(1, Release);
        Some(page)
    }

    /// Frees `page`, whose reference count must be 1, into the cache.
    #[inline]
    pub fn free(&mut self, page: usize) -> Result<(), AllocError> {
        self.alloc.claim_last_ref(page)?;
        self.push(page);
        Ok(())
    }

    /// Drops a reference to `page`; returns the count left. At 0 the page
    /// goes into the cache.
    #[inline]
    pub fn dec_ref(&mut self, page: usize) -> Result<u16, AllocError> {
        let (_, _, left) = self.alloc.drop_ref(page)?;
        if left == 0 {
            self.push(page);
        }
        Ok(left)
    }

    /// Pages the cache holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the cache holds no page.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pages the cache holds (reserved: in use in the bitmaps, count 0).
    pub fn pages(&self) -> &[usize] {
        &self.pages[..self.len]
    }

    /// Gives every page back to the bitmaps (before a reclaim, say).
    pub fn drain(&mut self) {
        self.flush(self.len);
    }

    #[inline]
    fn push(&mut self, page: usize) {
        if self.len == CACHE_PAGES {
            self.flush(CACHE_BATCH);
        }
        self.pages[self.len] = page;
        self.len += 1;
    }

    /// Gives the `n` oldest pages (the bottom of the stack) back.
    #[cold]
    #[inline(never)]
    fn flush(&mut self, n: usize) {
        if let Err(e) = self.alloc.unreserve(&self.pages[..n]) {
            // Every page here was checked on its way in; this is memory
            // corruption, not a caller's mistake.
            debug_assert!(false, "page cache flush: {e}");
        }
        self.pages.copy_within(n..self.len, 0);
        self.len -= n;
    }
}

impl<S: ChunkSource> Drop for PageCache<'_, S> {
    fn drop(&mut self) {
        self.drain();
    }
}
