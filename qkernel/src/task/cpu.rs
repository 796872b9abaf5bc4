//! Per-thread and per-process CPU time, and the CPU-time interval timers
//! (`ITIMER_VIRTUAL`, `ITIMER_PROF`).
//!
//! The vCPU's CPU time (`syscalls::cputime::cpu_ns`: time since boot less
//! the time blocked in the host) is cut at accounting points and the part
//! since the previous point goes to the task that ran: at a syscall's
//! entry (user time), at its exit (system time), when the scheduler
//! switches away from a task (user or system time, as the task was in a
//! syscall or not: a preempted task was in user mode) and when a CPU timer
//! is checked. Blocked time is never anyone's.
//!
//! A process's time is the sum of its threads' plus that of its threads
//! that are gone; its children's time is what the waited-for children
//! (and their own waited-for children) used, as Linux's `cutime`. A
//! zombie's time stays until it is reaped.
//!
//! CPU timers count down the process's user (`VIRTUAL`) or user and
//! system (`PROF`) time as it is charged. A CPU timer that goes off sends
//! `SIGVTALRM` or `SIGPROF` to the process. So that a process that
//! computes without syscalls sees it, each process with a CPU timer also
//! has a check deadline in `task::timers` (the VMM's alarm) at the
//! soonest wall time its timer could run out (now + the CPU time left:
//! one vCPU gives a process at most one second of CPU per second); the
//! check charges the running task and arms the next check if the timer
//! did not run out. Precision: the charge is exact at each point; a
//! timer goes off at the first point after it ran out, at worst a slice
//! (or one alarm round trip) late.
//!
//! Tasks on secondary vCPUs (`task::offload`) are charged their stint
//! when they come back, and at a CPU timer check or `getitimer`/
//! `setitimer` of their process up to then; CPU clocks and `getrusage`
//! add the part not charged yet.
//!
//! Lock order: `KERNEL` (a switch) or a secondary's slot (`offload`),
//! then `CPU`; no other lock is taken with `CPU` held.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use spin::Mutex;

use crate::syscalls::cputime;
use crate::time;

/// User and system time in ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Times {
    pub user: u64,
    pub sys: u64,
}

impl Times {
    /// Adds `o` (saturating).
    pub fn add(&mut self, o: Times) {
        self.user = self.user.saturating_add(o.user);
        self.sys = self.sys.saturating_add(o.sys);
    }

    /// User plus system time.
    pub fn total(self) -> u64 {
        self.user.saturating_add(self.sys)
    }
}

/// Which CPU timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// `ITIMER_VIRTUAL`: user time, `SIGVTALRM`.
    Virtual,
    /// `ITIMER_PROF`: user and system time, `SIGPROF`.
    Prof,
}

impl Which {
    /// The signal it sends.
    pub fn signal(self) -> u32 {
        match self {
            Which::Virtual => 26, // SIGVTALRM
            Which::Prof => 27,    // SIGPROF
        }
    }
}

/// A CPU timer: CPU ns left until it goes off, then every `interval` ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimer {
    pub left: u64,
    pub interval: u64,
}

impl CpuTimer {
    /// Counts `ns` down; returns whether it went off (and re-arms or
    /// disarms it: `left` 0).
    fn consume(&mut self, ns: u64) -> bool {
        if self.left == 0 || ns == 0 {
            return false;
        }
        if ns < self.left {
            self.left -= ns;
            return false;
        }
        let over = ns - self.left;
        // Periods missed in one charge go off once, as Linux's overrun.
        self.left = match over.checked_rem(self.interval) {
            Some(r) => self.interval - r,
            None => 0,
        };
        true
    }
}

#[derive(Clone, Copy)]
struct TaskTime {
    tgid: u32,
    t: Times,
    /// Uptime ns at the first accounting point.
    start: u64,
    /// Between a syscall's entry and its exit.
    in_sys: bool,
}

