//! Injecting the kick interrupt (`qlib::abi::KICK_VECTOR`) into a vCPU
//! that a kick stopped (`crate::kick`), and retrying when it cannot be
//! injected yet.
//!
//! Measured on this hypervisor (docs/platform-notes.md, "The vCPU kick"):
//! `KVM_INTERRUPT` on a vCPU stopped in user mode is delivered through the
//! guest IDT with the ordinary frame on TSS.RSP0, like an exception. In
//! guest kernel code it is not safe: `ready_for_interrupt_injection` and
//! `KVM_EXIT_IRQ_WINDOW_OPEN` do not follow the guest's IF (the window
//! "opened" in the return trampoline with IF=0 and the user PGD loaded,
//! and an interrupt injected there wedged the vCPU). So the interrupt is
//! injected only when the vCPU stopped at a user-mode RIP with IF=1 and no
//! event in flight; otherwise the vCPU is kicked again shortly
//! (`crate::kick::retry_loop`), by then the kernel has returned to the program (or made a host
//! call, after which it reads the control page anyway).

use std::os::fd::AsRawFd;

use kvm_ioctls::VcpuFd;

use crate::error::VmmError;

/// `KVM_INTERRUPT`: `_IOW(KVMIO, 0x86, struct kvm_interrupt)`.
const KVM_INTERRUPT: libc::c_ulong = 0x4004_ae86;

/// First address of the guest kernel's half; user code runs below it.
const KERNEL_HALF: u64 = 0xffff_8000_0000_0000;

/// RFLAGS.IF.
const IF: u64 = 0x200;

/// What [`try_inject`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Injected {
    /// The interrupt is queued; the guest takes it when it resumes.
    Yes,
    /// The vCPU is in guest kernel code or delivering an event: retry.
    NotNow,
}

/// Injects the kick interrupt if the vCPU (out of `KVM_RUN`) stopped in
/// user mode with nothing else being delivered.
pub fn try_inject(vcpu: &mut VcpuFd) -> Result<Injected, VmmError> {
    if vcpu.get_kvm_run().ready_for_interrupt_injection == 0 {
        return Ok(Injected::NotNow);
    }
    let regs = vcpu.get_regs().map_err(VmmError::Kvm)?;
    if regs.rip >= KERNEL_HALF || regs.rflags & IF == 0 {
        return Ok(Injected::NotNow);
    }
    let ev = vcpu.get_vcpu_events().map_err(VmmError::Kvm)?;
    if ev.exception.injected != 0
        || ev.exception.pending != 0
        || ev.interrupt.injected != 0
        || ev.nmi.injected != 0
    {
        return Ok(Injected::NotNow);
    }
    let irq = kvm_bindings::kvm_interrupt {
        irq: u32::from(qlib::abi::KICK_VECTOR),
    };
    // SAFETY: KVM_INTERRUPT reads one kvm_interrupt from a valid pointer;
    // the fd is this vCPU's.
    let rc = unsafe { libc::ioctl(vcpu.as_raw_fd(), KVM_INTERRUPT, &irq) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(VmmError::Vcpu(format!("KVM_INTERRUPT: {e}")));
    }
    Ok(Injected::Yes)
}
