//! Job control: stopped and continued thread groups (docs/processes.md,
//! "Job control").
//!
//! A stop signal (SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU) whose action is the
//! default stops the whole thread group when it is sent (or, if every
//! thread blocked it, when a thread takes it at its return to user mode):
//! the group is marked stopped in its leader ([`Job`]), its runnable
//! threads become [`State::Stopped`] (out of the run queue: no CPU), a
//! thread away on a secondary vCPU is recalled first, the running thread
//! stops at its next return to user mode (`signal::deliver`), and a thread
//! blocked in the kernel stays blocked: if its wait ends before SIGCONT,
//! it finishes its system call and stops on its way back to user mode.
//! The parent gets SIGCHLD with `CLD_STOPPED` (unless `SA_NOCLDSTOP`) and
//! its `wait4(WUNTRACED)`/`waitid(WSTOPPED)` report the stop once.
//!
//! SIGCONT (even blocked or ignored) discards the group's pending stop
//! signals and, if the group is stopped, makes its stopped threads
//! runnable and reports `CLD_CONTINUED`; a stop signal discards a pending
//! SIGCONT. SIGTSTP, SIGTTIN and SIGTTOU to a process of an orphaned
//! process group are discarded (Linux checks this when the signal is
//! taken; here when it stops the group). A fatal signal still ends a
//! stopped group. Pid 1 with init semantics is never stopped (its
//! default actions are dropped).
//!
//! Lock order: the task table ([`KERNEL`]) is taken here with no process
//! lock needed; callers that may already hold it use the `try_` paths.

use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};

use spin::Mutex;

use super::{KERNEL, Kernel, State, current_pid, current_tgid, sched};
use crate::signal::{self, Disp, Info, SIGCHLD, SIGCONT, SIGSTOP, STOP_SIGNALS, bit};

/// `si_code` of a SIGCHLD for a stopped or continued child.
pub const CLD_STOPPED: i32 = 5;
pub const CLD_CONTINUED: i32 = 6;

/// What the parent's wait has not seen yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Report {
    #[default]
    None,
    /// Stopped by this signal (`WUNTRACED`).
    Stopped(u32),
    /// Continued (`WCONTINUED`).
    Continued,
}

/// A thread group's job-control state, kept in its leader's task.
#[derive(Debug, Clone, Copy, Default)]
pub struct Job {
    /// The signal that stopped the group (0: not stopped).
    pub stopped: u32,
    /// The stop or continue the parent's wait reports next.
    pub report: Report,
    /// A fatal signal (not SIGKILL) sent while stopped: it ends the group
    /// when it is continued (0: none).
    pub kill: u32,
}

/// Whether thread group `g` is stopped.
pub fn stopped(k: &Kernel, g: u32) -> bool {
    k.tasks.get(&g).is_some_and(|l| l.job.stopped != 0)
}

/// Whether process group `pgid` is orphaned: no member has a parent in
/// another group of the same session.
pub fn orphaned(k: &Kernel, pgid: u32) -> bool {
    !k.tasks.values().any(|t| {
        t.pid == t.tgid
            && t.pgid == pgid
            && !matches!(t.state, State::Zombie(_))
            && k.tasks
                .get(&t.ppid)
                .is_some_and(|p| p.pgid != pgid && p.sid == t.sid)
    })
}

/// Whether a stop signal `sig` with the default action may stop group
/// `g`: never pid 1 with init semantics; SIGTSTP, SIGTTIN and SIGTTOU
/// not in an orphaned process group.
fn may_stop(k: &Kernel, g: u32, sig: u32) -> bool {
    if signal::init_spares(g) {
        return false;
    }
    let pgid = k.tasks.get(&g).map_or(0, |l| l.pgid);
    sig == SIGSTOP || !orphaned(k, pgid)
}

/// Discards the pending signals of `mask` of every thread of group `g`.
fn discard(k: &mut Kernel, g: u32, mask: u64) {
    if g == current_tgid() {
        signal::discard_pending(mask);
    }
    for t in k.tasks.values_mut().filter(|t| t.tgid == g) {
        t.sig.pending &= !mask;
    }
    if let Some(p) = k.tasks.get_mut(&g).and_then(|l| l.proc.as_mut()) {
        p.shared_sig.pending &= !mask;
    }
}

/// What sending `sig` to group `g` does before anything else (Linux's
/// `prepare_signal`): SIGCONT discards pending stop signals and continues
/// a stopped group; a stop signal discards a pending SIGCONT. Both even
/// when the signal itself is blocked or ignored.
pub fn prepare(k: &mut Kernel, g: u32, sig: u32) {
    if sig == SIGCONT {
        discard(k, g, STOP_SIGNALS);
        continue_group(k, g);
    } else if STOP_SIGNALS & bit(sig) != 0 {
        discard(k, g, bit(SIGCONT));
    }
}

