//! Guest timers: one deadline queue for the whole sandbox (docs/processes.md).
//!
//! Two kinds of entries, at most one of each per task:
//! - `Wake`: a parked task's deadline (a sleep, a poll/select/epoll
//!   timeout). Nothing outside the guest knows about it: the idle wait
//!   (`park::idle_poll`) passes the nearest one as its host `Poll`
//!   timeout, and [`run_expired`] wakes the task.
//! - `Alarm`: a process's `ITIMER_REAL` (`alarm`, `setitimer`). It must
//!   also interrupt a process that computes or a lone task blocked in the
//!   host, so the VMM's one alarm timerfd (`Call::SetAlarm`) is kept armed
//!   at the nearest alarm deadline; when it fires the VMM posts
//!   `control::ALARM` and [`run_expired`] sends `SIGALRM` to the process
//!   that armed the timer.
//!
//! Deadlines are `CLOCK_MONOTONIC` ns (the guest's clock is the host's).
//! Lock order: `KERNEL`, then `QUEUE`; no host call with `QUEUE` held.

use alloc::vec::Vec;

use qlib::abi::Call;
use spin::Mutex;

use super::{KERNEL, current_pid, sched};
use crate::errno::Errno;
use crate::{hostcall, signal, time};

/// No deadline.
pub const NEVER: u64 = u64::MAX;

/// `SIGALRM`.
const SIGALRM: u32 = 14;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Wakes a parked task.
    Wake,
    /// `ITIMER_REAL`: `SIGALRM`, then again every `interval` ns (0: once).
    Alarm { interval: u64 },
    /// The soonest a CPU timer (`ITIMER_VIRTUAL`, `ITIMER_PROF`) of
    /// process `pid` could run out: checked then (`task::cpu`).
    CpuCheck,
}

#[derive(Debug, Clone, Copy)]
struct Timer {
    deadline: u64,
    pid: u32,
    kind: Kind,
}

static QUEUE: Mutex<Vec<Timer>> = Mutex::new(Vec::new());
/// The deadline the VMM's alarm is armed for (0: disarmed).
static HOST_ALARM: Mutex<u64> = Mutex::new(0);

/// Whether the VMM's alarm must go off for `t` (not only the idle wait).
fn is_alarm(t: &Timer) -> bool {
    matches!(t.kind, Kind::Alarm { .. } | Kind::CpuCheck)
}

/// Arms (or moves) `pid`'s wake-up at `deadline` (`NEVER`: disarms).
pub fn arm_wake(pid: u32, deadline: u64) {
    let mut q = QUEUE.lock();
    q.retain(|t| t.pid != pid || is_alarm(t));
    if deadline != NEVER {
        q.push(Timer {
            deadline,
            pid,
            kind: Kind::Wake,
        });
    }
}

/// Drops `pid`'s wake-up.
pub fn disarm_wake(pid: u32) {
    arm_wake(pid, NEVER);
}

/// The nearest deadline of any timer (`NEVER`: none).
pub fn next_deadline() -> u64 {
    QUEUE
        .lock()
        .iter()
        .map(|t| t.deadline)
        .min()
        .unwrap_or(NEVER)
}

/// `pid`'s `ITIMER_REAL`: (ns until it goes off, 0 if disarmed; interval).
pub fn alarm(pid: u32) -> (u64, u64) {
    let q = QUEUE.lock();
    q.iter()
        .find_map(|t| match t.kind {
            Kind::Alarm { interval } if t.pid == pid => Some((remaining(t.deadline), interval)),
            _ => None,
        })
        .unwrap_or((0, 0))
}

fn remaining(deadline: u64) -> u64 {
    // Armed but due: 1 ns left, so it still reads as armed.
    deadline.saturating_sub(time::monotonic_ns()).max(1)
}

/// Arms `pid`'s `ITIMER_REAL` to go off in `value` ns, then every
/// `interval` ns; `value` 0 disarms. Returns the old (remaining, interval).
pub fn set_alarm(pid: u32, value: u64, interval: u64) -> (u64, u64) {
    let old = alarm(pid);
    {
        let mut q = QUEUE.lock();
        q.retain(|t| t.pid != pid || !matches!(t.kind, Kind::Alarm { .. }));
        if value != 0 {
            q.push(Timer {
                deadline: time::monotonic_ns().saturating_add(value),
                pid,
                kind: Kind::Alarm { interval },
            });
        }
    }
    arm_host_alarm();
    old
}

