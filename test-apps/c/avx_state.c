/* Preempted threads and interrupted signal receivers keep their AVX and
 * AVX-512 registers: the whole of YMM0-15, and (with AVX-512F) ZMM0-31 and
 * the opmask registers k1-k7, not only the low 128 bits of XMM0-15 that
 * FXSAVE covers. The JVM's compiled code keeps values there; a thread that
 * got another thread's upper halves crashed in the JIT (docs/threads.md).
 *
 *   avx_state switch   two YMM and two ZMM threads, each with its own
 *                      pattern loaded once, store and compare their
 *                      registers in one asm loop, so a difference can only come from
 *                      another thread run in between (a time slice switch).
 *   avx_state signal   a thread (re)loads its pattern, sends itself SIGUSR1 with
 *                      a raw tgkill in the same asm block, whose handler
 *                      zeroes every YMM/ZMM/k register; after rt_sigreturn
 *                      the pattern must be back (as on Linux, which saves
 *                      the XSAVE state in the signal frame).
 *
 * Prints one line per register kind: "kept", "CHANGED", or "no avx" /
 * "no avx512" when the CPU (or the OS: CPUID.OSXSAVE, XCR0) lacks it, so a
 * native run and a sandboxed run print the same on a given host. Exit 1
 * on any change. The inline asm names AVX-512 registers without
 * -mavx512f: the compiler then never allocates ZMM16-31 or k registers
 * itself, so they need no clobber. */
#include <cpuid.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define YMM_LD \
        "vmovdqu 0(%[pat]), %%ymm0\n" \
        "vmovdqu 32(%[pat]), %%ymm1\n" \
        "vmovdqu 64(%[pat]), %%ymm2\n" \
        "vmovdqu 96(%[pat]), %%ymm3\n" \
        "vmovdqu 128(%[pat]), %%ymm4\n" \
        "vmovdqu 160(%[pat]), %%ymm5\n" \
        "vmovdqu 192(%[pat]), %%ymm6\n" \
        "vmovdqu 224(%[pat]), %%ymm7\n" \
        "vmovdqu 256(%[pat]), %%ymm8\n" \
        "vmovdqu 288(%[pat]), %%ymm9\n" \
        "vmovdqu 320(%[pat]), %%ymm10\n" \
        "vmovdqu 352(%[pat]), %%ymm11\n" \
        "vmovdqu 384(%[pat]), %%ymm12\n" \
        "vmovdqu 416(%[pat]), %%ymm13\n" \
        "vmovdqu 448(%[pat]), %%ymm14\n" \
        "vmovdqu 480(%[pat]), %%ymm15\n"
#define YMM_ST \
        "vmovdqu %%ymm0, 0(%[buf])\n" \
        "vmovdqu %%ymm1, 32(%[buf])\n" \
        "vmovdqu %%ymm2, 64(%[buf])\n" \
        "vmovdqu %%ymm3, 96(%[buf])\n" \
        "vmovdqu %%ymm4, 128(%[buf])\n" \
        "vmovdqu %%ymm5, 160(%[buf])\n" \
        "vmovdqu %%ymm6, 192(%[buf])\n" \
        "vmovdqu %%ymm7, 224(%[buf])\n" \
        "vmovdqu %%ymm8, 256(%[buf])\n" \
        "vmovdqu %%ymm9, 288(%[buf])\n" \
        "vmovdqu %%ymm10, 320(%[buf])\n" \
        "vmovdqu %%ymm11, 352(%[buf])\n" \
        "vmovdqu %%ymm12, 384(%[buf])\n" \
        "vmovdqu %%ymm13, 416(%[buf])\n" \
        "vmovdqu %%ymm14, 448(%[buf])\n" \
        "vmovdqu %%ymm15, 480(%[buf])\n"
