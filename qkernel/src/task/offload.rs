//! Tasks' user mode on the secondary vCPUs (docs/smp.md, "Tasks on the
//! secondaries").
//!
//! vCPU 0 does all kernel work, as on one vCPU; a secondary runs the
//! *user mode* of one task at a time. When vCPU 0 is about to return a
//! task to user mode while another task waits for it and a secondary is
//! idle, it hands the returning task's user context (registers, CR3, FS
//! and GS base, FPU state) to that secondary's [`Slot`], marks the task
//! blocked and runs the next one. The secondary loads the context and
//! returns to user mode on its own return stub. At the task's next entry
//! (a syscall, a fault, the kick), the secondary saves the context back
//! into the slot, switches to the boot page tables, marks the slot
//! `RETURNED` and wakes vCPU 0 (`WakeVcpu` bit 0: a blocking host call
//! returns, user mode is kicked). vCPU 0 collects the task at its next
//! pick (its frame, FS/GS and FPU go back into the task, which becomes
//! runnable) and, once it runs it, serves the entry as if it had come on
//! vCPU 0 (`trap::after_return`).
//!
//! Why this and not a big kernel lock: a secondary never runs kernel code
//! beyond these few steps, so host calls (which only vCPU 0's `HostCalls`
//! serves), the per-vCPU `Process` slot, per-vCPU signal state, the slice
//! watcher and the hibernation barrier all stay as on one vCPU. The price
//! is a round trip to vCPU 0 for every syscall and fault of a task on a
//! secondary (two host calls, ~60-100 µs), so it pays for tasks that
//! compute, not for tasks that make many syscalls.
//!
//! **Recall.** vCPU 0 takes a task back from a secondary's user mode
//! ([`recall_slot`]: sets the slot's recall flag, kicks the secondary with
//! `WakeVcpu(WAKE_KICK)`, waits until the slot is `RETURNED`, kicking
//! again every 200 µs, because a kick that finds the secondary's kernel
//! code running is dropped; the secondary reads the flag before it
//! returns to user mode). It does so to:
//! - wake the task (`sched::wake`: a signal for it);
//! - change its address space (every `arch::flush_tlb` of the active
//!   address space recalls the tasks running on it, an address space is
//!   freed only after its tasks were recalled: the TLB shootdown; a
//!   secondary loads CR3 every time it starts a task, which flushes);
//! - end its group (`exit_group`, `execve`: [`forget_group`]);
//! - hibernate ([`recall_all`]: every secondary is then idle in the host
//!   with the boot page tables, the barrier of TASKS.md §4.8).

use alloc::boxed::Box;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::SeqCst};

use qlib::abi::{Call, KICK_VECTOR, WAKE_KICK};
use spin::Mutex;

use super::{KERNEL, Kernel, State, current_pid, current_tgid, sched};
use crate::arch::entry::TrapFrame;
use crate::arch::percpu::{self, MAX_CPUS};
use crate::arch::switch::FpuState;
use crate::arch::{self, user_return};

/// Slot states.
const IDLE: u32 = 0;
/// vCPU 0 put a task in the slot; the secondary has not taken it.
const ASSIGNED: u32 = 1;
/// The secondary runs the task (user mode, or its entry or exit).
const RUNNING: u32 = 2;
/// The task is back; vCPU 0 collects it.
const RETURNED: u32 = 3;

/// A task's user context while it is on a secondary.
struct Away {
    frame: TrapFrame,
    /// Where the task's own frame lies (the top of its kernel stack).
    frame_ptr: u64,
    /// Its address space's kernel PGD.
    cr3: u64,
    fs: u64,
    gs: u64,
    /// Its FPU state while away (swapped with the task's box).
    fpu: Option<Box<FpuState>>,
    /// CR2 of the page fault that ended the stint.
    cr2: u64,
    /// TSC when the secondary started it (its user time).
    since: u64,
    /// TSC up to which its user time is charged (`since`, or later once
    /// a CPU timer check charged the stint so far: [`charge_running`]).
    charged: u64,
    /// TSC at the entry that ended the stint (0: not ended by an entry,
    /// a task recalled before it started).
    ended: u64,
    tgid: u32,
}

