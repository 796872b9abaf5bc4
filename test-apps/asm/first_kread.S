/* Reads guest RAM through the kernel's direct map (qlib::layout::DIRECT_MAP) and the kernel image (KERNEL_BASE): SIGSEGV. */
.globl _start
.text
_start:
    movabs $0xffff880000001000, %rax
    mov (%rax), %rax
    movabs $0xffffffff80100000, %rax
    mov (%rax), %rax
    mov $60, %eax
    xor %edi, %edi
    syscall
