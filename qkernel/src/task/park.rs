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

use qlib::abi::{Call, PollFd, RET_RESTART};
use spin::Mutex;

use super::timers::{self, NEVER};
use super::{KERNEL, State, current_pid, sched};
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
    /// `CLOCK_MONOTONIC` ns (`NEVER`: none).
    deadline: u64,
    /// A sleep's `rem` address ([`sleep`]).
    rem: Option<u64>,
}

/// What the running syscall handler asked to wait on ([`wait_on`]),
/// taken by [`park`] once the handler returned.
struct Armed {
    fds: Vec<(i32, i16)>,
    deadline: u64,
    /// A sleep's `rem` address: the time left is written there if a signal
    /// cuts the sleep short.
    rem: Option<u64>,
}

static PARKED: Mutex<Vec<Parked>> = Mutex::new(Vec::new());
static ARMED: Mutex<Option<Armed>> = Mutex::new(None);
/// The syscall being run again after a wake: (pid, its deadline, `rem`).
static RESUME: Mutex<Option<(u32, u64, Option<u64>)>> = Mutex::new(None);
/// Pipe and socketpair ends created in the guest: (host fd, peer host
/// fd). A write on one wakes the tasks parked to read the other without a
/// host poll.
static PEERS: Mutex<Vec<(i32, i32)>> = Mutex::new(Vec::new());

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
    if let Some((pid, d, _)) = *RESUME.lock()
        && pid == current_pid()
    {
        return d;
    }
    match rel {
        None => NEVER,
        Some(ns) => time::monotonic_ns().saturating_add(ns).min(NEVER - 1),
    }
}

/// Whether the running syscall runs again after its task woke from a park.
pub fn rerun() -> bool {
    RESUME.lock().is_some_and(|(pid, ..)| pid == current_pid())
}

/// Whether `deadline` has passed.
pub fn expired(deadline: u64) -> bool {
    deadline != NEVER && time::monotonic_ns() >= deadline
}

/// Asks to park the running task on `fds` until one is ready or
/// `deadline` passes, then run the syscall again. Returns what the handler
/// returns meanwhile (ignored).
pub fn wait_on(fds: &[(i32, i16)], deadline: u64) -> SysResult {
    *ARMED.lock() = Some(Armed {
        fds: fds.to_vec(),
        deadline,
        rem: None,
    });
    crate::task::request(crate::task::Action::Park(-1, 0));
    Ok(0)
}

/// As [`wait_on`] for a sleep: no fds; if a handled signal cuts it short
/// the time left is written to user address `rem` (0: not wanted).
pub fn sleep(deadline: u64, rem: u64) -> SysResult {
    *ARMED.lock() = Some(Armed {
        fds: Vec::new(),
        deadline,
        rem: (rem != 0).then_some(rem),
    });
    crate::task::request(crate::task::Action::Park(-1, 0));
    Ok(0)
}

/// Records that the running task waits for `events` on host fd `fd`
/// (`fd` < 0: only what the handler armed with [`wait_on`]).
pub fn park(fd: i32, events: i16) {
    let pid = current_pid();
    let armed = ARMED.lock().take();
    let (mut fds, deadline, rem) = match armed {
        Some(a) => (a.fds, a.deadline, a.rem),
        None => (Vec::new(), NEVER, None),
    };
    if fd >= 0 {
        fds.push((fd, events));
    }
    timers::arm_wake(pid, deadline);
    PARKED.lock().push(Parked {
        pid,
        fds,
        deadline,
        rem,
    });
}

/// Parks `pid` on a deadline only (`timers::sleep_until`).
pub fn park_deadline_only(pid: u32, deadline: u64) {
    timers::arm_wake(pid, deadline);
    PARKED.lock().push(Parked {
        pid,
        fds: Vec::new(),
        deadline,
        rem: None,
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
    let resume = parked
        .iter()
        .find(|e| e.pid == pid)
        .map(|e| (pid, e.deadline, e.rem));
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
    if r.is_some_and(|(p, ..)| p == pid) {
        *r = None;
    }
}

/// The syscall that parked was run again: its deadline is forgotten.
pub fn rerun_done() {
    *RESUME.lock() = None;
}

/// A handled signal woke the parked task: its syscall ends with the
/// returned error (a sleep writes the time left first).
pub fn interrupted() -> Errno {
    let resume = RESUME.lock().take();
    if let Some((pid, deadline, Some(rem))) = resume
        && pid == current_pid()
    {
        let left = deadline.saturating_sub(time::monotonic_ns());
        let _ = crate::process::with(|p| -> Result<(), Errno> {
            crate::mm::uaccess::write(&mut p.mm, rem, &(left / 1_000_000_000))?;
            crate::mm::uaccess::write(&mut p.mm, rem + 8, &(left % 1_000_000_000))
        });
        return Errno::ERESTARTNOHAND;
    }
    Errno::ERESTARTSYS
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
    let (mut fds, owners) = parked_fds();
    let mut deadline = if hibernated() {
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
    let args = [gpa, fds.len() as u64, deadline, 0, 0, 0];
    let rc = hostcall::call_once(Call::Poll, args);
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
        timers::run_expired();
        return;
    }
    wake_ready(&fds, &owners, rc);
    timers::run_expired();
}

/// Every parked fd as a `PollFd`, and the task parked on each.
fn parked_fds() -> (Vec<PollFd>, Vec<u32>) {
    let mut fds: Vec<PollFd> = Vec::new();
    let mut owners: Vec<u32> = Vec::new();
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

/// Wakes the owners of the fds a `Poll` that returned `rc` found ready.
fn wake_ready(fds: &[PollFd], owners: &[u32], rc: i64) {
    let mut ready: Vec<u32> = Vec::new();
    for (i, &pid) in owners.iter().enumerate() {
        // Every task wakes on an error: its retry reports the real one.
        // SAFETY: the VMM wrote `revents` in place.
        let revents = unsafe { core::ptr::read_volatile(&fds[i]) }.revents;
        if rc < 0 || revents != 0 {
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
        // `call` serves a control request that cut it short, and a
        // deadline of 0 never waits.
        let rc = hostcall::call(Call::Poll, [gpa, fds.len() as u64, 0, 0, 0, 0]);
        if rc != RET_RESTART {
            wake_ready(&fds, &owners, rc);
        }
    }
    timers::run_expired();
}
