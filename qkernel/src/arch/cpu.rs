//! Descriptor tables: GDT (Linux layout, PLATFORM.md), TSS and IDT. They
//! live in `.cpu_entry.*` pages, which every user PGD also maps read-only,
//! because the hypervisor reads them while the user PGD is live.

use core::arch::{asm, global_asm};
use core::ptr::addr_of_mut;

use super::entry::{EXCEPTION_STUBS, kick_stub};
use super::percpu::MAX_CPUS;

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
    /* 0x40 + 16 * k: vCPU k's TSS (boot.rs fills vCPU 0's, init() all) */
    .quad 0, 0, 0, 0, 0, 0, 0, 0
    .quad 0, 0, 0, 0, 0, 0, 0, 0
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

const TSS_INIT: Tss = Tss {
    _reserved0: 0,
    rsp: [0; 3],
    _reserved1: 0,
    ist: [0; 7],
    _reserved2: 0,
    _reserved3: 0,
    // No I/O bitmap: user-mode port I/O faults.
    iomap_base: 104,
};

/// One TSS per vCPU; vCPU 0's is loaded by the boot code (`boot.rs`)
/// before the opt-in, the others' by their own boot path.
#[unsafe(no_mangle)]
#[unsafe(link_section = ".cpu_entry.data")]
static mut KERNEL_TSS: [Tss; MAX_CPUS] = [TSS_INIT; MAX_CPUS];

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

/// Bytes of one vCPU's entry stacks.
pub const ENTRY_STACKS_SIZE: usize = core::mem::size_of::<EntryStacks>();
const _: () = assert!(ENTRY_STACKS_SIZE == 8192);

/// The entry stacks, one pair per vCPU (`exception_common` finds the vCPU
/// from them).
#[unsafe(no_mangle)]
#[unsafe(link_section = ".cpu_entry.stack")]
pub static mut ENTRY_STACKS: [EntryStacks; MAX_CPUS] = [const {
    EntryStacks {
        user: [0; 4096],
        double_fault: [0; 4096],
    }
}; MAX_CPUS];

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

/// The IDT's descriptor, for the secondary vCPUs' `lidt` (`boot.rs`).
#[unsafe(no_mangle)]
static mut IDT_PTR: DescriptorPtr = DescriptorPtr { limit: 0, base: 0 };

/// Writes vCPU `k`'s TSS descriptor (available 64-bit TSS) into the GDT.
///
/// # Safety
/// Boot only: the descriptor must not be loaded (`ltr`) yet, or be the
/// boot vCPU's, which `ltr` already marked busy (rewritten identically
/// but for the busy bit, which the CPU does not read again).
unsafe fn set_tss_descriptor(k: usize, tss: u64) {
    unsafe extern "C" {
        static mut GDT: [u64; 24];
    }
    let low = 103
        | ((tss & 0xff_ffff) << 16)
        | (if k == 0 { 0x8b } else { 0x89 } << 40)
        | (((tss >> 24) & 0xff) << 56);
    // SAFETY: the caller guarantees the slot may be written; GDT has 24
    // quadwords and slot 8 + 2k + 1 < 24 for k < MAX_CPUS.
    unsafe {
        let gdt = addr_of_mut!(GDT);
        (*gdt)[8 + 2 * k] = low;
        (*gdt)[8 + 2 * k + 1] = tss >> 32;
    }
}

/// Completes every vCPU's TSS and descriptor (the boot code loaded vCPU
/// 0's) and installs the full IDT.
pub fn init() {
    // SAFETY: runs once at boot on the boot vCPU, before any other vCPU
    // starts or anything else reads these tables; the raw pointers come
    // from statics.
    unsafe {
        for k in 0..MAX_CPUS {
            let tss = addr_of_mut!(KERNEL_TSS[k]);
            let stacks = addr_of_mut!(ENTRY_STACKS[k]) as u64;
            (*tss).rsp[0] = stacks + 4096;
            (*tss).ist[usize::from(DF_IST) - 1] = stacks + 8192;
            set_tss_descriptor(k, tss as u64);
        }

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
        let ptr = addr_of_mut!(IDT_PTR);
        (*ptr).limit = (256 * 16 - 1) as u16;
        (*ptr).base = idt as u64;
        asm!("lidt [{0}]", in(reg) ptr, options(readonly, nostack, preserves_flags));
    }
}
