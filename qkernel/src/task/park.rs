//! Armed waits in the guest: a blocking call (read/write on a host pipe or
//! socket, accept, connect, send/recv, poll, select, epoll_wait, sleeps,
//! pause, sigsuspend), while other tasks exist, is tried without blocking;
//! if it would block, its task parks here on a set of host fds and/or a
//! deadline (`timers`) and another task runs. When nothing can run, the
//! vCPU waits in the host with one `Poll` over every parked fd, with the
//! nearest guest deadline as its timeout ([`idle_poll`]), and the ready
//! tasks wake and run their syscall again. A task alone blocks in the
//! host as before (one exit).
//!
//! Hibernation: a request that arrives while the vCPU waits here is
//! served from that wait (no user buffer is in flight); the next wait then
//! has no timeout, so that timers do not wake a hibernated sandbox, and
//! the deadlines that passed meanwhile fire right after the wake.

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use qlib::abi::{Call, PollFd, RET_RESTART};
use spin::Mutex;

use super::timers::{self, NEVER};
use super::{KERNEL, Kernel, State, current_pid, sched};
use crate::errno::{Errno, SysResult};
use crate::{hostcall, time};

/// `poll` events.
pub const POLLIN: i16 = 0x1;
pub const POLLOUT: i16 = 0x4;

/// A parked task: what it waits for.
struct Parked {
    pid: u32,
    /// (host fd, events).
    fds: Vec<(i32, i16)>,
    /// Guest wait queues ([`new_queues`], [`wake_queue`]).
    queues: Vec<u64>,
    /// `CLOCK_MONOTONIC` ns (`NEVER`: none).
    deadline: u64,
    /// A sleep's `rem` address ([`sleep`]).
    rem: Option<u64>,
    /// Bytes the syscall moved before it parked ([`done`]).
    done: usize,
    /// Its deadline woke it right after a `Poll` found none of its fds
    /// ready ([`timed_out_quietly`]).
    quiet: bool,
}

/// What the running syscall handler asked to wait on ([`wait_on`]),
/// taken by [`park`] once the handler returned.
struct Armed {
    fds: Vec<(i32, i16)>,
    queues: Vec<u64>,
    deadline: u64,
    /// A sleep's `rem` address: the time left is written there if a signal
    /// cuts the sleep short.
    rem: Option<u64>,
    done: usize,
}

/// The syscall being run again after a wake.
#[derive(Clone, Copy)]
struct Resume {
    pid: u32,
    deadline: u64,
    rem: Option<u64>,
    done: usize,
    quiet: bool,
}

static PARKED: Mutex<Vec<Parked>> = Mutex::new(Vec::new());
static ARMED: Mutex<Option<Armed>> = Mutex::new(None);
/// The syscall being run again after a wake.
static RESUME: Mutex<Option<Resume>> = Mutex::new(None);
/// The next guest wait queue id.
static NEXT_QUEUE: AtomicU64 = AtomicU64::new(1);
/// Tasks a [`wake_queue`] could not wake at once (the task table was
/// locked: an object was dropped under it); woken by the scheduler's
/// next pick ([`wake_deferred`]).
static DEFERRED: Mutex<Vec<u32>> = Mutex::new(Vec::new());
/// Pipe and socketpair ends created in the guest: (host fd, peer host
/// fd). A write on one wakes the tasks parked to read the other without a
/// host poll.
static PEERS: Mutex<Vec<(i32, i32)>> = Mutex::new(Vec::new());
/// The consoles' host input fds (`fs::console`): always polled, so that
/// terminal input (^C) arrives while no task reads.
static CONSOLES: Mutex<Vec<i32>> = Mutex::new(Vec::new());
/// Listening sockets' host fds ([`listening`]).
static LISTENING: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Whether a call that would block should park rather than block the
/// vCPU: another task exists that could run meanwhile.
pub fn worthwhile() -> bool {
    let me = current_pid();
    KERNEL.try_lock().is_some_and(|k| {
        k.tasks
            .values()
            .any(|t| t.pid != me && !matches!(t.state, State::Zombie(_)))
    })
}

/// The absolute deadline of a wait of `rel` ns (`None`: forever) that
/// starts now, or, when the syscall runs again after a wake, the deadline
/// its first run computed.
pub fn deadline(rel: Option<u64>) -> u64 {
    if let Some(r) = *RESUME.lock()
        && r.pid == current_pid()
    {
        return r.deadline;
    }
    match rel {
        None => NEVER,
        Some(ns) => time::monotonic_ns().saturating_add(ns).min(NEVER - 1),
    }
}

