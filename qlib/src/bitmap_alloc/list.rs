//! The list of held chunks that have at least one free page, doubly linked
//! through the `next`/`prev` words of their control pages so that a chunk
//! can leave from the middle in O(1) (when it fills up, or goes back to the
//! chunk source). It lives inside the allocator mutex: `&mut ChunkList`
//! means the lock is held.

use super::control::ControlPage;

pub(super) struct ChunkList {
    head: usize,
}

impl ChunkList {
    #[inline]
    pub(super) const fn new() -> Self {
        Self { head: 0 }
    }

    /// The first chunk on the list, if any.
    #[inline]
    pub(super) fn first(&self) -> Option<usize> {
        (self.head != 0).then_some(self.head)
    }

    /// Puts `chunk` (held, initialised, not on the list) at the head.
    #[inline]
    pub(super) fn push_front(&mut self, chunk: usize) {
        // SAFETY: the caller passes a held chunk with an initialised control
        // page, and `&mut self` means the allocator lock is held, so the
        // chunk cannot be released meanwhile.
        let cp = unsafe { ControlPage::at(chunk) };
        cp.set_prev(0);
        cp.set_next(self.head);
        if self.head != 0 {
            // SAFETY: every chunk on the list is held and initialised (list
            // invariant), and the lock is held.
            unsafe { ControlPage::at(self.head) }.set_prev(chunk);
        }
        self.head = chunk;
    }

    /// Takes `chunk`, which is on the list, off it.
    #[inline]
    pub(super) fn unlink(&mut self, chunk: usize) {
        // SAFETY: `chunk` is on the list, hence held and initialised; the
        // lock is held.
        let cp = unsafe { ControlPage::at(chunk) };
        let (prev, next) = (cp.prev(), cp.next());
        if prev == 0 {
            debug_assert_eq!(self.head, chunk);
            self.head = next;
        } else {
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
