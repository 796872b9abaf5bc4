/*
 * heapslack [wait]
 *
 * The heap shrunk with brk and grown again, as malloc trims and regrows
 * it: what the program sees must be what Linux gives it (the sandbox
 * keeps the pages above a shrunk break mapped and zeroes them when the
 * heap grows over them again: docs/memory.md, "Heap slack").
 *  1. 3 MiB grown, written, shrunk by 2 MiB, grown back: the 2 MiB read
 *     zero, the 1 MiB below keeps its bytes.
 *  2. After a fork: the parent shrinks and regrows the heap the two share
 *     copy-on-write and writes it; the child still reads its bytes.
 *  3. A fixed mapping placed just above the break after a shrink reads
 *     zero, and the heap cannot grow over it (brk fails, as Linux's).
 *  4. A shared mapping placed inside the heap goes with a shrink.
 *  5. 200 rounds of 6 MiB grown, written in full, shrunk back (malloc's
 *     pattern for a large request): the heap reads zero each time.
 *  6. With "wait": 4 MiB grown, written, shrunk; prints "shrunk" and
 *     reads a line from stdin (the test hibernates the sandbox there);
 *     then grown back: it reads zero.
 * Prints one line per check and "done".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (1024ul * 1024)

/* musl's sbrk only reads the break: move it with the syscall. */
static unsigned char *brk_at(unsigned char *want)
{
	return (unsigned char *)syscall(SYS_brk, want);
}

static int all(const unsigned char *p, size_t len, unsigned char v)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

static const char *yes(int ok)
{
	return ok ? "yes" : "no";
}

static unsigned char *grow(unsigned char *base, size_t len)
{
	if (brk_at(base + len) != base + len) {
		puts("brk failed");
		exit(1);
	}
	return base;
}

int main(int argc, char **argv)
{
	/* Page-aligned start: the break moves by whole pages. */
	unsigned char *h = brk_at(NULL);
	h = (unsigned char *)(((unsigned long)h + 4095) & ~4095ul);
	grow(h, 0);

	grow(h, 3 * MIB);
	memset(h, 0x5a, 3 * MIB);
	grow(h, 1 * MIB);
	grow(h, 3 * MIB);
	printf("regrown reads zero: %s, below kept: %s\n",
	       yes(all(h + MIB, 2 * MIB, 0)), yes(all(h, MIB, 0x5a)));

	memset(h, 0x11, 3 * MIB);
	fflush(stdout);
	int ready[2];
	if (pipe(ready) != 0)
		return 1;
	pid_t child = fork();
	if (child == 0) {
		char c;
		close(ready[1]);
		if (read(ready[0], &c, 1) != 1)
			_exit(2);
		printf("child keeps its heap: %s\n", yes(all(h, 3 * MIB, 0x11)));
		fflush(stdout);
		_exit(0);
	}
	close(ready[0]);
	grow(h, 1 * MIB);
	grow(h, 3 * MIB);
	int zero = all(h + MIB, 2 * MIB, 0);
	memset(h + MIB, 0x22, 2 * MIB);
	printf("parent regrown after fork reads zero: %s\n", yes(zero));
	fflush(stdout);
	if (write(ready[1], "x", 1) != 1)
		return 1;
	int st;
	waitpid(child, &st, 0);
	printf("child status %d, parent's bytes: %s\n", WEXITSTATUS(st),
	       yes(all(h + MIB, 2 * MIB, 0x22)));

	grow(h, 1 * MIB);
	unsigned char *m = mmap(h + MIB, MIB, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (m == MAP_FAILED)
		return 1;
	printf("fixed mapping over the slack reads zero: %s\n", yes(all(m, MIB, 0)));
	printf("heap grows over it: %s\n",
	       yes(brk_at(h + 3 * MIB) == h + 3 * MIB));
	munmap(m, MIB);
	grow(h, 3 * MIB);
	printf("regrown after the mapping went reads zero: %s\n",
	       yes(all(h + MIB, 2 * MIB, 0)));

	/* A shared mapping placed inside the heap goes with the shrink. */
	unsigned char *in = mmap(h + 2 * MIB, MIB, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (in == MAP_FAILED)
		return 1;
	memset(in, 0x44, MIB);
	grow(h, 1 * MIB);
	grow(h, 3 * MIB);
	printf("mapping inside the heap gone after a shrink: %s\n",
	       yes(all(h + MIB, 2 * MIB, 0)));

	int ok = 1;
	for (int r = 0; r < 200; r++) {
		grow(h, 6 * MIB);
		ok &= all(h + MIB, 5 * MIB, 0);
		memset(h, r & 0xff, 6 * MIB);
		grow(h, 1 * MIB);
	}
	printf("200 rounds of 6 MiB read zero: %s\n", yes(ok));

	if (argc > 1 && strcmp(argv[1], "wait") == 0) {
		grow(h, 5 * MIB);
		memset(h, 0x33, 5 * MIB);
		grow(h, 1 * MIB);
		puts("shrunk");
		fflush(stdout);
		char line[16];
		if (!fgets(line, sizeof line, stdin))
			return 1;
		grow(h, 5 * MIB);
		printf("regrown after the wait reads zero: %s\n", yes(all(h + MIB, 4 * MIB, 0)));
	}
	puts("done");
	return 0;
}
