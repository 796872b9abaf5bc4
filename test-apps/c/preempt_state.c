/* Preempted threads keep their user state: three kinds of threads run at
 * once and check, without a call between the check and the state, that
 * nothing of theirs changed while other threads ran on the vCPU:
 *  - xmm: its own pattern in XMM0-15, stored and compared in one asm loop;
 *  - fs: its TCB self pointer read through %fs:0 in a loop;
 *  - redzone: the 128 bytes below RSP filled, a getpid syscall, compared.
 * Prints one line per kind; exit 1 on any mismatch. With short time slices
 * (QVISOR_SLICE_US) the sandbox preempts each thread thousands of times. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define XMM_ROUNDS 6000000UL
#define FS_ROUNDS 60000000L
#define RZ_ROUNDS 150000L

struct xarg { uint64_t pat[32]; uint64_t buf[32]; long bad; };

static void *xmm_thread(void *p) {
    struct xarg *a = p;
    uint64_t left = XMM_ROUNDS;
    long bad = 0;
    __asm__ volatile(
        "movdqu 0(%[pat]), %%xmm0\n movdqu 16(%[pat]), %%xmm1\n"
        "movdqu 32(%[pat]), %%xmm2\n movdqu 48(%[pat]), %%xmm3\n"
        "movdqu 64(%[pat]), %%xmm4\n movdqu 80(%[pat]), %%xmm5\n"
        "movdqu 96(%[pat]), %%xmm6\n movdqu 112(%[pat]), %%xmm7\n"
        "movdqu 128(%[pat]), %%xmm8\n movdqu 144(%[pat]), %%xmm9\n"
        "movdqu 160(%[pat]), %%xmm10\n movdqu 176(%[pat]), %%xmm11\n"
        "movdqu 192(%[pat]), %%xmm12\n movdqu 208(%[pat]), %%xmm13\n"
        "movdqu 224(%[pat]), %%xmm14\n movdqu 240(%[pat]), %%xmm15\n"
        "1:\n"
        "movdqu %%xmm0, 0(%[buf])\n movdqu %%xmm1, 16(%[buf])\n"
        "movdqu %%xmm2, 32(%[buf])\n movdqu %%xmm3, 48(%[buf])\n"
        "movdqu %%xmm4, 64(%[buf])\n movdqu %%xmm5, 80(%[buf])\n"
        "movdqu %%xmm6, 96(%[buf])\n movdqu %%xmm7, 112(%[buf])\n"
        "movdqu %%xmm8, 128(%[buf])\n movdqu %%xmm9, 144(%[buf])\n"
        "movdqu %%xmm10, 160(%[buf])\n movdqu %%xmm11, 176(%[buf])\n"
        "movdqu %%xmm12, 192(%[buf])\n movdqu %%xmm13, 208(%[buf])\n"
        "movdqu %%xmm14, 224(%[buf])\n movdqu %%xmm15, 240(%[buf])\n"
        "xor %%rcx, %%rcx\n"
        "2:\n"
        "mov (%[buf],%%rcx,8), %%rax\n"
        "cmp (%[pat],%%rcx,8), %%rax\n"
        "je 3f\n"
        "inc %[bad]\n"
        "3:\n"
        "inc %%rcx\n cmp $32, %%rcx\n jne 2b\n"
        "dec %[left]\n jnz 1b\n"
        : [bad] "+r"(bad), [left] "+r"(left)
        : [pat] "r"(a->pat), [buf] "r"(a->buf)
        : "rax", "rcx", "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6",
          "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
    a->bad = bad;
    return NULL;
}

static void *fs_thread(void *p) {
    uint64_t me, now;
    long bad = 0;
    __asm__ volatile("mov %%fs:0, %0" : "=r"(me));
    for (long i = 0; i < FS_ROUNDS; i++) {
        __asm__ volatile("mov %%fs:0, %0" : "=r"(now));
        if (now != me) bad++;
    }
    *(long *)p = bad;
    return NULL;
}

static void *redzone_thread(void *p) {
    long bad = 0;
    for (long i = 0; i < RZ_ROUNDS; i++) {
        uint64_t pat = 0x5a5a5a5a5a5a5a5aULL ^ (uint64_t)i;
        long cnt;
        __asm__ volatile(
            "lea -128(%%rsp), %%rdi\n"
            "mov $16, %%ecx\n"
            "2: mov %[pat], (%%rdi)\n add $8, %%rdi\n dec %%ecx\n jnz 2b\n"
            "mov $39, %%eax\n syscall\n"
            "lea -128(%%rsp), %%rdi\n"
            "xor %[cnt], %[cnt]\n mov $16, %%ecx\n"
            "3: cmp %[pat], (%%rdi)\n je 4f\n inc %[cnt]\n 4: add $8, %%rdi\n dec %%ecx\n jnz 3b\n"
            : [cnt] "=&r"(cnt)
            : [pat] "r"(pat)
            : "rax", "rcx", "rdi", "r11", "memory", "cc");
        if (cnt) bad++;
    }
    *(long *)p = bad;
    return NULL;
}

int main(void) {
    static struct xarg xa[2];
    long fs_bad[2] = {0, 0}, rz_bad = 0;
    pthread_t t[5];
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 32; j++) xa[i].pat[j] = 0x1111111111111111ULL * (uint64_t)(i + 1) + (uint64_t)j;
        pthread_create(&t[i], NULL, xmm_thread, &xa[i]);
        pthread_create(&t[2 + i], NULL, fs_thread, &fs_bad[i]);
    }
    pthread_create(&t[4], NULL, redzone_thread, &rz_bad);
    for (int i = 0; i < 5; i++) pthread_join(t[i], NULL);
    long xb = xa[0].bad + xa[1].bad, fb = fs_bad[0] + fs_bad[1];
    printf("xmm registers: %s\n", xb ? "CHANGED" : "kept");
    printf("fs base: %s\n", fb ? "CHANGED" : "kept");
    printf("red zone: %s\n", rz_bad ? "CHANGED" : "kept");
    return xb || fb || rz_bad;
}
