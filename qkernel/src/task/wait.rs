//! Exit (of a thread, of a thread group), zombies, `wait4`/`waitid` and
//! signals to other threads and processes.

use alloc::boxed::Box;
use alloc::vec::Vec;

use super::{KERNEL, Kernel, State, Status, Task, sched};
use crate::errno::Errno;
use crate::mm::uaccess;
use crate::process::{PROCESS, Process};
use crate::signal::{self, Disp, Info, Posted, SIGCHLD};

/// Frees a process that no longer runs: its fds close, its pages go.
pub fn free_process(p: Process) {
    let Process { mm, files, .. } = p;
    drop(files);
    // SAFETY: the process does not run, so CR3 names another PGD.
    unsafe { mm.free() };
}

/// A task that ends or leaves: it no longer waits on a host fd or a
/// futex.
pub(super) fn detach(pid: u32) {
    super::park::forget(pid);
    super::futex::forget(pid);
}

/// Wakes every blocked thread of group `g` (a child exited: whichever
/// waits in `wait4` runs it again; the others go back to sleep).
pub(super) fn wake_group(k: &mut Kernel, g: u32) {
    let pids: Vec<u32> = k
        .tasks
        .values()
        .filter(|t| t.tgid == g && t.state == State::Blocked)
        .map(|t| t.pid)
        .collect();
    for p in pids {
        sched::wake(k, p);
    }
}

/// The dispositions of group `g`, which does not run.
fn disp_of(k: &Kernel, g: u32) -> Disp {
    k.tasks
        .get(&g)
        .and_then(|l| l.proc.as_ref())
        .map(|p| Disp::of(&p.signals.lock().actions))
        .unwrap_or_default()
}

/// Turns group leader `pid` (not running, or the one exiting) into a
/// zombie with `st`: its children go to pid 1, its parent gets its exit
/// signal and is woken. Returns whether nobody will wait for it (SIGCHLD
/// ignored).
fn zombify(k: &mut Kernel, pid: u32, st: Status) -> bool {
    let Some(t) = k.tasks.get_mut(&pid) else {
        return false;
    };
    t.state = State::Zombie(st);
    if t.sid == pid {
        // A session leader's end frees its controlling terminal.
        crate::fs::tty::session_ended(pid);
    }
    detach(pid);
    let ppid = t.ppid;
    let (pgid, sid) = (t.pgid, t.sid);
    let exit_signal = t.exit_signal;
    let vfork_parent = t.vfork_parent.take();
    let mut orphans_zombie = false;
    // Process groups this exit may orphan (Linux's `kill_orphaned_pgrp`):
    // its own, if its parent is in another group of the session, and its
    // children's other groups of the session.
    let mut groups: Vec<u32> = Vec::new();
    if k.tasks
        .get(&ppid)
        .is_some_and(|p| p.pgid != pgid && p.sid == sid)
    {
        groups.push(pgid);
    }
    for c in k.tasks.values_mut() {
        if c.ppid == pid && c.pid != pid {
            c.ppid = 1;
            orphans_zombie |= matches!(c.state, State::Zombie(_));
            if c.pgid != pgid && c.sid == sid && !groups.contains(&c.pgid) {
                groups.push(c.pgid);
            }
        }
    }
    super::jobctl::hangup_orphans(k, &groups);
    if let Some(vp) = vfork_parent {
        sched::wake(k, vp);
    }
    if orphans_zombie {
        wake_group(k, 1);
    }
    let mut auto_reap = false;
    if ppid == 0 {
        // Started from outside (`task::spawn`): nobody in the guest waits.
        auto_reap = super::spawn::exited(pid, st);
    } else if ppid == super::current_tgid() {
        // The parent is the running group (it killed its child).
        if exit_signal == SIGCHLD && signal::explicitly_ignored(SIGCHLD) {
            auto_reap = true;
        } else if exit_signal != 0 {
            signal::send(exit_signal, child_info(pid, st));
        }
        wake_group(k, ppid);
    } else if let Some(blocked) = k.tasks.get(&ppid).map(|_| leader_blocked(k, ppid))
        && let Some(parent) = k.tasks.get_mut(&ppid)
        && let Some(pp) = parent.proc.as_mut()
    {
        let d = Disp::of(&pp.signals.lock().actions);
        if exit_signal == SIGCHLD && d.ignored & signal::bit(SIGCHLD) != 0 {
            auto_reap = true;
        } else if exit_signal != 0
            && (!d.ignores(exit_signal) || blocked & signal::bit(exit_signal) != 0)
        {
            pp.shared_sig.post(exit_signal, child_info(pid, st));
        }
        wake_group(k, ppid);
    }
    auto_reap
}

