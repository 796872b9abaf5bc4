//! Returning from an exception to user mode with `sysretq` instead of
//! `mov cr3` + `iretq`.
//!
//! On this hypervisor `sysretq` is one trap that also switches to the user
//! PGD (opt-in bit 2), while `mov cr3` and `iretq` were two (PLATFORM.md):
//! a user page fault measured 15.6 µs with them and 8.9 µs with `sysretq`.
//! (`iretq` is gone altogether: it left the hypervisor in supervisor mode.) But `sysretq` takes RIP from RCX and RFLAGS from
//! R11, which the interrupted program still owns. So the kernel saves the
//! program's RCX, R11 and RIP in the return page's slots and `sysretq`s to
//! the stub at the top of the same page, which reloads them and jumps:
//!
//! ```text
//!   USER_RETURN_VA + 0x000:  mov rcx, [rip + slot 0]   48 8b 0d f9 07 00 00
//!                  + 0x007:  mov r11, [rip + slot 1]   4c 8b 1d fa 07 00 00
//!                  + 0x00e:  jmp [rip + slot 2]        ff 25 fc 07 00 00
//!                  + 0x800:  slots: rcx, r11, rip
//! ```
//!
//! **One stub and one set of slots per vCPU**, in the same page: vCPU
//! `k`'s stub is at `k * 0x20` and its slots at `0x800 + k * 0x20`, so
//! every copy of the stub has the same RIP-relative displacements and
//! two vCPUs returning at once never share slots (docs/smp.md).
//!
//! No flag changes after `sysretq` has set RFLAGS, and no user memory (the
//! stack, its red zone) is touched. The kick interrupt may stop the
//! program inside the stub: [`finish_stub`] then completes it in the frame. The page is one page of the kernel
//! image, mapped read+execute at [`USER_RETURN_VA`] in the user address
//! space (the free page between the stack top and the end of user space);
//! it is not a user frame, so hibernation and reclaim never move it. It
//! lies above `USER_END`, so the program can neither unmap, replace nor
//! write it. Only the kick interrupt runs between `sysretq` and the stub's
//! last load, and it lands on the same vCPU, whose stub the RIP names.

use qlib::pte::NO_EXEC;

use crate::arch::entry::TrapFrame;
use crate::arch::percpu::{self, MAX_CPUS};
use crate::mm::addr_space::AddrSpace;
use crate::mm::kva_to_gpa;

/// Where the return page is mapped in every user address space: above
/// `USER_END`, out of reach of the program's `munmap`/`mprotect`/`mmap`.
pub use qlib::layout::USER_RETURN_VA;

/// Offset of vCPU 0's slots in the page.
const SLOTS: usize = 0x800;
/// Distance between two vCPUs' stubs (and between their slots).
const STRIDE: usize = 0x20;

// Every vCPU's stub fits below the slots, and its slots in the page.
const _: () = assert!(STRIDE * MAX_CPUS <= SLOTS && SLOTS + STRIDE * MAX_CPUS <= 4096);
const _: () = assert!(STUB.len() <= STRIDE && 24 <= STRIDE);

/// The stub (module doc): RIP-relative loads of slots 0 and 1 into RCX and
/// R11, then an indirect jump through slot 2.
const STUB: [u8; 20] = [
    0x48, 0x8b, 0x0d, 0xf9, 0x07, 0x00, 0x00, // mov rcx, [rip + 0x7f9]
    0x4c, 0x8b, 0x1d, 0xfa, 0x07, 0x00, 0x00, // mov r11, [rip + 0x7fa]
    0xff, 0x25, 0xfc, 0x07, 0x00, 0x00, // jmp [rip + 0x7fc]
];

// The displacements above are relative to the end of each instruction.
const _: () = assert!(7 + 0x7f9 == SLOTS && 14 + 0x7fa == SLOTS + 8 && 20 + 0x7fc == SLOTS + 16);

#[repr(C, align(4096))]
struct ReturnPage([u8; 4096]);

const fn page() -> ReturnPage {
    let mut p = [0xcc; 4096]; // int3 everywhere but the stubs and slots
    let mut k = 0;
    while k < MAX_CPUS {
        let mut i = 0;
        while i < STUB.len() {
            p[k * STRIDE + i] = STUB[i];
            i += 1;
        }
        let mut j = 0;
        while j < 24 {
            p[SLOTS + k * STRIDE + j] = 0;
            j += 1;
        }
        k += 1;
    }
    ReturnPage(p)
}

