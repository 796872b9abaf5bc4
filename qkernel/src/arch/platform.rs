//! The platform layer (PLATFORM.md, "Hosts with hardware virtualization"):
//! everything that differs between our paravirtual hypervisor's native
//! mode and a real ring 0 is decided here: detection, where CR2 comes from,
//! the U bit on kernel pages, TSC rate, TLB flushing.

use qlib::layout::DIRECT_MAP;

/// The platform the kernel runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// The paravirtual hypervisor's native supervisor mode (opted in).
    PvmNative,
}

/// MSR reading the TSC rate in kHz (PVM hosts).
const MSR_TSC_KHZ: u32 = 0x4b56_4d13;

/// Decides the platform from the boot probe's result. `native` is 1 when
/// the probe found the hypervisor and the opt-in was made.
pub fn detect(native: u64) -> Result<Platform, &'static str> {
    if native == 1 {
        Ok(Platform::PvmNative)
    } else {
        Err(
            "native mode unavailable: MSR 0x4b564d11 does not identify the paravirtual \
             hypervisor (PLATFORM.md); kernels in real ring 0 (VMX/SVM hosts) are not \
             supported yet",
        )
    }
}

impl Platform {
    /// The faulting address of the last #PF. In native mode the hypervisor
    /// stores it at PV page + 8 (opt-in bit 4), which is cheaper than a
    /// trapping `mov from cr2`.
    pub fn fault_address(self) -> u64 {
        let pv = super::percpu::pv_page_gpa(super::percpu::this().id());
        let p = (DIRECT_MAP + pv + 8) as *const u64;
        // SAFETY: the PV page is reserved guest RAM mapped by the direct
        // map; the hypervisor writes it, so read it volatile.
        unsafe { p.read_volatile() }
    }

    /// TSC ticks per millisecond.
    pub fn tsc_khz(self) -> u64 {
        // SAFETY: this MSR exists on the PVM hypervisor (checked by detect).
        unsafe { super::rdmsr(MSR_TSC_KHZ) }
    }
}
