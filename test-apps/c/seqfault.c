/*
 * seqfault: anonymous memory touched in order, which the sandbox maps
 * ahead in growing windows (qkernel/src/mm/fault.rs, `anon_window`).
 * What a program sees must not change:
 *   - an 8 MiB mapping written page by page in order, then read back;
 *   - the same backwards and at random pages;
 *   - a mapping followed by a PROT_NONE page: the fault-ahead stops at
 *     the mapping's end, the guard page still faults (SIGSEGV);
 *   - the heap grown with brk in 64 KiB steps, written, shrunk, grown
 *     again: the pages that come back read as zero;
 *   - a fork child writing in order into memory its parent wrote part
 *     of: neither sees the other's writes.
 * Prints one line per case and "done".
 */
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096ul
#define MIB (1024ul * 1024)

static sigjmp_buf env;

static void on_segv(int s)
{
	(void)s;
	siglongjmp(env, 1);
}

static char *map(size_t len)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return p;
}

/* Every page of [p, p + len) holds its index from `first` and is
 * otherwise zero. */
static int check(const char *p, size_t len, unsigned first)
{
	for (size_t o = 0; o < len; o += PAGE) {
		unsigned v;
		memcpy(&v, p + o, sizeof v);
		if (v != first + o / PAGE)
			return 0;
		for (size_t i = sizeof v; i < PAGE; i += 512)
			if (p[o + i] != 0)
				return 0;
	}
	return 1;
}

static void put(char *p, size_t page, unsigned v)
{
	memcpy(p + page * PAGE, &v, sizeof v);
}

static void in_order(void)
{
	size_t len = 8 * MIB, n = len / PAGE;
	char *p = map(len);
	for (size_t i = 0; i < n; i++)
		put(p, i, (unsigned)i);
	printf("8 MiB written in order reads back: %s\n", check(p, len, 0) ? "yes" : "no");
	munmap(p, len);

	p = map(len);
	for (size_t i = n; i-- > 0;)
		put(p, i, (unsigned)i + 7);
	printf("8 MiB written backwards reads back: %s\n", check(p, len, 7) ? "yes" : "no");
	munmap(p, len);

	p = map(len);
	unsigned x = 12345;
	for (size_t k = 0; k < n / 4; k++) {
		x = x * 1103515245 + 12345;
		size_t i = (x >> 8) % n;
		put(p, i, (unsigned)i);
	}
	int ok = 1;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		memcpy(&v, p + i * PAGE, sizeof v);
		if (v != 0 && v != i)
			ok = 0;
	}
	printf("8 MiB written at random pages reads back: %s\n", ok ? "yes" : "no");
	munmap(p, len);
}

static void guard(void)
{
	size_t len = 1 * MIB;
	char *p = map(len + PAGE);
	mprotect(p + len, PAGE, PROT_NONE);
	for (size_t i = 0; i < len / PAGE; i++)
		put(p, i, (unsigned)i);
	printf("1 MiB before a guard page reads back: %s\n", check(p, len, 0) ? "yes" : "no");
	signal(SIGSEGV, on_segv);
	volatile int faulted = 0;
	if (sigsetjmp(env, 1) == 0)
		((volatile char *)p)[len] = 1;
	else
		faulted = 1;
	signal(SIGSEGV, SIG_DFL);
	printf("the guard page faults: %s\n", faulted ? "yes" : "no");
	munmap(p, len + PAGE);
}

/* The raw brk syscall (musl's sbrk refuses to move the break). */
static char *brk_to(char *to)
{
	return (char *)syscall(SYS_brk, to);
}

static void heap(void)
{
	char *base = brk_to(NULL);
	size_t step = 64 * 1024, total = 4 * MIB;
	for (size_t done = 0; done < total; done += step) {
		if (brk_to(base + done + step) != base + done + step) {
			printf("brk failed\n");
			return;
		}
		memset(base + done, 0x5a, step);
	}
	int ok = 1;
	for (size_t i = 0; i < total; i += 997)
		if (base[i] != 0x5a)
			ok = 0;
	printf("4 MiB of heap grown in 64 KiB steps holds its data: %s\n", ok ? "yes" : "no");
	brk_to(base);
	for (size_t done = 0; done < total; done += step)
		if (brk_to(base + done + step) != base + done + step)
			return;
	ok = 1;
	for (size_t i = 0; i < total; i += 509)
		if (base[i] != 0)
			ok = 0;
	printf("heap shrunk and grown again reads as zero: %s\n", ok ? "yes" : "no");
	brk_to(base);
}

static void forked(void)
{
	size_t len = 4 * MIB, n = len / PAGE;
	char *p = map(len);
	for (size_t i = 0; i < n / 2; i++)
		put(p, i, (unsigned)i);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		for (size_t i = 0; i < n; i++)
			put(p, i, (unsigned)i + 100000);
		_exit(check(p, len, 100000) ? 0 : 1);
	}
	int st;
	waitpid(pid, &st, 0);
	printf("the child's writes in order read back: %s\n",
	       WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "yes" : "no");
	int ok = check(p, len / 2, 0);
	for (size_t i = n / 2; i < n; i++) {
		unsigned v;
		memcpy(&v, p + i * PAGE, sizeof v);
		if (v != 0)
			ok = 0;
	}
	printf("the parent's memory is its own: %s\n", ok ? "yes" : "no");
	munmap(p, len);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc > 1 && strcmp(argv[1], "seq") == 0) {
		/* Only the in-order write (the fault count is checked). */
		size_t len = 8 * MIB;
		char *p = map(len);
		for (size_t i = 0; i < len / PAGE; i++)
			put(p, i, (unsigned)i);
		printf("in order: %s\n", check(p, len, 0) ? "yes" : "no");
		return 0;
	}
	in_order();
	guard();
	heap();
	forked();
	puts("done");
	return 0;
}
