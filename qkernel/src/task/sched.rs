//! The scheduler: a FIFO run queue and the switch between tasks.

use core::ptr::addr_of_mut;

use spin::Mutex;

use super::{KERNEL, Kernel, State, current_pid, set_current};
use crate::arch::{self, percpu, switch};
use crate::mm::addr_space::AddrSpace;
use crate::process::{self, PROCESS};

/// The address space of a task that has just exited, freed by the next
/// task once CR3 no longer names its page tables ([`finish_switch`]).
static DEAD: Mutex<Option<AddrSpace>> = Mutex::new(None);
/// A zombie nobody will wait for (its parent ignores SIGCHLD), removed by
/// the next task once its kernel stack is no longer in use.
static AUTO_REAP: Mutex<Option<u32>> = Mutex::new(None);

/// Parks the exiting task's address space until the switch away is done.
pub fn set_dead(mm: AddrSpace) {
    *DEAD.lock() = Some(mm);
}

/// Removes `pid` from the table after the switch away from it.
pub fn set_auto_reap(pid: u32) {
    *AUTO_REAP.lock() = Some(pid);
}

/// Makes a blocked task runnable.
/// A task away on a secondary vCPU is taken back first (its user mode
/// stops there; `offload`) and queued.
pub fn wake(k: &mut Kernel, pid: u32) {
    if k.tasks.get(&pid).is_some_and(|t| t.state == State::Blocked) && super::offload::recall(pid) {
        super::offload::collect(k);
        return;
    }
    if let Some(t) = k.tasks.get_mut(&pid)
        && t.state == State::Blocked
    {
        t.state = State::Runnable;
        k.runq.push_back(pid);
    }
}

/// The next runnable task in the queue, if any.
pub(super) fn pick(k: &mut Kernel) -> Option<u32> {
    super::offload::collect(k);
    super::park::wake_deferred(k);
    while let Some(pid) = k.runq.pop_front() {
        if k.tasks
            .get(&pid)
            .is_some_and(|t| t.state == State::Runnable)
        {
            return Some(pid);
        }
    }
    None
}

/// Lets every runnable task run before the current one goes on.
pub fn yield_now() {
    let next = {
        let mut k = KERNEL.lock();
        super::futex::expire(&mut k);
        if k.runq.is_empty() {
            // A task handed to a secondary that has not started it runs
            // here instead (`offload::reclaim_unstarted`).
            super::offload::reclaim_unstarted();
        }
        let Some(next) = pick(&mut k) else { return };
        let me = current_pid();
        if let Some(t) = k.tasks.get_mut(&me) {
            t.state = State::Runnable;
        }
        k.runq.push_back(me);
        next
    };
    switch(next);
}

/// The next task to run: the run queue's first, or, when it is empty,
/// whichever a host event (a parked fd, a deadline, a control request)
/// wakes, waiting in the host meanwhile.
fn next_task() -> u32 {
    loop {
        super::jobctl::run_deferred();
        {
            let mut k = KERNEL.lock();
            // Timers do not wake a hibernated sandbox: deadlines that
            // passed fire after the wake.
            if !crate::mm::swap::asleep() {
                super::futex::expire(&mut k);
            }
            if let Some(next) = pick(&mut k) {
                return next;
            }
        }
        if super::offload::reclaim_unstarted() {
            continue;
        }
        let futex_deadline = super::futex::next_deadline();
        // With every task waiting on nothing the host can signal (a futex
        // no one will wake, say), the vCPU still waits in the host, as a
        // Linux task sleeps: a signal, `qrun kill` or a hibernation
        // request ends the wait.
        super::slice::idle();
        super::park::idle_poll(futex_deadline);
    }
}

/// Sleeps until [`wake`]: other tasks run meanwhile, and with none to run
/// the vCPU waits in the host.
pub fn block_current() {
    let me = current_pid();
    if let Some(t) = KERNEL.lock().tasks.get_mut(&me) {
        t.state = State::Blocked;
    }
    switch(next_task());
}

/// Lets other tasks run while the current one is not runnable (its
/// state set by the caller: stopped). With nothing to run the vCPU waits
/// in the host for what may make a task runnable (a control request).
pub fn run_others() {
    switch(next_task());
}

/// Leaves the exiting (zombie or dead) current task for good.
pub fn leave_dead() -> ! {
    switch(next_task());
    log::error!("a dead task was switched back to");
    crate::hostcall::exit(0)
}

