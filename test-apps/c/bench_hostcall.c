/*
 * bench_hostcall [N]
 *
 * Benchmark, not a compatibility test: prints times, so its output differs
 * between runs. Times N (default 2000) poll() calls on fd 1 with timeout 0;
 * the guest kernel forwards poll on stdio to the host, so each costs one
 * system call plus exactly one host call. Also times N raw getppid() calls
 * (the null system call) in the same process, and prints
 *   poll_ns <nanoseconds per poll>
 *   syscall_ns <nanoseconds per getppid>
 *   hostcall_ns <poll_ns - syscall_ns>
 */
#define _GNU_SOURCE
#include <poll.h>
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

static double time_poll(long n)
{
	struct pollfd pfd = { .fd = 1, .events = POLLOUT };
	double start = now_ns();
	for (long i = 0; i < n; i++) {
		pfd.revents = 0;
		if (poll(&pfd, 1, 0) < 0) {
			perror("poll");
			exit(1);
		}
	}
	return (now_ns() - start) / (double)n;
}

static double time_syscall(long n)
{
	double start = now_ns();
	for (long i = 0; i < n; i++)
		syscall(SYS_getppid);
	return (now_ns() - start) / (double)n;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 2000;
	if (n <= 0) {
		fputs("usage: bench_hostcall [N > 0]\n", stderr);
		return 2;
	}
	time_poll(n / 10 + 1);
	time_syscall(n / 10 + 1);

	double poll_ns = time_poll(n);
	double syscall_ns = time_syscall(n);
	printf("poll_ns %.1f\n", poll_ns);
	printf("syscall_ns %.1f\n", syscall_ns);
	printf("hostcall_ns %.1f\n", poll_ns - syscall_ns);
	return 0;
}