static mut RETURN_PAGE: ReturnPage = page();

/// vCPU `k`'s slots.
fn slots(k: usize) -> *mut [u64; 3] {
    // SAFETY: `k < MAX_CPUS`, so the slots lie inside the page (asserted
    // above); only the address is computed here.
    unsafe {
        core::ptr::addr_of_mut!(RETURN_PAGE)
            .cast::<u8>()
            .add(SLOTS + k * STRIDE)
            .cast::<[u64; 3]>()
    }
}

fn page_gpa() -> u64 {
    kva_to_gpa(core::ptr::addr_of!(RETURN_PAGE) as u64)
}

/// Maps the return page into `mm` (read + execute) at [`USER_RETURN_VA`].
pub fn map(mm: &mut AddrSpace) -> Result<(), crate::errno::Errno> {
    use crate::mm::vma::{PROT_EXEC, PROT_READ};
    mm.map_kernel_page(USER_RETURN_VA, page_gpa(), PROT_READ | PROT_EXEC)
}

/// Completes the stub for a program interrupted inside it (the kick
/// interrupt can arrive between `sysretq` and the stub's jump): loads what
/// the stub had still to load from the slots into `frame`, so that the
/// frame is the program's own context and [`prepare`] may reuse the slots.
pub fn finish_stub(frame: &mut TrapFrame) {
    let Some((k, off)) = in_stub(frame.rip) else {
        return;
    };
    // SAFETY: the kick lands on the vCPU that `sysretq`ed into stub `k`,
    // so its `prepare` wrote slots `k` and nothing has written them since
    // (only that vCPU writes them).
    let [rcx, r11, rip] = unsafe { core::ptr::read_volatile(slots(k)) };
    if off < 7 {
        frame.rcx = rcx;
    }
    if off < 14 {
        frame.r11 = r11;
    }
    frame.rip = rip;
}

/// The vCPU whose stub `rip` lies in, and the offset in that stub.
fn in_stub(rip: u64) -> Option<(usize, u64)> {
    let off = rip.wrapping_sub(USER_RETURN_VA);
    let k = (off / STRIDE as u64) as usize;
    let within = off % STRIDE as u64;
    (k < MAX_CPUS && within < STUB.len() as u64).then_some((k, within))
}

/// Zeroes this vCPU's slots (at a task switch). They are only live between
/// [`prepare`] and the stub's last load, which no switch comes between
/// (a kick inside the stub is completed by [`finish_stub`] first), and
/// the page is readable by every process.
pub fn clear_slots() {
    // SAFETY: only this vCPU writes its slots, and no return through its
    // stub is in flight at a task switch.
    unsafe { core::ptr::write_volatile(slots(percpu::this().id()), [0; 3]) };
}

/// [`prepare`] on a secondary vCPU for a context vCPU 0 prepared before
/// (it checked that the address space maps the return page).
pub fn prepare_unchecked(frame: &mut TrapFrame) {
    let k = percpu::this().id();
    // SAFETY: as in `prepare`.
    unsafe { core::ptr::write_volatile(slots(k), [frame.rcx, frame.r11, frame.rip]) };
    frame.rip = USER_RETURN_VA + (k * STRIDE) as u64;
    frame.rflags = (frame.rflags & crate::process::USER_RFLAGS) | 0x202;
}

/// Prepares `frame` for the `sysretq` return: saves the program's RCX, R11
/// and RIP in the slots and points RIP at the stub. False (nothing changed)
/// when `mm` does not map the return page (the loader maps it into every
/// address space, so this does not happen).
pub fn prepare(frame: &mut TrapFrame, mm: &mut AddrSpace) -> bool {
    let pte = mm.pt.get(USER_RETURN_VA);
    if !pte.present() || pte.addr() != page_gpa() || pte.0 & NO_EXEC != 0 {
        return false;
    }
    let k = percpu::this().id();
    // SAFETY: only this vCPU writes slots `k`; they are read only by stub
    // `k`, on this vCPU, after the `sysretq` that follows this call.
    unsafe { core::ptr::write_volatile(slots(k), [frame.rcx, frame.r11, frame.rip]) };
    frame.rip = USER_RETURN_VA + (k * STRIDE) as u64;
    frame.rflags = (frame.rflags & crate::process::USER_RFLAGS) | 0x202;
    true
}