#define ZMM_LD \
        "vmovdqu64 0(%[pat]), %%zmm0\n" \
        "vmovdqu64 64(%[pat]), %%zmm1\n" \
        "vmovdqu64 128(%[pat]), %%zmm2\n" \
        "vmovdqu64 192(%[pat]), %%zmm3\n" \
        "vmovdqu64 256(%[pat]), %%zmm4\n" \
        "vmovdqu64 320(%[pat]), %%zmm5\n" \
        "vmovdqu64 384(%[pat]), %%zmm6\n" \
        "vmovdqu64 448(%[pat]), %%zmm7\n" \
        "vmovdqu64 512(%[pat]), %%zmm8\n" \
        "vmovdqu64 576(%[pat]), %%zmm9\n" \
        "vmovdqu64 640(%[pat]), %%zmm10\n" \
        "vmovdqu64 704(%[pat]), %%zmm11\n" \
        "vmovdqu64 768(%[pat]), %%zmm12\n" \
        "vmovdqu64 832(%[pat]), %%zmm13\n" \
        "vmovdqu64 896(%[pat]), %%zmm14\n" \
        "vmovdqu64 960(%[pat]), %%zmm15\n" \
        "vmovdqu64 1024(%[pat]), %%zmm16\n" \
        "vmovdqu64 1088(%[pat]), %%zmm17\n" \
        "vmovdqu64 1152(%[pat]), %%zmm18\n" \
        "vmovdqu64 1216(%[pat]), %%zmm19\n" \
        "vmovdqu64 1280(%[pat]), %%zmm20\n" \
        "vmovdqu64 1344(%[pat]), %%zmm21\n" \
        "vmovdqu64 1408(%[pat]), %%zmm22\n" \
        "vmovdqu64 1472(%[pat]), %%zmm23\n" \
        "vmovdqu64 1536(%[pat]), %%zmm24\n" \
        "vmovdqu64 1600(%[pat]), %%zmm25\n" \
        "vmovdqu64 1664(%[pat]), %%zmm26\n" \
        "vmovdqu64 1728(%[pat]), %%zmm27\n" \
        "vmovdqu64 1792(%[pat]), %%zmm28\n" \
        "vmovdqu64 1856(%[pat]), %%zmm29\n" \
        "vmovdqu64 1920(%[pat]), %%zmm30\n" \
        "vmovdqu64 1984(%[pat]), %%zmm31\n" \
        "kmovw 2048(%[pat]), %%k1\n" \
        "kmovw 2050(%[pat]), %%k2\n" \
        "kmovw 2052(%[pat]), %%k3\n" \
        "kmovw 2054(%[pat]), %%k4\n" \
        "kmovw 2056(%[pat]), %%k5\n" \
        "kmovw 2058(%[pat]), %%k6\n" \
        "kmovw 2060(%[pat]), %%k7\n"
#define ZMM_ST \
        "vmovdqu64 %%zmm0, 0(%[buf])\n" \
        "vmovdqu64 %%zmm1, 64(%[buf])\n" \
        "vmovdqu64 %%zmm2, 128(%[buf])\n" \
        "vmovdqu64 %%zmm3, 192(%[buf])\n" \
        "vmovdqu64 %%zmm4, 256(%[buf])\n" \
        "vmovdqu64 %%zmm5, 320(%[buf])\n" \
        "vmovdqu64 %%zmm6, 384(%[buf])\n" \
        "vmovdqu64 %%zmm7, 448(%[buf])\n" \
        "vmovdqu64 %%zmm8, 512(%[buf])\n" \
        "vmovdqu64 %%zmm9, 576(%[buf])\n" \
        "vmovdqu64 %%zmm10, 640(%[buf])\n" \
        "vmovdqu64 %%zmm11, 704(%[buf])\n" \
        "vmovdqu64 %%zmm12, 768(%[buf])\n" \
        "vmovdqu64 %%zmm13, 832(%[buf])\n" \
        "vmovdqu64 %%zmm14, 896(%[buf])\n" \
        "vmovdqu64 %%zmm15, 960(%[buf])\n" \
        "vmovdqu64 %%zmm16, 1024(%[buf])\n" \
        "vmovdqu64 %%zmm17, 1088(%[buf])\n" \
        "vmovdqu64 %%zmm18, 1152(%[buf])\n" \
        "vmovdqu64 %%zmm19, 1216(%[buf])\n" \
        "vmovdqu64 %%zmm20, 1280(%[buf])\n" \
        "vmovdqu64 %%zmm21, 1344(%[buf])\n" \
        "vmovdqu64 %%zmm22, 1408(%[buf])\n" \
        "vmovdqu64 %%zmm23, 1472(%[buf])\n" \
        "vmovdqu64 %%zmm24, 1536(%[buf])\n" \
        "vmovdqu64 %%zmm25, 1600(%[buf])\n" \
        "vmovdqu64 %%zmm26, 1664(%[buf])\n" \
        "vmovdqu64 %%zmm27, 1728(%[buf])\n" \
        "vmovdqu64 %%zmm28, 1792(%[buf])\n" \
        "vmovdqu64 %%zmm29, 1856(%[buf])\n" \
        "vmovdqu64 %%zmm30, 1920(%[buf])\n" \
        "vmovdqu64 %%zmm31, 1984(%[buf])\n" \
        "kmovw %%k1, 2048(%[buf])\n" \
        "kmovw %%k2, 2050(%[buf])\n" \
        "kmovw %%k3, 2052(%[buf])\n" \
        "kmovw %%k4, 2054(%[buf])\n" \
        "kmovw %%k5, 2056(%[buf])\n" \
        "kmovw %%k6, 2058(%[buf])\n" \
        "kmovw %%k7, 2060(%[buf])\n"
