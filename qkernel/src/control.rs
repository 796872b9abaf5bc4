//! Control requests from the VMM (`qlib::abi::ControlPage`): served after
//! every host call and at every syscall, outside any lock but the process
//! lock (lock order: process, then the page allocator).
//!
//! Reclaim: every free page of the bitmap allocator (held chunks) and every
//! chunk returned to the chunk pool goes back to the host in batched
//! `Reclaim` calls; the VMM drops them with `madvise(MADV_DONTNEED)` and
//! they read back as zeros. With one vCPU nothing allocates while the
//! batches are sent.
//!
//! Hand-back while running: once the program has freed 2 MiB more than it
//! allocated (`frames::RETURN_THRESHOLD_PAGES`: munmap, `MADV_DONTNEED`,
//! exit, exec, brk shrink), the free memory of the chunks those pages were
//! in goes back the same way ([`return_freed`], flagged
//! `RECLAIM_RUNNING`), at the next syscall, host call or blocking host
//! call: one host call per up to `MAX_IOVECS` ranges, never one per page.
//!
//! The control stack: requests are served wherever the kernel notices
//! them (after a host call, at a syscall, from the idle poll while a task
//! exits, from the kick interrupt), so on whatever task kernel stack is
//! current, at whatever depth. Serving one can be deep (a program load
//! for `qrun exec`, a hibernation's deflate and commit, a reclaim walk),
//! so every request is served on this vCPU's own control stack
//! ([`CONTROL_STACKS`], 64 KiB each), entered once (nested host calls
//! serve on it directly). The rule that makes this sound: **control
//! requests run on the control stack and never switch tasks** (they wake
//! tasks, queue signals, start processes that run later; a hibernation
//! waits in the host, on this stack). `task::sched::switch` panics if
//! called on a control stack. docs/processes.md, "Kernel stacks".

use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use qlib::abi::{
    CONTROL_SIGNALS_OFFSET, Call, IoVec, MAX_IOVECS, RECLAIM_DEFER, RECLAIM_LAST, RECLAIM_RUNNING,
    control,
};
use qlib::layout::CONTROL_GPA;

use crate::arch::kstack;
use crate::arch::percpu::{self, MAX_CPUS};
use crate::hostcall;
use crate::mm::{frames, gpa_to_kva};

static SERVING: AtomicBool = AtomicBool::new(false);

/// Bytes of one vCPU's control stack. Measured (`qrun --debug`, the
/// "control stack high water" line at exit): a `qrun exec` program load
/// about 27 KiB, a hibernation ... (docs/processes.md).
pub const CONTROL_STACK_SIZE: usize = 64 << 10;

#[repr(C, align(16))]
struct ControlStack([u8; CONTROL_STACK_SIZE]);

/// One control stack per vCPU, indexed by its id. Untouched pages cost
/// the host nothing (a vCPU that never serves one leaves its stack so,
/// but for the canary page).
static mut CONTROL_STACKS: [ControlStack; MAX_CPUS] =
    [const { ControlStack([0; CONTROL_STACK_SIZE]) }; MAX_CPUS];

/// Lowest address of vCPU `k`'s control stack.
fn stack_base(k: usize) -> u64 {
    // SAFETY: only the address is taken; `k < MAX_CPUS` (a vCPU id).
    (unsafe { &raw const CONTROL_STACKS[k] }) as u64
}

/// Arms every control stack's canary (and paints them when measuring):
/// once at boot, before any request is served.
pub fn init() {
    for k in 0..MAX_CPUS {
        let base = stack_base(k);
        // SAFETY: the control stacks are not in use yet; `base` is the
        // lowest word of one.
        unsafe {
            kstack::arm(base);
            if kstack::measuring() {
                kstack::paint(base, base + CONTROL_STACK_SIZE as u64);
            }
        }
    }
}

/// Whether the running code is on this vCPU's control stack.
pub fn on_control_stack() -> bool {
    let base = stack_base(percpu::this().id());
    let rsp = kstack::rsp();
    rsp >= base && rsp < base + CONTROL_STACK_SIZE as u64
}