fn child_info(pid: u32, st: Status) -> Info {
    let (code, status) = cld(st);
    Info {
        status,
        ..Info::user(code, pid, 0)
    }
}

/// `si_code` and `si_status` for a child that ended with `st`.
pub fn cld(st: Status) -> (i32, i32) {
    match st {
        Status::Exited(c) => (1, i32::from(c)), // CLD_EXITED
        Status::Killed(s) => (2, s as i32),     // CLD_KILLED
    }
}

/// Removes every thread of group `g` but the leader and `keep` (they do
/// not run: the vCPU is this one's).
pub(super) fn remove_threads(k: &mut Kernel, g: u32, keep: u32) {
    super::offload::forget_group(g);
    let pids: Vec<u32> = k
        .tasks
        .values()
        .filter(|t| t.tgid == g && t.pid != g && t.pid != keep)
        .map(|t| t.pid)
        .collect();
    for p in pids {
        detach(p);
        k.tasks.remove(&p);
        super::cpu::task_removed(p);
    }
}

/// The running thread group (not pid 1's) ends with `st`: its other
/// threads go at once, its fds close, its leader becomes a zombie.
pub fn exit_group(st: Status) -> ! {
    let (me, g) = (super::current_pid(), super::current_tgid());
    let mut proc = PROCESS.lock().take();
    let comm = proc.as_ref().map_or([0; 16], |p| p.comm);
    let mut tid = None;
    if let Some(p) = proc.as_mut() {
        // The robust futexes the calling thread holds go to their
        // waiters (process-shared mutexes in shared memory), as Linux
        // releases them at every thread's exit.
        super::futex::release_robust(p, me);
        if super::mmshare::member(g) {
            // The space lives on in another process: as Linux's
            // `mm_release`, `clear_child_tid` is zeroed and woken.
            tid = clear_child_tid(p);
        }
    }
    wake_child_tid(tid);
    if let Some(p) = proc {
        // Close the fds now (a reader sees EOF); the pages go after the
        // switch, when CR3 no longer names them. Only the address space
        // waits (small: the next task frees it at the deepest point of
        // its stack, right after the switch).
        let Process { mut mm, files, .. } = p;
        drop(files);
        // A vfork child gives its parent's space back (CR3 names it: it
        // stays) and the stand-in goes instead.
        {
            let mut k = KERNEL.lock();
            super::fork::lend_back(&mut k, g, &mut mm);
            // A space shared with another process (CLONE_VM) stays with
            // it; the stand-in goes instead.
            super::mmshare::leave(&mut k, g, &mut mm);
        }
        sched::set_dead(mm);
    }
    let mut k = KERNEL.lock();
    remove_threads(&mut k, g, me);
    if let Some(l) = k.tasks.get_mut(&g) {
        l.comm = comm;
    }
    if me != g {
        detach(me);
        if let Some(t) = k.tasks.get_mut(&me) {
            t.state = State::Dead(st);
        }
        if let Some(l) = k.tasks.get_mut(&g) {
            l.kstack = None;
        }
        if zombify(&mut k, g, st) {
            k.tasks.remove(&g);
            super::cpu::task_removed(g);
        }
        sched::set_auto_reap(me);
    } else if zombify(&mut k, me, st) {
        sched::set_auto_reap(me);
    }
    drop(k);
    sched::leave_dead()
}

