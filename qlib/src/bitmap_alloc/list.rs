//! The list of held chunks that have at least one free page, doubly linked
//! through the `next`/`prev` words of their control pages so that a chunk
//! can leave from the middle in O(1) (when it fills up, or goes back to the
//! chunk source). It lives inside the allocator mutex: `&mut ChunkList`
//! means the lock is held.
//!
//! The list also keeps the allocator's totals (free pages, fully free
//! chunks), but only for the chunks *behind* the head: the head's own
//! counts are read from its control page when asked for. `alloc` always
//! takes from the head, and a free usually lands there too, so the common
//! paths update no total at all; the totals change only when the head
//! changes or a page goes back to a chunk further down.

use super::USABLE_PAGES_PER_CHUNK;
use super::control::ControlPage;

pub(super) struct ChunkList {
    head: usize,
    /// Free pages in the listed chunks other than the head.
    rest_free_pages: usize,
    /// Fully free chunks on the list other than the head.
    rest_free_chunks: usize,
}

/// Free pages of `chunk` and whether they are all free (0 or 1).
///
/// # Safety
/// `chunk` is held and initialised, and the caller holds the allocator
/// lock.
#[inline]
unsafe fn counts(chunk: usize) -> (usize, usize) {
    // SAFETY: by the caller's contract.
    let n = unsafe { ControlPage::at(chunk) }.free_pages();
    (n, usize::from(n == USABLE_PAGES_PER_CHUNK))
}

impl ChunkList {
    #[inline]
    pub(super) const fn new() -> Self {
        Self {
            head: 0,
            rest_free_pages: 0,
            rest_free_chunks: 0,
        }
    }

    /// The first chunk on the list, if any.
    #[inline]
    pub(super) fn first(&self) -> Option<usize> {
        (self.head != 0).then_some(self.head)
    }

    /// Free pages in all listed chunks (full chunks, off the list, have
    /// none).
    #[inline]
    pub(super) fn free_pages(&self) -> usize {
        // SAFETY: the head is on the list, hence held and initialised;
        // `&self` was reached through the lock.
        self.rest_free_pages + self.first().map_or(0, |h| unsafe { counts(h) }.0)
    }

    /// Listed chunks whose pages are all free.
    #[inline]
    pub(super) fn free_chunks(&self) -> usize {
        // SAFETY: as in `free_pages`.
        self.rest_free_chunks + self.first().map_or(0, |h| unsafe { counts(h) }.1)
    }

    /// Puts `chunk` (held, initialised, not on the list, its free pages not
    /// yet counted: a new chunk, or a full one that just got a page back)
    /// at the head.
    #[inline]
    pub(super) fn push_front(&mut self, chunk: usize) {
        // SAFETY: the caller passes a held chunk with an initialised control
        // page, and `&mut self` means the allocator lock is held, so the
        // chunk cannot be released meanwhile.
        let cp = unsafe { ControlPage::at(chunk) };
        cp.set_prev(0);
        cp.set_next(self.head);
        if self.head != 0 {
            // The old head moves behind: its counts join the totals.
            // SAFETY: every chunk on the list is held and initialised (list
            // invariant), and the lock is held.
            let (pages, full) = unsafe { counts(self.head) };
            self.rest_free_pages += pages;
            self.rest_free_chunks += full;
            // SAFETY: as above.
            unsafe { ControlPage::at(self.head) }.set_prev(chunk);
        }
        self.head = chunk;
    }

    /// Records that a page went back to `chunk`, which is on the list and
    /// now has `now` free pages.
    #[inline]
    pub(super) fn page_returned(&mut self, chunk: usize, now: usize) {
        if chunk != self.head {
            self.rest_free_pages += 1;
            self.rest_free_chunks += usize::from(now == USABLE_PAGES_PER_CHUNK);
        }
    }

    /// Takes `chunk`, which is on the list, off it; its free pages leave
    /// the totals.
    #[inline]
    pub(super) fn unlink(&mut self, chunk: usize) {
        // SAFETY: `chunk` is on the list, hence held and initialised; the
        // lock is held.
        let cp = unsafe { ControlPage::at(chunk) };
        let (prev, next) = (cp.prev(), cp.next());
        if prev == 0 {
            debug_assert_eq!(self.head, chunk);
            self.head = next;
            if next != 0 {
                // The next chunk becomes the head: its counts leave the
                // totals.
                // SAFETY: `next` is on the list (list invariant); lock held.
                let (pages, full) = unsafe { counts(next) };
                self.rest_free_pages -= pages;
                self.rest_free_chunks -= full;
            }
        } else {
            // SAFETY: `chunk` is on the list (see above); lock held.
            let (pages, full) = unsafe { counts(chunk) };
            self.rest_free_pages -= pages;
            self.rest_free_chunks -= full;
            // SAFETY: `prev` is on the list (list invariant); lock held.
            unsafe { ControlPage::at(prev) }.set_next(next);
        }
        if next != 0 {
            // SAFETY: `next` is on the list (list invariant); lock held.
            unsafe { ControlPage::at(next) }.set_prev(prev);
        }
        cp.set_prev(0);
        cp.set_next(0);
    }

    /// Calls `f(chunk)` for each chunk on the list, head first.
    #[cfg(test)]
    #[inline]
    pub(super) fn for_each(&self, mut f: impl FnMut(usize)) {
        let mut c = self.head;
        while c != 0 {
            f(c);
            // SAFETY: `c` is on the list, hence held and initialised; the
            // caller holds the lock (it reached `self` through it).
            c = unsafe { ControlPage::at(c) }.next();
        }
    }
}
