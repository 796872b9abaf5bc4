/* flags_syscall: a program may make a system call with odd RFLAGS. With
 * NT set the call works and the program goes on ("nt ok"). With TF set
 * (single step) the call completes and the program then dies of SIGTRAP
 * (status 133), as on Linux; the kernel must not crash on either. */
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>

static long syscall_with_flags(unsigned long set)
{
    long ret;
    __asm__ volatile(
        "pushfq\n\t"
        "orq %[set], (%%rsp)\n\t"
        "popfq\n\t"
        "syscall\n\t"
        : "=a"(ret)
        : "a"((long)SYS_getppid), [set] "r"(set)
        : "rcx", "r11", "memory", "cc");
    return ret;
}

int main(int argc, char **argv)
{
    (void)argv;
    long r = syscall_with_flags(0x4000); /* NT */
    /* Clear NT again before anything else. */
    __asm__ volatile("pushfq\n\tandq $~0x4000, (%%rsp)\n\tpopfq" ::: "memory", "cc");
    printf("nt ok %d\n", r >= 0);
    fflush(stdout);
    if (argc > 1) {
        syscall_with_flags(0x100); /* TF: SIGTRAP follows */
        puts("not reached");
    }
    return 0;
}