/// Switches from the current task to `next`. The current task's state has
/// been set by the caller (Runnable and queued, Blocked, Dead or Zombie).
/// Between two threads of one group the `Process` stays in `PROCESS` (only
/// its per-thread fields are swapped) and CR3 is not reloaded; to another
/// group, the process goes back into its leader's task and the next
/// group's comes out of its leader's.
pub fn switch(next: u32) {
    // A task that runs may touch its memory: never while hibernated.
    crate::mm::swap::ensure_awake();
    let prev = current_pid();
    if prev == next {
        if let Some(t) = KERNEL.lock().tasks.get_mut(&prev) {
            t.state = State::Running;
        }
        return;
    }
    // The stack being left must not have overflowed (`arch::kstack`).
    arch::kstack::check_current();
    super::cpu::switch_out();
    if crate::control::on_control_stack() {
        // Control requests never switch tasks (`control`): the control
        // stack would be reused under the switched-out task.
        panic!("task switch from a control request (task {prev} to {next})");
    }
    let mut pg = PROCESS.lock();
    let mut k = KERNEL.lock();
    let Some(next_tgid) = k.tasks.get(&next).map(|t| t.tgid) else {
        log::error!("switch to unknown task {next}");
        return;
    };
    let prev_tgid = super::current_tgid();
    let same = prev_tgid == next_tgid;
    let prev_rsp: *mut u64 = match k.tasks.get_mut(&prev) {
        Some(t) => {
            t.sig.save_into();
            t.fs_base = arch::fs_base();
            t.gs_base = arch::gs_base();
            t.fpu.save();
            t.thread = *percpu::this().thread.lock();
            addr_of_mut!(t.rsp)
        }
        None => {
            log::error!("switch from unknown task {prev}");
            return;
        }
    };
    // The `Process` (about 5 KiB) moves by swapping in place, never
    // through a temporary: every switched-out task keeps this frame on
    // its kernel stack (docs/processes.md, "Kernel stacks").
    if !same && pg.is_some() {
        if let Some(p) = pg.as_mut() {
            crate::signal::save_group(&mut p.shared_sig);
        }
        match k.tasks.get_mut(&prev_tgid) {
            Some(leader) => {
                core::mem::swap(&mut *pg, &mut leader.proc);
                // What the leader held (nothing, while its group ran).
                *pg = None;
            }
            None => {
                log::error!("switch: group {prev_tgid} has no leader");
                *pg = None;
            }
        }
    }
    if !same && let Some(l) = k.tasks.get_mut(&next_tgid) {
        if l.proc.is_some() {
            core::mem::swap(&mut *pg, &mut l.proc);
            // The slot held no process (it went to its leader above).
            l.proc = None;
        }
        let stopped = l.job.stopped;
        if let Some(p) = pg.as_mut() {
            // A process sharing its space (CLONE_VM) takes it from the
            // member that ran last.
            super::mmshare::take(&mut k, next_tgid, p);
            process::activate(&p.mm);
            crate::signal::load_group(&p.signals.lock().actions, &p.shared_sig);
        }
        crate::signal::set_group_stop(stopped);
    }
    let Some(t) = k.tasks.get_mut(&next) else {
        return;
    };
    *percpu::this().thread.lock() = t.thread;
    drop(pg);
    t.state = State::Running;
    t.sig.restore();
    arch::set_fs_base(t.fs_base);
    arch::set_gs_base(t.gs_base);
    t.fpu.restore();
    switch::set_kernel_stack(t.kstack_base, t.kstack_top);
    // The return page's slots are readable by every process: the next
    // one must not see the previous one's registers. (Defence in depth:
    // a task resumed after a switch returns through the stub itself and
    // overwrites them, so no leak was observable in a test.)
    arch::user_return::clear_slots();
    set_current(next, next_tgid);
    super::slice::new_slice();
    let next_rsp = t.rsp;
    drop(k);
    // SAFETY: `prev_rsp` points into the boxed Task of `prev`, which stays
    // in the table at least until another task runs (only a parent's
    // wait or `finish_switch` removes it); `next_rsp` was saved by
    // `switch_to` or laid out by `fork`; no lock is held.
    unsafe { switch::switch_to(prev_rsp, next_rsp) };
    finish_switch();
}

/// Runs in the task that was switched to: frees what the previous task
/// left behind when it exited.
fn finish_switch() {
    let dead = DEAD.lock().take();
    if let Some(mm) = dead {
        // SAFETY: CR3 names the running task's PGD, not the dead one's.
        unsafe { mm.free() };
    }
    if let Some(pid) = AUTO_REAP.lock().take() {
        KERNEL.lock().tasks.remove(&pid);
        super::cpu::task_removed(pid);
    }
}

/// The first thing a new task runs (`arch::switch::ret_from_fork`).
#[unsafe(no_mangle)]
extern "C" fn task_first_run() {
    finish_switch();
    super::slice::publish();
    // Its frame lies at the top of its kernel stack, where the exit
    // (`sysret_stack_top_frame`) takes it from: it may start on a
    // secondary vCPU (`offload`).
    if super::offload::cpus() > 1 {
        let top = arch::switch::kernel_stack_top();
        let frame = (top - core::mem::size_of::<arch::entry::TrapFrame>() as u64)
            as *mut arch::entry::TrapFrame;
        // SAFETY: `fork` laid out the new task's user context there; this
        // task owns its stack and nothing else refers to the frame.
        crate::trap::after_return(unsafe { &mut *frame });
    }
}
