/*
 * timeslice: tasks that compute in user mode without a single syscall must
 * share the CPU (time slices, docs/threads.md "Preemption").
 * `timeslice MODE N`; one stable line per check, so a native run and a
 * sandboxed one print the same text.
 *
 *   threads N  N threads each spin SPIN_MS by the TSC (no syscall), while
 *              main sleeps 100 ms; the spins must overlap in time (each
 *              made progress while the others spun) and main must wake
 *              from its sleep before any spinner ends
 *   procs N    the same with N forked processes reporting through a pipe
 *
 * Without preemption the first spinner keeps the CPU until its time is
 * up: the spins run one after the other and do not overlap.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SPIN_MS 400
#define MAX_WORKERS 8

struct span {
    uint64_t start, end, iters;
};

static uint64_t tsc_per_ms;
static struct span spans[MAX_WORKERS];

static inline uint64_t rdtsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void calibrate(void)
{
    uint64_t t0 = now_ns(), c0 = rdtsc();
    struct timespec d = {0, 20 * 1000 * 1000};
    nanosleep(&d, NULL);
    uint64_t t1 = now_ns(), c1 = rdtsc();
    tsc_per_ms = (c1 - c0) * 1000000ull / (t1 - t0);
}

/* Spins SPIN_MS by the TSC; no syscall in the loop. */
static void spin(struct span *s)
{
    uint64_t start = rdtsc(), limit = start + SPIN_MS * tsc_per_ms, now;
    volatile uint64_t iters = 0;
    do {
        now = rdtsc();
        iters++;
    } while (now < limit);
    s->start = start;
    s->end = now;
    s->iters = iters;
}

static void *worker(void *arg)
{
    spin(arg);
    return NULL;
}

/* Whether every two spans overlap for at least half of SPIN_MS. */
static int overlapping(int n)
{
    uint64_t latest_start = 0, earliest_end = UINT64_MAX;
    for (int i = 0; i < n; i++) {
        if (spans[i].iters == 0)
            return 0;
        if (spans[i].start > latest_start)
            latest_start = spans[i].start;
        if (spans[i].end < earliest_end)
            earliest_end = spans[i].end;
    }
    if (earliest_end <= latest_start) {
        fprintf(stderr, "no overlap: spins ran one after the other\n");
        return 0;
    }
    uint64_t ms = (earliest_end - latest_start) / tsc_per_ms;
    if (ms < SPIN_MS / 2)
        fprintf(stderr, "overlap only %llu ms\n", (unsigned long long)ms);
    return ms >= SPIN_MS / 2;
}

static int threads(int n)
{
    pthread_t t[MAX_WORKERS];
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, worker, &spans[i]) != 0) {
            perror("pthread_create");
            return 1;
        }
    struct timespec d = {0, 100 * 1000 * 1000};
    nanosleep(&d, NULL);
    uint64_t woke = rdtsc();
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    int ok = overlapping(n);
    /* The sleep must end while the spinners spin, not after them. */
    int sleeper = 1;
    for (int i = 0; i < n; i++)
        if (woke >= spans[i].end) {
            fprintf(stderr, "main woke after spinner %d ended\n", i);
            sleeper = 0;
        }
    printf("timeslice threads %d: overlap %s, sleeper %s\n", n, ok ? "ok" : "WRONG",
           sleeper ? "ok" : "WRONG");
    return ok && sleeper ? 0 : 1;
}

static int procs(int n)
{
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        return 1;
    }
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            struct span s;
            spin(&s);
            if (write(fds[1], &s, sizeof s) != sizeof s)
                _exit(2);
            _exit(0);
        }
    }
    close(fds[1]);
    for (int i = 0; i < n; i++)
        if (read(fds[0], &spans[i], sizeof spans[i]) != sizeof spans[i]) {
            fprintf(stderr, "short read from child %d\n", i);
            return 1;
        }
    int status, failed = 0;
    while (wait(&status) > 0)
        failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    int ok = overlapping(n) && !failed;
    printf("timeslice procs %d: overlap %s\n", n, ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: timeslice threads|procs N\n");
        return 2;
    }
    int n = atoi(argv[2]);
    if (n < 1 || n > MAX_WORKERS) {
        fprintf(stderr, "N must be 1..%d\n", MAX_WORKERS);
        return 2;
    }
    calibrate();
    if (strcmp(argv[1], "threads") == 0)
        return threads(n);
    if (strcmp(argv[1], "procs") == 0)
        return procs(n);
    fprintf(stderr, "unknown mode %s\n", argv[1]);
    return 2;
}
