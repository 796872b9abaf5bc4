/*
 * filecopy FILE
 *   FILE holds 24 pages, page i filled with byte i + 1. Maps it
 *   MAP_PRIVATE read-write and writes into it two ways: a first write to
 *   page 0 (a not-present write fault: the sandbox copies the pages around
 *   it into private memory at once) and a write to page 17 after reading it
 *   (a present read-only file page: its neighbours are copied too). Checks
 *   every page after each step, then that the file itself is unchanged.
 *   The sandbox has the VMM make those copies (`Call::CopyPages`): the
 *   output must be the same as natively.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096
#define PAGES 24

static int check(const unsigned char *p, const char *when, int written0, int written17)
{
	int bad = 0;
	for (int i = 0; i < PAGES; i++) {
		for (int j = 0; j < PAGE; j++) {
			unsigned char want = (unsigned char)(i + 1);
			if (j == 100 && i == 0 && written0)
				want = 0xa0;
			if (j == 200 && i == 17 && written17)
				want = 0xa1;
			if (p[i * PAGE + j] != want) {
				printf("%s: page %d byte %d is %d, not %d\n", when, i, j, p[i * PAGE + j], want);
				bad = 1;
				break;
			}
		}
	}
	printf("%s: %s\n", when, bad ? "wrong" : "ok");
	return bad;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fputs("usage: filecopy FILE\n", stderr);
		return 2;
	}
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		perror("open");
		return 1;
	}
	unsigned char *p = mmap(NULL, PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	int bad = 0;
	p[100] = 0xa0;
	bad |= check(p, "after a write to page 0", 1, 0);
	volatile unsigned char r = p[17 * PAGE];
	(void)r;
	p[17 * PAGE + 200] = 0xa1;
	bad |= check(p, "after a write to page 17", 1, 1);
	unsigned char buf[PAGE];
	for (int i = 0; i < PAGES; i++) {
		if (pread(fd, buf, PAGE, (off_t)i * PAGE) != PAGE) {
			perror("pread");
			return 1;
		}
		for (int j = 0; j < PAGE; j++)
			if (buf[j] != (unsigned char)(i + 1)) {
				printf("the file changed: page %d byte %d\n", i, j);
				return 1;
			}
	}
	puts("the file is unchanged");
	return bad;
}
