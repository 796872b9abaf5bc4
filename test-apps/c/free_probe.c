/*
 * free_probe hold MIB HOW
 *   Maps and touches MIB MiB, prints "touched", waits for a line on stdin,
 *   frees the memory (HOW: "munmap", "dontneed" = madvise(MADV_DONTNEED)
 *   and keep the mapping, "brk" = grow the heap with brk and shrink it
 *   back), prints "freed" and waits for a line: the test reads the VMM's
 *   RSS meanwhile, with no reclaim asked for. Then it checks that the
 *   memory it maps (or still maps) reads as zero, prints "zero ok".
 *
 * free_probe ahead MIB
 *   Maps MIB MiB with MAP_POPULATE, writes a byte pattern into every
 *   second page, prints "mapped" and waits for a line on stdin: the test
 *   reads the VMM's RSS meanwhile (the sandbox backs fresh memory ahead
 *   and gives the untouched half back while the program waits). Then it
 *   checks that the written pages kept their bytes and the others read as
 *   zero, writes them all and prints "kept ok".
 *
 * free_probe churn ROUNDS
 *   Allocates and frees in a loop (mmap/munmap of 1-6 MiB, malloc/free,
 *   MADV_DONTNEED of parts, brk up and down), keeping up to 8 buffers
 *   alive, each filled with a pattern of its own and checked before it is
 *   freed and at the end: memory handed back to the host while the
 *   program runs must never lose or mix live data (every 16 rounds it
 *   sleeps 80 ms: the sandbox hands memory back when the program waits). Prints "churn ok
 *   <checksum>" and "freed <MiB> MiB" (what it gave back in all).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024ul * 1024)
#define PAGE 4096ul
#define SLOTS 8

static void fail(const char *what)
{
	printf("FAIL %s\n", what);
	fflush(stdout);
	exit(1);
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

/* musl's sbrk only reads the break: move it with the syscall. */
static unsigned char *brk_at(unsigned char *want)
{
	return (unsigned char *)syscall(SYS_brk, want);
}

static unsigned char *map(size_t len)
{
	unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		fail("mmap");
	return p;
}

static void check_zero(const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != 0)
			fail("freed memory not zero");
}

static int hold(size_t len, const char *how)
{
	unsigned char *p;
	if (strcmp(how, "brk") == 0) {
		p = brk_at(NULL);
		if (brk_at(p + len) != p + len)
			fail("brk up");
	} else {
		p = map(len);
	}
	memset(p, 0xa5, len);
	puts("touched");
	fflush(stdout);
	wait_for_line();

	if (strcmp(how, "munmap") == 0) {
		if (munmap(p, len) != 0)
			fail("munmap");
		p = NULL;
	} else if (strcmp(how, "dontneed") == 0) {
		if (madvise(p, len, MADV_DONTNEED) != 0)
			fail("madvise");
	} else if (strcmp(how, "brk") == 0) {
		unsigned char *end = brk_at(NULL);
		if (brk_at(end - len) != end - len)
			fail("brk down");
		p = NULL;
	} else {
		fail("HOW is munmap, dontneed or brk");
	}
	puts("freed");
	fflush(stdout);
	wait_for_line();

	if (p == NULL)
		p = map(len);
	check_zero(p, len);
	memset(p, 0x5a, len);
	puts("zero ok");
	return 0;
}

static int ahead(size_t len)
{
	unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED)
		fail("mmap");
	for (size_t off = 0; off < len; off += 2 * PAGE)
		memset(p + off, (int)(off / PAGE % 251) + 1, PAGE);
	puts("mapped");
	fflush(stdout);
	wait_for_line();

	for (size_t off = 0; off < len; off += PAGE) {
		unsigned char want = off % (2 * PAGE) ? 0 : (unsigned char)(off / PAGE % 251 + 1);
		for (size_t i = 0; i < PAGE; i++)
			if (p[off + i] != want)
				fail("a page changed while the program waited");
	}
	memset(p, 0x5a, len);
	puts("kept ok");
	return 0;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