#[derive(Default, Clone, Copy)]
struct Group {
    /// Time of the group's threads that are gone.
    dead: Times,
    /// Time of its reaped children.
    children: Times,
    virt: CpuTimer,
    prof: CpuTimer,
}

struct Cpu {
    tasks: BTreeMap<u32, TaskTime>,
    groups: BTreeMap<u32, Group>,
    /// CPU ns at the last accounting point.
    last: u64,
    /// Timers that went off: (tgid, which), sent at the next point where
    /// no lock is held ([`deliver`]).
    fired: Vec<(u32, Which)>,
}

static CPU: Mutex<Cpu> = Mutex::new(Cpu {
    tasks: BTreeMap::new(),
    groups: BTreeMap::new(),
    last: 0,
    fired: Vec::new(),
});

/// Most timers waiting to be sent (one per process and kind).
const FIRED_MAX: usize = 2 * super::MAX_TASKS;

impl Cpu {
    /// Charges the CPU time since the last point to task `pid` of group
    /// `tgid`, as system time if `sys`.
    fn charge(&mut self, pid: u32, tgid: u32, sys: bool) {
        let now = cputime::cpu_ns();
        let delta = now.saturating_sub(self.last);
        self.last = now;
        self.charge_ns(pid, tgid, sys, delta);
    }

    /// Charges `delta` ns to task `pid` of group `tgid`.
    fn charge_ns(&mut self, pid: u32, tgid: u32, sys: bool, delta: u64) {
        if !self.tasks.contains_key(&pid) && self.tasks.len() >= 2 * super::MAX_TASKS {
            // Every removal is reported ([`task_removed`]); this only
            // guards against one that was not.
            if let Some(k) = super::KERNEL.try_lock() {
                self.tasks.retain(|p, _| k.tasks.contains_key(p));
            }
        }
        let e = self.tasks.entry(pid).or_insert(TaskTime {
            tgid,
            t: Times::default(),
            start: if pid == 1 { 0 } else { time::uptime_ns() },
            in_sys: false,
        });
        let tgid = e.tgid;
        if sys {
            e.t.sys += delta;
        } else {
            e.t.user += delta;
        }
        if let Some(g) = self.groups.get_mut(&tgid) {
            let virt = !sys && g.virt.consume(delta);
            let prof = g.prof.consume(delta);
            for (went, which) in [(virt, Which::Virtual), (prof, Which::Prof)] {
                if went && self.fired.len() < FIRED_MAX && !self.fired.contains(&(tgid, which)) {
                    self.fired.push((tgid, which));
                }
            }
        }
    }

    /// Group `g`'s own time (its threads', live or gone).
    fn group_self(&self, g: u32) -> Times {
        let mut t = self.groups.get(&g).map(|x| x.dead).unwrap_or_default();
        for e in self.tasks.values().filter(|e| e.tgid == g) {
            t.add(e.t);
        }
        t
    }
}

fn current() -> (u32, u32) {
    (super::current_pid(), super::current_tgid())
}

/// A syscall starts: the time since the last point was user time.
pub fn syscall_entry() {
    let (pid, tgid) = current();
    let mut c = CPU.lock();
    c.charge(pid, tgid, false);
    if let Some(e) = c.tasks.get_mut(&pid) {
        e.in_sys = true;
    }
}

/// A syscall ends: the time since the last point was system time. Sends
/// the timers that went off.
pub fn syscall_exit() {
    let (pid, tgid) = current();
    {
        let mut c = CPU.lock();
        c.charge(pid, tgid, true);
        if let Some(e) = c.tasks.get_mut(&pid) {
            e.in_sys = false;
        }
    }
    deliver();
}

/// The scheduler switches away from the running task (with `KERNEL`
/// held: timers that go off are sent later).
pub fn switch_out() {
    let (pid, tgid) = current();
    let mut c = CPU.lock();
    let sys = c.tasks.get(&pid).is_some_and(|e| e.in_sys);
    c.charge(pid, tgid, sys);
}