/// Runs `f` on this vCPU's control stack (directly if already on it),
/// then checks the stack's canary.
fn on_control_stack_run(f: extern "C" fn()) {
    if on_control_stack() {
        f();
        return;
    }
    let k = percpu::this().id();
    let base = stack_base(k);
    // SAFETY: vCPU k's control stack is used by vCPU k only, and not in
    // use now (RSP is not on it, and nothing switches tasks while on it:
    // module doc), so nothing else lives there; both ends 16-byte aligned.
    unsafe { crate::arch::switch::on_stack(base + CONTROL_STACK_SIZE as u64, f) };
    // SAFETY: the lowest word of vCPU k's control stack.
    if !unsafe { kstack::intact(base) } {
        panic!("kernel stack overflow on the control stack of vCPU {k}");
    }
}

/// With the debug log on: the high water of this vCPU's control stack.
pub fn stack_high_water() -> usize {
    let base = stack_base(percpu::this().id());
    // SAFETY: a static of CONTROL_STACK_SIZE bytes, painted by `init`.
    unsafe { kstack::high_water(base, CONTROL_STACK_SIZE) }
}

fn pending_word() -> &'static AtomicU64 {
    // SAFETY: the control page is reserved guest RAM in the direct map,
    // 8-byte aligned; the VMM and the guest only touch it atomically.
    unsafe { AtomicU64::from_ptr(gpa_to_kva(CONTROL_GPA) as *mut u64) }
}

fn signals_word() -> &'static AtomicU64 {
    // SAFETY: as for `pending_word`, 8 bytes further into the control page.
    unsafe { AtomicU64::from_ptr(gpa_to_kva(CONTROL_GPA + CONTROL_SIGNALS_OFFSET) as *mut u64) }
}

/// Serves pending control requests, if any (a load when there are none),
/// and hands freed memory back if enough has gathered.
pub fn serve_pending() {
    if pending() || frames::return_urgent() {
        on_control_stack_run(serve_pending_here);
    }
}

extern "C" fn serve_pending_here() {
    serve(false);
    if frames::return_urgent() {
        return_freed();
    }
}

/// Hands the memory the running program freed back right before a
/// blocking host call, which must be the next host call: the VMM drops
/// it only if that call waits a while (`RECLAIM_DEFER`), so a server
/// that frees a request's memory and gets the next request at once keeps
/// its pages. No control request is served in between (it could allocate
/// the pages).
pub fn return_freed_before_wait() {
    let mut runs: Vec<IoVec> = Vec::new();
    frames::take_freed_runs(&mut runs);
    // The heaps' slack too: mapped, but garbage until zeroed for reuse.
    crate::mm::slack::own_runs(&mut runs);
    let flags = RECLAIM_RUNNING | RECLAIM_DEFER;
    for batch in runs.chunks(MAX_IOVECS as usize) {
        let (gpa, count) = hostcall::iovecs(batch);
        let rc = hostcall::call_once(Call::Reclaim, [gpa, count, flags | RECLAIM_LAST, 0, 0, 0]);
        if rc < 0 {
            log::error!("reclaim refused by the VMM: {rc}");
            return;
        }
    }
}

/// Hands the memory the running program freed back to the host
/// (module doc); returns the bytes handed back.
pub fn return_freed() -> u64 {
    let mut runs: Vec<IoVec> = Vec::new();
    frames::take_freed_runs(&mut runs);
    crate::mm::slack::own_runs(&mut runs);
    send(&runs, RECLAIM_RUNNING)
}

/// Sends `runs` in `Reclaim` batches flagged `flags` (the last one also
/// `RECLAIM_LAST`); returns the bytes handed back.
fn send(runs: &[IoVec], flags: u64) -> u64 {
    let batches = runs.chunks(MAX_IOVECS as usize);
    let n = batches.len();
    if n == 0 {
        // Nothing to drop; still tell the VMM the reclaim is done.
        hostcall::call(Call::Reclaim, [0, 0, flags | RECLAIM_LAST, 0, 0, 0]);
    }
    for (i, batch) in batches.enumerate() {
        let (gpa, count) = hostcall::iovecs(batch);
        let last = if i + 1 == n { RECLAIM_LAST } else { 0 };
        let rc = hostcall::call(Call::Reclaim, [gpa, count, flags | last, 0, 0, 0]);
        if rc < 0 {
            log::error!("reclaim refused by the VMM: {rc}");
            return 0;
        }
    }
    runs.iter().map(|r| r.len).sum()
}

