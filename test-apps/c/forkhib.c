/*
 * forkhib [MIB]: hibernation with two processes. Fills MIB MiB (default
 * 16) with pattern A and forks. The child rewrites the second half with
 * pattern B (its own copies; the first half stays shared copy-on-write
 * with the parent), says "ready" and blocks reading a line from stdin:
 * the test hibernates and wakes the sandbox meanwhile. Then the child
 * checks its memory, the parent (which waited in wait4) checks its own,
 * and each prints one line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static unsigned char value(size_t i, unsigned seed)
{
	return (unsigned char)((i >> 12) * 7 + (i & 0xfff) * 13 + seed);
}

static void fill(unsigned char *p, size_t from, size_t to, unsigned seed)
{
	for (size_t i = from; i < to; i++)
		p[i] = value(i, seed);
}

static size_t bad(const unsigned char *p, size_t from, size_t to, unsigned seed)
{
	size_t n = 0;
	for (size_t i = from; i < to; i++)
		n += p[i] != value(i, seed);
	return n;
}

int main(int argc, char **argv)
{
	size_t len = (size_t)(argc > 1 ? atoi(argv[1]) : 16) << 20;
	unsigned char *p = malloc(len);
	if (!p)
		return 2;
	fill(p, 0, len, 1);
	fflush(stdout);
	pid_t c = fork();
	if (c < 0) {
		perror("fork");
		return 2;
	}
	if (c == 0) {
		fill(p, len / 2, len, 2);
		printf("ready\n");
		fflush(stdout);
		char line[64];
		if (!fgets(line, sizeof line, stdin))
			return 3;
		size_t n = bad(p, 0, len / 2, 1) + bad(p, len / 2, len, 2);
		printf("child: %zu bad bytes\n", n);
		return n != 0;
	}
	int st;
	if (waitpid(c, &st, 0) != c)
		return 4;
	size_t n = bad(p, 0, len, 1);
	printf("parent: %zu bad bytes, child status %d\n", n, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return n != 0;
}
