/*
 * forkbomb [MAX]: forks children that only yield, until fork fails or MAX
 * (default 200) children run; prints how far it got and the error, then
 * kills and reaps every child (SIGKILL), and checks that a fresh fork
 * works again. The sandbox caps processes, so fork fails there with
 * EAGAIN before MAX; natively MAX is reached.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int max = argc > 1 ? atoi(argv[1]) : 200;
	pid_t *kids = calloc((size_t)max, sizeof *kids);
	int n = 0, err = 0;
	if (!kids)
		return 2;
	fflush(stdout);
	while (n < max) {
		pid_t c = fork();
		if (c < 0) {
			err = errno;
			break;
		}
		if (c == 0)
			for (;;)
				sched_yield();
		kids[n++] = c;
	}
	printf("forked %d children, then %s\n", n, err == EAGAIN ? "EAGAIN" : err ? strerror(err) : "stopped at the limit asked");
	int killed = 0;
	for (int i = 0; i < n; i++)
		killed += kill(kids[i], SIGKILL) == 0;
	int reaped = 0, st;
	while (wait(&st) > 0)
		reaped += WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
	printf("killed %d, reaped %d\n", killed, reaped);
	fflush(stdout);
	pid_t c = fork();
	if (c == 0)
		_exit(3);
	waitpid(c, &st, 0);
	printf("a fork afterwards: %s\n", c > 0 && WEXITSTATUS(st) == 3 ? "works" : "FAILS");
	return 0;
}
