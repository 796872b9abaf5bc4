//! Architecture code: boot, descriptor tables, entry/exit, and the small
//! platform layer. Unsafe CPU access is gathered here.

pub mod boot;
pub mod cpu;
pub mod entry;
pub mod fpu;
pub mod kstack;
pub mod percpu;
pub mod platform;
pub mod switch;
pub mod user_return;

use core::arch::asm;

/// Reads the time-stamp counter.
#[inline]
pub fn rdtsc() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: rdtsc has no side effects and is allowed (native mode).
    unsafe { asm!("rdtsc", out("eax") lo, out("edx") hi, options(nomem, nostack)) };
    (u64::from(hi) << 32) | u64::from(lo)
}

/// Reads an MSR.
///
/// # Safety
/// The MSR must exist (otherwise #GP).
pub unsafe fn rdmsr(msr: u32) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: the caller guarantees the MSR exists.
    unsafe { asm!("rdmsr", in("ecx") msr, out("eax") lo, out("edx") hi, options(nomem, nostack)) };
    (u64::from(hi) << 32) | u64::from(lo)
}

/// Writes a 32-bit value to an I/O port: the host-call doorbell.
///
/// # Safety
/// The port's handler must be prepared for the value.
#[inline]
pub unsafe fn outl(port: u16, value: u32) {
    // SAFETY: the caller guarantees the write is meaningful; the VMM reads
    // guest memory named by it, hence no `nomem`.
    unsafe {
        asm!("out dx, eax", in("dx") port, in("eax") value, options(nostack, preserves_flags))
    };
}

/// Sets the FS base (user TLS).
pub fn set_fs_base(base: u64) {
    // SAFETY: CR4.FSGSBASE is set at boot; the kernel does not use FS.
    unsafe { asm!("wrfsbase {0}", in(reg) base, options(nostack, preserves_flags)) };
}

/// Reads the FS base.
pub fn fs_base() -> u64 {
    let v: u64;
    // SAFETY: CR4.FSGSBASE is set at boot.
    unsafe { asm!("rdfsbase {0}", out(reg) v, options(nomem, nostack, preserves_flags)) };
    v
}

/// `MSR_KERNEL_GS_BASE`.
const MSR_KERNEL_GS_BASE: u32 = 0xC000_0102;

/// Sets the program's GS base. On this hypervisor the guest kernel and
/// user mode have separate GS bases (measured, docs/smp.md): user mode
/// runs with `MSR_KERNEL_GS_BASE` (as if the hypervisor did `swapgs` on
/// the way out and back), the kernel's persists across user mode. So the
/// program's is the MSR (a trapping `wrmsr`, only on `arch_prctl` and on a
/// switch to a task with another GS base).
pub fn set_gs_base(base: u64) {
    let cpu = percpu::this();
    if cpu
        .user_gs
        .swap(base, core::sync::atomic::Ordering::Relaxed)
        == base
    {
        return;
    }
    // SAFETY: KERNEL_GS_BASE exists on x86-64; the kernel itself never
    // reads it (its GS base is its PerCpu).
    unsafe { wrmsr(MSR_KERNEL_GS_BASE, base) };
}

/// The program's GS base (see [`set_gs_base`]): the value the kernel last
/// gave it, never the MSR (a `rdmsr` traps, ~20 µs here, and a task
/// switch needs the value). A program could change it itself only with
/// `wrgsbase`, which Linux's ABI allows only when `AT_HWCAP2` has
/// `HWCAP2_FSGSBASE`; the loader never sets that bit (docs/threads.md,
/// "The GS base").
pub fn gs_base() -> u64 {
    percpu::this()
        .user_gs
        .load(core::sync::atomic::Ordering::Relaxed)
}

/// Makes the MSR agree with [`gs_base`]'s cache (0) on a vCPU that has
/// just come up, whatever the hypervisor left in it.
pub fn reset_gs_base() {
    percpu::this()
        .user_gs
        .store(0, core::sync::atomic::Ordering::Relaxed);
    // SAFETY: KERNEL_GS_BASE exists on x86-64; the kernel never reads it.
    unsafe { wrmsr(MSR_KERNEL_GS_BASE, 0) };
}

/// Writes an MSR.
///
/// # Safety
/// The MSR must exist and the value must be valid for it.
pub unsafe fn wrmsr(msr: u32, value: u64) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        asm!("wrmsr", in("ecx") msr, in("eax") value as u32, in("edx") (value >> 32) as u32,
             options(nostack, preserves_flags))
    };
}

/// Reads CR3.
pub fn cr3() -> u64 {
    let v: u64;
    // SAFETY: reading CR3 has no side effects.
    unsafe { asm!("mov {0}, cr3", out(reg) v, options(nomem, nostack, preserves_flags)) };
    v
}

/// Reloads CR3 with its current value: flushes the TLB (batched TLB work
/// only; ~40 µs here).
/// Tasks on secondary vCPUs that use this address space are taken back
/// first (`task::offload::shootdown`).
pub fn flush_tlb() {
    crate::stats::flush();
    let v = cr3();
    crate::task::offload::shootdown(v);
    // SAFETY: writing back the current page-table root changes no mapping.
    unsafe { asm!("mov cr3, {0}", in(reg) v, options(nostack, preserves_flags)) };
}

/// A 64-bit random number from RDRAND, if the CPU has it and it succeeds.
pub fn rdrand() -> Option<u64> {
    for _ in 0..10 {
        let v: u64;
        let ok: u8;
        // SAFETY: only called when CPUID reported RDRAND (see random.rs).
        unsafe {
            asm!("rdrand {0}", "setc {1}", out(reg) v, out(reg_byte) ok, options(nomem, nostack))
        };
        if ok != 0 {
            return Some(v);
        }
    }
    None
}

/// CPUID leaf `leaf`, subleaf 0: (eax, ebx, ecx, edx).
pub fn cpuid(leaf: u32) -> (u32, u32, u32, u32) {
    let r = core::arch::x86_64::__cpuid_count(leaf, 0);
    (r.eax, r.ebx, r.ecx, r.edx)
}

/// Resets the program's FPU/SSE/AVX registers to their initial state
/// (`execve`). The kernel itself uses no FPU, SSE or AVX register.
pub fn reset_fpu() {
    fpu::reset();
}

/// Whether `addr` may be a thread's FS or GS base: below Linux's
/// `TASK_SIZE_MAX` (the lower half less its last page). `arch_prctl` and
/// `clone(CLONE_SETTLS)` refuse others with EPERM, as Linux does: loading
/// a non-canonical base would fault in the kernel.
pub fn user_base_ok(addr: u64) -> bool {
    addr < 0x0000_7fff_ffff_f000
}