/// One secondary's hand-over place.
struct Slot {
    state: AtomicU32,
    /// Return the task at once (vCPU 0 waits for it).
    recall: AtomicBool,
    pid: AtomicU32,
    tgid: AtomicU32,
    cr3: AtomicU64,
    /// Only one side touches it at a time (the state says which).
    away: Mutex<Away>,
}

impl Slot {
    const fn new() -> Self {
        Self {
            state: AtomicU32::new(IDLE),
            recall: AtomicBool::new(false),
            pid: AtomicU32::new(0),
            tgid: AtomicU32::new(0),
            cr3: AtomicU64::new(0),
            away: Mutex::new(Away {
                frame: TrapFrame {
                    r15: 0,
                    r14: 0,
                    r13: 0,
                    r12: 0,
                    r11: 0,
                    r10: 0,
                    r9: 0,
                    r8: 0,
                    rbp: 0,
                    rdi: 0,
                    rsi: 0,
                    rdx: 0,
                    rcx: 0,
                    rbx: 0,
                    rax: 0,
                    vector: 0,
                    error: 0,
                    rip: 0,
                    cs: 0,
                    rflags: 0,
                    rsp: 0,
                    ss: 0,
                },
                frame_ptr: 0,
                cr3: 0,
                fs: 0,
                gs: 0,
                fpu: None,
                cr2: 0,
                since: 0,
                charged: 0,
                ended: 0,
                tgid: 0,
            }),
        }
    }
}

static SLOTS: [Slot; MAX_CPUS] = [const { Slot::new() }; MAX_CPUS];

/// vCPUs online (1: everything stays on vCPU 0, nothing here costs more
/// than one load).
static CPUS: AtomicUsize = AtomicUsize::new(1);
/// Each secondary's page tables while it has no task (its boot CR3).
static BOOT_CR3: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];
/// Faults of tasks on secondaries: (pid, CR2) until their entry is
/// served on vCPU 0.
static FAULTS: Mutex<alloc::vec::Vec<(u32, u64)>> = Mutex::new(alloc::vec::Vec::new());
/// Stints on secondaries, for the log.
pub static STINTS: AtomicU64 = AtomicU64::new(0);

/// The secondaries are up (vCPU 0, at boot).
pub fn set_cpus(n: usize) {
    CPUS.store(n.clamp(1, MAX_CPUS), SeqCst);
}

/// vCPUs that run tasks (user mode).
pub fn cpus() -> usize {
    CPUS.load(SeqCst)
}

fn enabled() -> bool {
    cpus() > 1
}

/// The secondaries' slots, with their vCPU ids.
fn secondaries() -> impl Iterator<Item = (usize, &'static Slot)> {
    SLOTS.iter().enumerate().take(cpus()).skip(1)
}

/// A host call of a secondary (or of vCPU 0 in the middle of a hand-over):
/// the doorbell only, no control request served.
fn bare(c: Call, args: [u64; 6]) -> i64 {
    crate::hostcall::call_bare(c, args)
}

fn load_cr3(v: u64) {
    // SAFETY: `v` is a kernel PGD (an address space's, or the boot page
    // tables): every one maps the kernel half alike.
    unsafe { core::arch::asm!("mov cr3, {0}", in(reg) v, options(nostack)) };
}

/// Whether a task came back from a secondary and waits for vCPU 0.
pub fn returned_pending() -> bool {
    enabled() && (1..cpus()).any(|k| SLOTS[k].state.load(SeqCst) == RETURNED)
}

