/* Copy-on-write matrix across fork, and SIGCHLD's siginfo. For each kind
 * of memory (private anonymous, heap, static data, stack, a MAP_PRIVATE
 * file page, MAP_SHARED anonymous memory touched and not touched before
 * the fork) the parent writes before the fork, the child reads and writes,
 * then the parent reads and writes and the child reads again: private
 * memory keeps each side's own values, shared memory shows the other
 * side's writes (also a grandchild's, and after the child unmapped it or
 * exited). Then SA_SIGINFO SIGCHLD for an exit and a kill: si_code,
 * si_status, si_pid. One stable line per check; "WRONG" when a result
 * contradicts Linux. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

enum { N = 7 };
static const char *names[N] = {"private anon", "heap", "static data", "stack",
			       "private file", "shared anon", "shared anon untouched"};
static int shared_kind(int i) { return i >= 5; }
static volatile int *slot[N];
static int data_word = 1;

static void sync_write(int fd) { char c = 1; if (write(fd, &c, 1) != 1) _exit(90); }
static void sync_read(int fd) { char c; if (read(fd, &c, 1) != 1) _exit(91); }

static void matrix(void)
{
	int stack_word = 1;
	int *anon = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int fd = open("/proc/self/exe", O_RDONLY);
	char *file = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	int *sh = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (anon == MAP_FAILED || file == MAP_FAILED || sh == MAP_FAILED || fd < 0) {
		printf("setup: WRONG\n");
		return;
	}
	printf("file starts with ELF: %s\n", memcmp(file, "\177ELF", 4) == 0 ? "yes" : "WRONG");
	slot[0] = anon;
	slot[1] = malloc(64);
	slot[2] = &data_word;
	slot[3] = &stack_word;
	slot[4] = (volatile int *)(file + 64);
	slot[5] = sh;
	slot[6] = sh + 2048; /* the second page, never touched before the fork */
	for (int i = 0; i < N; i++)
		if (i != 6)
			*slot[i] = 10; /* parent, before the fork */
	int to_child[2], to_parent[2];
	if (pipe(to_child) || pipe(to_parent)) {
		printf("pipe: WRONG\n");
		return;
	}
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		char line[512] = "";
		for (int i = 0; i < N; i++) {
			int want = i == 6 ? 0 : 10;
			if (*slot[i] != want)
				snprintf(line + strlen(line), sizeof line - strlen(line), " %s=%d", names[i], *slot[i]);
			*slot[i] = 20; /* child writes */
		}
		sync_write(to_parent[1]);
		sync_read(to_child[0]); /* the parent wrote 30 */
		for (int i = 0; i < N; i++) {
			int want = shared_kind(i) ? 30 : 20;
			if (*slot[i] != want)
				snprintf(line + strlen(line), sizeof line - strlen(line), " after %s=%d", names[i], *slot[i]);
		}
		/* A grandchild writes the shared page; then this child unmaps it. */
		pid_t g = fork();
		if (g == 0) {
			sh[1] = 77;
			sh[2048 + 1] = 78;
			_exit(0);
		}
		waitpid(g, NULL, 0);
		munmap(sh, 3 * 4096);
		printf("child sees: %s\n", line[0] ? line : "parent's values before, own and shared after");
		fflush(stdout);
		sync_write(to_parent[1]);
		_exit(3);
	}
	sync_read(to_parent[0]);
	char line[512] = "";
	for (int i = 0; i < N; i++) {
		int want = shared_kind(i) ? 20 : (i == 6 ? 0 : 10);
		if (*slot[i] != want)
			snprintf(line + strlen(line), sizeof line - strlen(line), " %s=%d", names[i], *slot[i]);
		*slot[i] = 30;
	}
	sync_write(to_child[1]);
	sync_read(to_parent[0]);
	int st;
	waitpid(c, &st, 0);
	printf("parent sees: %s\n", line[0] ? line : "own private values, child's shared writes");
	printf("grandchild's shared writes after the child unmapped and exited: %d %d%s\n", sh[1], sh[2048 + 1],
	       sh[1] == 77 && sh[2049] == 78 ? "" : " WRONG");
	printf("child status: %d\n", WEXITSTATUS(st));
	/* The shared memory is still the parent's to use. */
	sh[100] = 5;
	printf("shared still writable: %d\n", sh[100]);
	munmap(sh, 3 * 4096);
	munmap(file, 4096);
	close(fd);
}

static volatile sig_atomic_t got;
static volatile int g_signo, g_code, g_status, g_pid;

static void on_chld(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	g_signo = sig;
	g_code = si->si_code;
	g_status = si->si_status;
	g_pid = si->si_pid;
	got = 1;
}

static const char *code_name(int c)
{
	switch (c) {
	case CLD_EXITED: return "CLD_EXITED";
	case CLD_KILLED: return "CLD_KILLED";
	case CLD_DUMPED: return "CLD_DUMPED";
	case CLD_STOPPED: return "CLD_STOPPED";
	case CLD_CONTINUED: return "CLD_CONTINUED";
	default: return "other";
	}
}

static void sigchld(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_chld;
	sa.sa_flags = SA_SIGINFO | SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGCHLD);
	for (int round = 0; round < 2; round++) {
		sigprocmask(SIG_BLOCK, &block, &old);
		got = 0;
		fflush(stdout);
		pid_t c = fork();
		if (c == 0) {
			if (round == 0)
				_exit(7);
			for (;;)
				pause();
		}
		if (round == 1)
			kill(c, SIGKILL);
		while (!got)
			sigsuspend(&old);
		sigprocmask(SIG_SETMASK, &old, NULL);
		int st;
		waitpid(c, &st, 0);
		printf("SIGCHLD: signo=%d code=%s status=%d pid %s\n", g_signo, code_name(g_code), g_status,
		       g_pid == c ? "matches" : "WRONG");
	}
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	matrix();
	sigchld();
	return 0;
}