/// Charges `ns` of user time that task `pid` ran on a secondary vCPU
/// (`task::offload`; vCPU 0's own clock did not see it). With `KERNEL`
/// held.
pub fn charge_user(pid: u32, tgid: u32, ns: u64) {
    CPU.lock().charge_ns(pid, tgid, false, ns);
}

/// Charges the running task up to now (a timer check); `false` if the
/// accounts are busy (never, on one vCPU: no point is interrupted).
fn sample() -> bool {
    let (pid, tgid) = current();
    let Some(mut c) = CPU.try_lock() else {
        return false;
    };
    let sys = c.tasks.get(&pid).is_some_and(|e| e.in_sys);
    c.charge(pid, tgid, sys);
    true
}

/// Sends `SIGVTALRM`/`SIGPROF` for the timers that went off. Must be
/// called with no lock held.
pub fn deliver() {
    let fired = {
        let Some(mut c) = CPU.try_lock() else {
            return;
        };
        if c.fired.is_empty() {
            return;
        }
        core::mem::take(&mut c.fired)
    };
    for (g, which) in fired {
        let info = crate::signal::Info::user(crate::signal::SI_KERNEL, 0, 0);
        if g == super::current_tgid() {
            crate::signal::send(which.signal(), info);
        } else if super::wait::send_to_group(g, which.signal(), info).is_err() {
            log::debug!("CPU timer of pid {g}, which is gone");
        }
        arm_check(g);
    }
}

/// Task `pid`'s own (user, system) time and start (uptime ns).
/// A stint on a secondary vCPU not charged yet counts as user time.
pub fn task_times(pid: u32) -> (Times, u64) {
    let away = super::offload::unbilled_ns(Some(pid), 0);
    let c = CPU.lock();
    let (mut t, start) = c
        .tasks
        .get(&pid)
        .map_or((Times::default(), 0), |e| (e.t, e.start));
    t.user = t.user.saturating_add(away);
    (t, start)
}

/// Process `tgid`'s own time (all its threads', those on secondary vCPUs
/// up to now).
pub fn group_times(tgid: u32) -> Times {
    let away = super::offload::unbilled_ns(None, tgid);
    let mut t = CPU.lock().group_self(tgid);
    t.user = t.user.saturating_add(away);
    t
}

/// Process `tgid`'s reaped children's time.
pub fn children_times(tgid: u32) -> Times {
    CPU.lock()
        .groups
        .get(&tgid)
        .map(|g| g.children)
        .unwrap_or_default()
}

/// Parent group `parent` reaped child group `child`: the child's time and
/// its children's become the parent's children's time, and the child's
/// accounts go. Returns what was folded (for `wait4`'s rusage).
pub fn reaped(child: u32, parent: u32) -> Times {
    let mut c = CPU.lock();
    let mut t = c.group_self(child);
    if let Some(g) = c.groups.remove(&child) {
        t.add(g.children);
    }
    c.tasks.retain(|_, e| e.tgid != child);
    c.groups.entry(parent).or_default().children.add(t);
    t
}

/// Task `pid` left the task table without a wait: a thread's time stays
/// its process's; a process's accounts go (nobody waited for it).
pub fn task_removed(pid: u32) {
    let mut c = CPU.lock();
    let Some(e) = c.tasks.get(&pid).copied() else {
        if c.groups.remove(&pid).is_some() {
            c.tasks.retain(|_, e| e.tgid != pid);
        }
        return;
    };
    if e.tgid == pid {
        c.groups.remove(&pid);
        c.tasks.retain(|_, e| e.tgid != pid);
    } else {
        c.tasks.remove(&pid);
        c.groups.entry(e.tgid).or_default().dead.add(e.t);
    }
}

/// Thread `me` of group `g` execs and takes the leader's pid: the
/// leader's time is the group's gone threads', `me`'s goes on as `g`.
pub fn exec_takes_over(me: u32, g: u32) {
    let mut c = CPU.lock();
    if let Some(l) = c.tasks.remove(&g) {
        c.groups.entry(g).or_default().dead.add(l.t);
    }
    if let Some(e) = c.tasks.remove(&me) {
        c.tasks.insert(g, e);
    }
}

