/* Wild pointers and privileged instructions from a user program: the
 * kernel must answer EFAULT and SIGSEGV exactly as Linux does, and a
 * user-mode `out` to the VMM's doorbell port must never reach the VMM. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void check(const char *what, long rc) {
    printf("%s: %ld %s\n", what, rc, rc < 0 ? strerror(errno) : "");
}

int main(int argc, char **argv) {
    check("write from NULL", syscall(SYS_write, 1, (void *)0, 16));
    check("write from a kernel address", syscall(SYS_write, 1, (void *)0xffff880000000000ul, 16));
    check("write from a non-canonical address", syscall(SYS_write, 1, (void *)0x0000900000000000ul, 16));
    check("read into a kernel address", syscall(SYS_read, 0, (void *)0xffff880000001000ul, 16));
    check("writev with a wild iovec array", syscall(SYS_writev, 1, (void *)0x10, 2));
    check("clock_gettime into NULL", syscall(SYS_clock_gettime, 0, (void *)0));
    check("uname into a kernel address", syscall(SYS_uname, (void *)0xffffffff80100000ul));
    fflush(stdout);
    if (argc > 1 && strcmp(argv[1], "out") == 0) {
        printf("trying port I/O\n");
        fflush(stdout);
        /* The VMM's host-call doorbell. Must fault (no IOPL, no bitmap). */
        __asm__ volatile("mov $0x5150, %%dx\n\tout %%eax, %%dx" ::"a"(0x1000) : "dx");
        printf("port I/O went through\n");
    }
    return 0;
}