#define YMM_ZERO \
        "vpxor %%xmm0, %%xmm0, %%xmm0\n" \
        "vpxor %%xmm1, %%xmm1, %%xmm1\n" \
        "vpxor %%xmm2, %%xmm2, %%xmm2\n" \
        "vpxor %%xmm3, %%xmm3, %%xmm3\n" \
        "vpxor %%xmm4, %%xmm4, %%xmm4\n" \
        "vpxor %%xmm5, %%xmm5, %%xmm5\n" \
        "vpxor %%xmm6, %%xmm6, %%xmm6\n" \
        "vpxor %%xmm7, %%xmm7, %%xmm7\n" \
        "vpxor %%xmm8, %%xmm8, %%xmm8\n" \
        "vpxor %%xmm9, %%xmm9, %%xmm9\n" \
        "vpxor %%xmm10, %%xmm10, %%xmm10\n" \
        "vpxor %%xmm11, %%xmm11, %%xmm11\n" \
        "vpxor %%xmm12, %%xmm12, %%xmm12\n" \
        "vpxor %%xmm13, %%xmm13, %%xmm13\n" \
        "vpxor %%xmm14, %%xmm14, %%xmm14\n" \
        "vpxor %%xmm15, %%xmm15, %%xmm15\n"
#define ZMM_ZERO \
        "vpxorq %%zmm0, %%zmm0, %%zmm0\n" \
        "vpxorq %%zmm1, %%zmm1, %%zmm1\n" \
        "vpxorq %%zmm2, %%zmm2, %%zmm2\n" \
        "vpxorq %%zmm3, %%zmm3, %%zmm3\n" \
        "vpxorq %%zmm4, %%zmm4, %%zmm4\n" \
        "vpxorq %%zmm5, %%zmm5, %%zmm5\n" \
        "vpxorq %%zmm6, %%zmm6, %%zmm6\n" \
        "vpxorq %%zmm7, %%zmm7, %%zmm7\n" \
        "vpxorq %%zmm8, %%zmm8, %%zmm8\n" \
        "vpxorq %%zmm9, %%zmm9, %%zmm9\n" \
        "vpxorq %%zmm10, %%zmm10, %%zmm10\n" \
        "vpxorq %%zmm11, %%zmm11, %%zmm11\n" \
        "vpxorq %%zmm12, %%zmm12, %%zmm12\n" \
        "vpxorq %%zmm13, %%zmm13, %%zmm13\n" \
        "vpxorq %%zmm14, %%zmm14, %%zmm14\n" \
        "vpxorq %%zmm15, %%zmm15, %%zmm15\n" \
        "vpxorq %%zmm16, %%zmm16, %%zmm16\n" \
        "vpxorq %%zmm17, %%zmm17, %%zmm17\n" \
        "vpxorq %%zmm18, %%zmm18, %%zmm18\n" \
        "vpxorq %%zmm19, %%zmm19, %%zmm19\n" \
        "vpxorq %%zmm20, %%zmm20, %%zmm20\n" \
        "vpxorq %%zmm21, %%zmm21, %%zmm21\n" \
        "vpxorq %%zmm22, %%zmm22, %%zmm22\n" \
        "vpxorq %%zmm23, %%zmm23, %%zmm23\n" \
        "vpxorq %%zmm24, %%zmm24, %%zmm24\n" \
        "vpxorq %%zmm25, %%zmm25, %%zmm25\n" \
        "vpxorq %%zmm26, %%zmm26, %%zmm26\n" \
        "vpxorq %%zmm27, %%zmm27, %%zmm27\n" \
        "vpxorq %%zmm28, %%zmm28, %%zmm28\n" \
        "vpxorq %%zmm29, %%zmm29, %%zmm29\n" \
        "vpxorq %%zmm30, %%zmm30, %%zmm30\n" \
        "vpxorq %%zmm31, %%zmm31, %%zmm31\n" \
        "kxorw %%k1, %%k1, %%k1\n" \
        "kxorw %%k2, %%k2, %%k2\n" \
        "kxorw %%k3, %%k3, %%k3\n" \
        "kxorw %%k4, %%k4, %%k4\n" \
        "kxorw %%k5, %%k5, %%k5\n" \
        "kxorw %%k6, %%k6, %%k6\n" \
        "kxorw %%k7, %%k7, %%k7\n"
