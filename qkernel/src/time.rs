//! Clocks from the TSC, calibrated at boot: the rate comes from the
//! platform (MSR 0x4b564d13 here), the epoch from one host call. The
//! parameters live in the vvar page (`crate::vdso`), which programs' vDSO
//! reads too: both compute every clock with `qlib::vvar`'s formula, so a
//! program mixing the syscall and the vDSO sees one clock.

use core::sync::atomic::{AtomicU64, Ordering};

use qlib::abi::{ABI_VERSION, Call, HelloReply};

use crate::arch::{self, platform::Platform};
use crate::{hostcall, vdso};
use qlib::vvar;

static TSC_KHZ: AtomicU64 = AtomicU64::new(1);

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
    vdso::set_clock(
        tsc,
        vvar::mult_for_khz(khz),
        vvar::SHIFT,
        reply.monotonic_ns,
        reply.realtime_ns,
    );
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
    vdso::read().elapsed_ns(arch::rdtsc())
}

/// `CLOCK_MONOTONIC` in ns.
pub fn monotonic_ns() -> u64 {
    let v = vdso::read();
    v.ns_at(v.mono_base, arch::rdtsc())
}

/// `CLOCK_REALTIME` in ns.
pub fn realtime_ns() -> u64 {
    let v = vdso::read();
    v.ns_at(v.real_base, arch::rdtsc())
}

/// Nanoseconds since boot (`/proc/uptime`, `sysinfo`).
pub fn uptime_ns() -> u64 {
    elapsed_ns()
}

/// A TSC interval in ns.
pub fn tsc_to_ns(ticks: u64) -> u64 {
    let v = vdso::read();
    vvar::ticks_to_ns(ticks, v.mult, v.shift)
}

/// The TSC rate in kHz.
pub fn tsc_khz() -> u64 {
    TSC_KHZ.load(Ordering::Relaxed)
}