/// [`prepare`] for the running group (`signal::send`). If the task table
/// is busy (the caller holds it), only the running thread's and group's
/// pending sets are cleaned.
pub fn prepare_current(sig: u32) {
    if sig != SIGCONT && STOP_SIGNALS & bit(sig) == 0 {
        return;
    }
    match KERNEL.try_lock() {
        Some(mut k) => prepare(&mut k, current_tgid(), sig),
        None if sig == SIGCONT => signal::discard_pending(STOP_SIGNALS),
        None => signal::discard_pending(bit(SIGCONT)),
    }
}

/// Sends the parent of group `g` SIGCHLD with `code` and `status`
/// (unless it ignores SIGCHLD or asked for `SA_NOCLDSTOP`) and wakes its
/// waiting threads.
fn notify_parent(k: &mut Kernel, g: u32, code: i32, status: i32) {
    let Some(ppid) = k.tasks.get(&g).map(|l| l.ppid) else {
        return;
    };
    if ppid == 0 {
        // Started from outside (`task::spawn`): nobody in the guest waits.
        return;
    }
    let info = Info {
        status,
        ..Info::user(code, g, 0)
    };
    if ppid == current_tgid() {
        if !Disp::current().nocldstop {
            signal::send(SIGCHLD, info);
        }
    } else {
        let blocked = super::wait::leader_blocked(k, ppid) & bit(SIGCHLD) != 0;
        if let Some(pp) = k.tasks.get_mut(&ppid).and_then(|t| t.proc.as_mut()) {
            let d = Disp::of(&pp.signals.lock().actions);
            if !d.nocldstop && (!d.ignores(SIGCHLD) || blocked) {
                pp.shared_sig.post(SIGCHLD, info);
            }
        }
    }
    super::wait::wake_group(k, ppid);
}

/// Stops group `g` with `sig` (the checks of [`may_stop`] done): its
/// runnable threads stop now, the running one at its return to user mode,
/// blocked ones when their wait ends; the parent is told. No-op if the
/// group is already stopped or gone.
pub fn stop_group(k: &mut Kernel, g: u32, sig: u32) {
    let live = k.tasks.values().any(|t| t.tgid == g && t.live());
    match k.tasks.get_mut(&g) {
        Some(l) if live && l.job.stopped == 0 => {
            l.job.stopped = sig;
            l.job.report = Report::Stopped(sig);
        }
        _ => return,
    }
    if g == current_tgid() {
        signal::set_group_stop(sig);
    }
    let me = current_pid();
    let threads: Vec<u32> = k
        .tasks
        .values()
        .filter(|t| t.tgid == g && t.pid != me && t.live())
        .map(|t| t.pid)
        .collect();
    for pid in threads {
        let blocked = k.tasks.get(&pid).is_some_and(|t| t.state == State::Blocked);
        if blocked && super::offload::recall(pid) {
            // Its user mode ran on a secondary vCPU: back to vCPU 0.
            super::offload::collect(k);
        }
        if let Some(t) = k.tasks.get_mut(&pid)
            && t.state == State::Runnable
        {
            t.state = State::Stopped;
            k.runq.retain(|&p| p != pid);
        }
    }
    notify_parent(k, g, CLD_STOPPED, sig as i32);
}

/// Continues stopped group `g`: its stopped threads become runnable and
/// the parent is told. Returns whether it was stopped.
pub fn continue_group(k: &mut Kernel, g: u32) -> bool {
    match k.tasks.get_mut(&g) {
        Some(l) if l.job.stopped != 0 => {
            l.job.stopped = 0;
            l.job.report = Report::Continued;
        }
        _ => return false,
    }
    if g == current_tgid() {
        signal::set_group_stop(0);
    }
    let threads: Vec<u32> = k
        .tasks
        .values()
        .filter(|t| t.tgid == g && t.state == State::Stopped)
        .map(|t| t.pid)
        .collect();
    for pid in threads {
        if let Some(t) = k.tasks.get_mut(&pid) {
            t.state = State::Runnable;
        }
        if !k.runq.contains(&pid) {
            k.runq.push_back(pid);
        }
    }
    notify_parent(k, g, CLD_CONTINUED, SIGCONT as i32);
    let kill = k
        .tasks
        .get_mut(&g)
        .map_or(0, |l| core::mem::take(&mut l.job.kill));
    if kill != 0 {
        if g == current_tgid() {
            signal::kill_group(kill);
        } else {
            super::wait::kill_group_other(k, g, kill);
        }
    }
    true
}

/// A fatal signal `sig` for group `g`: if `g` is stopped and `sig` is not
/// SIGKILL, it waits until SIGCONT, which then ends the group (Linux
/// leaves it pending: a stopped task does not want it). Returns whether
/// it waits; the caller then queues `sig` as pending.
pub fn defer_kill(k: &mut Kernel, g: u32, sig: u32) -> bool {
    if sig == signal::SIGKILL {
        return false;
    }
    match k.tasks.get_mut(&g) {
        Some(l) if l.job.stopped != 0 => {
            if l.job.kill == 0 {
                l.job.kill = sig;
            }
            true
        }
        _ => false,
    }
}

/// [`defer_kill`] for the running group; false if the table is busy (the
/// group is then killed at once).
pub fn defer_kill_current(sig: u32) -> bool {
    if signal::group_stop() == 0 {
        return false;
    }
    KERNEL
        .try_lock()
        .is_some_and(|mut k| defer_kill(&mut k, current_tgid(), sig))
}

