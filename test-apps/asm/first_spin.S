/* Spins before any system call: SIGTERM and control requests must still reach it (143). */
.globl _start
.text
_start:
1:  jmp 1b
