//! Per-CPU state: one [`PerCpu`] per vCPU in [`PERCPU`], indexed by the
//! vCPU id (0 = the boot vCPU). docs/smp.md.
//!
//! How code finds its own:
//! - **Syscall entry.** LSTAR is per vCPU: vCPU `k` enters at
//!   `syscall_entry_k` (`arch::entry`), which addresses `PERCPU[k]`
//!   RIP-relative (kernel stack top, scratch RSP): no GS at entry, which
//!   the hypervisor does not make reliable (PLATFORM.md).
//! - **Exception entry.** Each vCPU's TSS points at its own entry stacks;
//!   `exception_common` derives `k` from the entry stack it arrived on.
//! - **Kernel code.** The hypervisor keeps the kernel's GS base apart
//!   from user mode's (user mode runs with `MSR_KERNEL_GS_BASE`), so the
//!   kernel's stays `&PERCPU[k]` across user mode; both entries load it
//!   again anyway (`wrgsbase`, native, a few cycles). In the kernel,
//!   [`this`] is one `rdgsbase`. The program's GS base is the MSR
//!   (`arch::gs_base`/`set_gs_base`).

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use qlib::abi::HostCall;
use spin::Mutex;

use crate::process::{Process, ThreadFields};

/// Most vCPUs a sandbox has (the VMM enforces the same bound).
pub const MAX_CPUS: usize = qlib::abi::MAX_VCPUS;

/// GPA of vCPU `k`'s PV page (`qlib::layout::pv_page_gpa`).
pub use qlib::layout::pv_page_gpa;

/// One vCPU's state. The first words are read by the entry code at fixed
/// offsets ([`OFF_KSTACK_TOP`] ...).
#[repr(C, align(64))]
pub struct PerCpu {
    /// Top of the running task's kernel stack, loaded at entry.
    pub kstack_top: AtomicU64,
    /// The user RSP while the syscall entry switches stacks.
    pub scratch_rsp: AtomicU64,
    /// The program's GS base last written to `MSR_KERNEL_GS_BASE`
    /// (`arch::set_gs_base`), to skip rewriting the same value.
    pub user_gs: AtomicU64,
    /// This vCPU's id.
    pub id: AtomicU64,
    /// Lowest word of the running task's kernel stack, its canary
    /// (`arch::kstack`); 0 before the first task.
    pub kstack_base: AtomicU64,
    /// The running task's pid (tid) and thread group id.
    pub current: AtomicU32,
    pub current_tgid: AtomicU32,
    /// The vCPU has booted into native mode and runs its idle loop.
    pub online: AtomicBool,
    /// This vCPU's host-call record (`hostcall`): held across the
    /// doorbell, so never shared between vCPUs.
    pub record: Mutex<HostCall>,
    /// The process of the thread group running on this vCPU
    /// (`process::PROCESS` reaches it).
    pub process: Mutex<Option<Process>>,
    /// The running thread's per-thread fields (`process::thread`).
    pub thread: Mutex<ThreadFields>,
}

/// Offsets the entry assembly uses.
pub const OFF_KSTACK_TOP: usize = core::mem::offset_of!(PerCpu, kstack_top);
pub const OFF_SCRATCH_RSP: usize = core::mem::offset_of!(PerCpu, scratch_rsp);
/// Size of one entry of [`PERCPU`].
pub const PERCPU_SIZE: usize = core::mem::size_of::<PerCpu>();

impl PerCpu {
    const fn new(id: u64) -> Self {
        Self {
            kstack_top: AtomicU64::new(0),
            scratch_rsp: AtomicU64::new(0),
            user_gs: AtomicU64::new(0),
            id: AtomicU64::new(id),
            kstack_base: AtomicU64::new(0),
            current: AtomicU32::new(1),
            current_tgid: AtomicU32::new(1),
            online: AtomicBool::new(false),
            record: Mutex::new(HostCall {
                call: 0,
                args: [0; 6],
                ret: 0,
            }),
            process: Mutex::new(None),
            thread: Mutex::new(ThreadFields::new_thread(0, None)),
        }
    }

    /// This vCPU's id.
    pub fn id(&self) -> usize {
        self.id.load(Ordering::Relaxed) as usize
    }
}

/// Every vCPU's state (only the first `cpus()` are used).
#[unsafe(no_mangle)]
pub static PERCPU: [PerCpu; MAX_CPUS] = [
    PerCpu::new(0),
    PerCpu::new(1),
    PerCpu::new(2),
    PerCpu::new(3),
    PerCpu::new(4),
    PerCpu::new(5),
    PerCpu::new(6),
    PerCpu::new(7),
];

/// Points GS base at `PERCPU[k]`: once per vCPU at boot, before any
/// other use of [`this`].
pub fn install(k: usize) {
    let p = &PERCPU[k] as *const PerCpu as u64;
    // SAFETY: CR4.FSGSBASE is set at boot; from here on the kernel's GS
    // base is this vCPU's PerCpu (the entry code keeps it so).
    unsafe { core::arch::asm!("wrgsbase {0}", in(reg) p, options(nostack, preserves_flags)) };
}

/// The running vCPU's state.
#[inline]
pub fn this() -> &'static PerCpu {
    let p: u64;
    // SAFETY: CR4.FSGSBASE is set at boot; GS base is `&PERCPU[k]` in the
    // kernel (installed at boot, restored by every entry).
    unsafe {
        core::arch::asm!("rdgsbase {0}", out(reg) p, options(nomem, nostack, preserves_flags))
    };
    // SAFETY: GS base is always one of the PERCPU entries in the kernel
    // (see above), which are 'static.
    unsafe { &*(p as *const PerCpu) }
}
