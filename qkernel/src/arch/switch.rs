//! Kernel context switch between tasks on the one vCPU.
//!
//! [`switch_to`] saves the callee-saved registers on the current kernel
//! stack, stores RSP through `prev_rsp`, loads `next_rsp` and pops the next
//! task's registers: it returns in the next task, where that task last
//! called `switch_to` (or in [`ret_from_fork`] for a new one). Everything
//! else a switch changes (the kernel stack top used at entry, CR3, FS/GS
//! base, FPU state) is done around it by `task::sched`.

use core::arch::global_asm;

unsafe extern "C" {
    /// Saves the current context, stores its RSP at `*prev_rsp` and
    /// resumes the context saved at `next_rsp`.
    fn switch_stacks(prev_rsp: *mut u64, next_rsp: u64);
    /// Where a new task's first switch lands: it finishes the switch
    /// (`task::sched::finish_switch`) and returns to user mode with the
    /// `TrapFrame` at the top of its kernel stack (through
    /// `sysret_stack_top_frame`, the one exit of `arch::entry`).
    pub fn ret_from_fork();
    /// Calls `f` with RSP at `top` and returns on the caller's stack.
    fn call_with_stack(top: u64, f: extern "C" fn());
}

global_asm!(
    r#"
.section .text
.global switch_stacks
switch_stacks:
    push rbp
    push rbx
    push r12
    push r13
    push r14
    push r15
    mov [rdi], rsp
    mov rsp, rsi
    pop r15
    pop r14
    pop r13
    pop r12
    pop rbx
    pop rbp
    ret

.global ret_from_fork
ret_from_fork:
    call task_first_run
    jmp sysret_stack_top_frame

.global call_with_stack
call_with_stack:
    push rbp
    mov rbp, rsp
    mov rsp, rdi
    call rsi
    mov rsp, rbp
    pop rbp
    ret
"#
);

/// Runs `f` on the stack whose (16-byte aligned) top is `top`, then
/// returns on the current stack: for deep kernel work that may be reached
/// from any task's small kernel stack.
///
/// # Safety
///
/// `top` must be the 16-byte aligned end of memory that nothing else uses
/// while `f` runs (no other call of this on the same stack is in flight)
/// and large enough for `f`; `f` must not switch tasks.
pub unsafe fn on_stack(top: u64, f: extern "C" fn()) {
    // SAFETY: guaranteed by the caller; the asm keeps the caller's RSP in
    // RBP (callee-saved, so `f` preserves it) and restores both.
    unsafe { call_with_stack(top, f) }
}

/// Callee-saved registers [`switch_stacks`] pops, below the return address.
pub const SWITCH_FRAME_WORDS: usize = 6;

/// Switches kernel stacks (module doc).
///
/// # Safety
/// `prev_rsp` must be writable; `next_rsp` must be an RSP saved by this
/// function (or laid out like one, returning to [`ret_from_fork`]) whose
/// stack is still allocated. No spin lock may be held.
pub unsafe fn switch_to(prev_rsp: *mut u64, next_rsp: u64) {
    // SAFETY: guaranteed by the caller; the asm preserves the callee-saved
    // registers and the rest are clobbered as for any extern "C" call.
    unsafe { switch_stacks(prev_rsp, next_rsp) }
}

pub use super::fpu::FpuState;

/// Sets the kernel stack this vCPU's entry code switches to: its top,
/// and its lowest word (the canary `arch::kstack` checks).
pub fn set_kernel_stack(base: u64, top: u64) {
    let cpu = super::percpu::this();
    cpu.kstack_top
        .store(top, core::sync::atomic::Ordering::Relaxed);
    cpu.kstack_base
        .store(base, core::sync::atomic::Ordering::Relaxed);
}

/// The kernel stack top this vCPU's entry code switches to.
pub fn kernel_stack_top() -> u64 {
    super::percpu::this()
        .kstack_top
        .load(core::sync::atomic::Ordering::Relaxed)
}
