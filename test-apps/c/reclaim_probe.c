/*
 * reclaim_probe [MIB]
 *
 * For the memory-reclaim test: maps and touches MIB MiB (default 128),
 * unmaps it, prints "unmapped" and waits for one line on stdin (EOF also
 * continues). The test reclaims guest memory meanwhile. Then it maps MIB MiB
 * again and checks that every byte reads as zero before writing it: memory
 * handed back to the host must never leak old contents into a new mapping.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096ul
#define MIB (1024ul * 1024)

static void fail(const char *what)
{
	printf("FAIL %s\n", what);
	exit(1);
}

static unsigned char *map(size_t len)
{
	unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		fail("mmap");
	return p;
}

static void wait_for_line(void)
{
	char c;
	for (;;) {
		ssize_t n = read(0, &c, 1);
		if (n == 0 || (n == 1 && c == '\n'))
			return;
		if (n < 0)
			fail("read stdin");
	}
}

int main(int argc, char **argv)
{
	long mib = argc > 1 ? strtol(argv[1], NULL, 10) : 128;
	if (mib <= 0) {
		fputs("usage: reclaim_probe [MIB > 0]\n", stderr);
		return 2;
	}
	size_t len = (size_t)mib * MIB;

	unsigned char *p = map(len);
	memset(p, 0xa5, len);
	if (munmap(p, len) != 0)
		fail("munmap");
	puts("unmapped");
	fflush(stdout);

	wait_for_line();

	p = map(len);
	for (size_t i = 0; i < len; i++) {
		if (p[i] != 0)
			fail("remapped memory not zero");
		p[i] = 0x5a;
	}
	puts("zero ok");
	return 0;
}
