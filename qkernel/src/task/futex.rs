//! Futex wait queues (docs/threads.md).
//!
//! A waiter is keyed by (address space, virtual address): the address
//! space is named by its kernel PGD, which every thread of a group shares
//! and no two live address spaces share. Swapping a page out or copying it
//! on write never changes a key. Shared futexes set bit 0 of the address
//! (keys apart from private ones, as on Linux) and are per address space,
//! except in a `MAP_SHARED` file mapping, where the key is the file's
//! object and offset (`syscalls::sys_futex::key`): POSIX semaphores in
//! /dev/shm work between processes; likewise in `MAP_SHARED |
//! MAP_ANONYMOUS` memory, keyed by its region and offset, so a parent and
//! its forked children meet on a process-shared mutex there.
//!
//! A waiter is queued by the syscall handler (under the process lock,
//! after it checked the futex word), then sleeps in [`sleep`] once the
//! lock is released: nothing else runs in between (the kernel is not
//! preemptive), so no wake-up is lost. Timeouts are deadlines on the
//! monotonic clock: [`expire`] wakes the waiters whose deadline passed
//! each time the scheduler picks a task, and when nothing can run the
//! vCPU waits in the host until the earliest one (the idle poll's
//! deadline, `park::idle_poll`).
//!
//! Lock order: `KERNEL`, then [`WAITERS`] (never the other way round).

use alloc::vec::Vec;

use spin::Mutex;

use super::{KERNEL, Kernel, current_pid, sched};
use crate::errno::{Errno, SysResult};

/// (address space id, user virtual address).
pub type Key = (u64, u64);

/// `ETIMEDOUT`.
pub const ETIMEDOUT: Errno = Errno(110);

struct Waiter {
    key: Key,
    tid: u32,
    bitset: u32,
    /// Monotonic ns; `u64::MAX`: none.
    deadline: u64,
    /// A wake took it: the wait returns 0.
    woken: bool,
}

/// Every waiter, in the order it started to wait (wakes are FIFO).
static WAITERS: Mutex<Vec<Waiter>> = Mutex::new(Vec::new());

/// Queues the running task on `key` (the handler checked the word) until
/// a wake whose bitset meets `bitset` or the monotonic `deadline`.
pub fn enqueue(key: Key, bitset: u32, deadline: u64) {
    let tid = current_pid();
    let mut w = WAITERS.lock();
    w.retain(|e| e.tid != tid);
    w.push(Waiter {
        key,
        tid,
        bitset,
        deadline,
        woken: false,
    });
}

/// Wakes up to `n` waiters on `key` whose bitset meets `bitset`; returns
/// how many.
pub fn wake(key: Key, n: u32, bitset: u32) -> usize {
    let tids = take(key, n, bitset);
    if !tids.is_empty() {
        let mut k = KERNEL.lock();
        for &t in &tids {
            sched::wake(&mut k, t);
        }
    }
    tids.len()
}

/// Marks up to `n` waiters on `key` woken; returns their tids.
fn take(key: Key, n: u32, bitset: u32) -> Vec<u32> {
    let mut tids = Vec::new();
    let mut w = WAITERS.lock();
    for e in w.iter_mut() {
        if tids.len() >= n as usize {
            break;
        }
        if !e.woken && e.key == key && e.bitset & bitset != 0 {
            e.woken = true;
            tids.push(e.tid);
        }
    }
    tids
}

/// Wakes up to `n` waiters on `from` and moves up to `m` of the others to
/// `to`; returns how many were woken plus moved.
pub fn requeue(from: Key, to: Key, n: u32, m: u32) -> usize {
    let woken = wake(from, n, u32::MAX);
    let mut moved = 0usize;
    for e in WAITERS.lock().iter_mut() {
        if moved >= m as usize {
            break;
        }
        if !e.woken && e.key == from {
            e.key = to;
            moved += 1;
        }
    }
    woken + moved
}

/// Forgets task `tid` (it woke up, or it died).
pub fn forget(tid: u32) {
    WAITERS.lock().retain(|e| e.tid != tid);
}

/// What became of the running task's wait.
#[derive(PartialEq, Eq)]
enum Wait {
    Woken,
    Waiting(u64),
    Gone,
}

fn state(tid: u32) -> Wait {
    match WAITERS.lock().iter().find(|e| e.tid == tid) {
        Some(e) if e.woken => Wait::Woken,
        Some(e) => Wait::Waiting(e.deadline),
        None => Wait::Gone,
    }
}

/// Sleeps until the running task's queued wait ends: 0 when woken,
/// `ETIMEDOUT` at the deadline, `EINTR` (timed) or a restart (untimed)
/// for a handled signal. Runs with no lock held (`task::finish_syscall`).
pub fn sleep(deadline: u64) -> SysResult {
    let me = current_pid();
    loop {
        match state(me) {
            Wait::Woken | Wait::Gone => {
                forget(me);
                return Ok(0);
            }
            Wait::Waiting(d) => {
                if crate::signal::interrupts() {
                    forget(me);
                    return Err(if deadline == u64::MAX {
                        Errno::ERESTARTSYS
                    } else {
                        Errno::EINTR
                    });
                }
                if d != u64::MAX && crate::time::monotonic_ns() >= d {
                    forget(me);
                    return Err(ETIMEDOUT);
                }
            }
        }
        sched::block_current();
    }
}

