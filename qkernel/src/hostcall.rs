//! Host calls (`qlib::abi`): a record in kernel memory and a doorbell.
//! Each costs ~30 µs, so callers batch (iovec lists) and keep data in place.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::arch;
use crate::mm::kva_to_gpa;
use qlib::abi::{Call, HOSTCALL_PORT, HostCall, IoVec, RET_RESTART};

/// Makes a host call; returns the VMM's result (>= 0 or `-errno`). A
/// blocking call the VMM cuts short for a control request is retried once
/// the request is served (requests posted meanwhile are served too),
/// unless the request made a handled signal pending: then the call returns
/// `RET_RESTART` (`-ERESTARTSYS`) and signal delivery decides between
/// `EINTR` and a restart (`signal::deliver`). A hibernation is not a
/// signal: the call is reissued.
pub fn call(c: Call, args: [u64; 6]) -> i64 {
    let mut issue = args;
    loop {
        let ret = raw_call(c, issue);
        let restart = ret == RET_RESTART;
        // A hibernation served now must not move this call's buffers.
        crate::mm::swap::set_in_flight(restart.then_some((c, issue)));
        crate::control::serve_pending();
        crate::mm::swap::set_in_flight(None);
        // A task started from outside (or a fatal signal for this one)
        // ends the call: the syscall reruns after the task ran, and parks
        // (`task::spawn`).
        if !restart || crate::signal::interrupts() || crate::task::spawn::break_requested() {
            // The caller goes on with the program: a hibernation served
            // just now must be undone first. Not after a call that keeps
            // the sandbox hibernated (a log line, a reclaim): its caller
            // is kernel code, and whatever runs a task next wakes it
            // (`sched::switch`, the return to user mode). Waking there made
            // the first log line after a commit (`--debug`) wake the
            // sandbox, and the park that followed then waited with no
            // deadline in a running sandbox: the program hung (issue 13).
            if !c.keeps_hibernated() {
                crate::mm::swap::ensure_awake();
            }
            return ret;
        }
        // Hibernated from this wait: timers do not wake the sandbox, so
        // the wait goes on without its deadline until something else
        // returns it; then (a wake) it is reissued as it was, and a
        // deadline that passed meanwhile ends it at once.
        issue = if crate::mm::swap::take_hibernated() {
            without_deadline(c, args)
        } else {
            args
        };
    }
}

/// Whether blocking call `c` is a wait that usually lasts (a poll, a
/// sleep, an accept, a read of stdin), the point to hand freed memory
/// back (deferred: the VMM forgets it when the call returns at once).
/// Blocking reads and writes of sockets mostly return at once: a hand-back
/// there would be forgotten and the wait after it would have none.
fn waits(c: Call, args: &[u64; 6]) -> bool {
    match c {
        Call::Sleep => args[0] != 0,
        Call::Poll => args[2] != 0,
        Call::EpollWait => args[3] != 0,
        Call::Readv => true,
        Call::Fd => args[0] == qlib::io_abi::fd::ACCEPT,
        _ => false,
    }
}

/// `args` of a wait without its deadline (`Poll`, `EpollWait`, `Sleep`).
fn without_deadline(c: Call, mut args: [u64; 6]) -> [u64; 6] {
    match c {
        Call::Poll => args[2] = u64::MAX,
        Call::EpollWait => args[3] = u64::MAX,
        Call::Sleep => args[0] = u64::MAX,
        _ => {}
    }
    args
}

/// Makes a host call once: no retry, no control requests served.
pub fn call_once(c: Call, args: [u64; 6]) -> i64 {
    raw_call(c, args)
}

/// The doorbell alone: no control request served, no accounting, no
/// freed memory handed back (a secondary vCPU's calls, and vCPU 0's in
/// the middle of handing a task to one: `task::offload`).
pub fn call_bare(c: Call, args: [u64; 6]) -> i64 {
    ring(&mut arch::percpu::this().record.lock(), c, args)
}

/// A hint to the VMM (`Call::Populate`), safe from any kernel context
/// that may allocate (a fault handler holding the address space, a
/// secondary vCPU): the doorbell alone, counted in the stats, no control
/// request served; `None` when this vCPU's record is busy (the hint is
/// dropped: nothing waits on it).
pub fn hint(c: Call, args: [u64; 6]) -> Option<i64> {
    let mut rec = arch::percpu::this().record.try_lock()?;
    let st = crate::stats::start();
    let ret = ring(&mut rec, c, args);
    crate::stats::host_call(c, st);
    Some(ret)
}

fn raw_call(c: Call, args: [u64; 6]) -> i64 {
    let blocking = crate::syscalls::cputime::may_block(c, &args);
    // Freed memory goes back before the guest waits (a process that exits
    // while the others sleep); `Reclaim` itself never blocks.
    if blocking && waits(c, &args) && crate::mm::frames::return_due() {
        crate::control::return_freed_before_wait();
    }
    // This vCPU's record: the lock is only ever taken by this vCPU (it
    // guards against a nested call), never waited for by another.
    let mut rec = arch::percpu::this().record.lock();
    let t0 = if blocking { arch::rdtsc() } else { 0 };
    let st = crate::stats::start();
    let ret = ring(&mut rec, c, args);
    crate::stats::host_call(c, st);
    crate::mm::swap::after_call(c);
    if blocking {
        crate::syscalls::cputime::add_blocked(arch::rdtsc().wrapping_sub(t0));
    }
    ret
}

