/*
 * cowhib: copy-on-write faults taken on a secondary vCPU while the
 * sandbox hibernates (docs/smp.md, "The 2-vCPU hibernation failure";
 * runtime-shim/tests/smp.rs). pid 1 fills a 2 MiB block and prints
 * "ready"; until a line arrives on stdin it keeps three children alive,
 * forking a new one as one ends. Each child computes about a millisecond,
 * rewrites one page of the inherited block with its own pattern (a
 * copy-on-write fault: the page is present and read-only), computes
 * again, and so on over every page; then it checks the whole block and
 * exits 0, or 1 on a bad word. Its long stints send it to a secondary
 * vCPU, so its faults come back to vCPU 0 to be served; a hibernation
 * between such a fault and its service swaps the page out. After the
 * line pid 1 waits for the children and checks its own block:
 * "children: all ok" (or the number that failed) and "parent: N bad
 * words". stderr gets the number of children run.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCK (2u << 20)
#define PAGE 4096u
#define WORDS (BLOCK / 4)
#define KIDS 3
#define BURN 1000000

static uint32_t *block;
static volatile uint64_t sink;

static uint32_t value(size_t i, uint32_t seed)
{
	return seed * 2654435761u + (uint32_t)i * 40503u;
}

static void burn(void)
{
	uint64_t x = sink;
	for (long i = 0; i < BURN; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	sink = x;
}

static int child(uint32_t seed)
{
	for (size_t p = 0; p < BLOCK / PAGE; p++) {
		burn();
		for (size_t i = p * (PAGE / 4); i < (p + 1) * (PAGE / 4); i++)
			block[i] = value(i, seed);
	}
	for (size_t i = 0; i < WORDS; i++)
		if (block[i] != value(i, seed))
			return 1;
	return 0;
}

static int ended(int status)
{
	return !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

int main(void)
{
	block = malloc(BLOCK);
	if (!block) {
		perror("malloc");
		return 1;
	}
	for (size_t i = 0; i < WORDS; i++)
		block[i] = value(i, 1);
	uint32_t seed = 1;
	int running = 0, failed = 0, runs = 0;
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		while (running < KIDS) {
			pid_t pid = fork();
			if (pid < 0) {
				perror("fork");
				return 1;
			}
			if (pid == 0)
				_exit(child(++seed));
			seed++;
			running++;
			runs++;
		}
		struct pollfd in = { .fd = 0, .events = POLLIN };
		if (poll(&in, 1, 0) > 0)
			break;
		int status;
		if (wait(&status) > 0) {
			running--;
			failed += ended(status);
		}
	}
	while (running > 0) {
		int status;
		if (wait(&status) <= 0)
			break;
		running--;
		failed += ended(status);
	}
	long bad = 0;
	for (size_t i = 0; i < WORDS; i++)
		bad += block[i] != value(i, 1);
	if (failed)
		printf("children: %d failed\n", failed);
	else
		printf("children: all ok\n");
	printf("parent: %ld bad words\n", bad);
	fprintf(stderr, "children run: %d\n", runs);
	return failed != 0 || bad != 0;
}