/// Whether the running syscall runs again after its task woke from a park.
pub fn rerun() -> bool {
    RESUME.lock().is_some_and(|r| r.pid == current_pid())
}

/// The bytes an earlier run of the running syscall moved before its task
/// parked ([`wait_on_queues`]'s `done`); 0 on a first run.
pub fn done() -> usize {
    RESUME
        .lock()
        .filter(|r| r.pid == current_pid())
        .map_or(0, |r| r.done)
}

/// Whether `deadline` has passed.
pub fn expired(deadline: u64) -> bool {
    deadline != NEVER && time::monotonic_ns() >= deadline
}

/// Asks to park the running task on `fds` until one is ready or
/// `deadline` passes, then run the syscall again. Returns what the handler
/// returns meanwhile (ignored).
pub fn wait_on(fds: &[(i32, i16)], deadline: u64) -> SysResult {
    wait_on_queues(fds, &[], deadline, 0)
}

/// As [`wait_on`], and also until a guest object wakes one of `queues`
/// ([`wake_queue`]). `done`: bytes the syscall already moved (a blocking
/// pipe write that goes on); its rerun finds them with [`done`], and a
/// handled signal then ends the syscall with that count, not an error.
pub fn wait_on_queues(fds: &[(i32, i16)], queues: &[u64], deadline: u64, done: usize) -> SysResult {
    *ARMED.lock() = Some(Armed {
        fds: fds.to_vec(),
        queues: queues.to_vec(),
        deadline,
        rem: None,
        done,
    });
    crate::task::request(crate::task::Action::Park(-1, 0));
    Ok(0)
}

/// As [`wait_on`] for a sleep: no fds; if a handled signal cuts it short
/// the time left is written to user address `rem` (0: not wanted).
pub fn sleep(deadline: u64, rem: u64) -> SysResult {
    *ARMED.lock() = Some(Armed {
        fds: Vec::new(),
        queues: Vec::new(),
        deadline,
        rem: (rem != 0).then_some(rem),
        done: 0,
    });
    crate::task::request(crate::task::Action::Park(-1, 0));
    Ok(0)
}

/// Records that the running task waits for `events` on host fd `fd`
/// (`fd` < 0: only what the handler armed with [`wait_on`]).
pub fn park(fd: i32, events: i16) {
    let pid = current_pid();
    let armed = ARMED.lock().take();
    let mut a = armed.unwrap_or(Armed {
        fds: Vec::new(),
        queues: Vec::new(),
        deadline: NEVER,
        rem: None,
        done: 0,
    });
    if fd >= 0 {
        a.fds.push((fd, events));
    }
    timers::arm_wake(pid, a.deadline);
    PARKED.lock().push(Parked {
        pid,
        fds: a.fds,
        queues: a.queues,
        deadline: a.deadline,
        rem: a.rem,
        done: a.done,
        quiet: false,
    });
}

/// Parks `pid` on a deadline only (`timers::sleep_until`).
pub fn park_deadline_only(pid: u32, deadline: u64) {
    timers::arm_wake(pid, deadline);
    PARKED.lock().push(Parked {
        pid,
        fds: Vec::new(),
        queues: Vec::new(),
        deadline,
        rem: None,
        done: 0,
        quiet: false,
    });
}

/// Forgets what `pid` was parked on (it woke, or it died).
pub fn unpark(pid: u32) {
    PARKED.lock().retain(|e| e.pid != pid);
    timers::disarm_wake(pid);
}

/// The running task woke from [`park`]: it is no longer parked, and its
/// syscall, run again, finds its deadline with [`deadline`].
pub fn woke() {
    let pid = current_pid();
    let mut parked = PARKED.lock();
    let resume = parked.iter().find(|e| e.pid == pid).map(|e| Resume {
        pid,
        deadline: e.deadline,
        rem: e.rem,
        done: e.done,
        quiet: e.quiet,
    });
    parked.retain(|e| e.pid != pid);
    drop(parked);
    timers::disarm_wake(pid);
    *RESUME.lock() = resume;
}