/// A stop signal `sig` with the default action sent to non-running group
/// `g` that a thread does not block: the group stops (or the signal is
/// discarded: init, orphaned group).
pub fn stop_other(k: &mut Kernel, g: u32, sig: u32) {
    if may_stop(k, g, sig) {
        stop_group(k, g, sig);
    }
}

/// The same for the running group (`signal::send`). Returns false when
/// the task table is busy: the caller then queues the signal, and the
/// thread that takes it stops the group ([`stop_taken`]).
pub fn stop_current_group(sig: u32) -> bool {
    let Some(mut k) = KERNEL.try_lock() else {
        return false;
    };
    let g = current_tgid();
    stop_other(&mut k, g, sig);
    true
}

/// The running thread took stop signal `sig` (default action) from its
/// pending set at its return to user mode.
pub fn stop_taken(sig: u32) {
    let mut k = KERNEL.lock();
    let g = current_tgid();
    stop_other(&mut k, g, sig);
}

/// The running thread's group is stopped: it waits, not runnable, until
/// the group is continued (or a fatal signal makes it runnable again).
/// Called with no lock held, on the way back to user mode.
pub fn stop_current() {
    {
        let mut k = KERNEL.lock();
        let g = current_tgid();
        if !stopped(&k, g) {
            signal::set_group_stop(0);
            return;
        }
        if let Some(t) = k.tasks.get_mut(&current_pid()) {
            t.state = State::Stopped;
        }
    }
    sched::run_others();
}

/// A fatal signal for the running group: if its running task is stopped
/// (it waits in the scheduler), it runs again to end.
pub fn resume_to_die() {
    let Some(mut k) = KERNEL.try_lock() else {
        return;
    };
    let me = current_pid();
    if let Some(t) = k.tasks.get_mut(&me)
        && t.state == State::Stopped
    {
        t.state = State::Runnable;
        if !k.runq.contains(&me) {
            k.runq.push_back(me);
        }
    }
}

/// A stop or continue of child group `pid` its parent's wait reports:
/// `stopped` for `WUNTRACED`, `continued` for `WCONTINUED`; consumed
/// unless `keep` (`WNOWAIT`).
pub fn take_report(k: &mut Kernel, pid: u32, stopped: bool, continued: bool, keep: bool) -> Report {
    let Some(l) = k.tasks.get_mut(&pid) else {
        return Report::None;
    };
    let r = match l.job.report {
        Report::Stopped(_) if stopped && l.job.stopped != 0 => l.job.report,
        Report::Continued if continued => l.job.report,
        _ => return Report::None,
    };
    if !keep {
        l.job.report = Report::None;
    }
    r
}

/// Of the process groups in `groups`, each that is now orphaned and has
/// a stopped member gets SIGHUP and then SIGCONT (POSIX; Linux's
/// `kill_orphaned_pgrp`), once the task table is released.
pub fn hangup_orphans(k: &Kernel, groups: &[u32]) {
    for &g in groups {
        let stopped = k
            .tasks
            .values()
            .any(|t| t.pgid == g && t.pid == t.tgid && t.job.stopped != 0);
        if stopped && orphaned(k, g) {
            signal_soon(g, false, signal::SIGHUP);
            signal_soon(g, false, SIGCONT);
        }
    }
}

/// Signals sent where the task table was held (a pty's last master
/// dropped under it): (process group, or process if `by_pid`, signal).
static DEFERRED: Mutex<Vec<(u32, bool, u32)>> = Mutex::new(Vec::new());
static ANY_DEFERRED: AtomicBool = AtomicBool::new(false);

/// Sends `sig` from the kernel to process group `pgid` (`by_pid`: to
/// process `pgid`) now, or, if the task table is held, at the next
/// return to user mode of any task ([`run_deferred`]).
pub fn signal_soon(pgid: u32, by_pid: bool, sig: u32) {
    if KERNEL.is_locked() {
        DEFERRED.lock().push((pgid, by_pid, sig));
        ANY_DEFERRED.store(true, Ordering::Release);
        return;
    }
    send_kernel(pgid, by_pid, sig);
}

fn send_kernel(id: u32, by_pid: bool, sig: u32) {
    if !by_pid {
        super::pgrp::signal_group(id, sig);
        return;
    }
    let info = Info::user(signal::SI_KERNEL, 0, 0);
    if id == current_tgid() {
        signal::send(sig, info);
    } else {
        let _ = super::wait::send_to_group(id, sig, info);
    }
}

/// Sends the signals [`signal_soon`] deferred. Called with no lock held.
pub fn run_deferred() {
    // One load on every return to user mode; the swap only when set.
    if !ANY_DEFERRED.load(Ordering::Acquire) || !ANY_DEFERRED.swap(false, Ordering::AcqRel) {
        return;
    }
    let list = core::mem::take(&mut *DEFERRED.lock());
    for (id, by_pid, sig) in list {
        send_kernel(id, by_pid, sig);
    }
}