/// The running thread ends (`exit`): its `clear_child_tid` word is
/// zeroed and its futex woken (`pthread_join`), its robust futexes are
/// released. The last thread of a group ends the group.
pub fn exit_thread(code: u8) -> ! {
    let (me, g) = (super::current_pid(), super::current_tgid());
    let tid = {
        let mut guard = PROCESS.lock();
        guard.as_mut().and_then(|p| {
            super::futex::release_robust(p, me);
            clear_child_tid(p)
        })
    };
    wake_child_tid(tid);
    let mut k = KERNEL.lock();
    let others = k
        .tasks
        .values()
        .any(|t| t.tgid == g && t.pid != me && t.live());
    if !others {
        let st = match k.tasks.get(&g).map(|l| l.state) {
            Some(State::Dead(st)) => st,
            _ => Status::Exited(code),
        };
        drop(k);
        super::exit_current(st);
    }
    detach(me);
    if let Some(t) = k.tasks.get_mut(&me) {
        t.state = State::Dead(Status::Exited(code));
    }
    if me != g {
        sched::set_auto_reap(me);
    }
    drop(k);
    sched::leave_dead()
}

/// Zeroes the running thread's `clear_child_tid` word in `p`'s memory
/// (a bad address is ignored, as Linux); returns the futex keys to wake
/// once the process lock is released ([`wake_child_tid`]).
fn clear_child_tid(p: &mut Process) -> Option<(super::futex::Key, Option<super::futex::Key>)> {
    let a = crate::process::thread().clear_child_tid;
    if a == 0 {
        return None;
    }
    let _ = uaccess::write(&mut p.mm, a, &0u32);
    let shared = crate::syscalls::futex_key(p, a & !3, 0).ok();
    Some(((p.mm.pt.kernel_cr3(), a), shared))
}

/// Wakes a joiner of the `clear_child_tid` word: Linux wakes the shared
/// key; the private one too, for joiners that wait privately (a spurious
/// wake-up is allowed there).
fn wake_child_tid(keys: Option<(super::futex::Key, Option<super::futex::Key>)>) {
    if let Some((private, shared)) = keys {
        if let Some(shared) = shared {
            super::futex::wake(shared, 1, u32::MAX);
        }
        super::futex::wake(private, 1, u32::MAX);
    }
}

/// Kills thread group `g`, which is not running, with signal `sig`.
pub(super) fn kill_group_other(k: &mut Kernel, g: u32, sig: u32) {
    if signal::init_spares(g) {
        log::debug!("pid 1 has no handler for signal {sig}: dropped");
        return;
    }
    if g == 1 {
        log::info!("pid 1 killed by signal {sig}");
        crate::hostcall::exit(128 + sig as i32);
    }
    remove_threads(k, g, g);
    let Some(t) = k.tasks.get_mut(&g) else {
        return;
    };
    let proc = t.proc.take();
    t.kstack = None;
    if let Some(mut p) = proc {
        t.comm = p.comm;
        super::fork::lend_back(k, g, &mut p.mm);
        super::mmshare::leave(k, g, &mut p.mm);
        free_process(p);
    }
    if zombify(k, g, Status::Killed(sig)) {
        k.tasks.remove(&g);
        super::cpu::task_removed(g);
    }
}

/// The thread group of task `pid`.
pub fn group_of(pid: u32) -> Option<u32> {
    KERNEL.lock().tasks.get(&pid).map(|t| t.tgid)
}

