/* signals: handlers run, with the Linux x86-64 frame. raise (tkill) and
 * kill(getpid()) with SA_SIGINFO (si_signo, si_code, si_pid, si_uid);
 * registers, flags and FPU/SSE state survive a handler (ud2 -> SIGILL,
 * the handler skips the instruction through uc_mcontext); sigprocmask
 * blocks and delivers on unblock; sigpending; SA_RESETHAND; SA_NODEFER
 * nesting; SIGSEGV with siglongjmp (si_addr, SEGV_MAPERR / SEGV_ACCERR);
 * SIGFPE; SIGTRAP; SIGPIPE on a closed pipe; sigaltstack; sigsuspend;
 * a 16-byte aligned stack in handlers. One deterministic line per check;
 * "FAIL" marks a result that contradicts Linux. */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

static volatile sig_atomic_t count, depth, max_depth;
static volatile int last_sig, last_code, last_pid_ok, last_uid_ok, aligned_ok = 1;
static volatile void *last_addr;
static sigjmp_buf jb;

static void check(const char *what, int ok)
{
    printf("%s: %s\n", what, ok ? "ok" : "FAIL");
}

static void note_alignment(void)
{
    _Alignas(16) volatile char probe[16];
    if ((uintptr_t)probe % 16 != 0)
        aligned_ok = 0;
}

static void on_info(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    note_alignment();
    count++;
    last_sig = si->si_signo == sig ? sig : -1;
    last_code = si->si_code;
    last_pid_ok = si->si_pid == getpid();
    last_uid_ok = si->si_uid == getuid();
}

static void set(int sig, void (*fn)(int, siginfo_t *, void *), int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fn;
    sa.sa_flags = SA_SIGINFO | flags;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) != 0)
        printf("sigaction %d: FAIL\n", sig);
}

static void test_raise_kill(void)
{
    set(SIGUSR1, on_info, 0);
    count = 0;
    raise(SIGUSR1);
    printf("raise: count=%d signo=%d code=%s\n", count, last_sig,
           last_code == SI_TKILL ? "SI_TKILL" : "other");
    kill(getpid(), SIGUSR1);
    printf("kill: count=%d code=%s pid=%d uid=%d\n", count,
           last_code == SI_USER ? "SI_USER" : "other", last_pid_ok, last_uid_ok);
    check("kill(0 signal)", kill(getpid(), 0) == 0);
    errno = 0;
    check("kill(bad signal) EINVAL", kill(getpid(), 999) == -1 && errno == EINVAL);
}

/* SIGILL from ud2: the handler skips the 2-byte instruction. */
static void on_ill(int sig, siginfo_t *si, void *ucv)
{
    ucontext_t *uc = ucv;
    volatile double x = 3.0;
    for (int i = 0; i < 5; i++)
        x = x * 1.5 + 0.25; /* use the FPU/SSE registers */
    (void)x;
    last_sig = sig;
    last_code = si->si_code;
    last_addr = si->si_addr;
    last_pid_ok = (void *)uc->uc_mcontext.gregs[REG_RIP] == si->si_addr;
    uc->uc_mcontext.gregs[REG_RIP] += 2;
}

static void test_registers(void)
{
    set(SIGILL, on_ill, 0);
    uint64_t rcx = 0x1111111111111111ull, r11 = 0x2222222222222222ull;
    uint64_t r8 = 0x8888888888888888ull, r12 = 0xcccccccccccccccdull;
    uint64_t rbx = 0xbbbbbbbbbbbbbbbbull;
    double d = 1.0 / 3.0;
    uint64_t xlo = 0x0123456789abcdefull, xout = 0;
    uint8_t cf;
    __asm__ volatile(
        "movq %[xlo], %%xmm7\n\t"
        "stc\n\t"
        "ud2\n\t"
        "setc %[cf]\n\t"
        "movq %%xmm7, %[xout]\n\t"
        : "+c"(rcx), "+r"(r11), "+r"(r8), "+r"(r12), "+b"(rbx), [cf] "=r"(cf),
          [xout] "=r"(xout), "+x"(d)
        : [xlo] "r"(xlo)
        : "memory", "cc", "xmm7");
    printf("sigill: signo=%d code=%s addr_is_rip=%d\n", last_sig,
           last_code == ILL_ILLOPN ? "ILL_ILLOPN" : "other", last_pid_ok);
    check("registers survive a handler",
          rcx == 0x1111111111111111ull && r11 == 0x2222222222222222ull &&
              r8 == 0x8888888888888888ull && r12 == 0xcccccccccccccccdull &&
              rbx == 0xbbbbbbbbbbbbbbbbull && cf == 1);
    check("fpu/sse state survives a handler", d == 1.0 / 3.0 && xout == xlo);
}

static void test_mask(void)
{
    sigset_t s, old, pend;
    set(SIGUSR1, on_info, 0);
    count = 0;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    sigprocmask(SIG_BLOCK, &s, &old);
    raise(SIGUSR1);
    printf("blocked: count=%d\n", count);
    sigpending(&pend);
    printf("sigpending has SIGUSR1: %d, SIGUSR2: %d\n", sigismember(&pend, SIGUSR1),
           sigismember(&pend, SIGUSR2));
    sigprocmask(SIG_SETMASK, &old, NULL);
    printf("unblocked: count=%d\n", count);
    /* SIGKILL cannot be blocked */
    sigemptyset(&s);
    sigaddset(&s, SIGKILL);
    sigprocmask(SIG_BLOCK, &s, NULL);
    sigprocmask(SIG_BLOCK, NULL, &old);
    printf("SIGKILL blockable: %d\n", sigismember(&old, SIGKILL));
}

