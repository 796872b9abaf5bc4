//! Preemption by time slices (docs/threads.md, "Preemption").
//!
//! The guest has no timer tick. On every way back to user mode the kernel
//! publishes in the control page (`ControlPage::slice`) whether other
//! tasks want the vCPU (runnable, parked on host fds, or waiting on a
//! deadline) and a counter bumped at every switch and idle wait. The VMM's
//! slice watcher (`qvisor::slice`) posts `control::PREEMPT` with a kick when
//! the same task has kept the vCPU for a slice while others wait; the kick
//! lands in user mode (never in kernel code) or the request is read after
//! the next host call or at the next syscall. At the next return to user
//! mode, [`at_user_return`] then polls the parked fds without waiting,
//! fires the expired deadlines and yields to the next runnable task.
//!
//! A sandbox with one task never sets the bit and costs nothing more than
//! a lock and a length check per return to user mode.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};

use qlib::abi::{
    CONTROL_SLICE_OFFSET, CONTROL_SLICE_WATCH_OFFSET, Call, SLICE_COUNTER_SHIFT, SLICE_QUICK,
    SLICE_WANTED,
};
use qlib::layout::CONTROL_GPA;

use super::{KERNEL, State, futex, park, sched, timers};
use crate::hostcall;
use crate::mm::gpa_to_kva;

/// Bumped at every task switch and idle wait: a new slice.
static SWITCHES: AtomicU64 = AtomicU64::new(0);
/// `control::PREEMPT` was served: switch at the next return to user mode.
static NEED_RESCHED: AtomicBool = AtomicBool::new(false);
/// Preemptions done (the kernel's log at exit).
pub static PREEMPTIONS: AtomicU64 = AtomicU64::new(0);

fn control_word(offset: u64) -> &'static AtomicU64 {
    // SAFETY: the control page is reserved guest RAM in the direct map,
    // 8-byte aligned; the VMM and the guest only touch it atomically.
    unsafe { AtomicU64::from_ptr(gpa_to_kva(CONTROL_GPA + offset) as *mut u64) }
}

/// A task switch (or an idle wait): the next task starts a new slice.
pub fn new_slice() {
    SWITCHES.fetch_add(1, Ordering::Relaxed);
}

/// `control::PREEMPT` arrived.
pub fn request() {
    NEED_RESCHED.store(true, Ordering::Relaxed);
}

/// Whether tasks other than the running one want the vCPU, and whether
/// one of them is runnable (waits in the run queue).
fn others_wait() -> (bool, bool) {
    {
        let k = KERNEL.lock();
        if k.tasks.len() < 2 {
            return (false, false);
        }
        let runnable = k
            .runq
            .iter()
            .any(|pid| k.tasks.get(pid).is_some_and(|t| t.state == State::Runnable));
        if runnable {
            return (true, true);
        }
    }
    let wanted = park::any()
        || super::offload::returned_pending()
        || futex::next_deadline() != timers::NEVER
        || timers::next_deadline() != timers::NEVER;
    (wanted, false)
}

/// The slice word: `wanted` (others want the vCPU), `quick` (a runnable
/// task waits while a secondary is idle: short slices, so that a task
/// computing here is seen soon and can move there, `offload`).
fn word(wanted: bool, quick: bool) -> u64 {
    (SWITCHES.load(Ordering::Relaxed) << SLICE_COUNTER_SHIFT)
        | if wanted { SLICE_WANTED } else { 0 }
        | if wanted && quick { SLICE_QUICK } else { 0 }
}

/// Publishes the slice word; wakes the VMM's watcher if others wait and
/// it sleeps.
pub fn publish() {
    let (wanted, runnable) = others_wait();
    let quick = runnable && super::offload::idle_secondary().is_some();
    let slice = control_word(CONTROL_SLICE_OFFSET);
    let w = word(wanted, quick);
    if slice.load(Ordering::Relaxed) != w {
        slice.store(w, Ordering::SeqCst);
    }
    if wanted {
        // Pairs with the watcher's clear-then-read (`qvisor::slice`).
        fence(Ordering::SeqCst);
        if control_word(CONTROL_SLICE_WATCH_OFFSET).load(Ordering::SeqCst) == 0 {
            hostcall::call(Call::SliceWatch, [0; 6]);
        }
    }
}

/// The vCPU goes idle (nothing runnable): no slice runs.
pub fn idle() {
    new_slice();
    control_word(CONTROL_SLICE_OFFSET).store(word(false, false), Ordering::SeqCst);
}

/// The running task yielded so that a waiting task that computes goes to
/// an idle secondary; the next task to return to user mode does not.
static HANDING_OVER: AtomicBool = AtomicBool::new(false);

/// On every way back to user mode, with no lock held: switches if the
/// running task's slice is over, or to a task that computes and waits
/// while a secondary idles ([`super::offload::computer_waits`]), then
/// publishes the slice word.
pub fn at_user_return() {
    crate::mm::swap::ensure_awake();
    if NEED_RESCHED.swap(false, Ordering::Relaxed) {
        PREEMPTIONS.fetch_add(1, Ordering::Relaxed);
        park::poll_now();
        super::offload::rotate();
        // A task that has just shown it computes goes to an idle
        // secondary (`trap::after_return`) instead of waiting its turn.
        if !super::offload::goes_out() {
            sched::yield_now();
        }
    } else if HANDING_OVER.swap(false, Ordering::Relaxed) {
        // Yielded to ([`super::offload::computer_waits`]): this task goes
        // out at `offload::away` rather than yield back.
    } else if super::offload::computer_waits() {
        HANDING_OVER.store(true, Ordering::Relaxed);
        sched::yield_now();
    }
    publish();
}
