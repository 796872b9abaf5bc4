/*
 * hibcycles: data kept intact by many hibernations of several processes
 * (issue 13; runtime-shim/tests/processes.rs). pid 1 fills 4 MiB it then
 * shares copy-on-write, maps 8 pages MAP_SHARED anonymous, and forks
 * three children; each child rewrites half of the inherited block with
 * its own pattern, and every process fills 3 MiB of its own. The four
 * pass a token around a ring (pid 1 -> pipe -> child 1 -> pipe -> child
 * 2 -> socketpair -> child 3 -> socketpair -> pid 1); each hop rewrites a
 * page of each of the holder's blocks with the values they hold and
 * counts itself in a shared page. pid 1 says "ring" as the ring starts;
 * after at least 500 rounds, a line on stdin stops the ring ("stopped"),
 * every process then waits (the children on the ring, pid 1 on stdin),
 * and a second line starts the check: the token goes around once more;
 * each process writes its mark in the shared pages, checks every byte it
 * owns, the hop count and the previous process's mark (written after the
 * hibernations: the pages must still be shared), prints its checksums
 * and passes the token on. stdout does not depend on the number of
 * rounds (the same natively); stderr gets "rounds N".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define NPROC 4
#define MIN_ROUNDS 500
#define INHERITED (4u << 20)
#define OWN (3u << 20)
#define SHARED_PAGES 8
#define PAGE 4096u
#define WORDS (PAGE / 4)
#define CHECK 0x80000000u

static unsigned char value(size_t i, unsigned seed)
{
	return (unsigned char)((i >> 12) * 7 + (i & 0xfff) * 13 + seed * 29);
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

static uint64_t fnv(const unsigned char *p, size_t len)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static int rd[NPROC], wr[NPROC];	/* process i reads rd[i], writes wr[i] */
static unsigned char *inherited, *own;
/* Word 0 of page k: the hops that touched page k; word 1 + i of page 0:
 * process i's mark. */
static volatile uint32_t *shared;

static int get(int fd, uint32_t *v)
{
	size_t got = 0;
	while (got < sizeof *v) {
		ssize_t n = read(fd, (char *)v + got, sizeof *v - got);
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

static int put(int fd, uint32_t v)
{
	return write(fd, &v, sizeof v) == sizeof v ? 0 : -1;
}

static unsigned inherited_seed(int i, size_t at)
{
	return i == 0 || at < INHERITED / 2 ? 1 : 10 + (unsigned)i;
}

/* One hop of round r held by process i: rewrite one page of each block
 * with the values it already holds, count the hop in a shared page. */
static void hop(int i, uint32_t r)
{
	size_t a = (size_t)(r * 13 % (INHERITED / PAGE)) * PAGE;
	fill(inherited, a, a + PAGE, inherited_seed(i, a));
	size_t b = (size_t)(r * 7 % (OWN / PAGE)) * PAGE;
	fill(own, b, b + PAGE, 20 + (unsigned)i);
	shared[(r % SHARED_PAGES) * WORDS]++;
}

/* Process i's check after `rounds` rounds; prints one line. */
static int check(int i, uint32_t rounds)
{
	size_t n = bad(own, 0, OWN, 20 + (unsigned)i) +
		   bad(inherited, 0, INHERITED / 2, inherited_seed(i, 0)) +
		   bad(inherited, INHERITED / 2, INHERITED,
		       inherited_seed(i, INHERITED / 2));
	uint32_t hops = 0;
	for (unsigned k = 0; k < SHARED_PAGES; k++)
		hops += shared[k * WORDS];
	int prev = (i + NPROC - 1) % NPROC;
	int mark_ok = shared[1 + prev] == 100u + (unsigned)prev;
	printf("process %d: %zu bad bytes, hops %s, mark of %d %s, inherited %016llx, own %016llx\n",
	       i, n, hops == rounds * NPROC ? "all counted" : "MISCOUNTED", prev,
	       mark_ok ? "seen" : "MISSING",
	       (unsigned long long)fnv(inherited, INHERITED),
	       (unsigned long long)fnv(own, OWN));
	fflush(stdout);
	return n != 0 || !mark_ok || hops != rounds * NPROC;
}

/* pid 1: at least MIN_ROUNDS rounds, then on until a line on stdin. */
static int ring_leader(void)
{
	uint32_t r = 0, v;
	for (;; r++) {
		if (r >= MIN_ROUNDS) {
			struct pollfd in = {.fd = 0, .events = POLLIN};
			int ready = poll(&in, 1, 0);
			if (ready < 0)
				return 5;
			if (ready > 0)
				break;
		}
		hop(0, r);
		if (put(wr[0], r) || get(rd[0], &v) || v != r)
			return 5;
	}
	char line[64];
	if (!fgets(line, sizeof line, stdin))
		return 3;
	fprintf(stderr, "rounds %u\n", r);
	printf("stopped\n");
	fflush(stdout);
	if (!fgets(line, sizeof line, stdin))
		return 3;
	shared[1] = 100u;
	if (put(wr[0], CHECK | r) || get(rd[0], &v) || v != (CHECK | r))
		return 6;
	int failed = check(0, r);
	for (int k = 1; k < NPROC; k++) {
		int st;
		if (wait(&st) < 0)
			return 7;
		failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	}
	printf("children: %s\n", failed ? "FAILED" : "all 0");
	return failed;
}

static int run(int i)
{
	own = malloc(OWN);
	if (!own)
		return 2;
	fill(own, 0, OWN, 20 + (unsigned)i);
	if (i != 0)
		fill(inherited, INHERITED / 2, INHERITED, 10 + (unsigned)i);
	if (i == 0) {
		printf("ring\n");
		fflush(stdout);
		return ring_leader();
	}
	for (uint32_t r = 0;; r++) {
		uint32_t v;
		if (get(rd[i], &v))
			return 5;
		if (v & CHECK) {
			shared[1 + i] = 100u + (unsigned)i;
			int failed = check(i, v & ~CHECK);
			if (put(wr[i], v))
				return 6;
			return failed;
		}
		if (v != r)
			return 5;
		hop(i, r);
		if (put(wr[i], r))
			return 5;
	}
}

int main(void)
{
	inherited = malloc(INHERITED);
	shared = mmap(NULL, SHARED_PAGES * PAGE, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!inherited || shared == MAP_FAILED)
		return 2;
	fill(inherited, 0, INHERITED, 1);
	/* Links: 0 -> 1 and 1 -> 2 are pipes, 2 -> 3 and 3 -> 0 socketpairs. */
	for (int k = 0; k < NPROC; k++) {
		int fds[2];
		int to = (k + 1) % NPROC;
		if (k < 2) {
			if (pipe(fds))
				return 2;
			rd[to] = fds[0];
			wr[k] = fds[1];
		} else {
			if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds))
				return 2;
			rd[to] = fds[0];
			wr[k] = fds[1];
		}
	}
	fflush(stdout);
	for (int i = 1; i < NPROC; i++) {
		pid_t c = fork();
		if (c < 0) {
			perror("fork");
			return 2;
		}
		if (c == 0)
			return run(i);
	}
	return run(0);
}
