//! Descriptor tables: GDT (Linux layout, PLATFORM.md), TSS and IDT. They
//! live in `.cpu_entry.*` pages, which every user PGD also maps read-only,
//! because the hypervisor reads them while the user PGD is live.

use core::arch::{asm, global_asm};
use core::ptr::addr_of_mut;

use super::entry::{EXCEPTION_STUBS, kick_stub};

/// Selectors.
pub const KERNEL_CS: u16 = 0x10;
pub const USER_CS: u16 = 0x33;
pub const USER_SS: u16 = 0x2b;
/// Double faults run on IST 1.
const DF_IST: u8 = 1;

global_asm!(
    r#"
.section .cpu_entry.data, "aw"
.align 16
.global GDT
.global GDT_END
GDT:
    .quad 0
    .quad 0x00cf9b000000ffff  /* 0x08 kernel CS32 (unused) */
    .quad 0x00af9b000000ffff  /* 0x10 kernel CS64 */
    .quad 0x00cf93000000ffff  /* 0x18 kernel DS */
    .quad 0x00cffb000000ffff  /* 0x20 user CS32 (0x23) */
    .quad 0x00cff3000000ffff  /* 0x28 user DS (0x2b) */
    .quad 0x00affb000000ffff  /* 0x30 user CS64 (0x33) */
    .quad 0
    .quad 0, 0                /* 0x40 TSS, filled by init() */
GDT_END:
"#
);

/// The 64-bit TSS: 104 bytes, only RSP0 and IST1 used.
#[repr(C, packed(4))]
struct Tss {
    _reserved0: u32,
    rsp: [u64; 3],
    _reserved1: u64,
    ist: [u64; 7],
    _reserved2: u64,
    _reserved3: u16,
    iomap_base: u16,
}
const _: () = assert!(core::mem::size_of::<Tss>() == 104);

/// Loaded by the boot code (`boot.rs`) before the opt-in.
#[unsafe(no_mangle)]
#[unsafe(link_section = ".cpu_entry.data")]
static mut KERNEL_TSS: Tss = Tss {
    _reserved0: 0,
    rsp: [0; 3],
    _reserved1: 0,
    ist: [0; 7],
    _reserved2: 0,
    _reserved3: 0,
    // No I/O bitmap: user-mode port I/O faults.
    iomap_base: 104,
};

#[repr(C, align(4096))]
struct Idt([u64; 512]);

#[unsafe(link_section = ".cpu_entry.idt")]
static mut IDT: Idt = Idt([0; 512]);

/// The entry stacks. The hypervisor pushes the exception frame of an
/// exception from user mode through the *user* PGD (measured: with RSP0 in
/// kernel-only memory, delivery escalates to a triple fault), so RSP0 and
/// IST1 point into these pages, which every user PGD maps. The entry code
/// moves the frame to the kernel stack at once; nothing else lives here.
#[repr(C, align(4096))]
pub struct EntryStacks {
    /// RSP0: exceptions from user mode.
    pub user: [u8; 4096],
    /// IST1: double faults.
    pub double_fault: [u8; 4096],
}

/// The entry stacks (one vCPU).
#[unsafe(no_mangle)]
#[unsafe(link_section = ".cpu_entry.stack")]
pub static mut ENTRY_STACKS: EntryStacks = EntryStacks {
    user: [0; 4096],
    double_fault: [0; 4096],
};

/// Writes interrupt gate `vector` of `idt`: `stub`, privilege `dpl`, stack
/// `ist` (0: none).
///
/// # Safety
/// `idt` must point to the IDT and nothing may be using the gate.
unsafe fn set_gate(idt: *mut Idt, vector: usize, stub: u64, dpl: u64, ist: u64) {
    let low = (stub & 0xffff)
        | (u64::from(KERNEL_CS) << 16)
        | (ist << 32)
        | ((0x8e | (dpl << 5)) << 40)
        | (((stub >> 16) & 0xffff) << 48);
    // SAFETY: the caller guarantees `idt` is the IDT, unused meanwhile;
    // vector < 256 and the table has 512 words.
    unsafe {
        (*idt).0[vector * 2] = low;
        (*idt).0[vector * 2 + 1] = stub >> 32;
    }
}

#[repr(C, packed)]
struct DescriptorPtr {
    limit: u16,
    base: u64,
}

/// Completes the TSS (the boot code loaded it) and installs the full IDT.
pub fn init() {
    // SAFETY: runs once at boot on the only vCPU, before anything else
    // reads these tables; the raw pointers come from statics.
    unsafe {
        let tss = addr_of_mut!(KERNEL_TSS);
        let stacks = addr_of_mut!(ENTRY_STACKS) as u64;
        (*tss).rsp[0] = stacks + 4096;
        (*tss).ist[usize::from(DF_IST) - 1] = stacks + 8192;

        let idt = addr_of_mut!(IDT);
        for (vector, &stub) in EXCEPTION_STUBS.iter().enumerate() {
            // Breakpoint and overflow may be raised from user mode (int3).
            let dpl: u64 = if vector == 3 || vector == 4 { 3 } else { 0 };
            let ist: u64 = if vector == 8 { u64::from(DF_IST) } else { 0 };
            set_gate(idt, vector, stub, dpl, ist);
        }
        // The kick: DPL 0, so a program's `int 0x20` is a #GP, not a kick.
        let kick = usize::from(qlib::abi::KICK_VECTOR);
        set_gate(idt, kick, kick_stub as *const () as u64, 0, 0);
        let ptr = DescriptorPtr {
            limit: (256 * 16 - 1) as u16,
            base: idt as u64,
        };
        asm!("lidt [{0}]", in(reg) &ptr, options(readonly, nostack, preserves_flags));
    }
}
