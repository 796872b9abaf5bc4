//! The control page: page 0 of every chunk.
//!
//! Byte layout (`#[repr(C)]`, little endian, checked by the `const`
//! assertions below):
//!
//! ```text
//! offset  size  field       meaning
//! 0x000      8  next        address of the next chunk on the free list, 0 = none
//! 0x008      8  prev        address of the previous chunk on the free list, 0 = none
//! 0x010      8  magic       CONTROL_MAGIC while the allocator holds the chunk, 0 after
//! 0x018      8  l1          bit w set = L2 word w has at least one free page (bits 0..16)
//! 0x020      8  free_pages  number of free pages in the chunk, 0..=1023
//! 0x028     24  reserved    zero; pads the header to one 64-byte cache line
//! 0x040    128  l2[16]      bit b of word w set = page 64*w + b is FREE
//! 0x0c0   2048  refcount[1024]  AtomicU16 per page; 0 = free; refcount[0] unused
//! 0x8c0   1856  (unused, zero)  rest of the 4096-byte page
//! ```
//!
//! Page 0 (the control page itself) is never free: bit 0 of `l2[0]` is
//! always clear and `refcount[0]` always 0. Every field is an atomic so that
//! a shared reference to the control page is sound while several CPUs use
//! it: `next`, `prev`, `l1`, `l2` and `free_pages` change only under the
//! allocator lock (so plain `Relaxed` loads and stores suffice); `refcount`
//! changes lock-free.

use core::mem::{offset_of, size_of};
use core::sync::atomic::{AtomicU16, AtomicU64, Ordering::Relaxed};

use super::{PAGE_SIZE, PAGES_PER_CHUNK, USABLE_PAGES_PER_CHUNK};

/// `b"QBMAPCTL"` read as a little-endian `u64`.
pub(super) const CONTROL_MAGIC: u64 = u64::from_le_bytes(*b"QBMAPCTL");

const L2_WORDS: usize = PAGES_PER_CHUNK / 64;

/// L2 word 0 when every usable page is free: all bits but bit 0 (the
/// control page).
const L2_WORD0_ALL_FREE: u64 = !1;

/// L1 when every L2 word has a free page.
const L1_ALL: u64 = (1 << L2_WORDS) - 1;

#[repr(C)]
pub(super) struct ControlPage {
    next: AtomicU64,
    prev: AtomicU64,
    magic: AtomicU64,
    l1: AtomicU64,
    free_pages: AtomicU64,
    reserved: [AtomicU64; 3],
    l2: [AtomicU64; L2_WORDS],
    refcount: [AtomicU16; PAGES_PER_CHUNK],
}

const _: () = {
    assert!(size_of::<ControlPage>() <= PAGE_SIZE);
    assert!(size_of::<ControlPage>() == 0x8c0);
    assert!(core::mem::align_of::<ControlPage>() <= PAGE_SIZE);
    assert!(offset_of!(ControlPage, next) == 0x000);
    assert!(offset_of!(ControlPage, prev) == 0x008);
    assert!(offset_of!(ControlPage, magic) == 0x010);
    assert!(offset_of!(ControlPage, l1) == 0x018);
    assert!(offset_of!(ControlPage, free_pages) == 0x020);
    assert!(offset_of!(ControlPage, l2) == 0x040);
    assert!(offset_of!(ControlPage, refcount) == 0x0c0);
    assert!(L2_WORDS == 16);
};

impl ControlPage {
    /// Sets up the control page of `chunk`: list links 0, pages 1..=1023
    /// free with count 0.
    ///
    /// # Safety
    /// `chunk` is 4 MiB aligned, its first page is readable and writable
    /// and used by the allocator alone (a fresh chunk, or one this
    /// allocator gave back, whose retired control page a racy lock-free
    /// call may still read), and the caller holds the allocator lock.
    pub(super) unsafe fn init<'a>(chunk: usize) -> &'a ControlPage {
        // SAFETY: by the caller's contract the page is mapped and ours, and
        // 4 MiB aligned (>= align_of). Every field is an atomic and every
        // bit pattern is a valid atomic, so a shared reference is sound
        // even over old contents; they are all overwritten below with
        // atomic stores, so a racing reader of a retired page sees no data
        // race.
        let cp = unsafe { &*(chunk as *const ControlPage) };
        for word in [&cp.next, &cp.prev, &cp.l1, &cp.free_pages]
            .into_iter()
            .chain(&cp.reserved)
        {
            word.store(0, Relaxed);
        }
        for count in &cp.refcount {
            count.store(0, Relaxed);
        }
        cp.l2[0].store(L2_WORD0_ALL_FREE, Relaxed);
        for w in &cp.l2[1..] {
            w.store(u64::MAX, Relaxed);
        }
        cp.l1.store(L1_ALL, Relaxed);
        cp.free_pages.store(USABLE_PAGES_PER_CHUNK as u64, Relaxed);
        cp.magic.store(CONTROL_MAGIC, Relaxed);
        cp
    }

    /// The control page of `chunk`.
    ///
    /// # Safety
    /// `chunk` was held by the allocator at some point (its control page
    /// was set up by [`ControlPage::init`]) and its memory stays mapped for
    /// `'a` (the `ChunkSource` contract: until the allocator is dropped).
    /// Only the lock, or a page the caller holds in the chunk, keeps the
    /// chunk *held*; a retired control page reads as all counts 0.
    pub(super) unsafe fn at<'a>(chunk: usize) -> &'a ControlPage {
        // SAFETY: by the caller's contract the page is mapped and was
        // initialised; every field is atomic, so shared references from
        // several CPUs are sound.
        unsafe { &*(chunk as *const ControlPage) }
    }

