/*
 * init_sig MODE
 *
 * Signals to a container's pid 1 (pid_namespaces(7)): prints "ready" once
 * set up, then:
 *   wait     no handler; pauses forever (a SIGTERM from the runtime must
 *            leave it running, a SIGKILL ends it).
 *   handler  a SIGTERM handler; pauses until it runs, then exits 42.
 *   self     raise(SIGTERM), kill(getpid(), SIGKILL) with no handler: as
 *            pid 1 both are dropped; exits 7 (an ordinary process dies).
 *   child    a child sends pid 1 SIGTERM then SIGKILL, both dropped;
 *            exits 8 once the child is reaped.
 *   abort    abort(): dropped SIGABRT, then musl's crash instruction
 *            faults, and faults are never dropped.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_term(int sig)
{
	(void)sig;
	_exit(42);
}

static void ready(void)
{
	printf("ready pid %d\n", (int)getpid());
	fflush(stdout);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "wait";
	if (strcmp(mode, "handler") == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_term;
		sigaction(SIGTERM, &sa, NULL);
	}
	ready();
	if (strcmp(mode, "self") == 0) {
		raise(SIGTERM);
		kill(getpid(), SIGKILL);
		return 7;
	}
	if (strcmp(mode, "child") == 0) {
		pid_t c = fork();
		if (c == 0) {
			kill(1, SIGTERM);
			kill(1, SIGKILL);
			_exit(0);
		}
		int st;
		waitpid(c, &st, 0);
		return 8;
	}
	if (strcmp(mode, "abort") == 0)
		abort();
	for (;;)
		pause();
}