static void test_resethand(void)
{
    struct sigaction cur;
    set(SIGUSR2, on_info, SA_RESETHAND);
    count = 0;
    raise(SIGUSR2);
    sigaction(SIGUSR2, NULL, &cur);
    printf("resethand: count=%d now default=%d\n", count, cur.sa_handler == SIG_DFL);
}

static void on_nest(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    depth++;
    if (depth > max_depth)
        max_depth = depth;
    count++;
    if (count == 1)
        raise(sig);
    depth--;
}

static void test_nodefer(void)
{
    set(SIGUSR1, on_nest, SA_NODEFER);
    count = depth = max_depth = 0;
    raise(SIGUSR1);
    printf("nodefer: count=%d max_depth=%d\n", count, max_depth);
    set(SIGUSR1, on_nest, 0);
    count = depth = max_depth = 0;
    raise(SIGUSR1);
    printf("defer: count=%d max_depth=%d\n", count, max_depth);
}

static void on_jump(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    last_sig = sig;
    last_code = si->si_code;
    last_addr = si->si_addr;
    siglongjmp(jb, 1);
}

static void test_segv(void)
{
    set(SIGSEGV, on_jump, 0);
    char *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (sigsetjmp(jb, 1) == 0) {
        *(volatile char *)(page + 12) = 1;
        printf("segv accerr: no fault FAIL\n");
    }
    printf("segv accerr: signo=%d code=%s addr_ok=%d\n", last_sig,
           last_code == SEGV_ACCERR ? "SEGV_ACCERR" : "other", last_addr == page + 12);
    munmap(page, 4096);
    if (sigsetjmp(jb, 1) == 0) {
        (void)*(volatile char *)(page + 100);
        printf("segv maperr: no fault FAIL\n");
    }
    printf("segv maperr: signo=%d code=%s addr_ok=%d\n", last_sig,
           last_code == SEGV_MAPERR ? "SEGV_MAPERR" : "other", last_addr == page + 100);
    /* siglongjmp restored the mask: a second fault is caught too. */
    volatile uintptr_t low = 8;
    if (sigsetjmp(jb, 1) == 0)
        *(volatile char *)low = 1;
    printf("segv null: signo=%d addr_ok=%d\n", last_sig, last_addr == (void *)8);
}

static void test_fpe_trap(void)
{
    set(SIGFPE, on_jump, 0);
    volatile int zero = 0;
    if (sigsetjmp(jb, 1) == 0) {
        volatile int x = 7 / zero;
        (void)x;
    }
    printf("sigfpe: signo=%d code=%s\n", last_sig,
           last_code == FPE_INTDIV ? "FPE_INTDIV" : "other");
    set(SIGTRAP, on_info, 0);
    count = 0;
    __asm__ volatile("int3");
    printf("sigtrap: count=%d signo=%d\n", count, last_sig);
}

static void test_sigpipe(void)
{
    int fds[2];
    set(SIGPIPE, on_info, 0);
    count = 0;
    if (pipe(fds) != 0)
        printf("pipe: FAIL\n");
    close(fds[0]);
    errno = 0;
    ssize_t n = write(fds[1], "x", 1);
    printf("sigpipe: write=%zd errno=%s count=%d signo=%d\n", n,
           errno == EPIPE ? "EPIPE" : "other", count, last_sig);
    close(fds[1]);
}

static char altstack[65536];
static volatile int on_alt;

static void on_altstack(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    char local;
    on_alt = &local > altstack && &local < altstack + sizeof altstack;
    note_alignment();
}

static void test_altstack(void)
{
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
    check("sigaltstack", sigaltstack(&ss, NULL) == 0);
    set(SIGUSR2, on_altstack, SA_ONSTACK);
    raise(SIGUSR2);
    printf("altstack: handler on it=%d\n", on_alt);
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, NULL);
    raise(SIGUSR2);
    printf("altstack disabled: handler on it=%d\n", on_alt);
}

static void test_sigsuspend(void)
{
    sigset_t block, empty, now;
    set(SIGUSR1, on_info, 0);
    count = 0;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigprocmask(SIG_BLOCK, &block, NULL);
    raise(SIGUSR1);
    sigemptyset(&empty);
    errno = 0;
    int r = sigsuspend(&empty);
    sigprocmask(SIG_BLOCK, NULL, &now);
    printf("sigsuspend: ret=%d errno=%s count=%d still blocked=%d\n", r,
           errno == EINTR ? "EINTR" : "other", count, sigismember(&now, SIGUSR1));
    sigprocmask(SIG_UNBLOCK, &block, NULL);
}

static void test_ignore(void)
{
    signal(SIGUSR1, SIG_IGN);
    raise(SIGUSR1);
    printf("ignored SIGUSR1: still running\n");
    signal(SIGUSR1, SIG_DFL);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    test_raise_kill();
    test_registers();
    test_mask();
    test_resethand();
    test_nodefer();
    test_segv();
    test_fpe_trap();
    test_sigpipe();
    test_altstack();
    test_sigsuspend();
    test_ignore();
    check("handler stacks 16-byte aligned", aligned_ok);
    printf("done\n");
    return 0;
}