/// Makes the tasks that came back runnable (first in the queue: their
/// entry waits). Called by `sched::pick` with the table locked. Not while
/// hibernated: a runnable task would wake the sandbox.
pub fn collect(k: &mut Kernel) {
    if !enabled() || crate::mm::swap::asleep() {
        return;
    }
    for (cpu, s) in SLOTS.iter().enumerate().take(cpus()).skip(1) {
        if s.state.load(SeqCst) != RETURNED {
            continue;
        }
        let pid = s.pid.load(SeqCst);
        let mut a = s.away.lock();
        if let Some(t) = k.tasks.get_mut(&pid)
            && t.state == State::Blocked
            && a.frame_ptr == t.kstack_top - core::mem::size_of::<TrapFrame>() as u64
        {
            // SAFETY: the frame lies at the top of the task's kernel
            // stack (checked above), which is allocated while the task is
            // in the table; the task is switched out, so nothing else
            // uses the frame.
            unsafe { core::ptr::write(a.frame_ptr as *mut TrapFrame, a.frame) };
            t.fs_base = a.fs;
            t.gs_base = a.gs;
            if let Some(f) = a.fpu.as_mut() {
                core::mem::swap(&mut t.fpu, f);
            }
            if a.frame.vector == 14 {
                let mut f = FAULTS.lock();
                f.retain(|&(p, _)| p != pid);
                f.push((pid, a.cr2));
            }
            // The stint ended at its entry on the secondary, not when vCPU
            // 0 got round to collecting it.
            let end = if a.ended != 0 { a.ended } else { arch::rdtsc() };
            let ns = crate::time::tsc_to_ns(end.wrapping_sub(a.since));
            let unbilled = crate::time::tsc_to_ns(end.saturating_sub(a.charged));
            super::cpu::charge_user(pid, a.tgid, unbilled);
            t.habit.stint(ns, a.frame.vector != u64::from(KICK_VECTOR));
            // `getcpu` names the vCPU it last ran on in user mode.
            t.last_cpu = cpu as u8;
            t.state = State::Runnable;
            if a.frame.vector == u64::from(KICK_VECTOR) {
                // Recalled: it waits its turn.
                k.runq.push_back(pid);
            } else {
                // Its syscall or fault waits: served first.
                k.runq.push_front(pid);
            }
        } else if k.tasks.get(&pid).is_some_and(|t| t.live()) {
            // Not the task that left (a kernel bug): it stays blocked.
            log::error!("task {pid} came back from a secondary vCPU to another frame");
        }
        drop(a);
        s.state.store(IDLE, SeqCst);
    }
}

/// The CR2 of the page fault task `pid` took on a secondary, once.
pub fn take_fault(pid: u32) -> Option<u64> {
    let mut f = FAULTS.lock();
    let i = f.iter().position(|&(p, _)| p == pid)?;
    Some(f.swap_remove(i).1)
}

/// Takes the task in slot `k` back: returns once it is not running on the
/// secondary any more (`RETURNED`, or `IDLE`).
fn recall_slot(k: usize) {
    let s = &SLOTS[k];
    {
        let mut a = s.away.lock();
        if s.state
            .compare_exchange(ASSIGNED, RETURNED, SeqCst, SeqCst)
            .is_ok()
        {
            // It never ran: it comes back as if kicked.
            a.frame.vector = u64::from(KICK_VECTOR);
            a.since = arch::rdtsc();
            a.charged = a.since;
            a.ended = 0;
            return;
        }
    }
    if s.state.load(SeqCst) != RUNNING {
        return;
    }
    s.recall.store(true, SeqCst);
    while s.state.load(SeqCst) == RUNNING {
        bare(Call::WakeVcpu, [1 << k, WAKE_KICK, 0, 0, 0, 0]);
        let t0 = arch::rdtsc();
        while s.state.load(SeqCst) == RUNNING
            && crate::time::tsc_to_ns(arch::rdtsc().wrapping_sub(t0)) < 200_000
        {
            core::hint::spin_loop();
        }
    }
}

/// Takes back the tasks no secondary has started yet (vCPU 0 has nothing
/// else to run: a secondary whose host thread waits for a CPU would only
/// delay them). True if there was one (collected at the next pick).
pub fn reclaim_unstarted() -> bool {
    if !enabled() {
        return false;
    }
    let mut any = false;
    for (k, s) in secondaries() {
        if s.state.load(SeqCst) == ASSIGNED {
            recall_slot(k);
            any = true;
        }
    }
    any
}

/// Takes `pid` back if it is away; true if it was (it is then collected
/// at the next pick).
pub fn recall(pid: u32) -> bool {
    if !enabled() {
        return false;
    }
    let mut found = false;
    for (k, s) in secondaries() {
        let st = s.state.load(SeqCst);
        if st != IDLE && s.pid.load(SeqCst) == pid {
            recall_slot(k);
            found = true;
        }
    }
    found
}

