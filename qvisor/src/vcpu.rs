//! The vCPU: boot state (PLATFORM.md) and the run loop.
//!
//! ```text
//!   Running --KVM_RUN exit: host call--> Serving --Resume--> Running
//!      |                                    |
//!      |                                    +--Exit/Panic/BootError/Fatal--> Stopped
//!      +--shutdown / internal error / unexpected exit--> Stopped(error)
//! ```

use kvm_bindings::{kvm_segment, kvm_sregs};
use kvm_ioctls::{VcpuExit, VcpuFd};
use qlib::abi::HOSTCALL_PORT;

use crate::error::VmmError;
use crate::hostcall::{HostCalls, Outcome};
use crate::kick::Kick;
use crate::kick_inject::{Injected, try_inject};
use crate::smp::Smp;

/// Boot control registers (PLATFORM.md, "How to get into native mode").
const EFER: u64 = 0xD01;
const CR0: u64 = 0x8005_0033;
const CR4: u64 = 0x1_0620;
/// CR4.OSXSAVE: with it the CPUID that KVM shows the program reports
/// OSXSAVE, as Linux's does (see [`enable_xsave`]).
const CR4_OSXSAVE: u64 = 1 << 18;
/// XCR0 components a program may use: x87, SSE, AVX, AVX-512 (opmask,
/// ZMM_Hi256, Hi16_ZMM). Not MPX, not PKRU (`wrpkru` kills the VM here),
/// not AMX (its 8 KiB of tiles do not fit the guest's save area, and
/// Linux too hands it out only on request).
const GUEST_XCR0: u64 = 0xe7;

fn segment(selector: u16, code: bool) -> kvm_segment {
    kvm_segment {
        base: 0,
        limit: 0xffff_ffff,
        selector,
        type_: if code { 0xb } else { 0x3 },
        present: 1,
        dpl: 0,
        db: u8::from(!code),
        s: 1,
        l: u8::from(code),
        g: 1,
        avl: 0,
        unusable: 0,
        padding: 0,
    }
}

/// Puts the vCPU in 64-bit mode at `entry` with `cr3` as page tables and
/// RDI = `id` (the guest's boot code tells vCPU 0 from the others by it).
pub fn set_boot_state(vcpu: &VcpuFd, entry: u64, cr3: u64, id: u64) -> Result<(), VmmError> {
    let mut sregs: kvm_sregs = vcpu.get_sregs().map_err(VmmError::Kvm)?;
    sregs.cs = segment(0x10, true);
    let data = segment(0x18, false);
    sregs.ds = data;
    sregs.es = data;
    sregs.fs = data;
    sregs.gs = data;
    sregs.ss = data;
    sregs.efer = EFER;
    sregs.cr0 = CR0;
    sregs.cr4 = CR4;
    sregs.cr3 = cr3;
    if !enable_xsave(vcpu, &mut sregs) {
        sregs.cr4 = CR4;
        vcpu.set_sregs(&sregs).map_err(VmmError::Kvm)?;
    }
    let regs = kvm_bindings::kvm_regs {
        rip: entry,
        rdi: id,
        rflags: 2,
        ..Default::default()
    };
    vcpu.set_regs(&regs).map_err(VmmError::Kvm)
}

/// Sets CR4.OSXSAVE and the guest's XCR0 to the host's AVX/AVX-512
/// components ([`GUEST_XCR0`]), so that a program sees what it sees on
/// Linux: CPUID's OSXSAVE and, from `xgetbv`, the components it may use.
/// On hosts that fault CPUID in user mode (Intel with CPUID faulting),
/// KVM computes OSXSAVE from the guest's CR4: left clear, the program
/// believes the OS does not support AVX, and glibc, numpy or a JIT fall
/// back to SSE2. Where CPUID runs natively (the AMD hosts) it changes
/// nothing a program sees. Returns false, having changed nothing, when
/// the host has no XSAVE or KVM refuses either register (then the boot
/// goes on without it).
fn enable_xsave(vcpu: &VcpuFd, sregs: &mut kvm_sregs) -> bool {
    let Some(host) = host_xcr0() else {
        return false;
    };
    let xcr0 = host & GUEST_XCR0;
    if xcr0 & 3 != 3 {
        return false;
    }
    let Ok(mut xcrs) = vcpu.get_xcrs() else {
        return false;
    };
    sregs.cr4 = CR4 | CR4_OSXSAVE;
    if vcpu.set_sregs(sregs).is_err() {
        return false;
    }
    xcrs.nr_xcrs = 1;
    xcrs.flags = 0;
    xcrs.xcrs[0].xcr = 0;
    xcrs.xcrs[0].value = xcr0;
    vcpu.set_xcrs(&xcrs).is_ok()
}

/// The host's XCR0, when the host enabled XSAVE.
fn host_xcr0() -> Option<u64> {
    if !std::arch::is_x86_feature_detected!("xsave") {
        return None;
    }
    // SAFETY: the host OS enabled XSAVE (checked above: the detection
    // includes CPUID.OSXSAVE), so `xgetbv` with ECX = 0 is defined; it
    // only reads XCR0.
    Some(unsafe { xgetbv0() })
}