/// `pid` ended: it is no longer parked and its timers go.
pub fn forget(pid: u32) {
    unpark(pid);
    timers::forget(pid);
    let mut r = RESUME.lock();
    if r.is_some_and(|r| r.pid == pid) {
        *r = None;
    }
}

/// Whether the running syscall runs again because its deadline passed
/// right after a host `Poll` found none of its fds ready: it can report
/// a timeout without asking the host again (an `epoll_wait`'s
/// `EpollWait`).
pub fn timed_out_quietly() -> bool {
    RESUME
        .lock()
        .is_some_and(|r| r.pid == current_pid() && r.quiet && expired(r.deadline))
}

/// A `Poll` over the parked fds returned `rc` (>= 0): the parked tasks
/// whose deadline has passed and none of whose fds it found ready are
/// about to be woken by that deadline (`timers::run_expired`): mark them.
fn mark_quiet(fds: &[PollFd], owners: &[u32], rc: i64) {
    if rc < 0 {
        return;
    }
    let now = time::monotonic_ns();
    let mut parked = PARKED.lock();
    for e in parked.iter_mut() {
        if e.fds.is_empty() || e.deadline > now {
            continue;
        }
        let ready = owners.iter().enumerate().any(|(i, &pid)| {
            // SAFETY: the VMM wrote `revents` in place.
            let revents = unsafe { core::ptr::read_volatile(&fds[i]) }.revents;
            pid == e.pid && revents != 0
        });
        e.quiet = !ready;
    }
}

/// The syscall that parked was run again: its deadline is forgotten.
pub fn rerun_done() {
    *RESUME.lock() = None;
}

/// A handled signal woke the parked task: its syscall ends with the
/// returned error (a sleep writes the time left first), or with the bytes
/// it had already moved ([`wait_on_queues`]).
pub fn interrupted() -> Result<usize, Errno> {
    let resume = RESUME.lock().take();
    let Some(r) = resume.filter(|r| r.pid == current_pid()) else {
        return Err(Errno::ERESTARTSYS);
    };
    if r.done > 0 {
        return Ok(r.done);
    }
    if let Some(rem) = r.rem {
        let left = r.deadline.saturating_sub(time::monotonic_ns());
        let _ = crate::process::with(|p| -> Result<(), Errno> {
            crate::mm::uaccess::write(&mut p.mm, rem, &(left / 1_000_000_000))?;
            crate::mm::uaccess::write(&mut p.mm, rem + 8, &(left % 1_000_000_000))
        });
        return Err(Errno::ERESTARTNOHAND);
    }
    Err(Errno::ERESTARTSYS)
}

/// `n` new guest wait queue ids, consecutive.
pub fn new_queues(n: u64) -> u64 {
    NEXT_QUEUE.fetch_add(n, Ordering::Relaxed)
}

/// Wakes every task parked on guest wait queue `q` (their syscalls run
/// again). Safe to call with the process lock held; with the task table
/// locked the wake is deferred to the scheduler's next pick.
pub fn wake_queue(q: u64) {
    let ready: Vec<u32> = PARKED
        .lock()
        .iter()
        .filter(|e| e.queues.contains(&q))
        .map(|e| e.pid)
        .collect();
    if ready.is_empty() {
        return;
    }
    match KERNEL.try_lock() {
        Some(mut k) => {
            for pid in ready {
                sched::wake(&mut k, pid);
            }
        }
        None => DEFERRED.lock().extend(ready),
    }
}

/// Performs the wakes [`wake_queue`] deferred.
pub fn wake_deferred(k: &mut Kernel) {
    let pids = core::mem::take(&mut *DEFERRED.lock());
    for pid in pids {
        sched::wake(k, pid);
    }
}

/// Whether any task is parked.
pub fn any() -> bool {
    !PARKED.lock().is_empty()
}

/// Records that host fds `a` and `b` are the two ends of one pipe or
/// socketpair made in the guest.
pub fn add_peers(a: i32, b: i32) {
    let mut p = PEERS.lock();
    p.retain(|&(x, _)| x != a && x != b);
    p.push((a, b));
    p.push((b, a));
}

/// Host fd `fd` was closed: it is nobody's peer any more (its number may
/// come back for something else).
pub fn fd_closed(fd: i32) {
    PEERS.lock().retain(|&(x, y)| x != fd && y != fd);
    LISTENING.lock().retain(|&x| x != fd);
}

