/* Maps whole files read-only and privately, one after the other, keeping
 * every mapping: `filemap_many FILE...` prints, for each, "FILE: ok FIRST"
 * (FIRST = its first byte, read through the mapping) or "FILE: ERRNO-NAME"
 * when mmap fails. In a sandbox the files fill the file window (docs/
 * memory.md: 1 GiB); a file that does not fit is copied into guest RAM,
 * and mmap says ENOMEM when that does not fit either. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		int fd = open(argv[i], O_RDONLY);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) != 0) {
			printf("%s: open failed\n", argv[i]);
			return 2;
		}
		const char *name = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];
		char *m = mmap(0, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m == MAP_FAILED)
			printf("%s: %s\n", name, errno == ENOMEM ? "ENOMEM" : strerror(errno));
		else
			printf("%s: ok %c\n", name, m[0]);
		fflush(stdout);
		close(fd);
	}
	return 0;
}
