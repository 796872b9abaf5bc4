/* posix_spawn through the C library it is built against (glibc: clone
 * with CLONE_VM | CLONE_VFORK, the child reports an exec failure through
 * the memory it shares with the parent; musl: the same flags and a pipe).
 * A program that exists runs and its status comes back; a missing one is
 * ENOENT from posix_spawn itself; posix_spawnp searches PATH. */
#define _GNU_SOURCE
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
	if (argc > 1)
		return 42;
	setvbuf(stdout, NULL, _IOLBF, 0);
	pid_t pid;
	char *self_argv[] = {argv[0], "child", NULL};
	int r = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, self_argv, environ);
	int st = 0;
	if (r == 0)
		waitpid(pid, &st, 0);
	printf("posix_spawn self: %s, status %d\n", strerror(r), WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	char *bad[] = {"/no/such/program", NULL};
	r = posix_spawn(&pid, bad[0], NULL, NULL, bad, environ);
	printf("posix_spawn a missing program: %s\n", strerror(r));
	if (r == 0) {
		waitpid(pid, &st, 0);
		printf("  its status: %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
	char *nope[] = {"no-such-command-here", NULL};
	r = posix_spawnp(&pid, nope[0], NULL, NULL, nope, environ);
	printf("posix_spawnp a missing command: %s\n", strerror(r));
	if (r == 0)
		waitpid(pid, &st, 0);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", 1, 0);
	char *echo[] = {"sh", "-c", "echo should-not-show; exit 5", NULL};
	r = posix_spawnp(&pid, "sh", &fa, NULL, echo, environ);
	st = 0;
	if (r == 0)
		waitpid(pid, &st, 0);
	printf("posix_spawnp sh with stdout to /dev/null: %s, status %d\n", strerror(r),
	       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return 0;
}
