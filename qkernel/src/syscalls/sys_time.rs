//! Time syscalls, answered from the TSC (`time.rs`) without host calls;
//! a lone task sleeps in the host, one among others parks (`task::park`).

use crate::errno::{Errno, SysResult};
use crate::hostcall;
use crate::mm::uaccess;
use crate::process::Process;
use crate::time;

const CLOCK_REALTIME: u64 = 0;
const CLOCK_MONOTONIC: u64 = 1;
const CLOCK_PROCESS_CPUTIME_ID: u64 = 2;
const CLOCK_THREAD_CPUTIME_ID: u64 = 3;
const CLOCK_MONOTONIC_RAW: u64 = 4;
const CLOCK_REALTIME_COARSE: u64 = 5;
const CLOCK_MONOTONIC_COARSE: u64 = 6;
const CLOCK_BOOTTIME: u64 = 7;
/// International Atomic Time: `CLOCK_REALTIME` plus the TAI offset, which
/// is 0 here (as on Linux until `adjtimex` sets it).
const CLOCK_TAI: u64 = 11;
const TIMER_ABSTIME: u64 = 1;

/// A CPU-time clock: whose and which time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CpuClock {
    /// Thread id (`thread`) or process id; 0: the caller's.
    pid: u32,
    thread: bool,
    /// `CPUCLOCK_PROF` (user + system), `CPUCLOCK_VIRT` (user) or
    /// `CPUCLOCK_SCHED` (all the CPU time).
    which: u32,
}

const CPUCLOCK_PROF: u32 = 0;
const CPUCLOCK_VIRT: u32 = 1;
const CPUCLOCK_SCHED: u32 = 2;
/// `CPUCLOCK_PERTHREAD_MASK`.
const CPUCLOCK_PERTHREAD: i32 = 4;

/// Decodes a CPU-time clock id: the two fixed ones, or a dynamic one as
/// `clock_getcpuclockid` (`~pid << 3 | which`) and
/// `pthread_getcpuclockid` (`~tid << 3 | 4 | which`) make them.
fn cpu_clock(clock: u64) -> Option<CpuClock> {
    // `clockid_t` is an int: the upper half of the register is not the
    // caller's (a 32-bit move leaves it 0, as glibc's calls do).
    let id = clock as u32 as i32;
    match u64::from(id as u32) {
        CLOCK_PROCESS_CPUTIME_ID => {
            return Some(CpuClock {
                pid: 0,
                thread: false,
                which: CPUCLOCK_SCHED,
            });
        }
        CLOCK_THREAD_CPUTIME_ID => {
            return Some(CpuClock {
                pid: 0,
                thread: true,
                which: CPUCLOCK_SCHED,
            });
        }
        _ => {}
    }
    if id >= 0 || id & 3 == 3 {
        return None;
    }
    Some(CpuClock {
        pid: !(id >> 3) as u32,
        thread: id & CPUCLOCK_PERTHREAD != 0,
        which: (id & 3) as u32,
    })
}

/// The time of CPU clock `c`, as Linux's `lookup_task`: a thread clock
/// names the caller or a thread of its process, a process clock any
/// process (or thread: its process) that exists; else `EINVAL`.
fn cpu_clock_ns(c: CpuClock) -> Result<u64, Errno> {
    use crate::task::{self, cpu};
    let times = if c.thread {
        let tid = if c.pid == 0 {
            task::current_pid()
        } else {
            c.pid
        };
        if tid != task::current_pid() && task::wait::group_of(tid) != Some(task::current_tgid()) {
            return Err(Errno::EINVAL);
        }
        cpu::task_times(tid).0
    } else {
        let g = if c.pid == 0 {
            task::current_tgid()
        } else {
            task::wait::group_of(c.pid).ok_or(Errno::EINVAL)?
        };
        cpu::group_times(g)
    };
    Ok(match c.which {
        CPUCLOCK_VIRT => times.user,
        // PROF and SCHED: Linux's SCHED counts runtime, here the same.
        CPUCLOCK_PROF | CPUCLOCK_SCHED => times.total(),
        _ => return Err(Errno::EINVAL),
    })
}