struct buf {
	unsigned char *p;
	size_t len;
	unsigned seed;
	int kind; /* 0 mmap, 1 malloc */
	size_t zero_from, zero_to; /* a MADV_DONTNEED hole, page aligned */
};

static unsigned char pattern(unsigned seed, size_t i)
{
	return (unsigned char)(seed * 131u + (unsigned)(i / PAGE) * 7u + (unsigned)i);
}

static uint64_t check(const struct buf *b)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < b->len; i++) {
		unsigned char want = (i >= b->zero_from && i < b->zero_to) ? 0 : pattern(b->seed, i);
		if (b->p[i] != want) {
			printf("FAIL buffer %u byte %zu: %u, want %u\n", b->seed, i, b->p[i], want);
			fflush(stdout);
			exit(1);
		}
		sum = sum * 31 + want;
	}
	return sum;
}

/* Bytes the program gave back (munmap, free, MADV_DONTNEED, brk). */
static size_t freed;

static void release(struct buf *b)
{
	freed += b->len - (b->zero_to - b->zero_from);
	if (b->kind == 0)
		munmap(b->p, b->len);
	else
		free(b->p);
	b->p = NULL;
}

static int churn(long rounds)
{
	struct buf slots[SLOTS] = {0};
	uint64_t sum = 0;
	unsigned seed = 0;
	for (long r = 0; r < rounds; r++) {
		struct buf *b = &slots[next() % SLOTS];
		if (b->p) {
			sum += check(b);
			release(b);
		}
		b->len = (1 + next() % 6) * MIB + (next() % 16) * PAGE;
		b->kind = (int)(next() % 2);
		b->seed = ++seed;
		b->zero_from = b->zero_to = 0;
		if (b->kind == 0) {
			b->p = map(b->len);
		} else {
			b->p = malloc(b->len);
			if (!b->p)
				fail("malloc");
		}
		for (size_t i = 0; i < b->len; i++)
			b->p[i] = pattern(b->seed, i);
		if (b->kind == 0 && next() % 2) {
			/* Drop a page-aligned middle part; it must read zero. */
			size_t from = (next() % (b->len / PAGE / 2)) * PAGE;
			size_t to = from + (1 + next() % 256) * PAGE;
			if (to > b->len)
				to = b->len & ~(PAGE - 1);
			if (madvise(b->p + from, to - from, MADV_DONTNEED) != 0)
				fail("madvise");
			b->zero_from = from;
			b->zero_to = to;
			freed += to - from;
		}
		if (r % 16 == 0) {
			/* The heap grows by 3 MiB and shrinks back. */
			unsigned char *h = brk_at(NULL);
			if (brk_at(h + 3 * MIB) != h + 3 * MIB)
				fail("brk up");
			memset(h, 0x77, 3 * MIB);
			if (brk_at(h) != h)
				fail("brk down");
			freed += 3 * MIB;
			/* A wait: a sandbox hands freed memory back when the
			 * program waits (for 50 ms), while other buffers live. */
			struct timespec ts = {0, 80 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
	}
	for (int i = 0; i < SLOTS; i++)
		if (slots[i].p) {
			sum += check(&slots[i]);
			release(&slots[i]);
		}
	printf("churn ok %llu\nfreed %zu MiB\n", (unsigned long long)sum, freed / MIB);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "hold") == 0) {
		long mib = strtol(argv[2], NULL, 10);
		if (mib <= 0)
			fail("MIB > 0");
		return hold((size_t)mib * MIB, argv[3]);
	}
	if (argc == 3 && strcmp(argv[1], "churn") == 0)
		return churn(strtol(argv[2], NULL, 10));
	if (argc == 3 && strcmp(argv[1], "ahead") == 0) {
		long mib = strtol(argv[2], NULL, 10);
		if (mib <= 0)
			fail("MIB > 0");
		return ahead((size_t)mib * MIB);
	}
	fputs("usage: free_probe hold MIB munmap|dontneed|brk | ahead MIB | churn ROUNDS\n", stderr);
	return 2;
}
