//! Counters for `qrun do --stats` (docs/memory.md, "Warm latency"):
//! syscalls by number with the cycles spent in them, user page faults,
//! TLB flushes, host calls by kind. Counting costs a few relaxed atomic
//! adds; the kernel sends the counters to the VMM as `Log` lines of level
//! `LOG_STATS` at exit, only when the VMM asked for them.

use core::fmt::Write;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use qlib::abi::{Call, LOG_STATS};

use crate::hostcall;
use crate::klog::Line;

const SYSCALLS: usize = 512;
const CALLS: usize = 80;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// A count and the TSC ticks it took.
struct Slot {
    n: AtomicU64,
    tsc: AtomicU64,
}

impl Slot {
    const fn new() -> Self {
        Self {
            n: AtomicU64::new(0),
            tsc: AtomicU64::new(0),
        }
    }

    fn add(&self, ticks: u64) {
        self.n.fetch_add(1, Ordering::Relaxed);
        self.tsc.fetch_add(ticks, Ordering::Relaxed);
    }
}

static SYS: [Slot; SYSCALLS] = [const { Slot::new() }; SYSCALLS];
static HOST: [Slot; CALLS] = [const { Slot::new() }; CALLS];
/// Not-present faults (demand paging), present faults (copy-on-write,
/// stale PTEs) and swap-ins.
static FAULT_MISSING: Slot = Slot::new();
static FAULT_PRESENT: Slot = Slot::new();
/// CR3 reloads done to flush the TLB.
static FLUSHES: AtomicU64 = AtomicU64::new(0);
/// Pages mapped by demand paging (fault-around included).
static PAGES_MAPPED: AtomicU64 = AtomicU64::new(0);
/// Idle waits in the host, with the TSC ticks the vCPU was awake before
/// each (since the previous idle wait ended).
static IDLE: Slot = Slot::new();
/// When the last idle wait ended (0: none yet).
static WOKE_AT: AtomicU64 = AtomicU64::new(0);
/// Idle waits on a deadline, by how far the next deadline was after the
/// first: within 50 us, 1 ms, 10 ms, further or none.
static GAPS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

/// Turns counting on when the VMM's boot flags ask for it.
pub fn init(enabled: bool) {
    ENABLED.store(enabled, Ordering::Relaxed);
}

fn on() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The TSC now, when counting (0 otherwise).
pub fn start() -> u64 {
    if on() { crate::arch::rdtsc() } else { 0 }
}

fn since(t0: u64) -> u64 {
    crate::arch::rdtsc().saturating_sub(t0)
}

/// Syscall `nr` ran from `t0`.
pub fn syscall(nr: u64, t0: u64) {
    if on() && (nr as usize) < SYSCALLS {
        SYS[nr as usize].add(since(t0));
    }
}

/// Host call `c` ran from `t0`.
pub fn host_call(c: Call, t0: u64) {
    if on() && (c as usize) < CALLS {
        HOST[c as usize].add(since(t0));
    }
}

/// A user page fault (`present`: the PTE was there) handled from `t0`.
pub fn fault(present: bool, t0: u64) {
    if on() {
        let s = if present {
            &FAULT_PRESENT
        } else {
            &FAULT_MISSING
        };
        s.add(since(t0));
    }
}

/// A TLB flush.
pub fn flush() {
    if on() {
        FLUSHES.fetch_add(1, Ordering::Relaxed);
    }
}

/// `n` pages mapped by a fault.
pub fn mapped(n: u64) {
    if on() {
        PAGES_MAPPED.fetch_add(n, Ordering::Relaxed);
    }
}

/// The vCPU starts an idle wait in the host whose deadline is the
/// earliest of the timed waits; `gap` is how far the next one is after
/// it (`u64::MAX`: none), asked only when counting.
pub fn idle_wait(timed: bool, gap: impl FnOnce() -> u64) {
    if !on() {
        return;
    }
    let gap = gap();
    let woke = WOKE_AT.load(Ordering::Relaxed);
    if woke != 0 {
        IDLE.add(since(woke));
    }
    if timed {
        let bin = match gap {
            0..50_000 => 0,
            50_000..1_000_000 => 1,
            1_000_000..10_000_000 => 2,
            _ => 3,
        };
        GAPS[bin].fetch_add(1, Ordering::Relaxed);
    }
}