/// Sends process-directed `sig` to thread group `g`, which is not the
/// running one: it becomes pending for the group, and a thread that does
/// not block it is woken if it runs a handler; a fatal one kills the
/// group.
pub fn send_to_group(g: u32, sig: u32, info: Info) -> Result<(), Errno> {
    let mut k = KERNEL.lock();
    let leader = k.tasks.get(&g).ok_or(Errno::ESRCH)?;
    if matches!(leader.state, State::Zombie(_)) {
        return Ok(());
    }
    super::jobctl::prepare(&mut k, g, sig);
    let d = disp_of(&k, g);
    let b = signal::bit(sig);
    // A signal the leader blocks is queued even if ignored (Linux's
    // `sig_ignored` on the target task).
    if d.ignores(sig) && leader_blocked(&k, g) & b == 0 {
        return Ok(());
    }
    let taker = k
        .tasks
        .values()
        .filter(|t| t.tgid == g && t.live() && t.sig.blocked & b == 0)
        .map(|t| (t.pid, t.sig.takes(sig, d)))
        .next();
    if d.kills(sig)
        && (sig == signal::SIGKILL || taker.is_some())
        && !super::jobctl::defer_kill(&mut k, g, sig)
    {
        kill_group_other(&mut k, g, sig);
        return Ok(());
    }
    if d.stops(sig) && (sig == signal::SIGSTOP || taker.is_some()) {
        super::jobctl::stop_other(&mut k, g, sig);
        return Ok(());
    }
    if let Some(p) = k.tasks.get_mut(&g).and_then(|l| l.proc.as_mut()) {
        p.shared_sig.post(sig, info);
    }
    if let Some((pid, true)) = taker {
        sched::wake(&mut k, pid);
    } else {
        wake_sigwaiter(&mut k, g, sig);
    }
    Ok(())
}

/// The blocked mask of group `g`'s leader thread (the first live thread
/// if the leader's ended).
pub(super) fn leader_blocked(k: &Kernel, g: u32) -> u64 {
    k.tasks
        .get(&g)
        .filter(|l| l.live())
        .or_else(|| k.tasks.values().find(|t| t.tgid == g && t.live()))
        .map_or(0, |t| t.sig.blocked)
}

/// Wakes a blocked thread of group `g` that waits for `sig` in
/// `rt_sigtimedwait`; returns whether there was one.
pub fn wake_sigwaiter(k: &mut Kernel, g: u32, sig: u32) -> bool {
    let b = signal::bit(sig);
    let me = super::current_pid();
    let found = k
        .tasks
        .values()
        .find(|t| t.tgid == g && t.pid != me && t.live() && t.sig.sigwait & b != 0)
        .map(|t| t.pid);
    if let Some(pid) = found {
        sched::wake(k, pid);
    }
    found.is_some()
}

/// Sends thread-directed `sig` (`tkill`, `tgkill`) to task `tid`.
pub fn send_to_thread(tid: u32, sig: u32, info: Info) -> Result<(), Errno> {
    if tid == super::current_pid() {
        signal::send_thread(sig, info);
        return Ok(());
    }
    let mut k = KERNEL.lock();
    let t = k.tasks.get(&tid).ok_or(Errno::ESRCH)?;
    if !t.live() {
        return Ok(());
    }
    let g = t.tgid;
    let running = g == super::current_tgid();
    super::jobctl::prepare(&mut k, g, sig);
    let d = if running {
        Disp::current()
    } else {
        disp_of(&k, g)
    };
    let Some(t) = k.tasks.get_mut(&tid) else {
        return Err(Errno::ESRCH);
    };
    match t.sig.post(sig, info, d) {
        Posted::Dropped | Posted::Queued => {}
        Posted::Wake => sched::wake(&mut k, tid),
        Posted::Fatal if super::jobctl::defer_kill(&mut k, g, sig) => {
            if let Some(t) = k.tasks.get_mut(&tid) {
                t.sig.info[(sig - 1) as usize] = info;
                t.sig.pending |= signal::bit(sig);
            }
        }
        Posted::Fatal if running => signal::kill_group(sig),
        Posted::Fatal => kill_group_other(&mut k, g, sig),
        Posted::Stop => super::jobctl::stop_other(&mut k, g, sig),
    }
    Ok(())
}

/// Which children a wait looks at.
#[derive(Debug, Clone, Copy)]
pub enum Which {
    Any,
    Pid(u32),
    Pgid(u32),
}