/// `xgetbv` of XCR0.
///
/// # Safety
/// The CPU and OS must support XSAVE (CPUID.OSXSAVE).
#[target_feature(enable = "xsave")]
unsafe fn xgetbv0() -> u64 {
    // SAFETY: the caller guarantees XSAVE support.
    unsafe { std::arch::x86_64::_xgetbv(0) }
}

/// Runs the vCPU until the program exits; returns its status.
/// A secondary vCPU's failure (`smp`) ends it too.
pub fn run(
    vcpu: &mut VcpuFd,
    calls: &mut HostCalls<'_>,
    kick: &Kick,
    smp: &Smp,
) -> Result<i32, VmmError> {
    let exit_flag: *mut u8 = &raw mut vcpu.get_kvm_run().immediate_exit;
    kick.attach(exit_flag);
    let result = run_loop(vcpu, calls, kick, exit_flag, smp);
    kick.detach();
    result
}

fn run_loop(
    vcpu: &mut VcpuFd,
    calls: &mut HostCalls<'_>,
    kick: &Kick,
    exit_flag: *mut u8,
    smp: &Smp,
) -> Result<i32, VmmError> {
    // A kick found the guest kernel running: retried when the timer fires.
    let mut retry = false;
    loop {
        if let Some(e) = smp.take_failure() {
            return Err(e);
        }
        if kick.entering() {
            // SAFETY: exit_flag points into this vCPU's kvm_run mapping.
            unsafe { exit_flag.write_volatile(1) };
        }
        let r = vcpu.run();
        kick.left();
        let exit = match r {
            Ok(exit) => exit,
            // Kicked (`crate::kick`), or another signal reached this thread
            // (e.g. the cgroup freezer waking a thawed task).
            Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => {
                // SAFETY: as above.
                unsafe { exit_flag.write_volatile(0) };
                if (kick.take() || retry) && try_inject(vcpu)? == Injected::NotNow {
                    retry = true;
                    kick.retry_later();
                } else {
                    retry = false;
                }
                continue;
            }
            // A page KVM could not get: a file in the file window that
            // shrank on the host. The guest gets SIGBUS (`file_window`).
            Err(e) => {
                if e.errno() == libc::EFAULT && calls.files_shrank() {
                    continue;
                }
                return Err(VmmError::Vcpu(format!(
                    "KVM_RUN: {e} (fault at {:x?}): {}",
                    memory_fault(vcpu),
                    describe(vcpu)
                )));
            }
        };
        let gpa = match exit {
            VcpuExit::IoOut(HOSTCALL_PORT, data) if data.len() == 4 => {
                u64::from(u32::from_le_bytes(data.try_into().expect("4 bytes")))
            }
            VcpuExit::IoOut(port, _) | VcpuExit::IoIn(port, _) => {
                return Err(VmmError::Vcpu(format!(
                    "port I/O to unknown port {port:#x}"
                )));
            }
            VcpuExit::Shutdown => {
                return Err(VmmError::Vcpu(format!(
                    "guest shut down (triple fault): {}",
                    describe(vcpu)
                )));
            }
            VcpuExit::Hlt => return Err(VmmError::Vcpu("guest halted".into())),
            VcpuExit::InternalError => {
                return Err(VmmError::Vcpu(format!(
                    "KVM internal error (an instruction the emulator refuses?): {}",
                    describe(vcpu)
                )));
            }
            other => return Err(VmmError::Vcpu(format!("unexpected exit {other:?}"))),
        };
        let outcome = calls.serve(gpa);
        // The guest kernel reads the control page after every host call.
        kick.take();
        retry = false;
        match outcome {
            Outcome::Resume => {}
            Outcome::Exit(status) => return Ok(status),
            Outcome::Panic(msg) => return Err(VmmError::GuestPanic(msg)),
            Outcome::BootError(msg) => return Err(VmmError::Boot(msg)),
            Outcome::Fatal(msg) => return Err(VmmError::Hibernation(msg)),
        }
    }
}

/// The GPA KVM reports with an `EFAULT` from `KVM_RUN`
/// (`KVM_EXIT_MEMORY_FAULT`, Linux 6.8 and later), if it does.
fn memory_fault(vcpu: &mut VcpuFd) -> Option<u64> {
    let run = vcpu.get_kvm_run();
    if run.exit_reason != kvm_bindings::KVM_EXIT_MEMORY_FAULT {
        return None;
    }
    // SAFETY: `memory_fault` is the union member KVM fills when it sets
    // this exit reason; any bit pattern is a valid u64.
    Some(unsafe { run.__bindgen_anon_1.memory_fault.gpa })
}

/// The vCPU state worth printing when the guest dies.
pub fn describe(vcpu: &VcpuFd) -> String {
    let regs = vcpu.get_regs().unwrap_or_default();
    let sregs = vcpu.get_sregs().unwrap_or_default();
    format!(
        "rip {:#x} rsp {:#x} rflags {:#x} cs {:#x} cr2 {:#x} cr3 {:#x}",
        regs.rip, regs.rsp, regs.rflags, sregs.cs.selector, sregs.cr2, sregs.cr3
    )
}
