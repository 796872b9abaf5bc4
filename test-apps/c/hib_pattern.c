/*
 * hib_pattern [MIB]
 *
 * For the hibernation tests and bench: fills MIB MiB (default 64) with a
 * pattern derived from a seed, keeps its checksum, prints "ready <sum>",
 * then serves one command per line on stdin (a blocking read, which is
 * where a hibernated sandbox waits):
 *
 *   verify      checks every byte against the pattern and the checksum:
 *               "ok <sum>" or "CORRUPT <offset>"
 *   touch N     reads N MiB from the start (a smaller working set): "ok"
 *   fill SEED   refills everything with a new seed: "ok <sum>"
 *   ping        "pong" (touches almost nothing)
 *   quit        exits 0
 *
 * Every answer is one line, flushed at once.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MIB (1024ul * 1024)

static uint64_t *buf;
static size_t words;
static uint64_t seed = 1;
static uint64_t sum;

static uint64_t pattern(size_t i)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
	x ^= x >> 31;
	return x * 0xbf58476d1ce4e5b9ull;
}

static uint64_t fill(void)
{
	uint64_t s = 0;
	for (size_t i = 0; i < words; i++) {
		buf[i] = pattern(i);
		s += buf[i] ^ i;
	}
	return s;
}

static void verify(void)
{
	uint64_t s = 0;
	for (size_t i = 0; i < words; i++) {
		if (buf[i] != pattern(i)) {
			printf("CORRUPT %zu\n", i * 8);
			return;
		}
		s += buf[i] ^ i;
	}
	if (s != sum)
		printf("CORRUPT checksum\n");
	else
		printf("ok %llx\n", (unsigned long long)s);
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
	words = mib * MIB / 8;
	buf = mmap(NULL, mib * MIB, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED) {
		printf("FAIL mmap\n");
		return 1;
	}
	sum = fill();
	printf("ready %llx\n", (unsigned long long)sum);
	fflush(stdout);
	char line[128];
	while (fgets(line, sizeof line, stdin)) {
		unsigned long n;
		if (strncmp(line, "verify", 6) == 0) {
			verify();
		} else if (sscanf(line, "touch %lu", &n) == 1) {
			volatile uint64_t acc = 0;
			size_t w = n * MIB / 8;
			for (size_t i = 0; i < w && i < words; i += 512)
				acc += buf[i];
			printf("ok\n");
		} else if (sscanf(line, "fill %lu", &n) == 1) {
			seed = n;
			sum = fill();
			printf("ok %llx\n", (unsigned long long)sum);
		} else if (strncmp(line, "ping", 4) == 0) {
			printf("pong\n");
		} else if (strncmp(line, "quit", 4) == 0) {
			return 0;
		} else {
			printf("unknown command\n");
		}
		fflush(stdout);
	}
	return 0;
}
