/* MAP_PRIVATE file pages: `filemap_private FILE` maps FILE (at least two
 * pages, first bytes "ORIG") twice, writes into the first mapping and
 * checks the write stays private: the second mapping of the same file, a
 * pread of the file and a forked child's fresh mapping still see "ORIG".
 * `filemap_private FILE hold` then prints "written" and waits for stdin to
 * close before exiting, so another sandbox can look at the file meanwhile.
 * Prints "ok" on success, "FAIL ..." otherwise. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static int fails;

static void check(int ok, const char *what)
{
	if (!ok) {
		printf("FAIL %s\n", what);
		fails++;
	}
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		perror("open");
		return 2;
	}
	size_t len = 8192;
	char *a = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	char *b = mmap(0, len, PROT_READ, MAP_PRIVATE, fd, 0);
	if (a == MAP_FAILED || b == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	check(memcmp(a, "ORIG", 4) == 0, "first mapping reads the file");
	check(a[4096] == 'P', "second page reads the file");
	memcpy(a, "MINE", 4);
	a[4096] = 'Q';
	check(memcmp(a, "MINE", 4) == 0, "the write is seen in its mapping");
	check(memcmp(b, "ORIG", 4) == 0, "another mapping does not see it");
	char buf[4];
	check(pread(fd, buf, 4, 0) == 4 && memcmp(buf, "ORIG", 4) == 0,
	      "the file does not see it");
	/* madvise(DONTNEED) on a private file mapping: the file's bytes again. */
	check(madvise(a + 4096, 4096, MADV_DONTNEED) == 0, "madvise");
	check(a[4096] == 'P', "DONTNEED brings the file page back");
	pid_t pid = fork();
	if (pid == 0) {
		char *c = mmap(0, len, PROT_READ, MAP_PRIVATE, fd, 0);
		int ok = c != MAP_FAILED && memcmp(c, "ORIG", 4) == 0 &&
			 memcmp(a, "MINE", 4) == 0;
		_exit(ok ? 0 : 1);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child sees the file and its copy");
	if (argc > 2 && strcmp(argv[2], "hold") == 0) {
		printf("written\n");
		fflush(stdout);
		while (read(0, buf, 1) > 0)
			;
	}
	printf(fails ? "failed\n" : "ok\n");
	return fails ? 1 : 0;
}