/// Host fd `fd` is a listening socket (`listen` succeeded): a hibernated
/// sandbox waits on it too, so that a connection wakes it even when no
/// task waits on it then (the program was computing, or waiting on
/// something else).
pub fn listening(fd: i32) {
    let mut l = LISTENING.lock();
    if !l.contains(&fd) {
        l.push(fd);
    }
}

/// Adds the listening sockets not in `fds` (owned by no task).
fn add_listening(fds: &mut Vec<PollFd>, owners: &mut Vec<u32>) {
    for &fd in LISTENING.lock().iter() {
        if !fds.iter().any(|p| p.fd == fd) {
            fds.push(PollFd {
                fd,
                events: POLLIN,
                revents: 0,
            });
            owners.push(0);
        }
    }
}

/// Bytes were written to host fd `fd`: the tasks parked to read its peer
/// (if the guest made both ends) can run, without a host poll.
pub fn wake_readers_of_peer(fd: i32) {
    let Some(peer) = PEERS
        .lock()
        .iter()
        .find(|&&(x, _)| x == fd)
        .map(|&(_, y)| y)
    else {
        return;
    };
    let ready: Vec<u32> = PARKED
        .lock()
        .iter()
        .filter(|e| e.fds.iter().any(|&(f, ev)| f == peer && ev & POLLIN != 0))
        .map(|e| e.pid)
        .collect();
    if ready.is_empty() {
        return;
    }
    let mut k = KERNEL.lock();
    for pid in ready {
        sched::wake(&mut k, pid);
    }
}

/// Whether the sandbox was hibernated from the last interrupted wait:
/// the next wait must then have no timeout (timers do not wake it).
fn hibernated() -> bool {
    crate::mm::swap::take_hibernated()
}

/// Waits in the host until a parked fd is ready, the nearest deadline
/// passes or a control request arrives, and wakes the tasks that can go
/// on. Called with no lock held when nothing is runnable. `futex_deadline`
/// is the nearest timed futex wait's (`NEVER`: none).
pub fn idle_poll(futex_deadline: u64) {
    let (mut fds, mut owners) = parked_fds();
    let mut deadline = if hibernated() || crate::mm::swap::asleep() {
        add_listening(&mut fds, &mut owners);
        log::debug!(
            "hibernated: waiting on {:?} with no deadline",
            fds.iter().map(|p| (p.fd, p.events)).collect::<Vec<_>>()
        );
        NEVER
    } else {
        timers::next_deadline().min(futex_deadline)
    };
    if deadline != NEVER && time::monotonic_ns() >= deadline {
        if fds.is_empty() {
            timers::run_expired();
            return;
        }
        deadline = 0;
    }
    let gpa = crate::mm::kva_to_gpa(fds.as_mut_ptr() as u64);
    let sent = hostcall::host_deadline(deadline);
    let args = [gpa, fds.len() as u64, sent, 0, 0, 0];
    crate::stats::idle_wait(deadline != NEVER, || super::futex::next_two_deadlines().1);
    let rc = hostcall::call_once(Call::Poll, args);
    crate::stats::idle_woke();
    if rc == 0 {
        hostcall::timed_out(sent);
    }
    if rc == RET_RESTART {
        // A control request (hibernation, a host signal, the alarm),
        // served from this wait: nothing of the program is in flight.
        crate::mm::swap::set_in_flight(Some((Call::Poll, args)));
        crate::control::serve_pending();
        crate::mm::swap::set_in_flight(None);
        // A handled signal for the blocked running task wakes it so its
        // wait returns.
        if crate::signal::interrupts() {
            sched::wake(&mut KERNEL.lock(), current_pid());
        }
        if !crate::mm::swap::asleep() {
            timers::run_expired();
        }
        return;
    }
    wake_ready(&fds, &owners, rc);
    mark_quiet(&fds, &owners, rc);
    timers::run_expired();
}

/// Waits in the host with one `Poll` over every parked fd and no
/// deadline, then wakes the tasks whose fds are ready: the wait of a
/// sandbox hibernated from the kick interrupt (`mm::swap`), so that what
/// the parked tasks wait on wakes it. A control request (a wake, SIGCONT)
/// ends the wait too; it is served by the caller. No lock is held (the
/// kick interrupts user mode only).
pub fn wait_hibernated() {
    let (mut fds, mut owners) = parked_fds();
    add_listening(&mut fds, &mut owners);
    log::debug!(
        "hibernated from the kick: waiting on {:?}",
        fds.iter().map(|p| (p.fd, p.events)).collect::<Vec<_>>()
    );
    if fds.is_empty() {
        hostcall::call_once(Call::Sleep, [NEVER, 0, 0, 0, 0, 0]);
        return;
    }
    let gpa = crate::mm::kva_to_gpa(fds.as_mut_ptr() as u64);
    let rc = hostcall::call_once(Call::Poll, [gpa, fds.len() as u64, NEVER, 0, 0, 0]);
    if rc != RET_RESTART && rc != 0 {
        wake_ready(&fds, &owners, rc);
    }
}

