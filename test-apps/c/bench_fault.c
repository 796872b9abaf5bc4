/*
 * bench_fault [MIB]
 *
 * Benchmark, not a compatibility test: prints times, so its output differs
 * between runs. Three passes, each over a fresh anonymous mapping of MIB
 * MiB (default 256), unmapped after it:
 *  1. cold: touch one byte every 64 KiB. The guest kernel maps a 64 KiB
 *     aligned window of 16 pages per fault ("fault-around"), so each touch
 *     is one page fault there (natively, with transparent huge pages off
 *     for the mapping, one 4 KiB fault). In a fresh sandbox this is also
 *     the first touch of that guest RAM, which the host populates lazily.
 *  2. warm: the same again; the frames freed by pass 1 are reused, so this
 *     is the guest's fault path alone.
 *  3. touch every 4 KiB page.
 * Prints
 *   fault_ns_per_touch <pass 1, nanoseconds per 64 KiB-stride touch>
 *   fault_warm_ns_per_touch <pass 2, the same>
 *   page_ns_per_page <pass 3, nanoseconds per 4 KiB page>
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define KIB 1024ul
#define MIB (1024ul * KIB)

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static volatile unsigned char *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	/* Natively, huge pages would turn 512 faults into one; ignore
	 * failure (the guest kernel has no huge pages anyway). */
	madvise(p, len, MADV_NOHUGEPAGE);
	return p;
}

/* Nanoseconds per touch of one byte every `stride` bytes of a fresh
 * mapping of `len` bytes. */
static double touch(size_t len, size_t stride)
{
	volatile unsigned char *p = map(len);
	double start = now_ns();
	for (size_t off = 0; off < len; off += stride)
		p[off] = 1;
	double elapsed = now_ns() - start;
	munmap((void *)p, len);
	return elapsed / (double)(len / stride);
}

int main(int argc, char **argv)
{
	long mib = argc > 1 ? strtol(argv[1], NULL, 10) : 256;
	if (mib <= 0) {
		fputs("usage: bench_fault [MIB > 0]\n", stderr);
		return 2;
	}
	size_t len = (size_t)mib * MIB;

	printf("fault_ns_per_touch %.1f\n", touch(len, 64 * KIB));
	printf("fault_warm_ns_per_touch %.1f\n", touch(len, 64 * KIB));
	printf("page_ns_per_page %.1f\n", touch(len, 4 * KIB));
	return 0;
}
