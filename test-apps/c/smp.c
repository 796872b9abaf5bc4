/*
 * smp: what several vCPUs must get right (docs/smp.md). `smp CASE [ARG]`;
 * the checking cases print stable lines (no tids, no times, no counts that
 * depend on timing), so a native run and a sandboxed one print the same.
 *
 *   mmrace MS     for MS milliseconds one thread unmaps and remaps (a new
 *                 pattern each round) and mprotects a region while three
 *                 threads read it in a loop: after munmap returns no
 *                 reader may see the old pattern, and while PROT_NONE is
 *                 in force no read may succeed (readers get SIGSEGV)
 *   affinity      sched_setaffinity to an absent CPU is EINVAL, to CPU 0
 *                 works; getcpu then says 0; the mask is not empty
 *   burn N        N iterations of a CPU loop in 2 threads at once, then
 *                 the same work in 1 thread after the other; prints
 *                 `burn_parallel_ns`, `burn_serial_ns` and their ratio
 *                 (about 0.5 on 2 free CPUs, 1.0 on one)
 *   forkthreads   4 threads each fork a child (which touches the
 *                 parent's copied memory and exits with a code) and wait
 *                 for it, 20 rounds
 *   hib MIB       4 threads compute over their own MIB MiB each (rewrite
 *                 with a new seed, verify, repeat) until a line arrives on
 *                 stdin; "ready" first; then each thread's bad words
 *   getcpu [1]    2 threads each compute in 60 bursts of about 2 ms and
 *                 ask sched_getcpu() and the getcpu syscall after each:
 *                 every answer must be below the online CPU count
 *                 (stdout); with 1, the CPUs seen go to stderr
 *                 ("getcpu seen: 0 1")
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- mmrace ---- */

#define RACE_VA ((char *)0x2000000000ul)
#define RACE_LEN (16 * 4096ul)
#define READERS 3

static atomic_int stop;
/* Every word of page `p` of the mapping of round `g` holds PAT(g, p).
 * Rounds below `floor_gen` are from a mapping whose munmap has returned:
 * no reader may see them after loading it, nor another page's words (a
 * stale translation to a frame reused elsewhere). 0: a fresh page. */
#define PAT(g, p) ((g) * 64 + (int)(p) + 1)
static atomic_int floor_gen;
/* Non-zero (the round) while the region is PROT_NONE: set after mprotect
 * returned, cleared before it is made readable again. */
static atomic_int none_round;
static atomic_long stale, read_while_none, reads;
static atomic_int readers_up;
static __thread sigjmp_buf jb;
static __thread volatile int in_read;

static void on_segv(int sig)
{
	(void)sig;
	if (in_read)
		siglongjmp(jb, 1);
	_exit(99);
}

static void *reader(void *arg)
{
	volatile unsigned off = (unsigned)(uintptr_t)arg;
	volatile long n = 0;
	while (!atomic_load(&stop)) {
		int f = atomic_load(&floor_gen);
		int r1 = atomic_load(&none_round);
		if (sigsetjmp(jb, 1) == 0) {
			in_read = 1;
			int v = *(volatile int *)(RACE_VA + off);
			in_read = 0;
			n++;
			if (v != 0 && (v < PAT(f, 0) || (v - 1) % 64 != (int)(off / 4096)))
				atomic_fetch_add(&stale, 1);
			if (r1 != 0 && atomic_load(&none_round) == r1)
				atomic_fetch_add(&read_while_none, 1);
		} else {
			in_read = 0;
		}
		off = (off + 4096 + 64) % RACE_LEN;
		if (n == 1)
			atomic_fetch_add(&readers_up, 1);
	}
	atomic_fetch_add(&reads, n);
	return NULL;
}

static void fill(int g)
{
	for (unsigned long i = 0; i < RACE_LEN; i += sizeof(int))
		*(int *)(RACE_VA + i) = PAT(g, i / 4096);
}

