//! The first instructions. They run in KVM's emulator (~1 µs each) until
//! the native-mode opt-in, so this path is short and avoids every
//! instruction the emulator refuses (PLATFORM.md): load the GDT, reload CS,
//! install a #GP gate for the probe, load the TSS, set STAR/LSTAR, probe MSR 0x4b564d11,
//! opt in with MSR 0x4b564d10, then call `kmain(native)` on the boot stack.

use core::arch::global_asm;

use qlib::layout::PV_PAGE_GPA;

/// Opt-in flags: mode follows events and CR3 bit 12 (bit 0), exceptions
/// from user mode switch to the kernel PGD (bit 1), `syscall`/`sysretq`
/// switch PGDs (bit 2), CR2 is stored in the PV page (bit 4).
pub const OPT_IN_FLAGS: u64 = 0x17;

/// Size of the boot stack, which stays the kernel stack of the first task.
pub const BOOT_STACK_SIZE: usize = 64 * 1024;

/// The boot stack's storage: 16-byte aligned as the ABI requires (a
/// byte array alone may land on any address, and code relies on the
/// alignment: `core::fmt` tags odd argument pointers, for one).
#[repr(C, align(16))]
pub struct BootStack(pub [u8; BOOT_STACK_SIZE]);

/// The boot and kernel stack.
#[unsafe(no_mangle)]
pub static mut BOOT_STACK: BootStack = BootStack([0; BOOT_STACK_SIZE]);

/// log2 of a secondary vCPU's boot stack size (16 KiB).
const AP_STACK_SHIFT: u32 = 14;
const AP_STACK_SIZE: usize = 1 << AP_STACK_SHIFT;

/// The secondary vCPUs' boot stacks: vCPU k's top is `AP_STACKS + k *
/// AP_STACK_SIZE` (so slot k - 1; vCPU 0 uses `BOOT_STACK`).
#[repr(C, align(16))]
pub struct ApStacks(pub [[u8; AP_STACK_SIZE]; super::percpu::MAX_CPUS - 1]);

#[unsafe(no_mangle)]
pub static mut AP_STACKS: ApStacks = ApStacks([[0; AP_STACK_SIZE]; super::percpu::MAX_CPUS - 1]);

/// Secondary vCPU `k`'s boot stack (1 <= k < MAX_CPUS): (lowest address,
/// top). It stays its kernel stack (`task::offload`).
pub fn ap_stack(k: usize) -> (u64, u64) {
    let base = core::ptr::addr_of!(AP_STACKS) as u64 + ((k - 1) * AP_STACK_SIZE) as u64;
    (base, base + AP_STACK_SIZE as u64)
}

