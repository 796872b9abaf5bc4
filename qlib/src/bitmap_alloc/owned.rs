//! Which chunks the allocator holds: one bit per 4 MiB chunk of a fixed
//! window of [`WINDOW_CHUNKS`] chunks (16 GiB) starting at a base address.
//!
//! Membership costs one range check and one atomic load, with no lookup
//! table and without touching the chunk itself, so an address the
//! allocator never handed out is rejected before anything is dereferenced.
//! The base is either given at construction (the kernel passes the start of
//! its direct map, so every guest-physical chunk fits) or, if not, fixed at
//! the first chunk taken from the source and placed so that chunk sits in
//! the middle of the window. A chunk the source returns outside the window
//! is handed straight back.
//!
//! Bits are set (after the control page is initialised) and cleared (before
//! the chunk goes back to the source) only under the allocator lock; they
//! are read lock-free. All accesses are `SeqCst` because the chunk release
//! path pairs them with the allocator's reader count (see `mod.rs`).

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};

use super::CHUNK_SIZE;

/// Chunks the ownership window covers: 4096 x 4 MiB = 16 GiB.
pub const WINDOW_CHUNKS: usize = 4096;

/// Marks "no base yet": a real base is 4 MiB aligned, so it is never this.
const NO_BASE: usize = usize::MAX;

pub(super) struct OwnedChunks {
    base: AtomicUsize,
    bits: [AtomicU64; WINDOW_CHUNKS / 64],
}

impl OwnedChunks {
    /// `base` must be 4 MiB aligned when given.
    #[inline]
    pub(super) const fn new(base: Option<usize>) -> Self {
        let base = match base {
            Some(b) => {
                assert!(b % CHUNK_SIZE == 0, "window base must be 4 MiB aligned");
                b
            }
            None => NO_BASE,
        };
        Self {
            base: AtomicUsize::new(base),
            bits: [const { AtomicU64::new(0) }; WINDOW_CHUNKS / 64],
        }
    }

    #[inline]
    fn slot_in(base: usize, chunk: usize) -> Option<usize> {
        if base == NO_BASE || chunk < base {
            return None;
        }
        let slot = (chunk - base) / CHUNK_SIZE;
        (slot < WINDOW_CHUNKS).then_some(slot)
    }

    /// The window slot of 4 MiB-aligned `chunk`, if it falls in the window.
    #[inline]
    fn slot(&self, chunk: usize) -> Option<usize> {
        Self::slot_in(self.base.load(SeqCst), chunk)
    }

    #[inline]
    fn chunk_at(&self, slot: usize) -> usize {
        self.base.load(SeqCst) + slot * CHUNK_SIZE
    }

    /// Whether the allocator holds the 4 MiB-aligned `chunk`. Lock-free.
    #[inline]
    pub(super) fn contains(&self, chunk: usize) -> bool {
        self.slot(chunk)
            .is_some_and(|s| self.bits[s / 64].load(SeqCst) & (1 << (s % 64)) != 0)
    }

    /// The slot for a chunk just taken from the source, fixing the base if
    /// this is the first chunk. `None` if it is outside the window. Lock held.
    #[inline]
    pub(super) fn slot_for_new(&self, chunk: usize) -> Option<usize> {
        if self.base.load(SeqCst) == NO_BASE {
            let base = chunk.saturating_sub(WINDOW_CHUNKS / 2 * CHUNK_SIZE);
            self.base.store(base, SeqCst);
        }
        self.slot(chunk)
    }

    /// Publishes `chunk` as held. Lock held; its control page is ready.
    #[inline]
    pub(super) fn insert(&self, chunk: usize) {
        let s = self
            .slot(chunk)
            .expect("insert: chunk comes from slot_for_new");
        self.bits[s / 64].fetch_or(1 << (s % 64), SeqCst);
    }

    /// Withdraws `chunk`. Lock held.
    #[inline]
    pub(super) fn remove(&self, chunk: usize) {
        let s = self.slot(chunk).expect("remove: chunk is held");
        self.bits[s / 64].fetch_and(!(1 << (s % 64)), SeqCst);
    }

    /// Calls `f(chunk)` for every held chunk in ascending address order.
    /// Lock held (so the set does not change underneath).
    #[inline]
    pub(super) fn for_each(&self, mut f: impl FnMut(usize)) {
        for (w, word) in self.bits.iter().enumerate() {
            let mut bits = word.load(SeqCst);
            while bits != 0 {
                let slot = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                f(self.chunk_at(slot));
            }
        }
    }
}