/// Serves pending control requests from the kick interrupt: the program
/// was interrupted in user mode, with no host call in flight, so a
/// hibernation request is served here too (the program then stays parked
/// in the host until it is woken).
pub fn serve_from_interrupt() {
    on_control_stack_run(serve_from_interrupt_here);
}

extern "C" fn serve_from_interrupt_here() {
    serve(true);
}

/// Whether a control request is posted.
pub fn pending() -> bool {
    pending_word().load(Ordering::Acquire) != 0
}

/// Whether a control request other than `PREEMPT` is posted: what ends a
/// hibernated guest's park (`mm::swap`). A preemption the slice watcher
/// posted before the hibernation held the guest waits for the wake.
pub fn pending_but_preempt() -> bool {
    pending_word().load(Ordering::Acquire) & !control::PREEMPT != 0
}

fn serve(interrupted: bool) {
    let word = pending_word();
    if word.load(Ordering::Relaxed) == 0 || SERVING.swap(true, Ordering::Acquire) {
        return;
    }
    loop {
        let deferred = serve_once(word, interrupted);
        SERVING.store(false, Ordering::Release);
        // What was posted while serving: the host calls made meanwhile
        // returned to a nested `serve_pending`, which left it (SERVING),
        // and the VMM kicks no more once a host call returned ("the guest
        // reads the control page after every host call"). An alarm armed
        // again for a deadline the host has already passed is posted
        // during that very `SetAlarm`: unserved, a program computing
        // without syscalls got its SIGVTALRM seconds late. After a park
        // (hibernated from the interrupt), what woke us is served here
        // too before the program runs again.
        let again = word.load(Ordering::Acquire) & !deferred;
        if again == 0 {
            return;
        }
        if SERVING.swap(true, Ordering::Acquire) {
            return;
        }
    }
}

/// One round of [`serve`]: takes the posted bits and serves them. Returns
/// the bits put back to be served later.
fn serve_once(word: &AtomicU64, interrupted: bool) -> u64 {
    let bits = word.swap(0, Ordering::AcqRel);
    let mut deferred = 0;
    if bits & control::RECLAIM != 0 {
        reclaim();
    }
    if bits & control::HIBERNATE != 0 {
        if crate::mm::swap::in_blocking_call() {
            crate::mm::swap::hibernate(false);
        } else if interrupted {
            crate::mm::swap::hibernate(true);
        } else {
            // Deflate only where the program waits (so that what it waits
            // on can wake it): the VMM's eventfd is still set, so the next
            // blocking host call returns RET_RESTART at once and we get
            // here again from inside it.
            word.fetch_or(control::HIBERNATE, Ordering::AcqRel);
            deferred |= control::HIBERNATE;
        }
    }
    if bits & control::SIGNAL != 0 {
        crate::signal::deliver_from_host(signals_word().swap(0, Ordering::AcqRel));
    }
    if bits & control::WINDOW_GONE != 0 {
        crate::mm::filemap::take_gone();
    }
    if bits & control::ALARM != 0 {
        crate::itimer::fire();
    }
    if bits & control::PREEMPT != 0 {
        crate::task::slice::request();
    }
    if bits & control::EXEC != 0 {
        if crate::task::spawn::ready() {
            crate::task::spawn::serve_orders();
        } else {
            // Still booting: served at the program's first syscall.
            word.fetch_or(control::EXEC, Ordering::AcqRel);
            deferred |= control::EXEC;
        }
    }
    deferred
}

/// Returns free memory to the host; returns the bytes handed back.
pub fn reclaim() -> u64 {
    let mut runs: Vec<IoVec> = Vec::new();
    frames::forget_freed();
    frames::for_each_free_run(|gpa, len| runs.push(IoVec { gpa, len }));
    frames::for_each_returned_chunk(|gpa, len| runs.push(IoVec { gpa, len }));
    // Free kernel heap holes go too, held while the host drops them (room
    // for their ranges is made first: nothing allocates while they are
    // held but from what `grab_free_pages` leaves).
    runs.reserve(crate::mm::heap::MAX_GRABBED);
    let holes = crate::mm::heap::grab_free_pages();
    runs.extend(holes.ranges());
    let total = send(&runs, 0);
    holes.release();
    let s = frames::stats();
    log::debug!(
        "reclaimed {} KiB in {} ranges; {} pages in use, {} free in {} chunks",
        total >> 10,
        runs.len(),
        s.pages_in_use,
        s.pages_free,
        s.chunks
    );
    total
}