/// Takes back every task that runs on the address space whose kernel PGD
/// is `cr3` (its mappings change: the TLB shootdown).
pub fn shootdown(cr3: u64) {
    if !enabled() {
        return;
    }
    for (k, s) in secondaries() {
        let st = s.state.load(SeqCst);
        if (st == ASSIGNED || st == RUNNING) && s.cr3.load(SeqCst) == cr3 {
            recall_slot(k);
        }
    }
}

/// A slice on a secondary: as long as vCPU 0's.
const SLICE_NS: u64 = 10_000_000;

/// vCPU 0's slice ended while tasks wait (`slice::at_user_return`): the
/// tasks that have kept a secondary for a slice or longer go back to
/// the run queue too, so that the waiting ones get a secondary in turn.
pub fn rotate() {
    if !enabled() {
        return;
    }
    let now = arch::rdtsc();
    for (k, s) in secondaries() {
        if s.state.load(SeqCst) != RUNNING {
            continue;
        }
        let since = s.away.try_lock().map(|a| a.since);
        if since.is_some_and(|t| crate::time::tsc_to_ns(now.wrapping_sub(t)) >= SLICE_NS) {
            recall_slot(k);
        }
    }
}

/// Takes back every task (hibernation, a change to every address space).
pub fn recall_all() {
    if !enabled() {
        return;
    }
    for (k, _) in secondaries() {
        recall_slot(k);
    }
}

/// The user time not charged yet of the stints on secondaries of task
/// `pid` (`Some`) or of every task of group `tgid`: a running stint so
/// far, a stint that ended but was not collected. CPU clocks and
/// `getrusage` add it, so that a thread computing on a secondary shows
/// its time while it is there (it is charged when it comes back).
pub fn unbilled_ns(pid: Option<u32>, tgid: u32) -> u64 {
    if !enabled() {
        return 0;
    }
    let now = arch::rdtsc();
    let mut ns = 0u64;
    for (_, s) in secondaries() {
        let a = s.away.lock();
        let end = match s.state.load(SeqCst) {
            RUNNING if a.ended != 0 => a.ended,
            RUNNING => now,
            RETURNED if a.ended != 0 => a.ended,
            _ => continue,
        };
        let mine = match pid {
            Some(p) => s.pid.load(SeqCst) == p,
            None => a.tgid == tgid,
        };
        if mine {
            ns = ns.saturating_add(crate::time::tsc_to_ns(end.saturating_sub(a.charged)));
        }
    }
    ns
}

/// Charges the running stints of group `g`'s tasks up to now (a CPU
/// timer check: a lone thread computing on a secondary would otherwise
/// be charged only when it comes back, and its timer go off that late).
pub fn charge_running(g: u32) {
    if !enabled() {
        return;
    }
    for (_, s) in secondaries() {
        let mut a = s.away.lock();
        if s.state.load(SeqCst) != RUNNING || a.tgid != g {
            continue;
        }
        let end = if a.ended != 0 { a.ended } else { arch::rdtsc() };
        let ns = crate::time::tsc_to_ns(end.saturating_sub(a.charged));
        a.charged = a.charged.max(end);
        super::cpu::charge_user(s.pid.load(SeqCst), g, ns);
    }
}

/// Takes back the tasks of group `g` and forgets them (they are being
/// removed: `exit_group`, `execve`).
pub fn forget_group(g: u32) {
    if !enabled() {
        return;
    }
    for (k, s) in secondaries() {
        if s.state.load(SeqCst) != IDLE && s.tgid.load(SeqCst) == g {
            recall_slot(k);
            s.state.store(IDLE, SeqCst);
        }
    }
}

/// Tasks that `sched_setaffinity` kept on vCPU 0.
static PINNED: Mutex<alloc::vec::Vec<u32>> = Mutex::new(alloc::vec::Vec::new());

