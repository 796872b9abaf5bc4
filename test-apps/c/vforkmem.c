/*
 * vforkmem: a vfork child runs on its parent's memory until it execs or
 * exits (processes.rs). The parent sees what the child wrote to a global,
 * to the heap and into a mapping the child made; an exec error the child
 * stored; and a parent killed (by its vfork child) while it waits does
 * not take the child's memory with it: the orphaned child goes on, writes
 * and exits with its own status. Run as a subreaper so that natively the
 * orphan comes back to this process, as it does to pid 1 in the sandbox.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int global;
static volatile int child_errno;
static char *volatile child_map;

static void report(const char *what, int st)
{
	if (WIFEXITED(st))
		printf("%s: exit %d\n", what, WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		printf("%s: signal %d\n", what, WTERMSIG(st));
}

int main(void)
{
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	char *heap = malloc(64);
	if (!heap)
		return 2;
	strcpy(heap, "parent");
	int st;

	pid_t c = vfork();
	if (c == 0) {
		global = 42;
		strcpy(heap, "written by the child");
		child_map = mmap(NULL, 8192, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (child_map != MAP_FAILED)
			strcpy(child_map + 4096, "mapped by the child");
		_exit(3);
	}
	if (c < 0 || waitpid(c, &st, 0) != c)
		return 2;
	printf("global %d, heap \"%s\", mapping \"%s\"\n", global, heap,
	       child_map == MAP_FAILED ? "failed" : child_map + 4096);
	report("vfork child", st);

	c = vfork();
	if (c == 0) {
		char *argv[] = {"/no/such/program", NULL};
		execv(argv[0], argv);
		child_errno = errno;
		_exit(127);
	}
	if (c < 0 || waitpid(c, &st, 0) != c)
		return 2;
	printf("exec error seen by the parent: %s\n", strerror(child_errno));
	report("failed exec child", st);

	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		pid_t me = getpid();
		pid_t cc = vfork();
		if (cc == 0) {
			kill(me, SIGKILL);
			while (getppid() == me)
				sched_yield();
			strcpy(heap, "orphan");
			_exit(heap[0] == 'o' ? 7 : 8);
		}
		/* Not reached: killed while waiting for the vfork child. */
		printf("the vfork parent went on\n");
		_exit(9);
	}
	if (p < 0 || waitpid(p, &st, 0) != p)
		return 2;
	report("vfork parent killed by its child", st);
	if (wait(&st) < 0)
		return 2;
	report("the orphaned vfork child", st);
	printf("heap here: \"%s\"\n", heap);
	return 0;
}