/// Fills this vCPU's locked host-call record and rings the doorbell;
/// returns what the VMM wrote back.
fn ring(rec: &mut HostCall, c: Call, args: [u64; 6]) -> i64 {
    rec.call = c as u64;
    rec.args = args;
    rec.ret = 0;
    let gpa = kva_to_gpa(&*rec as *const HostCall as u64);
    // SAFETY: the record is a live kernel static at `gpa`; the VMM reads it
    // and writes `ret` before the vCPU resumes, while the caller holds its
    // lock.
    unsafe { arch::outl(HOSTCALL_PORT, gpa as u32) };
    // SAFETY: `ret` was written by the VMM behind the compiler's back.
    unsafe { core::ptr::read_volatile(&rec.ret) }
}

/// Passes a kernel buffer (in the kernel image or the direct map).
pub fn buf(bytes: &[u8]) -> (u64, u64) {
    (kva_to_gpa(bytes.as_ptr() as u64), bytes.len() as u64)
}

/// Passes an iovec array that lives in kernel memory.
pub fn iovecs(v: &[IoVec]) -> (u64, u64) {
    (kva_to_gpa(v.as_ptr() as u64), v.len() as u64)
}

/// How far the host's `CLOCK_MONOTONIC` runs ahead of the guest's (ns),
/// as far as waits that timed out before the guest's deadline showed:
/// added to the deadlines the host waits for ([`host_deadline`]). The
/// guest's clock starts from the host's time read before the `Hello`
/// call returned, so it lags by about one host-call exit; a host wait
/// that ends at the deadline the host sees would end before the guest's,
/// and the guest would wait again (another host call) or, for a sleep,
/// return early.
static HOST_AHEAD: AtomicU64 = AtomicU64::new(0);
/// The largest correction: the host's own waits were rounded up to 1 ms
/// before, so no wait becomes later than it was then.
const MAX_AHEAD_NS: u64 = 1_000_000;

/// The host deadline for the guest monotonic `deadline_ns` (0 and
/// `u64::MAX` stay: now, none).
pub fn host_deadline(deadline_ns: u64) -> u64 {
    if deadline_ns == 0 || deadline_ns == u64::MAX {
        return deadline_ns;
    }
    deadline_ns.saturating_add(HOST_AHEAD.load(Ordering::Relaxed))
}

/// A host wait for `sent` (a [`host_deadline`]) timed out: the host's
/// clock has reached `sent`. If the guest's has not, the host is ahead by
/// at least the difference.
pub fn timed_out(sent: u64) {
    if sent == 0 || sent == u64::MAX {
        return;
    }
    let now = crate::time::monotonic_ns();
    if now < sent {
        HOST_AHEAD.fetch_max((sent - now).min(MAX_AHEAD_NS), Ordering::Relaxed);
    }
}

/// Blocks until the monotonic clock reaches `deadline_ns` (`u64::MAX`:
/// forever); false when a handled signal cut the sleep short.
pub fn sleep_until(deadline_ns: u64) -> bool {
    loop {
        let sent = host_deadline(deadline_ns);
        if call(Call::Sleep, [sent, 0, 0, 0, 0, 0]) == RET_RESTART {
            return false;
        }
        if deadline_ns == u64::MAX || crate::time::monotonic_ns() >= deadline_ns {
            return true;
        }
        timed_out(sent);
    }
}

/// Ends the sandbox with `status`.
pub fn exit(status: i32) -> ! {
    // Shared file mappings reach their files before the sandbox ends.
    crate::mm::sharedfile::sync_all();
    if crate::task::offload::cpus() > 1 {
        log::debug!(
            "{} task stints on secondary vCPUs, {} preemptions",
            crate::task::offload::STINTS.load(core::sync::atomic::Ordering::Relaxed),
            crate::task::slice::PREEMPTIONS.load(core::sync::atomic::Ordering::Relaxed)
        );
    }
    if crate::arch::kstack::measuring() {
        log::debug!(
            "kernel stack high water: boot stack (pid 1) {} of {} bytes, control stack {} of {} bytes",
            crate::arch::entry::boot_stack_high_water(),
            crate::arch::boot::BOOT_STACK_SIZE,
            crate::control::stack_high_water(),
            crate::control::CONTROL_STACK_SIZE
        );
    }
    crate::stats::report();
    raw_call(Call::Exit, [status as u64, 0, 0, 0, 0, 0]);
    unreachable_halt()
}

/// Ends the sandbox with `status` before the program ran, the VMM
/// printing `reason` (one line) on its stderr.
pub fn exit_with_reason(status: i32, reason: &str) -> ! {
    let (gpa, len) = buf(reason.as_bytes());
    raw_call(Call::Exit, [status as u64, gpa, len, 0, 0, 0]);
    unreachable_halt()
}

/// A fatal boot error: reported to the VMM, which stops the sandbox.
pub fn boot_error(msg: &str) -> ! {
    let (gpa, len) = buf(msg.as_bytes());
    raw_call(Call::BootError, [0, gpa, len, 0, 0, 0]);
    unreachable_halt()
}

/// Stops the vCPU for good if the VMM ever resumes after a final call.
pub fn unreachable_halt() -> ! {
    loop {
        // SAFETY: hlt only waits; the VMM treats it as a guest error.
        unsafe { core::arch::asm!("hlt", options(nomem, nostack)) };
    }
}
