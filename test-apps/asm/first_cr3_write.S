/* First instruction loads CR3 with the guest's boot kernel PGD (GPA 0x10000): SIGSEGV. */
.globl _start
.text
_start:
    mov $0x10000, %rax
    mov %rax, %cr3
    mov $60, %eax
    xor %edi, %edi
    syscall