/// Blocks the running task once, until [`sched::wake`] or the monotonic
/// `deadline` (`u64::MAX`: none): for waits that are not on a futex word
/// (`rt_sigtimedwait`). Its key names no address space (0) and its empty
/// bitset meets no futex wake, so only [`expire`] or a signal wakes it.
pub fn block_until(deadline: u64) -> Result<(), Errno> {
    let me = current_pid();
    if deadline != u64::MAX {
        enqueue((0, 0), 0, deadline);
    }
    sched::block_current();
    forget(me);
    Ok(())
}

/// Wakes the waiters whose deadline has passed (their `sleep` returns
/// `ETIMEDOUT`). Called by the scheduler with the task table locked.
pub fn expire(k: &mut Kernel) {
    let due: Vec<u32> = {
        let w = WAITERS.lock();
        if w.iter().all(|e| e.deadline == u64::MAX || e.woken) {
            return;
        }
        let now = crate::time::monotonic_ns();
        w.iter()
            .filter(|e| !e.woken && e.deadline <= now)
            .map(|e| e.tid)
            .collect()
    };
    for t in due {
        sched::wake(k, t);
    }
}

/// The earliest deadline of a waiting task (`u64::MAX`: none).
pub fn next_deadline() -> u64 {
    WAITERS
        .lock()
        .iter()
        .filter(|e| !e.woken)
        .map(|e| e.deadline)
        .min()
        .unwrap_or(u64::MAX)
}

/// The earliest deadline of a waiting task and how far the next one is
/// after it (`u64::MAX`: none), for the stats.
pub fn next_two_deadlines() -> (u64, u64) {
    let w = WAITERS.lock();
    let mut first = u64::MAX;
    let mut second = u64::MAX;
    for d in w.iter().filter(|e| !e.woken).map(|e| e.deadline) {
        if d < first {
            second = first;
            first = d;
        } else if d < second {
            second = d;
        }
    }
    (first, second.saturating_sub(first))
}

const FUTEX_WAITERS: u32 = 0x8000_0000;
const FUTEX_OWNER_DIED: u32 = 0x4000_0000;
const FUTEX_TID_MASK: u32 = 0x3fff_ffff;
/// Most robust list entries walked (Linux's `ROBUST_LIST_LIMIT`).
const ROBUST_LIST_LIMIT: usize = 2048;

/// Releases the robust futexes thread `tid` of process `p` still holds
/// as it exits: each gets `FUTEX_OWNER_DIED` and one waiter is woken (as
/// Linux's `exit_robust_list`). A bad list simply ends the walk.
pub fn release_robust(p: &mut crate::process::Process, tid: u32) {
    let head = crate::process::thread().robust_list;
    if head == 0 {
        return;
    }
    let mm_id = p.mm.pt.kernel_cr3();
    let rd = |p: &mut crate::process::Process, a: u64| {
        crate::mm::uaccess::read::<u64>(&mut p.mm, a).ok()
    };
    let (Some(first), Some(offset), Some(pending)) =
        (rd(p, head), rd(p, head + 8), rd(p, head + 16))
    else {
        return;
    };
    let release = |p: &mut crate::process::Process, entry: u64| {
        let uaddr = (entry & !1).wrapping_add(offset);
        let Ok(v) = crate::mm::uaccess::read::<u32>(&mut p.mm, uaddr) else {
            return;
        };
        if v & FUTEX_TID_MASK != tid {
            return;
        }
        let nv = (v & FUTEX_WAITERS) | FUTEX_OWNER_DIED;
        if crate::mm::uaccess::write(&mut p.mm, uaddr, &nv).is_ok() && v & FUTEX_WAITERS != 0 {
            // The shared key names the word's region in shared memory.
            if let Ok(shared) = crate::syscalls::futex_key(p, uaddr, 0) {
                wake(shared, 1, u32::MAX);
            }
            wake((mm_id, uaddr), 1, u32::MAX);
        }
    };
    let mut entry = first;
    for _ in 0..ROBUST_LIST_LIMIT {
        if entry & !1 == head || entry == 0 {
            break;
        }
        let next = rd(p, entry & !1);
        if entry != pending {
            release(p, entry);
        }
        match next {
            Some(n) => entry = n,
            None => break,
        }
    }
    if pending != 0 {
        release(p, pending);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wake_is_fifo_and_bounded_by_count_and_bitset() {
        WAITERS.lock().clear();
        for (tid, bits) in [(10, 1), (11, 2), (12, 1), (13, 1)] {
            WAITERS.lock().push(Waiter {
                key: (1, 0x1000),
                tid,
                bitset: bits,
                deadline: u64::MAX,
                woken: false,
            });
        }
        assert_eq!(take((1, 0x1000), 2, 1), [10, 12]);
        assert_eq!(take((2, 0x1000), 9, u32::MAX), Vec::<u32>::new());
        assert_eq!(take((1, 0x1000), 9, u32::MAX), [11, 13]);
        WAITERS.lock().clear();
    }
}
