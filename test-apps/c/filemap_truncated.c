/* A file truncated while mapped: `filemap_truncated FILE` creates FILE
 * (four pages), maps it read-only and privately (in a sandbox: straight
 * from the host page cache), touches every page, then shrinks the file to
 * one page and 100 bytes and prints what each access gives: the page
 * holding the new end reads (zeros past it), the pages past it are SIGBUS,
 * for reads and for writes through a writable private mapping.
 * `filemap_truncated FILE wait` instead prints "mapped" after touching
 * the pages and waits for a line on stdin (the file is shrunk meanwhile
 * by someone else, e.g. on the host). Ends with "done". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PG 4096

static sigjmp_buf env;
static volatile int bus_code;

static void on_bus(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)ctx;
	bus_code = si->si_code;
	siglongjmp(env, 1);
}

static void probe(const char *what, volatile char *p, int write)
{
	bus_code = 0;
	if (sigsetjmp(env, 1) == 0) {
		if (write) {
			*p = 'W';
			printf("%s: wrote\n", what);
		} else {
			char c = *p;
			printf("%s: byte %d\n", what, c);
		}
	} else {
		printf("%s: sigbus code %d\n", what, bus_code);
	}
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int wait = argc > 2 && strcmp(argv[2], "wait") == 0;
	struct sigaction sa = { 0 };
	sa.sa_sigaction = on_bus;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGBUS, &sa, 0);

	int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror("open");
		return 2;
	}
	char page[PG];
	for (int i = 0; i < 4; i++) {
		memset(page, 'a' + i, PG);
		if (write(fd, page, PG) != PG)
			return 2;
	}
	int ro = open(argv[1], O_RDONLY);
	char *m = mmap(0, 4 * PG, PROT_READ, MAP_PRIVATE, ro, 0);
	char *w = mmap(0, 4 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE, ro, 0);
	if (m == MAP_FAILED || w == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	unsigned sum = 0;
	for (int i = 0; i < 4; i++)
		sum += (unsigned char)m[i * PG] + (unsigned char)w[i * PG + 1];
	printf("touched: %u\n", sum);
	fflush(stdout);
	if (wait) {
		printf("mapped\n");
		fflush(stdout);
		char line[16];
		if (!fgets(line, sizeof line, stdin))
			return 2;
	} else if (ftruncate(fd, PG + 100) != 0) {
		perror("ftruncate");
		return 2;
	}
	probe("page 0", m, 0);
	probe("page 1 before the end", m + PG + 50, 0);
	probe("page 1 past the end", m + PG + 200, 0);
	probe("page 2", m + 2 * PG, 0);
	probe("page 3", m + 3 * PG + 7, 0);
	probe("page 2 again", m + 2 * PG + 9, 0);
	probe("writable mapping, page 0", w, 1);
	probe("writable mapping, page 2", w + 2 * PG, 1);
	probe("writable mapping, page 3 read", w + 3 * PG, 0);
	printf("done\n");
	return 0;
}
