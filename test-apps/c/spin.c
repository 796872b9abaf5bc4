/* spin MODE: a pure user-mode compute loop with no system calls, for the
 * vCPU kick (control requests and signals reach a spinning program).
 * MODE handler: a SIGTERM handler sets a flag; print "ready", spin until
 *   the flag is set, print "graceful", exit 0.
 * MODE plain: print "ready", spin forever (SIGTERM's default action ends it).
 * MODE checksum: fill a 16 MiB buffer, print "ready", then spin computing
 *   a checksum over it for about SECONDS (argv[2], default 3) of loops,
 *   counted in passes, not clock time (no syscalls); verify it against the
 *   value computed before "ready" and print "checksum ok" or "BAD". */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

#define WORDS (16u << 20) / 8

static uint64_t sum(const volatile uint64_t *buf)
{
    uint64_t s = 0;
    for (uint64_t i = 0; i < WORDS; i++)
        s = s * 31 + buf[i];
    return s;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "handler";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (strcmp(mode, "checksum") == 0) {
        long passes = argc > 2 ? atol(argv[2]) : 100;
        uint64_t *buf = malloc(WORDS * 8);
        if (!buf)
            return 2;
        uint64_t x = 0x9e3779b97f4a7c15ull;
        for (uint64_t i = 0; i < WORDS; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf[i] = x;
        }
        uint64_t want = sum(buf);
        printf("ready\n");
        for (long p = 0; p < passes; p++) {
            if (sum(buf) != want) {
                printf("BAD at pass %ld\n", p);
                return 1;
            }
        }
        printf("checksum ok\n");
        return 0;
    }
    if (strcmp(mode, "handler") == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_term;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
    }
    printf("ready\n");
    while (!stop)
        ;
    printf("graceful\n");
    return 0;
}
