/*
 * bench_syscall [N]
 *
 * Benchmark, not a compatibility test: prints a time, so its output differs
 * between runs. Times N (default 200000) raw getppid() system calls (the
 * raw syscall, so no libc caching can hide the kernel entry) with
 * CLOCK_MONOTONIC after a short warm-up, then N clock_gettime calls
 * through the C library (the vDSO: docs/vdso.md) and N / 10 as raw system
 * calls, and prints
 *   syscall_ns <nanoseconds per getppid>
 *   clock_gettime_ns <nanoseconds per libc clock_gettime>
 *   clock_gettime_syscall_ns <nanoseconds per raw clock_gettime syscall>
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 200000;
	if (n <= 0) {
		fputs("usage: bench_syscall [N > 0]\n", stderr);
		return 2;
	}
	for (long i = 0; i < n / 10 + 1; i++)
		syscall(SYS_getppid);

	double start = now_ns();
	for (long i = 0; i < n; i++)
		syscall(SYS_getppid);
	double elapsed = now_ns() - start;

	printf("syscall_ns %.1f\n", elapsed / (double)n);

	struct timespec ts;
	start = now_ns();
	for (long i = 0; i < n; i++)
		clock_gettime(CLOCK_MONOTONIC, &ts);
	elapsed = now_ns() - start;
	printf("clock_gettime_ns %.1f\n", elapsed / (double)n);

	long m = n / 10 + 1;
	start = now_ns();
	for (long i = 0; i < m; i++)
		syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
	elapsed = now_ns() - start;
	printf("clock_gettime_syscall_ns %.1f\n", elapsed / (double)m);
	return 0;
}