static int map_fixed(void)
{
	return mmap(RACE_VA, RACE_LEN, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == RACE_VA ? 0 : -1;
}

static int mmrace(long ms)
{
	struct sigaction sa = {0};
	sa.sa_handler = on_segv;
	sa.sa_flags = SA_NODEFER;
	sigaction(SIGSEGV, &sa, NULL);
	if (map_fixed()) {
		perror("mmap");
		return 1;
	}
	int g = 1;
	fill(g);
	pthread_t t[READERS];
	for (int i = 0; i < READERS; i++)
		pthread_create(&t[i], NULL, reader, (void *)(uintptr_t)(i * 1000 * 4));
	/* On a loaded host the readers may not get a CPU before the rounds end:
	 * wait (up to 5 s) until one has read, natively and in the sandbox. */
	uint64_t started = now_ns() + 5000000000ull;
	while (atomic_load(&readers_up) == 0 && now_ns() < started)
		sched_yield();
	uint64_t end = now_ns() + (uint64_t)ms * 1000000ull;
	long rounds = 0;
	while (now_ns() < end) {
		/* munmap: the old pattern must be gone for good. */
		munmap(RACE_VA, RACE_LEN);
		atomic_store(&floor_gen, g + 1);
		sched_yield();
		if (map_fixed()) {
			perror("mmap");
			return 1;
		}
		g++;
		fill(g);
		/* mprotect: no read while PROT_NONE. */
		mprotect(RACE_VA, RACE_LEN, PROT_NONE);
		atomic_store(&none_round, (int)rounds + 1);
		sched_yield();
		atomic_store(&none_round, 0);
		mprotect(RACE_VA, RACE_LEN, PROT_READ | PROT_WRITE);
		rounds++;
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < READERS; i++)
		pthread_join(t[i], NULL);
	printf("mmrace: readers ran: %s\n", atomic_load(&reads) > 0 ? "yes" : "no");
	printf("mmrace: rounds done: %s\n", rounds >= 3 ? "yes" : "too few");
	printf("mmrace: old pattern read after munmap: %ld%s\n", atomic_load(&stale),
	       atomic_load(&stale) ? " WRONG" : "");
	printf("mmrace: reads while PROT_NONE: %ld%s\n", atomic_load(&read_while_none),
	       atomic_load(&read_while_none) ? " WRONG" : "");
	return 0;
}

/* ---- affinity ---- */

static int affinity(void)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(CPU_SETSIZE - 1, &s);
	int r = sched_setaffinity(0, sizeof s, &s);
	printf("setaffinity to cpu %d: %s\n", CPU_SETSIZE - 1, r ? strerror(errno) : "ok WRONG");
	CPU_ZERO(&s);
	if (sched_getaffinity(0, sizeof s, &s)) {
		perror("sched_getaffinity");
		return 1;
	}
	int n = CPU_COUNT(&s);
	printf("affinity mask has cpu 0: %s\n", CPU_ISSET(0, &s) ? "yes" : "no");
	printf("online cpus agree with the mask: %s\n",
	       sysconf(_SC_NPROCESSORS_ONLN) == n ? "yes" : "WRONG");
	CPU_ZERO(&s);
	CPU_SET(0, &s);
	r = sched_setaffinity(0, sizeof s, &s);
	printf("setaffinity to cpu 0: %s\n", r ? strerror(errno) : "ok");
	unsigned cpu = 99, node = 99;
	syscall(SYS_getcpu, &cpu, &node, NULL);
	printf("getcpu after pinning: cpu %u node %u\n", cpu, node);
	return 0;
}

/* ---- burn ---- */

static long burn_iters;

static void *burn(void *arg)
{
	volatile uint64_t x = (uintptr_t)arg;
	for (long i = 0; i < burn_iters; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return NULL;
}

static int burn_case(long n)
{
	burn_iters = n;
	pthread_t a, b;
	uint64_t t0 = now_ns();
	pthread_create(&a, NULL, burn, (void *)1);
	pthread_create(&b, NULL, burn, (void *)2);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	uint64_t par = now_ns() - t0;
	t0 = now_ns();
	pthread_create(&a, NULL, burn, (void *)1);
	pthread_join(a, NULL);
	pthread_create(&b, NULL, burn, (void *)2);
	pthread_join(b, NULL);
	uint64_t ser = now_ns() - t0;
	printf("burn_parallel_ns %llu\n", (unsigned long long)par);
	printf("burn_serial_ns %llu\n", (unsigned long long)ser);
	printf("burn_ratio %.3f\n", (double)par / (double)ser);
	return 0;
}

/* ---- forkthreads ---- */

static int shared_page[1024];

static void *forker(void *arg)
{
	long id = (long)(uintptr_t)arg;
	long bad = 0;
	for (int round = 0; round < 20; round++) {
		shared_page[id] = (int)(id * 100 + round);
		pid_t c = fork();
		if (c == 0) {
			/* The copy holds what this thread wrote before the fork. */
			_exit(shared_page[id] == id * 100 + round ? (int)id + 10 : 99);
		}
		int st = 0;
		if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != id + 10)
			bad++;
	}
	return (void *)(uintptr_t)bad;
}