fn clock_ns(clock: u64) -> Result<u64, Errno> {
    Ok(match u64::from(clock as u32) {
        // The vDSO (`qkernel/vdso/vdso.c`) answers the same clocks the
        // same way; keep the two in step.
        CLOCK_REALTIME | CLOCK_REALTIME_COARSE | CLOCK_TAI => time::realtime_ns(),
        CLOCK_MONOTONIC | CLOCK_MONOTONIC_RAW | CLOCK_MONOTONIC_COARSE | CLOCK_BOOTTIME => {
            time::monotonic_ns()
        }
        _ => return cpu_clock_ns(cpu_clock(clock).ok_or(Errno::EINVAL)?),
    })
}

fn put_timespec(p: &mut Process, addr: u64, ns: u64) -> Result<(), Errno> {
    uaccess::write(&mut p.mm, addr, &(ns / 1_000_000_000))?;
    uaccess::write(&mut p.mm, addr + 8, &(ns % 1_000_000_000))
}

/// Reads a `struct timespec` as ns: `EINVAL` when negative or `tv_nsec`
/// is out of range, as Linux's `timespec64_valid`.
pub(super) fn get_timespec(p: &mut Process, addr: u64) -> Result<u64, Errno> {
    let sec: u64 = uaccess::read(&mut p.mm, addr)?;
    let nsec: u64 = uaccess::read(&mut p.mm, addr + 8)?;
    if sec as i64 > i64::MAX / 1_000_000_000 || nsec >= 1_000_000_000 || (sec as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    Ok(sec * 1_000_000_000 + nsec)
}

/// `clock_gettime(clock, ts)`.
pub fn clock_gettime(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let ns = clock_ns(a[0])?;
    put_timespec(p, a[1], ns)?;
    Ok(0)
}

/// `clock_getres(clock, ts)`.
pub fn clock_getres(p: &mut Process, a: &[u64; 6]) -> SysResult {
    clock_ns(a[0])?;
    if a[1] != 0 {
        put_timespec(p, a[1], 1)?;
    }
    Ok(0)
}

/// `gettimeofday(tv, tz)`.
pub fn gettimeofday(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let ns = time::realtime_ns();
    if a[0] != 0 {
        uaccess::write(&mut p.mm, a[0], &(ns / 1_000_000_000))?;
        uaccess::write(&mut p.mm, a[0] + 8, &(ns % 1_000_000_000 / 1000))?;
    }
    if a[1] != 0 {
        uaccess::write(&mut p.mm, a[1], &0u64)?;
    }
    Ok(0)
}

/// `time(tloc)`.
pub fn time(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let secs = time::realtime_ns() / 1_000_000_000;
    if a[0] != 0 {
        uaccess::write(&mut p.mm, a[0], &secs)?;
    }
    Ok(secs as usize)
}

/// Sleeps `ns`; a handled signal cuts the sleep short with
/// `ERESTARTNOHAND` (EINTR once the handler runs), after writing the time
/// left to `rem` (if not 0).
fn sleep(p: &mut Process, ns: u64, rem: u64) -> SysResult {
    if ns == 0 {
        return Ok(0);
    }
    if crate::task::park::worthwhile() {
        // Other tasks run meanwhile (`task::timers` wakes this one).
        let deadline = crate::task::park::deadline(Some(ns));
        if crate::task::park::expired(deadline) {
            return Ok(0);
        }
        return crate::task::park::sleep(deadline, rem);
    }
    let deadline = time::monotonic_ns().saturating_add(ns);
    if hostcall::sleep_until(deadline) {
        return Ok(0);
    }
    if rem != 0 {
        put_timespec(p, rem, deadline.saturating_sub(time::monotonic_ns()))?;
    }
    Err(Errno::ERESTARTNOHAND)
}

/// `nanosleep(req, rem)`.
pub fn nanosleep(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let ns = get_timespec(p, a[0])?;
    sleep(p, ns, a[1])
}

/// `clock_nanosleep(clock, flags, req, rem)`.
pub fn clock_nanosleep(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let now = clock_ns(a[0])?;
    let ns = get_timespec(p, a[2])?;
    if a[1] & TIMER_ABSTIME != 0 {
        sleep(p, ns.saturating_sub(now), 0)
    } else {
        sleep(p, ns, a[3])
    }
}

const ITIMER_REAL: u64 = 0;
const NS_PER_US: u64 = 1_000;
const NS_PER_S: u64 = 1_000_000_000;

/// Reads a `struct timeval` as ns: `EINVAL` out of range.
fn get_timeval(p: &mut Process, addr: u64) -> Result<u64, Errno> {
    let sec = uaccess::read::<u64>(&mut p.mm, addr)? as i64;
    let usec = uaccess::read::<u64>(&mut p.mm, addr + 8)? as i64;
    if !(0..=i64::MAX / NS_PER_S as i64 - 1).contains(&sec) || !(0..1_000_000).contains(&usec) {
        return Err(Errno::EINVAL);
    }
    Ok(sec as u64 * NS_PER_S + usec as u64 * NS_PER_US)
}

/// Writes ns as a `struct timeval`; a running timer shows at least 1 µs.
fn put_timeval(p: &mut Process, addr: u64, ns: u64) -> Result<(), Errno> {
    let us = if ns == 0 { 0 } else { ns.div_ceil(NS_PER_US) };
    uaccess::write(&mut p.mm, addr, &(us / 1_000_000))?;
    uaccess::write(&mut p.mm, addr + 8, &(us % 1_000_000))
}

/// Writes (remaining, interval) as a `struct itimerval` (interval first).
fn put_itimerval(p: &mut Process, addr: u64, (value, interval): (u64, u64)) -> Result<(), Errno> {
    put_timeval(p, addr, interval)?;
    put_timeval(p, addr + 16, value)
}

const ITIMER_VIRTUAL: u64 = 1;
const ITIMER_PROF: u64 = 2;

/// Which interval timer: the real-time one (`None`) or a CPU-time one.
fn which_timer(which: u64) -> Result<Option<crate::task::cpu::Which>, Errno> {
    use crate::task::cpu::Which;
    match which {
        ITIMER_REAL => Ok(None),
        ITIMER_VIRTUAL => Ok(Some(Which::Virtual)),
        ITIMER_PROF => Ok(Some(Which::Prof)),
        _ => Err(Errno::EINVAL),
    }
}

/// `getitimer(which, curr)`.
pub fn getitimer(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let cur = match which_timer(a[0])? {
        None => crate::itimer::get(),
        Some(w) => crate::task::cpu::get_timer(w),
    };
    put_itimerval(p, a[1], cur)?;
    Ok(0)
}

/// `setitimer(which, new, old)`: a null `new` disarms, as on Linux.
pub fn setitimer(p: &mut Process, a: &[u64; 6]) -> SysResult {
    let which = which_timer(a[0])?;
    let (interval, value) = if a[1] == 0 {
        (0, 0)
    } else {
        (get_timeval(p, a[1])?, get_timeval(p, a[1] + 16)?)
    };
    // As on Linux, the timer is set even if `old` then faults.
    let old = match which {
        None => crate::itimer::set(value, interval),
        Some(w) => crate::task::cpu::set_timer(w, value, interval),
    };
    if a[2] != 0 {
        put_itimerval(p, a[2], old)?;
    }
    Ok(0)
}

/// `alarm(seconds)`: the seconds left of the previous alarm, rounded to
/// the nearest and at least 1 if one was set (Linux's rounding).
pub fn alarm(_p: &mut Process, a: &[u64; 6]) -> SysResult {
    let secs = a[0] & 0xffff_ffff; // unsigned int
    let (old, _) = crate::itimer::set(secs * NS_PER_S, 0);
    let (s, rest_us) = (old / NS_PER_S, (old % NS_PER_S).div_ceil(NS_PER_US));
    let rounded = if (s == 0 && rest_us != 0) || rest_us >= 500_000 {
        s + 1
    } else {
        s
    };
    Ok(rounded as usize)
}
