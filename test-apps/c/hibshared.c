/*
 * hibshared: a MAP_SHARED anonymous page stays shared when only one of
 * its sharers reads it back between two hibernations (issue 13;
 * runtime-shim/tests/processes.rs). The parent maps one shared page and
 * forks a child that waits on a pipe. Each line on stdin is a step:
 * "touch": the parent alone writes the page (after a hibernation it reads
 * the page back while the child's PTE still names the swap slot); "check":
 * the child writes its mark and reads the parent's count, the parent then
 * reads the child's mark. Both must see each other's writes.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	volatile unsigned *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
					 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int down[2], up[2];
	if (shared == MAP_FAILED || pipe(down) || pipe(up))
		return 2;
	shared[0] = 1;
	pid_t c = fork();
	if (c < 0)
		return 2;
	if (c == 0) {
		char b;
		if (read(down[0], &b, 1) != 1)
			return 3;
		shared[1] = 42;
		printf("child: count %u\n", shared[0]);
		fflush(stdout);
		return write(up[1], &b, 1) == 1 ? 0 : 4;
	}
	printf("ready\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (strcmp(line, "touch\n") == 0) {
			shared[0]++;
			printf("touched: count %u\n", shared[0]);
			fflush(stdout);
		} else if (strcmp(line, "check\n") == 0) {
			char b = 'x';
			if (write(down[1], &b, 1) != 1 || read(up[0], &b, 1) != 1)
				return 5;
			printf("parent: mark %s\n", shared[1] == 42 ? "seen" : "MISSING");
			int st;
			if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st))
				return 6;
			return shared[1] == 42 ? 0 : 1;
		}
	}
	return 7;
}
