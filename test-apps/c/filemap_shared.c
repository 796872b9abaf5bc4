/* Writable MAP_SHARED file mappings: `filemap_shared FILE` creates FILE
 * (two pages and 100 bytes) and prints what each step sees, for a
 * differential test (native vs sandbox): writes through the mapping seen
 * by pread, pwrite seen by the mapping, a forked child's writes, a second
 * mapping of the same file, SIGBUS past the file's end, ftruncate growing
 * and shrinking the file, msync, munmap, mremap, memfd. It ends with a
 * write through a mapping it never unmaps or syncs: the file must have it
 * after exit. `filemap_shared FILE hold` writes through the mapping, prints
 * "holding", waits for a line on stdin (hibernated meanwhile) and shows
 * what the mapping and the file hold then. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
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

/* Reads one byte at `p`; prints "sigbus CODE" or the byte. */
static void probe(const char *what, volatile char *p)
{
	bus_code = 0;
	if (sigsetjmp(env, 1) == 0) {
		char c = *p;
		printf("%s: byte %d\n", what, c);
	} else {
		printf("%s: sigbus code %d\n", what, bus_code);
	}
}

static void show_pread(int fd, const char *what, off_t off, size_t n)
{
	char buf[64] = { 0 };
	ssize_t got = pread(fd, buf, n, off);
	printf("%s: pread %zd '%.*s'\n", what, got, got > 0 ? (int)got : 0, buf);
}

static unsigned long sum_file(int fd)
{
	char buf[PG];
	unsigned long h = 5381;
	ssize_t n;
	off_t off = 0;
	while ((n = pread(fd, buf, sizeof buf, off)) > 0) {
		for (ssize_t i = 0; i < n; i++)
			h = h * 33 + (unsigned char)buf[i];
		off += n;
	}
	return h ^ (unsigned long)off;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
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
	for (int i = 0; i < 2; i++) {
		memset(page, 'a' + i, PG);
		if (write(fd, page, PG) != PG)
			return 2;
	}
	memset(page, 'c', 100);
	if (write(fd, page, 100) != 100)
		return 2;

	/* Four pages over a file of two pages and 100 bytes. */
	char *m = mmap(0, 4 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	if (argc > 2 && strcmp(argv[2], "hold") == 0) {
		/* Hibernated here: the write must survive, stay shared with the
		 * file, and reach it. */
		memcpy(m + 700, "HIBER", 5);
		printf("holding\n");
		fflush(stdout);
		char line[16];
		if (!fgets(line, sizeof line, stdin))
			return 2;
		printf("after wake: '%.5s'\n", m + 700);
		show_pread(fd, "after wake", 700, 5);
		memcpy(m + 710, "AGAIN", 5);
		show_pread(fd, "written after wake", 710, 5);
		return 0;
	}
	printf("mapped: %c %c %c tail %d\n", m[0], m[PG], m[2 * PG], m[2 * PG + 100]);

	memcpy(m + 100, "HELLO", 5);
	show_pread(fd, "mapping write", 100, 5);
	char rbuf[8] = { 0 };
	lseek(fd, 100, SEEK_SET);
	printf("read: %zd '%.5s'\n", read(fd, rbuf, 5), rbuf);

	if (pwrite(fd, "WORLD", 5, 200) != 5)
		return 2;
	printf("pwrite seen by the mapping: '%.5s'\n", m + 200);

	pid_t pid = fork();
	if (pid == 0) {
		memcpy(m + PG + 10, "CHILD", 5);
		_exit(0);
	}
	waitpid(pid, 0, 0);
	printf("child write seen: '%.5s'\n", m + PG + 10);
	show_pread(fd, "child write", PG + 10, 5);

	/* A second mapping of the same file, at a file offset. */
	int fd2 = open(argv[1], O_RDWR);
	char *m2 = mmap(0, PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd2, PG);
	if (m2 == MAP_FAILED) {
		perror("mmap 2");
		return 2;
	}
	printf("second mapping sees: '%.5s'\n", m2 + 10);
	memcpy(m2 + 20, "SECND", 5);
	printf("first mapping sees the second: '%.5s'\n", m + PG + 20);

	/* Past the end of the file. */
	probe("page holding the end, past it", m + 2 * PG + 200);
	probe("page past the end", m + 3 * PG);
	probe("second page past the end (write target)", m + 3 * PG + 100);

	/* Growing the file makes the page reachable. */
	if (ftruncate(fd, 4 * PG) != 0)
		return 2;
	probe("after growing", m + 3 * PG);
	memcpy(m + 3 * PG + 1, "EXTND", 5);
	show_pread(fd, "write in the grown part", 3 * PG + 1, 5);

	/* Shrinking: the lost page is SIGBUS again, the tail of the page
	 * holding the new end reads zero. */
	if (ftruncate(fd, PG + 50) != 0)
		return 2;
	probe("after shrinking, page 2", m + 2 * PG);
	probe("after shrinking, tail of page 1", m + PG + 60);
	printf("after shrinking: '%.5s'\n", m + PG + 10);
	if (ftruncate(fd, 3 * PG) != 0)
		return 2;
	probe("grown again, page 2", m + 2 * PG + 5);

	/* msync, then the host file has it. */
	memcpy(m + 300, "SYNCD", 5);
	printf("msync: %d\n", msync(m, 4 * PG, MS_SYNC));
	show_pread(fd, "after msync", 300, 5);

	/* munmap of the second mapping after a write: the file has it. */
	memcpy(m2 + 40, "UNMAP", 5);
	printf("munmap: %d\n", munmap(m2, PG));
	close(fd2);
	show_pread(fd, "after munmap", PG + 40, 5);

	/* mremap moves the mapping; the file offsets move with it. */
	char *r = mremap(m, 4 * PG, 8 * PG, MREMAP_MAYMOVE);
	if (r == MAP_FAILED) {
		perror("mremap");
		return 2;
	}
	printf("after mremap: '%.5s' '%.5s'\n", r + 100, r + PG + 20);
	memcpy(r + 400, "MOVED", 5);
	show_pread(fd, "write after mremap", 400, 5);

	/* mprotect read-only then writable again: still shared. */
	mprotect(r, PG, PROT_READ);
	mprotect(r, PG, PROT_READ | PROT_WRITE);
	memcpy(r + 500, "MPROT", 5);
	show_pread(fd, "write after mprotect", 500, 5);

	/* memfd. */
	int mfd = memfd_create("shm", 0);
	if (mfd >= 0 && ftruncate(mfd, 2 * PG) == 0) {
		char *mm = mmap(0, 2 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
		if (mm != MAP_FAILED) {
			memcpy(mm + PG, "MEMFD", 5);
			show_pread(mfd, "memfd", PG, 5);
		}
	}

	printf("file sum before exit: %lx\n", sum_file(fd));
	/* Written through the mapping, never synced nor unmapped. */
	memcpy(r + 600, "ATEXIT", 6);
	return 0;
}