/// Arms (or moves, or with `None` drops) process `tgid`'s CPU timer
/// check (`task::cpu`).
pub fn set_cpu_check(tgid: u32, deadline: Option<u64>) {
    {
        let mut q = QUEUE.lock();
        q.retain(|t| t.pid != tgid || t.kind != Kind::CpuCheck);
        if let Some(deadline) = deadline {
            q.push(Timer {
                deadline,
                pid: tgid,
                kind: Kind::CpuCheck,
            });
        }
    }
    arm_host_alarm();
}

/// `pid` ended: its timers go (a new process never inherits them; `fork`
/// does not copy them either, as on Linux).
pub fn forget(pid: u32) {
    let had_alarm = {
        let mut q = QUEUE.lock();
        let had = q.iter().any(|t| t.pid == pid && is_alarm(t));
        q.retain(|t| t.pid != pid);
        had
    };
    if had_alarm {
        arm_host_alarm();
    }
}

/// Keeps the VMM's alarm at the nearest alarm deadline. Never called with
/// a lock held: the host call serves control requests on its way back.
fn arm_host_alarm() {
    let want = QUEUE
        .lock()
        .iter()
        .filter(|t| is_alarm(t))
        .map(|t| t.deadline)
        .min()
        .unwrap_or(0);
    {
        let mut armed = HOST_ALARM.lock();
        if *armed == want {
            return;
        }
        *armed = want;
    }
    let rc = hostcall::call(Call::SetAlarm, [want, 0, 0, 0, 0, 0]);
    if rc < 0 {
        log::error!("the VMM refused the alarm ({rc}): SIGALRM will not come");
    }
}

/// The VMM's alarm went off: it is no longer armed. Fires what is due and
/// arms it again for the next alarm (the guest's clock may not be quite
/// at the deadline yet).
pub fn host_alarm_fired() {
    *HOST_ALARM.lock() = u64::MAX;
    run_expired();
    arm_host_alarm();
}

/// Fires every timer whose deadline has passed: parked tasks wake,
/// processes get `SIGALRM` (interval timers are armed again, skipping
/// periods already missed). Called from the idle wait and when the VMM's
/// alarm goes off; must not be called with `KERNEL` held.
pub fn run_expired() {
    let now = time::monotonic_ns();
    let mut wakes: Vec<u32> = Vec::new();
    let mut alarms: Vec<u32> = Vec::new();
    let mut checks: Vec<u32> = Vec::new();
    {
        let mut q = QUEUE.lock();
        let mut i = 0;
        while i < q.len() {
            let t = q[i];
            if t.deadline > now {
                i += 1;
                continue;
            }
            match t.kind {
                Kind::Wake => {
                    wakes.push(t.pid);
                    q.swap_remove(i);
                }
                Kind::CpuCheck => {
                    checks.push(t.pid);
                    q.swap_remove(i);
                }
                Kind::Alarm { interval } => {
                    alarms.push(t.pid);
                    if let Some(missed) = (now - t.deadline).checked_div(interval) {
                        q[i].deadline = t.deadline + (missed + 1) * interval;
                        i += 1;
                    } else {
                        q.swap_remove(i);
                    }
                }
            }
        }
    }
    if !alarms.is_empty() || !checks.is_empty() {
        // The host alarm went off (or is about to): arm the next one.
        *HOST_ALARM.lock() = u64::MAX;
        arm_host_alarm();
    }
    if !wakes.is_empty() {
        let mut k = KERNEL.lock();
        for pid in wakes {
            sched::wake(&mut k, pid);
        }
    }
    for pid in alarms {
        let info = signal::Info::user(signal::SI_KERNEL, 0, 0);
        if pid == super::current_tgid() {
            signal::send(SIGALRM, info);
        } else if super::wait::send_to_group(pid, SIGALRM, info).is_err() {
            log::debug!("SIGALRM for pid {pid}, which is gone");
        }
    }
    for g in checks {
        super::cpu::check(g);
    }
}

/// Sleeps the running task until `deadline` (`NEVER`: until woken), other
/// tasks running meanwhile. For kernel code outside the process lock (a
/// futex wait with a timeout, later). `Ok(true)`: the deadline passed;
/// `Ok(false)`: woken earlier (`sched::wake`, a handled signal).
#[expect(dead_code, reason = "the futex wait's timeout (threads) will use it")]
pub fn sleep_until(deadline: u64) -> Result<bool, Errno> {
    let me = current_pid();
    if time::monotonic_ns() >= deadline {
        return Ok(true);
    }
    super::park::park_deadline_only(me, deadline);
    sched::block_current();
    super::park::unpark(me);
    Ok(time::monotonic_ns() >= deadline)
}