#define YMM_CLOB "ymm0", "ymm1", "ymm2", "ymm3", "ymm4", "ymm5", "ymm6", "ymm7", "ymm8", "ymm9", "ymm10", "ymm11", "ymm12", "ymm13", "ymm14", "ymm15"

#define ROUNDS 4000000L
#define SIG_ROUNDS 20000L
#define YMM_WORDS 64  /* 16 x 32 bytes */
#define ZMM_WORDS 258 /* 32 x 64 bytes + 7 x 2 bytes of k1-k7, padded */

struct arg {
    uint64_t pat[ZMM_WORDS] __attribute__((aligned(64)));
    uint64_t buf[ZMM_WORDS] __attribute__((aligned(64)));
    long rounds;
    int sig; /* send SIGUSR1 to itself between load and store */
    long bad;
};

static long tid(void) { return syscall(SYS_gettid); }

/* tgkill(getpid(), tid, SIGUSR1) as raw asm, between the load and the
 * store of the registers; nothing happens when sig is 0. */
#define MAYBE_SIGNAL                                                         \
    "test %[sig], %[sig]\n jz 5f\n"                                          \
    "mov $234, %%eax\n mov %[pid], %%rdi\n mov %[tid], %%rsi\n"              \
    "mov $10, %%edx\n syscall\n"                                             \
    "5:\n"

#define COMPARE(words)                                                       \
    "xor %%rcx, %%rcx\n"                                                     \
    "2: mov (%[buf],%%rcx,8), %%rax\n cmp (%[pat],%%rcx,8), %%rax\n"         \
    "je 3f\n inc %[bad]\n 3: inc %%rcx\n cmp $" #words ", %%rcx\n jne 2b\n"

static void *ymm_thread(void *p) {
    struct arg *a = p;
    long left = a->rounds, bad = 0;
    long pid = getpid(), me = tid(), sig = a->sig;
    __asm__ volatile(
        YMM_LD
        "1:\n"
        MAYBE_SIGNAL
        YMM_ST
        COMPARE(64)
        "test %[sig], %[sig]\n jz 6f\n"
        YMM_LD
        "6: dec %[left]\n jnz 1b\n"
        "vzeroupper\n"
        : [bad] "+r"(bad), [left] "+r"(left)
        : [pat] "r"(a->pat), [buf] "r"(a->buf), [sig] "r"(sig), [pid] "m"(pid), [tid] "m"(me)
        : "rax", "rcx", "rdx", "rsi", "rdi", "r11", "memory", "cc", YMM_CLOB);
    a->bad = bad;
    return NULL;
}

