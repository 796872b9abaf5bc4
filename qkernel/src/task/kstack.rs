//! A task's kernel stack: [`KSTACK_SIZE`](super::KSTACK_SIZE) bytes of
//! kernel heap, painted, with the overflow canary at the bottom
//! (`arch::kstack`). When it is freed with the debug log on, its high
//! water goes to the log.

use alloc::vec::Vec;

use super::KSTACK_SIZE;
use crate::arch::kstack;
use crate::errno::Errno;

/// One task's kernel stack.
pub struct KStack {
    words: Vec<u64>,
    /// The task it belongs to (for the high-water line).
    pub pid: u32,
}

impl KStack {
    /// A painted stack with its canary armed; `EAGAIN` without memory.
    pub fn new() -> Result<Self, Errno> {
        let mut words = Vec::new();
        words
            .try_reserve_exact(KSTACK_SIZE / 8)
            .map_err(|_| Errno::EAGAIN)?;
        // The allocation is written whole anyway: the paint costs nothing.
        words.resize(KSTACK_SIZE / 8, kstack::PAINT);
        words[0] = kstack::CANARY;
        Ok(Self { words, pid: 0 })
    }

    /// The stack, marked as task `pid`'s.
    pub fn owned_by(mut self, pid: u32) -> Self {
        self.pid = pid;
        self
    }

    /// The lowest word (the canary's address).
    pub fn base(&self) -> u64 {
        self.words.as_ptr() as u64
    }

    /// The words, to lay out the first switch frame.
    pub fn words_mut(&mut self) -> &mut [u64] {
        &mut self.words
    }
}

impl Drop for KStack {
    fn drop(&mut self) {
        if kstack::measuring() {
            // SAFETY: the stack is ours, painted by `new`, no longer used.
            let used = unsafe { kstack::high_water(self.base(), KSTACK_SIZE) };
            log::debug!(
                "task {}: kernel stack high water {used} of {KSTACK_SIZE} bytes",
                self.pid
            );
        }
    }
}
