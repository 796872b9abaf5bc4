//! Clocks from the TSC, calibrated at boot: the rate comes from the
//! platform (MSR 0x4b564d13 here), the epoch from one host call.

use core::sync::atomic::{AtomicU64, Ordering};

use qlib::abi::{ABI_VERSION, Call, HelloReply};

use crate::arch::{self, platform::Platform};
use crate::hostcall;

static TSC_KHZ: AtomicU64 = AtomicU64::new(1);
static TSC0: AtomicU64 = AtomicU64::new(0);
static REALTIME0: AtomicU64 = AtomicU64::new(0);
static MONOTONIC0: AtomicU64 = AtomicU64::new(0);

/// Says hello to the VMM (ABI check) and calibrates the clocks.
pub fn init(platform: Platform) -> Result<(), &'static str> {
    let khz = platform.tsc_khz();
    if khz == 0 {
        return Err("TSC rate unknown");
    }
    TSC_KHZ.store(khz, Ordering::Relaxed);
    let reply = HelloReply::default();
    let (gpa, _) = hostcall::buf(as_bytes(&reply));
    let rc = hostcall::call(Call::Hello, [ABI_VERSION, gpa, 0, 0, 0, 0]);
    let tsc = arch::rdtsc();
    if rc != 0 {
        return Err("the VMM refused our host-call ABI version");
    }
    // SAFETY: the VMM wrote the reply in place; read it volatile.
    let reply = unsafe { core::ptr::read_volatile(&reply) };
    TSC0.store(tsc, Ordering::Relaxed);
    REALTIME0.store(reply.realtime_ns, Ordering::Relaxed);
    MONOTONIC0.store(reply.monotonic_ns, Ordering::Relaxed);
    Ok(())
}

fn as_bytes(r: &HelloReply) -> &[u8] {
    // SAFETY: HelloReply is repr(C) plain data of two u64s.
    unsafe {
        core::slice::from_raw_parts(r as *const HelloReply as *const u8, size_of::<HelloReply>())
    }
}

/// Nanoseconds since boot calibration.
fn elapsed_ns() -> u64 {
    tsc_to_ns(arch::rdtsc().wrapping_sub(TSC0.load(Ordering::Relaxed)))
}

/// `CLOCK_MONOTONIC` in ns.
pub fn monotonic_ns() -> u64 {
    MONOTONIC0.load(Ordering::Relaxed) + elapsed_ns()
}

/// `CLOCK_REALTIME` in ns.
pub fn realtime_ns() -> u64 {
    REALTIME0.load(Ordering::Relaxed) + elapsed_ns()
}

/// Nanoseconds since boot (`/proc/uptime`, `sysinfo`).
pub fn uptime_ns() -> u64 {
    elapsed_ns()
}

/// A TSC interval in ns.
pub fn tsc_to_ns(ticks: u64) -> u64 {
    (u128::from(ticks) * 1_000_000 / u128::from(TSC_KHZ.load(Ordering::Relaxed))) as u64
}

/// The TSC rate in kHz.
pub fn tsc_khz() -> u64 {
    TSC_KHZ.load(Ordering::Relaxed)
}