/// Host fd `fd` is a console's input (`fs::console`).
pub fn add_console(fd: i32) {
    let mut c = CONSOLES.lock();
    if !c.contains(&fd) {
        c.push(fd);
    }
}

/// Host fd `fd` is no longer a console's input.
pub fn remove_console(fd: i32) {
    CONSOLES.lock().retain(|&x| x != fd);
}

/// Every parked fd as a `PollFd`, and the task parked on each (the
/// consoles' input fds first, owned by no task).
fn parked_fds() -> (Vec<PollFd>, Vec<u32>) {
    let mut fds: Vec<PollFd> = Vec::new();
    let mut owners: Vec<u32> = Vec::new();
    for &fd in CONSOLES.lock().iter() {
        fds.push(PollFd {
            fd,
            events: POLLIN,
            revents: 0,
        });
        owners.push(0);
    }
    for e in PARKED.lock().iter() {
        for &(fd, events) in &e.fds {
            fds.push(PollFd {
                fd,
                events,
                revents: 0,
            });
            owners.push(e.pid);
        }
    }
    (fds, owners)
}

/// Wakes the owners of the fds a `Poll` that returned `rc` found ready;
/// console input goes into the console's terminal first.
fn wake_ready(fds: &[PollFd], owners: &[u32], rc: i64) {
    if rc > 0 {
        let consoles = CONSOLES.lock().clone();
        for (i, f) in fds.iter().enumerate() {
            // SAFETY: the VMM wrote `revents` in place.
            let revents = unsafe { core::ptr::read_volatile(f) }.revents;
            if owners[i] == 0 && revents != 0 && consoles.contains(&f.fd) {
                crate::fs::console::input_ready(f.fd);
                // ^C may have been for the blocked running task's own
                // group: its wait must end, as in `idle_poll`.
                if crate::signal::interrupts() {
                    sched::wake(&mut KERNEL.lock(), current_pid());
                }
            }
        }
    }
    let mut ready: Vec<u32> = Vec::new();
    for (i, &pid) in owners.iter().enumerate() {
        // Every task wakes on an error: its retry reports the real one.
        // SAFETY: the VMM wrote `revents` in place.
        let revents = unsafe { core::ptr::read_volatile(&fds[i]) }.revents;
        // pid 0: a listening socket no task waits on (`add_listening`).
        if pid != 0 && (rc < 0 || revents != 0) {
            ready.push(pid);
        }
    }
    if !ready.is_empty() {
        let mut k = KERNEL.lock();
        for pid in ready {
            sched::wake(&mut k, pid);
        }
    }
}

/// Wakes, without waiting, the parked tasks whose fds are ready and those
/// whose deadline passed: a preemption (`task::slice`) calls it so that a
/// task parked on a socket runs while another computes. One `Poll` host
/// call when fds are parked.
pub fn poll_now() {
    let (mut fds, owners) = parked_fds();
    if !fds.is_empty() {
        let gpa = crate::mm::kva_to_gpa(fds.as_mut_ptr() as u64);
        let args = [gpa, fds.len() as u64, 0, 0, 0, 0];
        // A deadline of 0 never waits.
        let rc = hostcall::call_once(Call::Poll, args);
        if rc == RET_RESTART {
            // A control request cut it short: served here, and if it
            // hibernated the sandbox, the sandbox waits as after a
            // hibernation from the kick (the preempted task computes: a
            // connection to a listening socket must wake it), not in
            // this `Poll` reissued without its deadline.
            crate::mm::swap::set_in_flight(Some((Call::Poll, args)));
            crate::control::serve_pending();
            crate::mm::swap::set_in_flight(None);
            if hibernated() {
                wait_hibernated();
            }
        } else {
            wake_ready(&fds, &owners, rc);
        }
    }
    timers::run_expired();
}
