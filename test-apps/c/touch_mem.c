/*
 * touch_mem [MIB]
 *
 * Maps MIB MiB (default 64) of anonymous memory, writes one byte per 4 KiB
 * page, reads them all back, and unmaps. Then checks that mprotect to
 * read-only keeps the contents readable, and that mremap can grow a mapping
 * while preserving its contents.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE 4096ul
#define MIB (1024ul * 1024)

static void fail(const char *what)
{
	printf("FAIL %s\n", what);
	exit(1);
}

static unsigned char page_byte(size_t page)
{
	return (unsigned char)(page * 7 + 1);
}

static void touch(size_t mib)
{
	size_t len = mib * MIB;
	unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		fail("mmap");
	for (size_t page = 0; page < len / PAGE; page++) {
		if (p[page * PAGE] != 0)
			fail("fresh page not zero");
		p[page * PAGE] = page_byte(page);
	}
	uint64_t sum = 0;
	for (size_t page = 0; page < len / PAGE; page++) {
		if (p[page * PAGE] != page_byte(page))
			fail("page readback");
		sum += p[page * PAGE];
	}
	if (munmap(p, len) != 0)
		fail("munmap");
	printf("touched %zu MiB, sum %llu\n", mib, (unsigned long long)sum);
	puts("ok");
}

static void check_mprotect(void)
{
	unsigned char *p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		fail("mmap for mprotect");
	memset(p, 0x5a, 2 * PAGE);
	if (mprotect(p, PAGE, PROT_READ) != 0)
		fail("mprotect");
	for (size_t i = 0; i < 2 * PAGE; i++)
		if (p[i] != 0x5a)
			fail("mprotect readback");
	p[PAGE] = 1; /* the second page stays writable */
	if (munmap(p, 2 * PAGE) != 0)
		fail("munmap after mprotect");
	puts("mprotect ok");
}

static void check_mremap(void)
{
	size_t old_len = 1 * MIB, new_len = 4 * MIB;
	unsigned char *p = mmap(NULL, old_len, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		fail("mmap for mremap");
	for (size_t i = 0; i < old_len; i++)
		p[i] = (unsigned char)(i ^ (i >> 9));
	unsigned char *q = mremap(p, old_len, new_len, MREMAP_MAYMOVE);
	if (q == MAP_FAILED)
		fail("mremap");
	for (size_t i = 0; i < old_len; i++)
		if (q[i] != (unsigned char)(i ^ (i >> 9)))
			fail("mremap lost contents");
	for (size_t i = old_len; i < new_len; i += PAGE) {
		if (q[i] != 0)
			fail("mremap grown part not zero");
		q[i] = 1;
	}
	if (munmap(q, new_len) != 0)
		fail("munmap after mremap");
	puts("mremap ok");
}

int main(int argc, char **argv)
{
	long mib = argc > 1 ? strtol(argv[1], NULL, 10) : 64;
	if (mib <= 0) {
		fputs("usage: touch_mem [MIB > 0]\n", stderr);
		return 2;
	}
	touch((size_t)mib);
	check_mprotect();
	check_mremap();
	return 0;
}
