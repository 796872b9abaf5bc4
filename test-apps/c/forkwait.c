/*
 * forkwait: fork, copy-on-write, wait4/waitid statuses, getppid, zombies,
 * ECHILD, kill to a child, vfork, posix_spawn. One stable line per check (no pids);
 * outcomes do not depend on whether parent or child runs first.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGES 4
static char pages[PAGES][4096];
static char untouched[2][4096];
static volatile sig_atomic_t got_usr1;
static void usr1(int s);

static void report_status(const char *what, int st)
{
	if (WIFEXITED(st))
		printf("%s: exited %d\n", what, WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		printf("%s: signal %d\n", what, WTERMSIG(st));
	else
		printf("%s: other %#x\n", what, st);
}

static int all(const char *p, char c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != c)
			return 0;
	return 1;
}

static void cow(void)
{
	int fd[2];
	char *heap = malloc(64 * 1024);
	char stack[8192];
	for (int i = 0; i < PAGES; i++)
		memset(pages[i], 'P', 4096);
	memset(heap, 'P', 64 * 1024);
	memset(stack, 'P', sizeof stack);
	if (pipe(fd) != 0) {
		perror("pipe");
		exit(1);
	}
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		char line[256];
		int ok = all(pages[0], 'P', 4096) && all(pages[3], 'P', 4096) &&
			 all(heap, 'P', 64 * 1024) && all(stack, 'P', sizeof stack);
		memset(pages[0], 'C', 4096);
		memset(pages[1], 'C', 4096);
		memset(heap, 'C', 32 * 1024);
		stack[0] = 'C';
		untouched[0][0] = 'C';
		/* A grandchild shares the child's pages again. */
		pid_t g = fork();
		if (g == 0) {
			int gok = all(pages[0], 'C', 4096) && all(heap + 32 * 1024, 'P', 32 * 1024);
			memset(pages[0], 'G', 4096);
			_exit(gok ? 0 : 1);
		}
		int gst = -1;
		waitpid(g, &gst, 0);
		ok = ok && all(pages[0], 'C', 4096) && all(pages[1], 'C', 4096) &&
		     all(pages[2], 'P', 4096) && all(heap, 'C', 32 * 1024) &&
		     all(heap + 32 * 1024, 'P', 32 * 1024) && stack[0] == 'C' &&
		     stack[1] == 'P' && untouched[0][0] == 'C' && untouched[1][0] == 0;
		snprintf(line, sizeof line, "cow child: %s, grandchild: %s\n",
			 ok ? "own values" : "WRONG", gst == 0 ? "own values" : "WRONG");
		if (write(fd[1], line, strlen(line)) < 0)
			_exit(3);
		_exit(0);
	}
	close(fd[1]);
	memset(pages[1], 'Q', 4096);
	memset(pages[2], 'Q', 4096);
	memset(heap + 32 * 1024, 'Q', 32 * 1024);
	stack[1] = 'Q';
	int st;
	if (waitpid(c, &st, 0) != c)
		perror("waitpid");
	char buf[256];
	ssize_t n = read(fd[0], buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = 0;
	fputs(buf, stdout);
	close(fd[0]);
	int ok = all(pages[0], 'P', 4096) && all(pages[1], 'Q', 4096) &&
		 all(pages[2], 'Q', 4096) && all(pages[3], 'P', 4096) &&
		 all(heap, 'P', 32 * 1024) && all(heap + 32 * 1024, 'Q', 32 * 1024) &&
		 stack[0] == 'P' && stack[1] == 'Q' && untouched[0][0] == 0;
	printf("cow parent: %s\n", ok ? "own values" : "WRONG");
	report_status("cow child status", st);
	free(heap);
}

static void statuses(void)
{
	static const int codes[] = {0, 7, 255};
	for (unsigned i = 0; i < sizeof codes / sizeof codes[0]; i++) {
		fflush(stdout);
		pid_t c = fork();
		if (c == 0)
			_exit(codes[i]);
		int st;
		pid_t w = wait4(c, &st, 0, NULL);
		report_status(w == c ? "wait4 exit" : "wait4 WRONG PID", st);
	}
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		volatile int *volatile bad = (int *)8;
		*bad = 1;
		_exit(0);
	}
	int st;
	waitpid(c, &st, 0);
	report_status("segv child", st);
	fflush(stdout);
	c = fork();
	if (c == 0)
		abort();
	waitpid(c, &st, 0);
	report_status("abort child", st);

	fflush(stdout);
	c = fork();
	if (c == 0)
		exit(9);
	siginfo_t si;
	memset(&si, 0, sizeof si);
	int r = waitid(P_PID, c, &si, WEXITED);
	printf("waitid: r=%d signo=%d code=%s status=%d pid %s\n", r, si.si_signo,
	       si.si_code == CLD_EXITED ? "CLD_EXITED" : "other", si.si_status,
	       si.si_pid == c ? "matches" : "WRONG");
}

