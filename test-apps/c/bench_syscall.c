/*
 * bench_syscall [N]
 *
 * Benchmark, not a compatibility test: prints a time, so its output differs
 * between runs. Times N (default 200000) raw getppid() system calls (the
 * raw syscall, so no libc caching can hide the kernel entry) with
 * CLOCK_MONOTONIC after a short warm-up, and prints
 *   syscall_ns <nanoseconds per call>
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
	return 0;
}
