//! Kernel entry and exit: the `syscall` entry at LSTAR, the exception stubs,
//! and the two ways back to user mode.
//!
//! Both entries build a [`TrapFrame`] on the kernel stack. There is one way
//! back to user mode, the first entry included: `sysretq` (one trap; the
//! hypervisor switches CR3 back to the user PGD, opt-in bit 2, and leaves
//! supervisor mode). A return that must restore RCX and R11 too (after an
//! exception, `rt_sigreturn`, `execve`, the first entry) `sysretq`s to the
//! return stub of `user_return`. There is no `iretq` to user mode: on this
//! hypervisor `mov cr3, user_pgd` + `iretq` leaves the vCPU in supervisor
//! mode, so the program could run privileged instructions (`mov cr3`,
//! `out`, `hlt`) until its next syscall.
//!
//! Per-CPU values live in `percpu::PERCPU[k]`: the syscall entry of vCPU k
//! (its own LSTAR) addresses them RIP-relative, the exception entry finds
//! k from its entry stack; both then point GS base at them for the kernel
//! and put the program's GS base back on the way out.

use core::arch::global_asm;

/// Registers of the interrupted user context, as the entry code saves them.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct TrapFrame {
    pub r15: u64,
    pub r14: u64,
    pub r13: u64,
    pub r12: u64,
    pub r11: u64,
    pub r10: u64,
    pub r9: u64,
    pub r8: u64,
    pub rbp: u64,
    pub rdi: u64,
    pub rsi: u64,
    pub rdx: u64,
    pub rcx: u64,
    pub rbx: u64,
    pub rax: u64,
    /// Exception vector, or `u64::MAX` for a syscall.
    pub vector: u64,
    pub error: u64,
    pub rip: u64,
    pub cs: u64,
    pub rflags: u64,
    pub rsp: u64,
    pub ss: u64,
}

use super::percpu::{MAX_CPUS, OFF_KSTACK_TOP, OFF_SCRATCH_RSP, PERCPU_SIZE};

unsafe extern "C" {
    /// The 32 exception stubs, in vector order.
    pub static EXCEPTION_STUBS: [u64; 32];
    /// The kick interrupt's stub (`qlib::abi::KICK_VECTOR`).
    pub fn kick_stub();
    fn return_via_sysret(frame: *const TrapFrame) -> !;
}

/// Leaves the kernel for user mode with the registers in `frame`, by the
/// same `sysretq` as every return from a syscall or an exception.
///
/// # Safety
/// `frame` must hold a user context ready for `sysretq`: a lower-half RIP
/// (`trap::prepare_return` makes it so), and the active address space must
/// be the one `frame` belongs to. The frame is copied onto the kernel
/// stack top, so it may live anywhere.
pub unsafe fn enter_user(frame: &TrapFrame) -> ! {
    // SAFETY: the caller guarantees the frame; the asm never returns.
    unsafe { return_via_sysret(frame) }
}

