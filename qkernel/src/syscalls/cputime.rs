//! CPU-time accounting from the TSC: the vCPU runs the program except
//! while it waits in a host call that may block (sleeps, polls, blocking
//! I/O), so CPU time is the time since boot minus the time spent in
//! those calls. System time is the time spent serving syscalls (guest
//! kernel and the host calls they make), minus their blocked part; user
//! time is the rest. The load average is an exponentially damped average
//! of whether the process was runnable, as Linux computes it every 5 s.
//! Who the CPU time goes to is `task::cpu`'s business.

use core::sync::atomic::{AtomicU64, Ordering};

use qlib::abi::Call;
use qlib::io_abi::{fd as fdop, io};
use spin::Mutex;

use crate::arch;
use crate::time;

/// TSC ticks spent blocked in the host.
static BLOCKED_TSC: AtomicU64 = AtomicU64::new(0);
/// TSC ticks spent in syscalls, blocked time excluded.
static SYS_TSC: AtomicU64 = AtomicU64::new(0);

/// Whether host call `c` with `args` may wait in the host (the time it
/// takes is then not CPU time of the program).
pub fn may_block(c: Call, args: &[u64; 6]) -> bool {
    match c {
        Call::Sleep | Call::Poll | Call::EpollWait | Call::Readv | Call::Open => true,
        Call::Io | Call::Msg => args[4] & io::BLOCK != 0,
        Call::Fd => {
            matches!(args[0], fdop::CONNECT | fdop::ACCEPT) && args[3] & io::BLOCK != 0
                || args[0] == fdop::SENDFILE && args[5] & io::BLOCK != 0
        }
        _ => false,
    }
}

/// Records `ticks` TSC ticks spent blocked in the host.
pub fn add_blocked(ticks: u64) {
    BLOCKED_TSC.fetch_add(ticks, Ordering::Relaxed);
}

/// TSC ticks blocked so far.
pub fn blocked_ticks() -> u64 {
    BLOCKED_TSC.load(Ordering::Relaxed)
}

/// A syscall's accounting: started at `start` (TSC) with `blocked0`
/// blocked ticks so far.
pub struct SyscallClock {
    start: u64,
    blocked0: u64,
}

impl SyscallClock {
    /// Starts timing a syscall.
    pub fn start() -> Self {
        Self {
            start: arch::rdtsc(),
            blocked0: blocked_ticks(),
        }
    }

    /// Ends it: its unblocked time is system time.
    pub fn stop(self) {
        let total = arch::rdtsc().wrapping_sub(self.start);
        let blocked = blocked_ticks().wrapping_sub(self.blocked0);
        SYS_TSC.fetch_add(total.saturating_sub(blocked), Ordering::Relaxed);
    }
}

/// (user, system) CPU time in ns.
pub fn user_sys_ns() -> (u64, u64) {
    let up = time::uptime_ns();
    let cpu = up.saturating_sub(time::tsc_to_ns(blocked_ticks()));
    let sys = time::tsc_to_ns(SYS_TSC.load(Ordering::Relaxed)).min(cpu);
    (cpu - sys, sys)
}

/// CPU time (user + system) in ns.
pub fn cpu_ns() -> u64 {
    let (u, s) = user_sys_ns();
    u + s
}

/// Linux's fixed point for load averages: 11 fractional bits.
const FSHIFT: u32 = 11;
const FIXED_1: u64 = 1 << FSHIFT;
/// `FIXED_1 / exp(5 s / 1 min)`, `.. / 5 min`, `.. / 15 min`.
const EXP: [u64; 3] = [1884, 2014, 2037];
const PERIOD_NS: u64 = 5_000_000_000;

struct Load {
    /// The three averages, fixed point.
    avg: [u64; 3],
    /// Uptime and CPU time at the last update.
    at_ns: u64,
    cpu_ns: u64,
}

static LOAD: Mutex<Load> = Mutex::new(Load {
    avg: [0; 3],
    at_ns: 0,
    cpu_ns: 0,
});

/// The 1, 5 and 15 minute load averages in Linux's fixed point
/// (`FSHIFT` bits): each 5 s period since the last call adds the
/// fraction of it the process spent runnable, damped as Linux does.
pub fn loadavg() -> [u64; 3] {
    let now = time::uptime_ns();
    let cpu = cpu_ns();
    let mut l = LOAD.lock();
    let periods = now.saturating_sub(l.at_ns) / PERIOD_NS;
    if periods == 0 {
        return l.avg;
    }
    let span = periods * PERIOD_NS;
    let elapsed = now - l.at_ns;
    let busy = cpu.saturating_sub(l.cpu_ns).min(elapsed);
    let active = (u128::from(busy) * u128::from(FIXED_1) / u128::from(elapsed)) as u64;
    for (avg, e) in l.avg.iter_mut().zip(EXP) {
        // Past ~2000 periods (about 3 hours) every average has converged.
        for _ in 0..periods.min(2000) {
            *avg = (*avg * e + active * (FIXED_1 - e)) >> FSHIFT;
        }
    }
    l.at_ns += span;
    l.cpu_ns = cpu;
    l.avg
}

/// A load average as Linux prints it: integer part and two decimals.
pub fn load_parts(v: u64) -> (u64, u64) {
    let v = v + FIXED_1 / 200; // round to the nearest hundredth
    (v >> FSHIFT, ((v & (FIXED_1 - 1)) * 100) >> FSHIFT)
}