impl Which {
    fn matches(self, t: &Task) -> bool {
        match self {
            Which::Any => true,
            Which::Pid(p) => t.pid == p,
            Which::Pgid(g) => t.pgid == g,
        }
    }
}

/// What a wait reports about a child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// It ended (a zombie).
    Exited(Status),
    /// It was stopped by this signal (`WUNTRACED`, `WSTOPPED`).
    Stopped(u32),
    /// It was continued (`WCONTINUED`).
    Continued,
}

impl Event {
    /// The `wait4` status word.
    pub fn wait_status(self) -> i32 {
        match self {
            Event::Exited(st) => st.wait_status(),
            Event::Stopped(sig) => ((sig as i32) << 8) | 0x7f,
            Event::Continued => 0xffff,
        }
    }

    /// `si_code` and `si_status` of `waitid`'s `siginfo_t`.
    pub fn cld(self) -> (i32, i32) {
        match self {
            Event::Exited(st) => cld(st),
            Event::Stopped(sig) => (super::jobctl::CLD_STOPPED, sig as i32),
            Event::Continued => (super::jobctl::CLD_CONTINUED, signal::SIGCONT as i32),
        }
    }
}

/// Which events a wait takes, and whether it leaves them (`WNOWAIT`).
#[derive(Debug, Clone, Copy)]
pub struct WaitFor {
    pub exited: bool,
    pub stopped: bool,
    pub continued: bool,
    pub keep: bool,
}

/// A reaped (or, with `keep`, only looked-at) child, or one that stopped
/// or continued: pid, event and the CPU time it and its reaped children
/// used. `Ok(None)`: children exist, none has anything to report.
/// `ECHILD`: no such child.
pub fn reap(which: Which, w: WaitFor) -> Result<Option<(u32, Event, super::cpu::Times)>, Errno> {
    use super::jobctl::Report;
    let me = super::current_tgid();
    let mut k = KERNEL.lock();
    let mut any = false;
    let mut found = None;
    for t in k.tasks.values() {
        if t.ppid != me || t.pid == me || t.pid != t.tgid || !which.matches(t) {
            continue;
        }
        any = true;
        match (t.state, t.job.report) {
            (State::Zombie(st), _) if w.exited => {
                found = Some((t.pid, Event::Exited(st)));
                break;
            }
            (State::Zombie(_), _) => {}
            (_, Report::Stopped(sig)) if w.stopped && t.job.stopped != 0 => {
                found = Some((t.pid, Event::Stopped(sig)));
                break;
            }
            (_, Report::Continued) if w.continued => {
                found = Some((t.pid, Event::Continued));
                break;
            }
            _ => {}
        }
    }
    if !any {
        return Err(Errno::ECHILD);
    }
    let Some((pid, ev)) = found else {
        return Ok(None);
    };
    let st = match ev {
        Event::Exited(st) if !w.keep => st,
        _ => {
            if !w.keep {
                super::jobctl::take_report(&mut k, pid, w.stopped, w.continued, false);
            }
            drop(k);
            let mut t = super::cpu::group_times(pid);
            t.add(super::cpu::children_times(pid));
            return Ok(Some((pid, ev, t)));
        }
    };
    let t: Option<Box<Task>> = k.tasks.remove(&pid);
    drop(k);
    drop(t);
    Ok(Some((pid, Event::Exited(st), super::cpu::reaped(pid, me))))
}

/// The process group of the running task.
pub fn current_pgid() -> u32 {
    let k = KERNEL.lock();
    k.tasks.get(&super::current_tgid()).map_or(1, |t| t.pgid)
}

/// Every pid of process group `pgid` (all processes for `None`), zombies
/// and threads other than group leaders excluded.
pub fn pids_of(pgid: Option<u32>) -> alloc::vec::Vec<u32> {
    let k = KERNEL.lock();
    k.tasks
        .values()
        .filter(|t| !matches!(t.state, State::Zombie(_)) && t.pid == t.tgid)
        .filter(|t| pgid.is_none_or(|g| t.pgid == g))
        .map(|t| t.pid)
        .collect()
}