global_asm!(
    r#"
.macro PUSH_GPRS
    push rax
    push rbx
    push rcx
    push rdx
    push rsi
    push rdi
    push rbp
    push r8
    push r9
    push r10
    push r11
    push r12
    push r13
    push r14
    push r15
.endm
.macro POP_GPRS_BUT_RAX
    pop r15
    pop r14
    pop r13
    pop r12
    pop r11
    pop r10
    pop r9
    pop r8
    pop rbp
    pop rdi
    pop rsi
    pop rdx
    pop rcx
    pop rbx
.endm
.macro POP_GPRS
    POP_GPRS_BUT_RAX
    pop rax
.endm
/* Back to user mode with sysretq from a TrapFrame at rsp: rcx = its rip,
   r11 = its rflags (after an exception, rip is the return stub's). The
   program's GS base goes back first (the kernel's is the PerCpu). */
.macro SYSRET
    POP_GPRS
    mov rcx, [rsp + 16]
    mov r11, [rsp + 32]
    mov rsp, [rsp + 40]
    sysretq
.endm

/* vCPU k's syscall entry (its LSTAR): PERCPU[k] is RIP-relative. */
.macro SYSCALL_ENTRY k
.global syscall_entry_\k
syscall_entry_\k:
    mov [rip + PERCPU + \k * {pcs} + {off_scratch}], rsp
    mov rsp, [rip + PERCPU + \k * {pcs} + {off_kstack}]
    push 0x2b
    push qword ptr [rip + PERCPU + \k * {pcs} + {off_scratch}]
    push r11
    push 0x33
    push rcx
    push 0
    push -1
    PUSH_GPRS
    lea rbx, [rip + PERCPU + \k * {pcs}]
    jmp syscall_common
.endm

.section .text
SYSCALL_ENTRY 0
SYSCALL_ENTRY 1
SYSCALL_ENTRY 2
SYSCALL_ENTRY 3
SYSCALL_ENTRY 4
SYSCALL_ENTRY 5
SYSCALL_ENTRY 6
SYSCALL_ENTRY 7

/* rbx = this vCPU's PerCpu (rbx is saved in the frame). */
syscall_common:
    wrgsbase rbx
    cld
    mov rdi, rsp
    call syscall_handler
    SYSRET

/* An exception came from user mode iff we are on a user entry stack
   (TSS.RSP0 of vCPU k, the first half of ENTRY_STACKS[k]): decided by the
   stack, which the program cannot forge, not by the saved CS, which sits
   in user-writable memory; the stack also names the vCPU. From user mode,
   the vector, error code and hardware frame move to the kernel stack
   before anything else is saved, and CS/SS are forced to the user
   selectors. */
exception_common:
    push rax
    push rcx
    lea rax, [rip + ENTRY_STACKS]
    mov rcx, rsp
    sub rcx, rax
    jb exc_from_kernel
    cmp rcx, {max_cpus} * {entry_size}
    jae exc_from_kernel
    test rcx, 4096
    jnz exc_from_kernel
    shr rcx, 13
    imul rcx, rcx, {pcs}
    lea rax, [rip + PERCPU]
    add rcx, rax
    mov rax, rsp
    mov rsp, [rcx + {off_kstack}]
    push qword ptr [rax + 64]
    push qword ptr [rax + 56]
    push qword ptr [rax + 48]
    push qword ptr [rax + 40]
    push qword ptr [rax + 32]
    push qword ptr [rax + 24]
    push qword ptr [rax + 16]
    mov qword ptr [rsp + 24], 0x33
    mov qword ptr [rsp + 48], 0x2b
    /* PUSH_GPRS, with the program's rax and rcx from the entry stack. */
    push qword ptr [rax + 8]
    push rbx
    push qword ptr [rax]
    push rdx
    push rsi
    push rdi
    push rbp
    push r8
    push r9
    push r10
    push r11
    push r12
    push r13
    push r14
    push r15
    wrgsbase rcx
    cld
    mov rdi, rsp
    mov esi, 1
    call exception_handler
    SYSRET

exc_from_kernel:
    pop rcx
    pop rax
    PUSH_GPRS
    cld
    mov rdi, rsp
    xor esi, esi
    call exception_handler
    POP_GPRS
    add rsp, 16
    iretq

/* rdi = &TrapFrame of a user context (the first entry): it is copied to
   the top of the kernel stack and left with the one sysretq exit. The
   frame may lie on that stack just below its destination (kmain's, on
   the boot stack): then the copy runs backwards so that it does not
   overwrite what it has still to read. */
.global return_via_sysret
return_via_sysret:
    mov rsi, rdi
    mov rsp, qword ptr gs:[{off_kstack}]
    sub rsp, {frame_size}
    mov rdi, rsp
    mov ecx, {frame_size} / 8
    cld
    cmp rdi, rsi
    jbe 7f
    lea rsi, [rsi + {frame_size} - 8]
    lea rdi, [rdi + {frame_size} - 8]
    std
7:
    rep movsq
    cld
/* The TrapFrame at the top of the kernel stack (a new task's first run,
   `ret_from_fork`, comes here too). */
.global sysret_stack_top_frame
sysret_stack_top_frame:
    mov rsp, qword ptr gs:[{off_kstack}]
    sub rsp, {frame_size}
    SYSRET

.macro EXC_NOERR n
exc_stub_\n:
    push 0
    push \n
    jmp exception_common
.endm
.macro EXC_ERR n
exc_stub_\n:
    push \n
    jmp exception_common
.endm

.section .text
EXC_NOERR 0
EXC_NOERR 1
EXC_NOERR 2
EXC_NOERR 3
EXC_NOERR 4
EXC_NOERR 5
EXC_NOERR 6
EXC_NOERR 7
EXC_ERR 8
EXC_NOERR 9
EXC_ERR 10
EXC_ERR 11
EXC_ERR 12
EXC_ERR 13
EXC_ERR 14
EXC_NOERR 15
EXC_NOERR 16
EXC_ERR 17
EXC_NOERR 18
EXC_NOERR 19
EXC_NOERR 20
EXC_ERR 21
EXC_NOERR 22
EXC_NOERR 23
EXC_NOERR 24
EXC_NOERR 25
EXC_NOERR 26
EXC_NOERR 27
EXC_NOERR 28
EXC_ERR 29
EXC_ERR 30
EXC_NOERR 31

/* The vCPU kick (qlib::abi::KICK_VECTOR): an external interrupt the VMM
   injects; it enters like an exception without an error code. */
.global kick_stub
kick_stub:
    push 0
    push 0x20
    jmp exception_common

.section .rodata
.align 8
.global EXCEPTION_STUBS
EXCEPTION_STUBS:
    .quad exc_stub_0, exc_stub_1, exc_stub_2, exc_stub_3
    .quad exc_stub_4, exc_stub_5, exc_stub_6, exc_stub_7
    .quad exc_stub_8, exc_stub_9, exc_stub_10, exc_stub_11
    .quad exc_stub_12, exc_stub_13, exc_stub_14, exc_stub_15
    .quad exc_stub_16, exc_stub_17, exc_stub_18, exc_stub_19
    .quad exc_stub_20, exc_stub_21, exc_stub_22, exc_stub_23
    .quad exc_stub_24, exc_stub_25, exc_stub_26, exc_stub_27
    .quad exc_stub_28, exc_stub_29, exc_stub_30, exc_stub_31

/* vCPU k's LSTAR (boot.rs loads it on the secondary vCPUs). */
.global SYSCALL_ENTRIES
SYSCALL_ENTRIES:
    .quad syscall_entry_0, syscall_entry_1, syscall_entry_2, syscall_entry_3
    .quad syscall_entry_4, syscall_entry_5, syscall_entry_6, syscall_entry_7
"#,
    frame_size = const core::mem::size_of::<TrapFrame>(),
    pcs = const PERCPU_SIZE,
    off_kstack = const OFF_KSTACK_TOP,
    off_scratch = const OFF_SCRATCH_RSP,
    max_cpus = const MAX_CPUS,
    entry_size = const super::cpu::ENTRY_STACKS_SIZE,
);
const _: () = assert!(MAX_CPUS == 8, "one SYSCALL_ENTRY per vCPU above");

