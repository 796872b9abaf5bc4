//! Kernel stack overflow detection (docs/processes.md, "Kernel stacks").
//!
//! Kernel stacks have no guard page: a task's is heap memory, the boot
//! and control stacks are statics. So every kernel stack carries a
//! [`CANARY`] word at its lowest address, checked where the stack is
//! left (`task::sched::switch`), at every syscall exit and after every
//! control request: one load and one compare. A stack that grew past its
//! end has overwritten the canary (or, with a frame large enough to skip
//! it, the paint below it, seen at the high-water check), and the guest
//! panics with "kernel stack overflow" instead of running on with a
//! corrupted heap.
//!
//! High water: task stacks are painted with [`PAINT`] when created (the
//! allocation writes every word anyway); the static stacks only when the
//! debug log is on. [`high_water`] finds the deepest word ever written.

/// The word at the bottom of every kernel stack.
pub const CANARY: u64 = 0x4b53_5441_434b_2121; // "!!KCATSK"
/// What unused kernel stack words hold.
pub const PAINT: u64 = 0x5041_494e_5450_4149;

/// Arms the canary of the stack whose lowest address is `base`.
///
/// # Safety
/// `base` must be the 8-byte aligned lowest word of a kernel stack that
/// no code uses that deep.
pub unsafe fn arm(base: u64) {
    // SAFETY: guaranteed by the caller.
    unsafe { (base as *mut u64).write_volatile(CANARY) }
}

/// Whether the canary at `base` (armed by [`arm`]) is intact.
///
/// # Safety
/// `base` must be the lowest word of a live kernel stack.
pub unsafe fn intact(base: u64) -> bool {
    // SAFETY: guaranteed by the caller.
    unsafe { (base as *const u64).read_volatile() == CANARY }
}

/// Paints `[base + 8, end)` with [`PAINT`] (the canary word stays).
///
/// # Safety
/// The range must be memory of a kernel stack that no one uses now (below
/// the live RSP, or a stack not in use).
pub unsafe fn paint(base: u64, end: u64) {
    let mut p = base + 8;
    while p + 8 <= end {
        // SAFETY: guaranteed by the caller.
        unsafe { (p as *mut u64).write_volatile(PAINT) };
        p += 8;
    }
}

/// Bytes of the stack `[base, base + size)` ever used: from the lowest
/// word that is no longer [`PAINT`] to the top (`size` when the canary
/// itself is gone or the first painted word was written).
///
/// # Safety
/// `[base, base + size)` must be readable stack memory painted by [`paint`].
pub unsafe fn high_water(base: u64, size: usize) -> usize {
    // SAFETY: guaranteed by the caller.
    if !unsafe { intact(base) } {
        return size;
    }
    let mut off = 8;
    while off < size {
        // SAFETY: inside the range the caller vouched for.
        if unsafe { ((base + off as u64) as *const u64).read_volatile() } != PAINT {
            break;
        }
        off += 8;
    }
    if off == 8 { size } else { size - off }
}

/// Checks the running kernel stack's canary (this vCPU's `kstack_base`):
/// one load and one compare. Panics on an overflow.
#[inline]
pub fn check_current() {
    let base = super::percpu::this()
        .kstack_base
        .load(core::sync::atomic::Ordering::Relaxed);
    // SAFETY: `kstack_base` is 0 or the lowest word of the running task's
    // kernel stack, which is live while it runs.
    if base != 0 && !unsafe { intact(base) } {
        overflowed();
    }
}

#[cold]
#[inline(never)]
fn overflowed() -> ! {
    panic!(
        "kernel stack overflow in task {}",
        crate::task::current_pid()
    )
}

/// The stack pointer.
#[inline(always)]
pub fn rsp() -> u64 {
    let r: u64;
    // SAFETY: reads RSP only.
    unsafe {
        core::arch::asm!("mov {0}, rsp", out(reg) r, options(nomem, nostack, preserves_flags))
    };
    r
}

/// Whether the debug log is on (`qrun --debug`): high-water reports.
#[inline]
pub fn measuring() -> bool {
    log::log_enabled!(log::Level::Debug)
}