/// Keeps task `tid` on vCPU 0 (`pinned`) or lets it run anywhere.
pub fn pin(tid: u32, pinned: bool) {
    let mut p = PINNED.lock();
    p.retain(|&t| t != tid);
    if pinned && p.len() < super::MAX_TASKS * 2 {
        p.push(tid);
    }
}

/// The affinity mask of task `tid` (0: none in particular): every vCPU
/// that runs tasks, or CPU 0 alone for a pinned task.
pub fn affinity(tid: u32) -> u64 {
    if tid != 0 && PINNED.lock().contains(&tid) {
        return 1;
    }
    (1u64 << cpus()) - 1
}

/// An idle secondary vCPU (online, no task in its slot).
pub fn idle_secondary() -> Option<usize> {
    if !enabled() {
        return None;
    }
    (1..cpus())
        .find(|&k| SLOTS[k].state.load(SeqCst) == IDLE && percpu::PERCPU[k].online.load(SeqCst))
}

/// An idle secondary, if the running task `me` should go to one: another
/// task waits for vCPU 0, the sandbox is awake, and `me` has shown that
/// it computes (`Task::habit`: a task that keeps coming back quickly
/// would pay a round trip to vCPU 0 for every entry).
fn wanted(me: u32) -> Option<usize> {
    if !enabled() || crate::mm::swap::asleep() {
        return None;
    }
    let k = idle_secondary()?;
    let kk = KERNEL.lock();
    if kk.tasks.get(&me).is_none_or(|t| t.habit.stays()) {
        return None;
    }
    let others = kk.runq.iter().any(|pid| {
        kk.tasks
            .get(pid)
            .is_some_and(|t| t.state == State::Runnable)
    });
    others.then_some(k)
}

/// Whether a runnable task that has shown it computes waits for vCPU 0
/// while a secondary idles: the running task then yields to it at its
/// return to user mode ([`super::slice::at_user_return`]), and it goes
/// out at its own ([`away`]). Otherwise it would wait until the running
/// task blocks or its slice ends: a worker woken with work (OpenBLAS, a
/// thread pool) sat behind the thread that woke it for up to 10 ms.
pub fn computer_waits() -> bool {
    if !enabled() || crate::mm::swap::asleep() || idle_secondary().is_none() {
        return false;
    }
    // PINNED before KERNEL, as in `goes_out`.
    let pinned = PINNED.lock();
    let k = KERNEL.lock();
    k.runq.iter().any(|pid| {
        !pinned.contains(pid)
            && k.tasks
                .get(pid)
                .is_some_and(|t| t.state == State::Runnable && !t.habit.stays())
    })
}

/// Whether the running task will go to a secondary at its return to user
/// mode ([`away`]).
pub fn goes_out() -> bool {
    enabled() && !PINNED.lock().contains(&current_pid()) && wanted(current_pid()).is_some()
}

/// On vCPU 0, after the return to user mode of the running task was
/// prepared in `frame` (the top of its kernel stack): if it should run on
/// a secondary, sends it there and runs other tasks; true once it came
/// back, its next entry (or a kick) in `frame`, for the caller to serve.
/// False: it returns to user mode here, `frame` unchanged.
pub fn away(frame: &mut TrapFrame) -> bool {
    if !enabled() {
        return false;
    }
    if returned_pending() && !crate::mm::swap::asleep() {
        // Tasks came back from secondaries: they go first. The frame
        // leaves the return stub's slots (the switch clears them) and is
        // served again as a kick.
        user_return::finish_stub(frame);
        frame.vector = u64::from(KICK_VECTOR);
        sched::yield_now();
        return true;
    }
    let me = current_pid();
    if PINNED.lock().contains(&me) {
        return false;
    }
    let Some(k) = wanted(me) else {
        return false;
    };
    let next = {
        let mut kk = KERNEL.lock();
        let Some(next) = sched::pick(&mut kk) else {
            return false;
        };
        if let Some(t) = kk.tasks.get_mut(&me) {
            t.state = State::Blocked;
        }
        next
    };
    user_return::finish_stub(frame);
    let s = &SLOTS[k];
    {
        let mut a = s.away.lock();
        a.frame = *frame;
        a.frame_ptr = frame as *mut TrapFrame as u64;
        a.cr3 = arch::cr3();
        a.fs = arch::fs_base();
        a.gs = arch::gs_base();
        a.tgid = current_tgid();
        a.since = arch::rdtsc();
        a.charged = a.since;
        a.ended = 0;
        a.fpu.get_or_insert_with(FpuState::clean).save();
        s.pid.store(me, SeqCst);
        s.tgid.store(a.tgid, SeqCst);
        s.cr3.store(a.cr3, SeqCst);
        s.recall.store(false, SeqCst);
    }
    s.state.store(ASSIGNED, SeqCst);
    STINTS.fetch_add(1, SeqCst);
    bare(Call::WakeVcpu, [1 << k, 0, 0, 0, 0, 0]);
    sched::switch(next);
    // Back on vCPU 0 (collected, then switched to): `frame` holds the
    // entry that ended the stint.
    true
}

