/*
 * bench_procs N HELLO: process costs, timed inside the program (natively
 * and in the sandbox, for the bench's ratios). Prints, in ns per round:
 *   fork_exit_wait_ns  fork, the child _exits, the parent waitpid()s
 *   fork_exec_wait_ns  fork, the child execs HELLO (a static hello, its
 *                      output to /dev/null), the parent waitpid()s
 *   pingpong_ns        a one-byte round trip over two pipes between two
 *                      processes (two context switches)
 *   sockpong_ns        the same over two AF_UNIX socketpairs: host
 *                      sockets in the sandbox, so each blocking read is an
 *                      armed wait (tried, parked, woken by the idle poll)
 */
#include <sys/socket.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200;
	const char *hello = argc > 2 ? argv[2] : "/bin/true";
	if (n <= 0)
		return 2;
	int st;

	double t = now_ns();
	for (int i = 0; i < n; i++) {
		pid_t p = fork();
		if (p == 0)
			_exit(0);
		if (p < 0 || waitpid(p, &st, 0) != p)
			return 1;
	}
	printf("fork_exit_wait_ns %.0f\n", (now_ns() - t) / n);

	int quiet = open("/dev/null", O_WRONLY);
	t = now_ns();
	for (int i = 0; i < n; i++) {
		pid_t p = fork();
		if (p == 0) {
			dup2(quiet, 1);
			execl(hello, hello, (char *)NULL);
			_exit(127);
		}
		if (p < 0 || waitpid(p, &st, 0) != p || WEXITSTATUS(st) != 0)
			return 1;
	}
	printf("fork_exec_wait_ns %.0f\n", (now_ns() - t) / n);

	int a[2], b[2];
	if (pipe(a) < 0 || pipe(b) < 0)
		return 1;
	int rounds = n * 10;
	pid_t p = fork();
	if (p == 0) {
		char c;
		for (int i = 0; i < rounds; i++)
			if (read(a[0], &c, 1) != 1 || write(b[1], &c, 1) != 1)
				_exit(1);
		_exit(0);
	}
	char c = 'x';
	t = now_ns();
	for (int i = 0; i < rounds; i++)
		if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1)
			return 1;
	printf("pingpong_ns %.0f\n", (now_ns() - t) / rounds);
	waitpid(p, &st, 0);

	int sa[2], sb[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sa) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sb) < 0)
		return 1;
	p = fork();
	if (p == 0) {
		char d;
		for (int i = 0; i < rounds; i++)
			if (read(sa[1], &d, 1) != 1 || write(sb[1], &d, 1) != 1)
				_exit(1);
		_exit(0);
	}
	t = now_ns();
	for (int i = 0; i < rounds; i++)
		if (write(sa[0], &c, 1) != 1 || read(sb[0], &c, 1) != 1)
			return 1;
	printf("sockpong_ns %.0f\n", (now_ns() - t) / rounds);
	waitpid(p, &st, 0);
	return 0;
}