/// The running process's CPU timer `which`: (CPU ns left, 0 if
/// disarmed; interval).
pub fn get_timer(which: Which) -> (u64, u64) {
    let g = super::current_tgid();
    super::offload::charge_running(g);
    sample();
    let c = CPU.lock();
    let t = c
        .groups
        .get(&g)
        .map(|x| match which {
            Which::Virtual => x.virt,
            Which::Prof => x.prof,
        })
        .unwrap_or_default();
    (t.left, t.interval)
}

/// Arms the running process's CPU timer `which` to go off after `value`
/// ns of CPU time, then every `interval`; `value` 0 disarms. Returns the
/// old (left, interval).
pub fn set_timer(which: Which, value: u64, interval: u64) -> (u64, u64) {
    let g = super::current_tgid();
    super::offload::charge_running(g);
    sample();
    let old = {
        let mut c = CPU.lock();
        let grp = c.groups.entry(g).or_default();
        let slot = match which {
            Which::Virtual => &mut grp.virt,
            Which::Prof => &mut grp.prof,
        };
        let old = *slot;
        *slot = CpuTimer {
            left: value,
            interval: if value == 0 { 0 } else { interval },
        };
        c.fired.retain(|f| *f != (g, which));
        old
    };
    arm_check(g);
    (old.left, old.interval)
}

/// The shortest wait between two checks of a group's CPU timers.
const CHECK_MIN_NS: u64 = 1_000_000;

/// CPU ns left of group `g`'s nearest CPU timer (`None`: none armed).
fn nearest_left(g: u32) -> Option<u64> {
    let c = CPU.lock();
    let grp = c.groups.get(&g)?;
    [grp.virt.left, grp.prof.left]
        .into_iter()
        .filter(|&l| l != 0)
        .min()
}

/// Keeps group `g`'s check deadline at the soonest wall time one of its
/// CPU timers could run out (none if none is armed): N vCPUs give a
/// process up to N seconds of CPU per second. Never sooner than 1 ms
/// (unless less is left): with the time left divided by N, a process
/// using one vCPU would be checked ever more often as its timer nears
/// its end (each check charges system time, which `ITIMER_VIRTUAL` does
/// not count: a 2-vCPU sandbox never let it go off).
fn arm_check(g: u32) {
    let cpus = super::offload::cpus().max(1) as u64;
    let wait = |l: u64| (l / cpus).max(l.min(CHECK_MIN_NS));
    let deadline = nearest_left(g).map(|l| time::monotonic_ns().saturating_add(wait(l)));
    super::timers::set_cpu_check(g, deadline);
}

/// Group `g`'s check deadline passed (from `task::timers`, no lock held):
/// charges the running task and the group's tasks on secondary vCPUs,
/// sends what went off and arms the next check.
pub fn check(g: u32) {
    super::offload::charge_running(g);
    sample();
    deliver();
    arm_check(g);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_shot_timer_goes_off_once() {
        let mut t = CpuTimer {
            left: 100,
            interval: 0,
        };
        assert!(!t.consume(60));
        assert_eq!(t.left, 40);
        assert!(t.consume(50));
        assert_eq!(t.left, 0);
        assert!(!t.consume(1000));
    }

    #[test]
    fn interval_timer_rearms_past_the_overshoot() {
        let mut t = CpuTimer {
            left: 100,
            interval: 30,
        };
        assert!(t.consume(110));
        assert_eq!(t.left, 20);
        // Several periods in one charge: once, at the right phase.
        assert!(t.consume(95));
        assert_eq!(t.left, 15);
    }

    #[test]
    fn times_add_saturates() {
        let mut a = Times {
            user: u64::MAX - 1,
            sys: 1,
        };
        a.add(Times { user: 5, sys: 2 });
        assert_eq!(
            a,
            Times {
                user: u64::MAX,
                sys: 3
            }
        );
        assert_eq!(a.total(), u64::MAX);
    }
}
