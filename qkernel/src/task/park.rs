//! Tasks parked on host fds: a read or write on a host pipe or socket
//! that would block, while other tasks exist, is tried without
//! `io::BLOCK`; on `EAGAIN` the task parks here and another runs. When
//! nothing can run, the vCPU waits in the host with one `Poll` over every
//! parked fd, and the ready tasks wake.

use alloc::vec::Vec;

use qlib::abi::{Call, PollFd, RET_RESTART};
use spin::Mutex;

use super::{KERNEL, State, current_pid, sched};
use crate::hostcall;

/// `poll` events.
pub const POLLIN: i16 = 0x1;
pub const POLLOUT: i16 = 0x4;

/// (pid, host fd, events) of each parked task.
static PARKED: Mutex<Vec<(u32, i32, i16)>> = Mutex::new(Vec::new());

/// Whether a read or write that would block should park rather than
/// block the vCPU: another task exists that could run meanwhile.
pub fn worthwhile() -> bool {
    let me = current_pid();
    KERNEL.try_lock().is_some_and(|k| {
        k.tasks
            .values()
            .any(|t| t.pid != me && !matches!(t.state, State::Zombie(_)))
    })
}

/// Records that the running task waits for `events` on host fd `fd`.
pub fn park(fd: i32, events: i16) {
    PARKED.lock().push((current_pid(), fd, events));
}

/// Forgets what `pid` was parked on (it woke, or it died).
pub fn unpark(pid: u32) {
    PARKED.lock().retain(|e| e.0 != pid);
}

/// Whether any task is parked.
pub fn any() -> bool {
    !PARKED.lock().is_empty()
}

/// Waits in the host until a parked fd is ready (or a control request
/// arrives) and wakes the tasks whose fds are. Called with no lock held
/// when nothing is runnable.
/// It also returns at monotonic `deadline_ns` (a timed futex wait;
/// `u64::MAX`: none).
pub fn idle_poll_until(deadline_ns: u64) {
    let mut fds: Vec<PollFd> = PARKED
        .lock()
        .iter()
        .map(|&(_, fd, events)| PollFd {
            fd,
            events,
            revents: 0,
        })
        .collect();
    if fds.is_empty() {
        return;
    }
    let gpa = crate::mm::kva_to_gpa(fds.as_mut_ptr() as u64);
    let rc = hostcall::call_once(Call::Poll, [gpa, fds.len() as u64, deadline_ns, 0, 0, 0]);
    if rc == RET_RESTART {
        // A control request (hibernation, a host signal for pid 1):
        // served now; a handled signal for the blocked running task
        // wakes it so its wait returns.
        crate::control::serve_pending();
        if crate::signal::interrupts() {
            sched::wake(&mut KERNEL.lock(), current_pid());
        }
        return;
    }
    let parked = core::mem::take(&mut *PARKED.lock());
    let mut k = KERNEL.lock();
    let mut keep = Vec::new();
    for (i, e) in parked.into_iter().enumerate() {
        // Every task wakes on an error: its retry reports the real one.
        let ready = rc < 0 || fds.get(i).is_none_or(|f| f.revents != 0);
        if ready {
            sched::wake(&mut k, e.0);
        } else {
            keep.push(e);
        }
    }
    drop(k);
    PARKED.lock().extend(keep);
}
