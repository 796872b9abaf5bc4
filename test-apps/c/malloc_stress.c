/*
 * malloc/realloc/free/calloc under a fixed-seed PRNG. Small blocks come from
 * the heap, blocks of 256 KiB and more take musl's mmap path (and realloc of
 * them mremap). Every block is filled with a pattern derived from its slot
 * and generation and verified before it is resized or freed. The checksum
 * depends only on the PRNG, never on addresses.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 512
#define ROUNDS 40000
#define LARGE_MIN (256u * 1024)
#define LARGE_MAX (2u * 1024 * 1024)

struct block {
	unsigned char *p;
	size_t size;
	uint32_t tag;
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t checksum = 14695981039346656037ull; /* FNV-1a */

static uint64_t rng(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ull;
}

static void mix(uint64_t v)
{
	for (int i = 0; i < 8; i++) {
		checksum ^= (v >> (8 * i)) & 0xff;
		checksum *= 1099511628211ull;
	}
}

static void fail(const char *what, int slot)
{
	printf("FAIL %s (slot %d)\n", what, slot);
	exit(1);
}

static size_t pick_size(void)
{
	uint64_t r = rng();
	if (r % 64 == 0)
		return LARGE_MIN + (size_t)(rng() % (LARGE_MAX - LARGE_MIN));
	if (r % 8 == 1)
		return 1 + (size_t)(rng() % 16384);
	return 1 + (size_t)(rng() % 256);
}

static unsigned char pattern(uint32_t tag, size_t i)
{
	return (unsigned char)(tag * 31u + (uint32_t)i * 7u + (uint32_t)(i >> 8));
}

/* Writes the pattern into [from, size); the whole block for from == 0. */
static void fill(struct block *b, size_t from)
{
	for (size_t i = from; i < b->size; i++)
		b->p[i] = pattern(b->tag, i);
}

/* Checks the pattern over [0, upto). Large blocks are sampled to stay fast. */
static void verify(const struct block *b, size_t upto, int slot)
{
	size_t step = upto > 65536 ? 61 : 1;
	for (size_t i = 0; i < upto; i += step)
		if (b->p[i] != pattern(b->tag, i))
			fail("pattern", slot);
	if (upto > 0 && b->p[upto - 1] != pattern(b->tag, upto - 1))
		fail("pattern end", slot);
}

static void check_calloc(void)
{
	static const size_t sizes[] = { 1, 24, 100, 4096, 100000, LARGE_MIN,
					 LARGE_MAX + 12345 };
	for (int round = 0; round < 8; round++) {
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			/* Dirty memory first so calloc has to hand back zeroes
			 * over reused blocks. */
			unsigned char *dirty = malloc(sizes[s]);
			if (dirty == NULL)
				fail("malloc for calloc", (int)s);
			memset(dirty, 0xa5, sizes[s]);
			free(dirty);

			size_t n = sizes[s] / 8 + 1;
			uint64_t *z = calloc(n, 8);
			if (z == NULL)
				fail("calloc", (int)s);
			for (size_t i = 0; i < n; i++)
				if (z[i] != 0)
					fail("calloc not zero", (int)s);
			mix(n);
			free(z);
		}
	}
	/* Overflowing n * size must fail, not wrap around. volatile keeps
	 * the compiler from folding the call away. */
	volatile size_t huge = SIZE_MAX / 2;
	if (calloc(huge, 4) != NULL)
		fail("calloc overflow", -1);
	puts("calloc ok");
}

int main(void)
{
	static struct block blocks[SLOTS];
	uint32_t next_tag = 1;

	for (int round = 0; round < ROUNDS; round++) {
		int slot = (int)(rng() % SLOTS);
		struct block *b = &blocks[slot];
		if (b->p == NULL) {
			b->size = pick_size();
			b->tag = next_tag++;
			b->p = malloc(b->size);
			if (b->p == NULL)
				fail("malloc", slot);
			fill(b, 0);
			mix(b->size);
		} else if (rng() % 3 == 0) {
			size_t new_size = pick_size();
			verify(b, b->size, slot);
			unsigned char *np = realloc(b->p, new_size);
			if (np == NULL)
				fail("realloc", slot);
			b->p = np;
			size_t kept = new_size < b->size ? new_size : b->size;
			verify(b, kept, slot);
			size_t old = b->size;
			b->size = new_size;
			fill(b, old < new_size ? old : new_size);
			mix(new_size ^ ((uint64_t)kept << 32));
		} else {
			verify(b, b->size, slot);
			mix(b->p[b->size / 2]);
			free(b->p);
			b->p = NULL;
		}
	}
	for (int slot = 0; slot < SLOTS; slot++) {
		if (blocks[slot].p != NULL) {
			verify(&blocks[slot], blocks[slot].size, slot);
			free(blocks[slot].p);
		}
	}
	puts("malloc/realloc/free ok");

	check_calloc();
	printf("checksum %016llx\n", (unsigned long long)checksum);
	puts("ok");
	return 0;
}