/// The idle wait ended.
pub fn idle_woke() {
    if on() {
        WOKE_AT.store(crate::arch::rdtsc(), Ordering::Relaxed);
    }
}

/// Sends `line` as one `Log` call and empties it.
fn send(line: &mut Line) {
    if !line.bytes().is_empty() {
        let (gpa, len) = hostcall::buf(line.bytes());
        hostcall::call_once(Call::Log, [LOG_STATS, gpa, len, 0, 0, 0]);
    }
    line.clear();
}

fn us(ticks: u64) -> u64 {
    crate::time::tsc_to_ns(ticks) / 1000
}

/// The `top` slots of `slots` by time, as `(index, count, ticks)`.
fn top<const N: usize>(slots: &[Slot]) -> [(usize, u64, u64); N] {
    let mut best = [(0usize, 0u64, 0u64); N];
    for (i, s) in slots.iter().enumerate() {
        let (n, t) = (s.n.load(Ordering::Relaxed), s.tsc.load(Ordering::Relaxed));
        if n == 0 {
            continue;
        }
        if let Some(pos) = best.iter().position(|b| b.1 == 0 || t > b.2) {
            best.copy_within(pos..N - 1, pos + 1);
            best[pos] = (i, n, t);
        }
    }
    best
}

fn total(slots: &[Slot]) -> (u64, u64) {
    slots.iter().fold((0, 0), |(n, t), s| {
        (
            n + s.n.load(Ordering::Relaxed),
            t + s.tsc.load(Ordering::Relaxed),
        )
    })
}

/// Sends the counters to the VMM (at exit), when counting.
pub fn report() {
    if !on() {
        return;
    }
    let mut line = Line::new();
    let (n, t) = total(&SYS);
    let _ = write!(line, "syscalls {n} in {} us:", us(t));
    for (i, n, t) in top::<8>(&SYS) {
        if n > 0 {
            let _ = write!(line, " {i}x{n}={}us", us(t));
        }
    }
    send(&mut line);
    let fm = (
        FAULT_MISSING.n.load(Ordering::Relaxed),
        FAULT_MISSING.tsc.load(Ordering::Relaxed),
    );
    let fp = (
        FAULT_PRESENT.n.load(Ordering::Relaxed),
        FAULT_PRESENT.tsc.load(Ordering::Relaxed),
    );
    let _ = write!(
        line,
        "faults: not present {} in {} us ({} pages mapped), present {} in {} us; tlb flushes {}",
        fm.0,
        us(fm.1),
        PAGES_MAPPED.load(Ordering::Relaxed),
        fp.0,
        us(fp.1),
        FLUSHES.load(Ordering::Relaxed)
    );
    send(&mut line);
    let (n, t) = total(&HOST);
    let _ = write!(line, "host calls {n} in {} us:", us(t));
    for (i, n, t) in top::<8>(&HOST) {
        if n > 0 {
            match Call::from_u64(i as u64) {
                Some(c) => write!(line, " {c:?}x{n}={}us", us(t)),
                None => write!(line, " {i}x{n}={}us", us(t)),
            }
            .ok();
        }
    }
    send(&mut line);
    let g = GAPS.each_ref().map(|a| a.load(Ordering::Relaxed));
    let _ = write!(
        line,
        "idle waits {} ({} us awake before them); timed ones by the next deadline's distance: <50us {}, <1ms {}, <10ms {}, further {}",
        IDLE.n.load(Ordering::Relaxed),
        us(IDLE.tsc.load(Ordering::Relaxed)),
        g[0],
        g[1],
        g[2],
        g[3]
    );
    send(&mut line);
    crate::fs::frozen::report(&mut line);
    send(&mut line);
}