global_asm!(
    r#"
.section .text.boot, "ax"
.global _start
.code64
_start:
    /* The VMM starts vCPU k > 0 here with RDI = k (smp_start). */
    test rdi, rdi
    jnz smp_start
    lea rsp, [rip + BOOT_STACK + {stack_size}]
    lgdt [rip + GDT_PTR]
    push 0x10
    lea rax, [rip + 1f]
    push rax
    retfq
1:
    mov ax, 0x18
    mov ds, ax
    mov es, ax
    mov ss, ax
    xor eax, eax
    mov fs, ax
    mov gs, ax

    /* A #GP gate (vector 13) in the boot IDT, for the probe. */
    lea rax, [rip + boot_gp_handler]
    lea rdi, [rip + BOOT_IDT + 13 * 16]
    mov word ptr [rdi], ax
    mov word ptr [rdi + 2], 0x10
    mov word ptr [rdi + 4], 0x8e00
    shr rax, 16
    mov word ptr [rdi + 6], ax
    shr rax, 16
    mov dword ptr [rdi + 8], eax
    lidt [rip + BOOT_IDT_PTR]

    /* The TSS (RSP0 = the user entry stack) and its descriptor at 0x40,
       loaded before the opt-in as the hypervisor expects. */
    lea rax, [rip + ENTRY_STACKS + 4096]
    lea rdi, [rip + KERNEL_TSS]
    mov [rdi + 4], rax
    mov rax, rdi
    lea rsi, [rip + GDT + 0x40]
    mov word ptr [rsi], 103
    mov word ptr [rsi + 2], ax
    shr rax, 16
    mov byte ptr [rsi + 4], al
    mov byte ptr [rsi + 5], 0x89
    mov byte ptr [rsi + 6], 0
    mov byte ptr [rsi + 7], ah
    shr rax, 16
    mov dword ptr [rsi + 8], eax
    mov dword ptr [rsi + 12], 0
    mov ax, 0x40
    ltr ax

    /* STAR: kernel CS 0x10, user base 0x23 (CS 0x33, SS 0x2b). LSTAR. */
    mov ecx, 0xC0000081
    xor eax, eax
    mov edx, 0x00230010
    wrmsr
    mov ecx, 0xC0000082
    lea rax, [rip + syscall_entry_0]
    mov rdx, rax
    shr rdx, 32
    wrmsr

    /* Probe: MSR 0x4b564d11 reads "PVM" here; other hypervisors #GP. */
    xor r15d, r15d
    mov ecx, 0x4b564d11
    rdmsr
    test r15d, r15d
    jnz 2f
    cmp eax, 0x4d5650
    jne 2f
    mov ecx, 0x4b564d10
    mov eax, {pv_page} + {opt_in}
    xor edx, edx
    wrmsr
    mov edi, 1
    jmp 3f
2:
    xor edi, edi
3:
    call kmain
4:
    hlt
    jmp 4b

/* A secondary vCPU (RDI = k, 1..MAX_CPUS-1), started once the boot vCPU
   asked for it (Call::StartVcpus): the boot vCPU has filled every TSS and
   descriptor, the IDT and the per-CPU syscall entries, and proved the
   platform, so no probe here. Its own stack, TSS, LSTAR and PV page. */
smp_start:
    mov rbx, rdi
    mov rax, rdi
    shl rax, {ap_stack_shift}
    lea rsp, [rip + AP_STACKS]
    add rsp, rax
    lgdt [rip + GDT_PTR]
    push 0x10
    lea rax, [rip + 5f]
    push rax
    retfq
5:
    mov ax, 0x18
    mov ds, ax
    mov es, ax
    mov ss, ax
    xor eax, eax
    mov fs, ax
    mov gs, ax
    lidt [rip + IDT_PTR]
    mov eax, ebx
    shl eax, 4
    add eax, 0x40
    ltr ax
    mov ecx, 0xC0000081
    xor eax, eax
    mov edx, 0x00230010
    wrmsr
    mov ecx, 0xC0000082
    lea rax, [rip + SYSCALL_ENTRIES]
    mov rax, [rax + rbx * 8]
    mov rdx, rax
    shr rdx, 32
    wrmsr
    /* PV page: qlib::layout::pv_page_gpa(k) = 0x8000 + k * 0x1000. */
    mov rax, rbx
    add rax, 8
    shl rax, 12
    or rax, {opt_in}
    mov ecx, 0x4b564d10
    xor edx, edx
    wrmsr
    mov rdi, rbx
    call smp_main
6:
    hlt
    jmp 6b

/* #GP during the probe: note it and skip the 2-byte rdmsr. */
boot_gp_handler:
    mov r15d, 1
    add qword ptr [rsp + 8], 2
    add rsp, 8
    iretq

.section .rodata
.align 16
GDT_PTR:
    .word 24 * 8 - 1  /* GDT (cpu.rs): 24 quadwords */
    .quad GDT
BOOT_IDT_PTR:
    .word 14 * 16 - 1
    .quad BOOT_IDT

.section .bss
.align 16
BOOT_IDT:
    .zero 14 * 16
"#,
    stack_size = const BOOT_STACK_SIZE,
    ap_stack_shift = const AP_STACK_SHIFT,
    pv_page = const PV_PAGE_GPA,
    opt_in = const OPT_IN_FLAGS,
);