static void kills(void)
{
	/* A child that yields forever: WNOHANG sees it running, SIGKILL ends it. */
	fflush(stdout);
	pid_t c = fork();
	if (c == 0)
		for (;;)
			sched_yield();
	int st = 0;
	printf("wait4 WNOHANG on a live child: %d\n", (int)waitpid(c, &st, WNOHANG));
	siginfo_t si;
	memset(&si, 0x55, sizeof si);
	int r = waitid(P_ALL, 0, &si, WEXITED | WNOHANG);
	printf("waitid WNOHANG on a live child: r=%d si_pid=%d\n", r, (int)si.si_pid);
	printf("kill SIGKILL: %d\n", kill(c, SIGKILL));
	waitpid(c, &st, 0);
	report_status("killed child", st);

	/* A handled signal: the child's handler runs and it exits 42. */
	fflush(stdout);
	c = fork();
	if (c == 0) {
		while (!got_usr1)
			sched_yield();
		_exit(42);
	}
	printf("kill SIGUSR1: %d\n", kill(c, SIGUSR1));
	waitpid(c, &st, 0);
	report_status("SIGUSR1 child", st);
	/* kill(pid, 0) to a live child, then to a reaped one. */
	fflush(stdout);
	c = fork();
	if (c == 0)
		_exit(0);
	printf("kill 0 to a child: %d\n", kill(c, 0));
	waitpid(c, &st, 0);
	errno = 0;
	r = kill(c, 0);
	printf("kill 0 to a reaped child: %d %s\n", r, errno == ESRCH ? "ESRCH" : "other");
}

static void usr1(int s)
{
	(void)s;
	got_usr1 = 1;
}

static void zombies(void)
{
	int sum = 0, n = 0, st;
	for (int i = 1; i <= 3; i++) {
		fflush(stdout);
		if (fork() == 0)
			_exit(i);
	}
	pid_t w;
	while ((w = wait(&st)) > 0) {
		n++;
		sum += WEXITSTATUS(st);
	}
	printf("reaped %d zombies, codes sum %d, then %s\n", n, sum,
	       errno == ECHILD ? "ECHILD" : "other");
	errno = 0;
	w = waitpid(-1, &st, 0);
	printf("waitpid with no children: %d %s\n", (int)w, errno == ECHILD ? "ECHILD" : "other");
	/* SIGCHLD ignored: children are reaped by the kernel. */
	signal(SIGCHLD, SIG_IGN);
	fflush(stdout);
	if (fork() == 0)
		_exit(1);
	errno = 0;
	w = wait(&st);
	printf("wait with SIGCHLD ignored: %d %s\n", (int)w, errno == ECHILD ? "ECHILD" : "other");
	signal(SIGCHLD, SIG_DFL);
}

extern char **environ;

/* Process groups and sessions: setpgid from both sides (as shells do),
 * kill(-pgid), setsid in a child. */
static void groups(void)
{
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		setpgid(0, 0);
		for (;;)
			sched_yield();
	}
	int r = setpgid(c, c);
	printf("setpgid(child, child): %d, getpgid(child) is the child: %s\n", r,
	       getpgid(c) == c ? "yes" : "no");
	printf("the parent's group is unchanged: %s\n", getpgrp() != c ? "yes" : "no");
	printf("kill(-pgid, SIGKILL): %d\n", kill(-c, SIGKILL));
	int st;
	waitpid(c, &st, 0);
	report_status("group member", st);
	fflush(stdout);
	c = fork();
	if (c == 0) {
		pid_t s = setsid();
		int ok = s == getpid() && getsid(0) == s && getpgrp() == s;
		errno = 0;
		int again = setsid();
		_exit(ok && again == -1 && errno == EPERM ? 0 : 1);
	}
	waitpid(c, &st, 0);
	printf("setsid in a child: %s\n", st == 0 ? "new session, then EPERM" : "WRONG");
	errno = 0;
	r = setpgid(1 << 22, 0);
	printf("setpgid of a stranger: %s\n", errno == ESRCH ? "ESRCH" : "other");
	(void)r;
}

/* posix_spawn (musl: clone with CLONE_VM | CLONE_VFORK and a new stack). */
static void spawn(const char *self)
{
	pid_t pid;
	int st = -1;
	char *argv[] = {(char *)self, "spawned", NULL};
	fflush(stdout);
	int r = posix_spawn(&pid, self, NULL, NULL, argv, environ);
	if (r == 0)
		waitpid(pid, &st, 0);
	printf("posix_spawn self: %d, ", r);
	report_status("status", st);
	char *bad[] = {"/nonexistent/program", NULL};
	r = posix_spawn(&pid, bad[0], NULL, NULL, bad, environ);
	printf("posix_spawn a missing program: %s\n", r == ENOENT ? "ENOENT" : "other");
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "spawned") == 0)
		return 33;
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = usr1;
	sigaction(SIGUSR1, &sa, NULL);
	pid_t me = getpid();
	fflush(stdout);
	pid_t c = fork();
	if (c == 0)
		_exit(getppid() == me ? 0 : 1);
	int st;
	waitpid(c, &st, 0);
	printf("getppid in the child: %s\n", st == 0 ? "the parent" : "WRONG");
	printf("fork returned a positive pid: %s\n", c > 0 ? "yes" : "no");
	cow();
	statuses();
	kills();
	zombies();
	fflush(stdout);
	c = vfork();
	if (c == 0)
		_exit(5);
	waitpid(c, &st, 0);
	report_status("vfork child", st);
	spawn(argv[0]);
	groups();
	return 0;
}