    /// Marks the chunk as no longer held (just before it goes back to the
    /// chunk source), so a stale control page is recognisable in a dump.
    #[inline]
    pub(super) fn retire(&self) {
        self.magic.store(0, Relaxed);
    }

    #[inline]
    pub(super) fn next(&self) -> usize {
        self.next.load(Relaxed) as usize
    }

    #[inline]
    pub(super) fn prev(&self) -> usize {
        self.prev.load(Relaxed) as usize
    }

    #[inline]
    pub(super) fn set_next(&self, chunk: usize) {
        self.next.store(chunk as u64, Relaxed);
    }

    #[inline]
    pub(super) fn set_prev(&self, chunk: usize) {
        self.prev.store(chunk as u64, Relaxed);
    }

    #[inline]
    pub(super) fn free_pages(&self) -> usize {
        self.free_pages.load(Relaxed) as usize
    }

    #[inline]
    pub(super) fn refcount(&self, index: usize) -> &AtomicU16 {
        &self.refcount[index]
    }

    #[cfg(test)]
    #[inline]
    pub(super) fn is_free(&self, index: usize) -> bool {
        self.l2[index / 64].load(Relaxed) & (1 << (index % 64)) != 0
    }

    /// Takes the lowest free page: two `trailing_zeros` scans. Returns its
    /// index within the chunk and the chunk's free pages left, or `None` if
    /// the chunk is full. Lock held.
    #[inline]
    pub(super) fn take_page(&self) -> Option<(usize, usize)> {
        let (first, bits, left) = self.take_word(1)?;
        Some((first + bits.trailing_zeros() as usize, left))
    }

    /// Takes up to `max` (>= 1) free pages of the lowest L2 word that has
    /// any, lowest first: returns the index of the word's first page, the
    /// taken pages as bits of that word, and the chunk's free pages left;
    /// `None` if the chunk is full. Lock held.
    #[inline]
    pub(super) fn take_word(&self, max: usize) -> Option<(usize, u64, usize)> {
        let l1 = self.l1.load(Relaxed);
        if l1 == 0 {
            return None;
        }
        let w = l1.trailing_zeros() as usize;
        let mut rest = self.l2[w].load(Relaxed);
        debug_assert_ne!(rest, 0, "L1 bit set over an empty L2 word");
        let (mut taken, mut n) = (0u64, 0u64);
        while rest != 0 && n < max as u64 {
            let lowest = rest & rest.wrapping_neg();
            taken |= lowest;
            rest ^= lowest;
            n += 1;
        }
        self.l2[w].store(rest, Relaxed);
        if rest == 0 {
            self.l1.store(l1 & !(1 << w), Relaxed);
        }
        let left = self.free_pages.load(Relaxed) - n;
        self.free_pages.store(left, Relaxed);
        Some((w * 64, taken, left as usize))
    }

    /// Marks page `index` (1..=1023) free again and returns the chunk's free
    /// pages now. Returns `None`, changing nothing, if it already was free.
    /// Lock held.
    #[inline]
    pub(super) fn put_page(&self, index: usize) -> Option<usize> {
        debug_assert!((1..PAGES_PER_CHUNK).contains(&index));
        let (w, bit) = (index / 64, 1u64 << (index % 64));
        let word = self.l2[w].load(Relaxed);
        if word & bit != 0 {
            return None;
        }
        self.l2[w].store(word | bit, Relaxed);
        if word == 0 {
            self.l1.store(self.l1.load(Relaxed) | (1 << w), Relaxed);
        }
        let now = self.free_pages.load(Relaxed) + 1;
        self.free_pages.store(now, Relaxed);
        Some(now as usize)
    }

    /// Calls `f(first_index, count)` for each maximal run of free pages, in
    /// ascending order. Lock held.
    #[inline]
    pub(super) fn for_each_free_run(&self, mut f: impl FnMut(usize, usize)) {
        let mut run: Option<(usize, usize)> = None;
        for (w, word) in self.l2.iter().enumerate() {
            let mut bits = word.load(Relaxed);
            while bits != 0 {
                let i = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                run = match run {
                    Some((start, len)) if start + len == i => Some((start, len + 1)),
                    Some((start, len)) => {
                        f(start, len);
                        Some((i, 1))
                    }
                    None => Some((i, 1)),
                };
            }
        }
        if let Some((start, len)) = run {
            f(start, len);
        }
    }

    /// Checks the bitmaps and counters against each other; pages for which
    /// `reserved(index)` holds sit in a page cache (in use, count 0). Lock
    /// held.
    #[cfg(test)]
    #[inline]
    pub(super) fn check(&self, reserved: impl Fn(usize) -> bool) -> Result<(), &'static str> {
        if self.magic.load(Relaxed) != CONTROL_MAGIC {
            return Err("bad magic");
        }
        if self.l2[0].load(Relaxed) & 1 != 0 || self.refcount[0].load(Relaxed) != 0 {
            return Err("control page marked free or referenced");
        }
        let l1 = self.l1.load(Relaxed);
        if l1 & !L1_ALL != 0 {
            return Err("L1 bit beyond the 16 L2 words");
        }
        let mut free = 0;
        for (w, word) in self.l2.iter().enumerate() {
            let word = word.load(Relaxed);
            if (word != 0) != (l1 & (1 << w) != 0) {
                return Err("L1 disagrees with L2");
            }
            free += word.count_ones() as usize;
        }
        if free != self.free_pages() {
            return Err("free_pages disagrees with the L2 popcount");
        }
        for i in 1..PAGES_PER_CHUNK {
            let count = self.refcount[i].load(Relaxed);
            if reserved(i) {
                if self.is_free(i) || count != 0 {
                    return Err("a cached page is marked free or referenced");
                }
            } else if self.is_free(i) != (count == 0) {
                return Err("free bit disagrees with refcount");
            }
        }
        Ok(())
    }
}