/// Makes the boot stack the kernel stack of the first task, with its
/// overflow canary armed (`arch::kstack`).
pub fn init_kernel_stack() {
    let base = core::ptr::addr_of!(super::boot::BOOT_STACK) as u64;
    // SAFETY: the lowest word of the boot stack, far below kmain's frames.
    unsafe { super::kstack::arm(base) };
    super::switch::set_kernel_stack(base, base + super::boot::BOOT_STACK_SIZE as u64);
}

/// With the debug log on, paints the unused part of the boot stack so
/// that its high water can be reported (`boot_stack_high_water`).
#[inline(never)]
pub fn paint_boot_stack() {
    if !super::kstack::measuring() {
        return;
    }
    let base = core::ptr::addr_of!(super::boot::BOOT_STACK) as u64;
    // A margin for `paint`'s own frame below this one.
    let end = super::kstack::rsp() - 1024;
    // SAFETY: below the live RSP (less a margin for the call) of the boot
    // stack, nothing lives; the canary word is kept.
    unsafe { super::kstack::paint(base, end) };
}

/// Bytes of the boot stack used so far (meaningful after
/// [`paint_boot_stack`]).
pub fn boot_stack_high_water() -> usize {
    let base = core::ptr::addr_of!(super::boot::BOOT_STACK) as u64;
    // SAFETY: the boot stack is a static, always readable.
    unsafe { super::kstack::high_water(base, super::boot::BOOT_STACK_SIZE) }
}
