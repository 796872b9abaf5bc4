/* fault_regs: a page fault (and the kernel's return from it) leaves every
 * register and the arithmetic flags as they were. Touches 64 fresh pages,
 * each time with known values in all general registers the asm can name
 * (RCX and R11 included: the sandbox's return path borrows them), the
 * carry flag set and then clear, and checks them after the faulting store.
 * Prints one line per check and "ok" at the end; exits 1 on a mismatch. */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>

static int check(volatile char *page, int carry)
{
    uint64_t rcx = 0x1111111111111111ull, r11 = 0x2222222222222222ull;
    uint64_t r8 = 0x8888888888888888ull, r10 = 0xaaaaaaaaaaaaaaaaull;
    uint8_t cf;
    __asm__ volatile(
        "cmp $1, %[carry]\n\t" /* CF = (carry < 1), i.e. set when carry == 0 */
        "cmc\n\t"              /* CF = carry */
        "movb $7, (%[p])\n\t"  /* the page fault */
        "setc %[cf]\n\t"
        : "+c"(rcx), "+r"(r11), "+r"(r8), "+r"(r10), [cf] "=r"(cf)
        : [p] "r"(page), [carry] "r"(carry)
        : "memory", "cc");
    int ok = rcx == 0x1111111111111111ull && r11 == 0x2222222222222222ull &&
             r8 == 0x8888888888888888ull && r10 == 0xaaaaaaaaaaaaaaaaull &&
             cf == carry && *page == 7;
    if (!ok)
        printf("MISMATCH carry=%d: rcx=%llx r11=%llx r8=%llx r10=%llx cf=%d\n", carry,
               (unsigned long long)rcx, (unsigned long long)r11, (unsigned long long)r8,
               (unsigned long long)r10, cf);
    return ok;
}

int main(void)
{
    enum { PAGES = 64 };
    /* A 64 KiB stride: every touch is a fresh fault in the sandbox (its
     * fault-around maps 16 pages). */
    char *m = mmap(NULL, PAGES * 65536ul, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    int good = 0;
    for (int i = 0; i < PAGES; i++)
        good += check(m + i * 65536ul, i & 1);
    printf("%d/%d faults preserved registers and flags\n", good, PAGES);
    puts(good == PAGES ? "ok" : "FAILED");
    return good == PAGES ? 0 : 1;
}