/// A secondary's first task (`smp_main`): records its boot page tables
/// and its stack, then waits for a task and enters its user mode.
pub fn secondary_main(stack_base: u64, stack_top: u64) -> ! {
    let k = percpu::this().id();
    BOOT_CR3[k].store(arch::cr3(), SeqCst);
    arch::switch::set_kernel_stack(stack_base, stack_top);
    let mut frame = TrapFrame::default();
    next_task(&mut frame);
    // SAFETY: `next_task` loaded the task's address space and a user
    // context prepared for `sysretq` through this vCPU's return stub.
    unsafe { arch::entry::enter_user(&frame) }
}

/// An entry from user mode on a secondary (the running task's syscall,
/// fault or kick): hands the task back to vCPU 0, then waits for the next
/// and leaves `frame` ready for its `sysretq`.
pub fn secondary_entry(frame: &mut TrapFrame, cr2: u64) {
    let k = percpu::this().id();
    let s = &SLOTS[k];
    if s.state.load(SeqCst) == RUNNING {
        user_return::finish_stub(frame);
        let quiet = {
            let mut a = s.away.lock();
            if let Some(f) = a.fpu.as_mut() {
                f.save();
            }
            a.fs = arch::fs_base();
            a.gs = arch::gs_base();
            a.frame = *frame;
            a.cr2 = cr2;
            a.ended = arch::rdtsc();
            load_cr3(BOOT_CR3[k].load(SeqCst));
            s.recall.load(SeqCst)
        };
        s.state.store(RETURNED, SeqCst);
        if !quiet {
            // vCPU 0 serves the entry (it waits for it when recalling).
            bare(Call::WakeVcpu, [1, 0, 0, 0, 0, 0]);
        }
    }
    next_task(frame);
}

/// Waits in the host until vCPU 0 assigns a task, then loads it: its
/// address space, FS/GS base, FPU state, and its context in `frame`,
/// prepared for this vCPU's return stub.
fn next_task(frame: &mut TrapFrame) {
    let k = percpu::this().id();
    let s = &SLOTS[k];
    loop {
        // Taken before the state moves: whoever reads the stint's start
        // under the lock ([`unbilled_ns`]) never sees `RUNNING` with the
        // time of the hand-over instead.
        let mut a = s.away.lock();
        if s.state
            .compare_exchange(ASSIGNED, RUNNING, SeqCst, SeqCst)
            .is_ok()
        {
            if s.recall.load(SeqCst) {
                a.frame.vector = u64::from(KICK_VECTOR);
                a.since = arch::rdtsc();
                a.charged = a.since;
                a.ended = 0;
                drop(a);
                s.state.store(RETURNED, SeqCst);
                continue;
            }
            load_cr3(a.cr3);
            arch::set_fs_base(a.fs);
            arch::set_gs_base(a.gs);
            if let Some(f) = a.fpu.as_ref() {
                f.restore();
            }
            a.since = arch::rdtsc();
            a.charged = a.since;
            *frame = a.frame;
            let cpu = percpu::this();
            cpu.current.store(s.pid.load(SeqCst), SeqCst);
            cpu.current_tgid.store(a.tgid, SeqCst);
            drop(a);
            user_return::prepare_unchecked(frame);
            return;
        }
        drop(a);
        bare(Call::VcpuIdle, [0; 6]);
    }
}
