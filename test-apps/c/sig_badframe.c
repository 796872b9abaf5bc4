/* sig_badframe MODE: the kernel must survive hostile signal frames and
 * stacks. Each mode either prints "survived" and exits 0, or dies by
 * SIGSEGV (status 139), the same natively and sandboxed:
 *   flags        rt_sigreturn to a good RIP with every RFLAGS bit but TF
 *                set (NT, IOPL, VM... dropped: the program goes on)
 *   noncanonical rt_sigreturn to a non-canonical RIP  (SIGSEGV)
 *   unmapped     rt_sigreturn with RSP on an unmapped page  (SIGSEGV)
 *   badfp        rt_sigreturn with an unmapped fpstate pointer (SIGSEGV)
 *   badstack     a signal for a handler while RSP is unmapped (SIGSEGV) */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

static _Alignas(16) char stack[65536];
static ucontext_t uc;

static void landing(void)
{
    static const char msg[] = "survived\n";
    (void)!write(1, msg, sizeof msg - 1);
    _exit(0);
}

static void handler(int sig)
{
    (void)sig;
}

static void __attribute__((noreturn)) sigreturn_at(void *sp)
{
    __asm__ volatile("mov %0, %%rsp\n\t"
                     "mov $15, %%eax\n\t"
                     "syscall\n\t"
                     "ud2" ::"r"(sp)
                     : "memory");
    __builtin_unreachable();
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "flags";
    memset(&uc, 0, sizeof uc);
    uc.uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)landing;
    uc.uc_mcontext.gregs[REG_RSP] = (greg_t)(uintptr_t)(stack + sizeof stack - 8);
    uc.uc_mcontext.gregs[REG_EFL] = 0x202;
    uc.uc_mcontext.gregs[REG_CSGSFS] = 0x33 | (0x2bll << 48);
    if (strcmp(mode, "flags") == 0) {
        uc.uc_mcontext.gregs[REG_EFL] = ~0x100ll;
    } else if (strcmp(mode, "noncanonical") == 0) {
        uc.uc_mcontext.gregs[REG_RIP] = (greg_t)0x8000000000001000ull;
    } else if (strcmp(mode, "unmapped") == 0) {
        sigreturn_at((void *)0x1000);
    } else if (strcmp(mode, "badfp") == 0) {
        uc.uc_mcontext.fpregs = (void *)0x2000;
    } else if (strcmp(mode, "badstack") == 0) {
        signal(SIGUSR1, handler);
        long pid = getpid();
        __asm__ volatile("mov $0x3000, %%rsp\n\t"
                         "mov $62, %%eax\n\t"
                         "syscall\n\t"
                         "ud2" ::"D"(pid),
                         "S"(SIGUSR1)
                         : "memory");
    }
    sigreturn_at(&uc);
}