static int forkthreads(void)
{
	pthread_t t[4];
	for (long i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, forker, (void *)(uintptr_t)i);
	for (int i = 0; i < 4; i++) {
		void *bad;
		pthread_join(t[i], &bad);
		printf("thread %d: 20 forks, %ld wrong statuses\n", i, (long)(uintptr_t)bad);
	}
	return 0;
}

/* ---- hib ---- */

#define HIB_THREADS 4

struct hib {
	uint32_t *buf;
	size_t words;
	long bad;
	long passes;
};

static void *hib_worker(void *arg)
{
	struct hib *h = arg;
	uint32_t seed = 1;
	for (size_t i = 0; i < h->words; i++)
		h->buf[i] = seed * 2654435761u + (uint32_t)i;
	while (!atomic_load(&stop)) {
		for (size_t i = 0; i < h->words; i++)
			if (h->buf[i] != seed * 2654435761u + (uint32_t)i)
				h->bad++;
		seed++;
		for (size_t i = 0; i < h->words; i++)
			h->buf[i] = seed * 2654435761u + (uint32_t)i;
		h->passes++;
	}
	for (size_t i = 0; i < h->words; i++)
		if (h->buf[i] != seed * 2654435761u + (uint32_t)i)
			h->bad++;
	return NULL;
}

static int hib(long mib)
{
	struct hib h[HIB_THREADS];
	pthread_t t[HIB_THREADS];
	for (int i = 0; i < HIB_THREADS; i++) {
		h[i].words = (size_t)mib * (1u << 20) / 4;
		h[i].buf = malloc(h[i].words * 4);
		h[i].bad = 0;
		h[i].passes = 0;
		if (!h[i].buf) {
			perror("malloc");
			return 1;
		}
		pthread_create(&t[i], NULL, hib_worker, &h[i]);
	}
	printf("ready\n");
	fflush(stdout);
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		printf("stdin closed\n");
	atomic_store(&stop, 1);
	for (int i = 0; i < HIB_THREADS; i++) {
		pthread_join(t[i], NULL);
		printf("thread %d: %ld bad words, computed: %s\n", i, h[i].bad,
		       h[i].passes > 0 ? "yes" : "no");
	}
	return 0;
}

/* ---- getcpu ---- */

#define GETCPU_BURSTS 60

static atomic_int getcpu_bad;
static atomic_uint getcpu_seen;

static void *getcpu_thread(void *arg)
{
	volatile uint64_t x = (uintptr_t)arg;
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	for (int b = 0; b < GETCPU_BURSTS; b++) {
		for (long i = 0; i < 2000000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
		int c = sched_getcpu();
		unsigned cpu = 0, node = 0;
		long rc = syscall(SYS_getcpu, &cpu, &node, NULL);
		if (c < 0 || c >= online || rc != 0 || (long)cpu >= online || node != 0)
			atomic_fetch_add(&getcpu_bad, 1);
		if (c >= 0 && c < 32)
			atomic_fetch_or(&getcpu_seen, 1u << c);
		if (rc == 0 && cpu < 32)
			atomic_fetch_or(&getcpu_seen, 1u << cpu);
	}
	return NULL;
}

static int getcpu_case(int show)
{
	pthread_t t[2];
	for (long i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, getcpu_thread, (void *)(i + 1));
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	int bad = atomic_load(&getcpu_bad);
	if (bad)
		printf("getcpu: WRONG: %d answers not below the online CPU count\n", bad);
	else
		printf("getcpu: every answer below the online CPU count\n");
	if (show) {
		fprintf(stderr, "getcpu seen:");
		unsigned seen = atomic_load(&getcpu_seen);
		for (int c = 0; c < 32; c++)
			if (seen & (1u << c))
				fprintf(stderr, " %d", c);
		fprintf(stderr, "\n");
	}
	return bad != 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: smp mmrace MS | affinity | burn N | forkthreads | hib MIB | getcpu [1]\n");
		return 2;
	}
	const char *c = argv[1];
	long arg = argc > 2 ? atol(argv[2]) : 0;
	if (!strcmp(c, "mmrace"))
		return mmrace(arg > 0 ? arg : 1000);
	if (!strcmp(c, "affinity"))
		return affinity();
	if (!strcmp(c, "burn"))
		return burn_case(arg > 0 ? arg : 100000000);
	if (!strcmp(c, "forkthreads"))
		return forkthreads();
	if (!strcmp(c, "hib"))
		return hib(arg > 0 ? arg : 4);
	if (!strcmp(c, "getcpu"))
		return getcpu_case(arg > 0);
	fprintf(stderr, "smp: unknown case %s\n", c);
	return 2;
}