static void *zmm_thread(void *p) {
    struct arg *a = p;
    long left = a->rounds, bad = 0;
    long pid = getpid(), me = tid(), sig = a->sig;
    __asm__ volatile(
        ZMM_LD
        "1:\n"
        MAYBE_SIGNAL
        ZMM_ST
        COMPARE(258)
        "test %[sig], %[sig]\n jz 6f\n"
        ZMM_LD
        "6: dec %[left]\n jnz 1b\n"
        "vzeroupper\n"
        : [bad] "+r"(bad), [left] "+r"(left)
        : [pat] "r"(a->pat), [buf] "r"(a->buf), [sig] "r"(sig), [pid] "m"(pid), [tid] "m"(me)
        : "rax", "rcx", "rdx", "rsi", "rdi", "r11", "memory", "cc", YMM_CLOB);
    a->bad = bad;
    return NULL;
}

static int has_zmm;

/* Zeroes every register the threads check. */
static void scribble(int s) {
    (void)s;
    if (has_zmm)
        __asm__ volatile(ZMM_ZERO ::: "memory");
    else
        __asm__ volatile(YMM_ZERO ::: "memory");
}

static void fill(struct arg *a, int k, long rounds, int sig) {
    memset(a, 0, sizeof *a);
    for (int j = 0; j < ZMM_WORDS; j++)
        a->pat[j] = 0x0101010101010101ULL * (uint64_t)(k + 1) * 0x11 + (uint64_t)j * 0x10001;
    /* k1-k7 are 16 bits each (kmovw): the last two words' tail stays 0. */
    memset((char *)a->pat + 2048 + 14, 0, 2);
    a->rounds = rounds;
    a->sig = sig;
}

int main(int argc, char **argv) {
    int sig = argc > 1 && strcmp(argv[1], "signal") == 0;
    if (argc != 2 || (!sig && strcmp(argv[1], "switch") != 0)) {
        fprintf(stderr, "usage: avx_state switch|signal\n");
        return 2;
    }
    unsigned a, b, c, d;
    __cpuid(1, a, b, c, d);
    int avx = 0;
    if (c >> 27 & 1 && c >> 28 & 1) {
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        avx = (lo & 6) == 6;
        __cpuid_count(7, 0, a, b, c, d);
        has_zmm = avx && b >> 16 & 1 && (lo & 0xe0) == 0xe0;
    }
    if (!avx) {
        printf("ymm registers: no avx\nzmm registers: no avx512\n");
        return 0;
    }
    static struct arg args[4];
    pthread_t t[4];
    int n = 0;
    if (sig) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = scribble;
        sigaction(SIGUSR1, &sa, NULL);
        fill(&args[0], 0, SIG_ROUNDS, 1);
        pthread_create(&t[n++], NULL, ymm_thread, &args[0]);
        pthread_join(t[0], NULL);
        if (has_zmm) {
            fill(&args[1], 1, SIG_ROUNDS, 1);
            pthread_create(&t[n++], NULL, zmm_thread, &args[1]);
            pthread_join(t[1], NULL);
        }
    } else {
        for (int k = 0; k < 2; k++) {
            fill(&args[k], k, ROUNDS, 0);
            pthread_create(&t[n++], NULL, ymm_thread, &args[k]);
        }
        for (int k = 2; has_zmm && k < 4; k++) {
            fill(&args[k], k, ROUNDS / 4, 0);
            pthread_create(&t[n++], NULL, zmm_thread, &args[k]);
        }
        for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    }
    long yb = args[0].bad + (sig ? 0 : args[1].bad);
    long zb = sig ? args[1].bad : args[2].bad + args[3].bad;
    printf("ymm registers: %s\n", yb ? "CHANGED" : "kept");
    if (has_zmm)
        printf("zmm registers: %s\n", zb ? "CHANGED" : "kept");
    else
        printf("zmm registers: no avx512\n");
    return yb || zb;
}
