/* The old system calls that modern libcs no longer make but old static
 * programs do (runtime-tools' busybox lists directories with getdents and
 * touches files with utimes): getdents (struct linux_dirent, the type in
 * the record's last byte) read in small batches, utimes, utime and
 * futimesat, with their errors. Output is the same on every run. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>
#include <utime.h>

#include "checks.h"

/* One call's result and errno (the call made before errno is read). */
static void result(const char *what, long r)
{
	int e = errno;
	if (r < 0)
		printf("%s: %ld %s\n", what, r, errno_name(e));
	else
		printf("%s: %ld\n", what, r);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void times_of(const char *what, const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		printf("%s: stat %s\n", what, errno_name(errno));
		return;
	}
	printf("%s: atime %lld.%09ld mtime %lld.%09ld\n", what, (long long)st.st_atim.tv_sec,
	       st.st_atim.tv_nsec, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	char dir[] = "/tmp/legacy_calls.XXXXXX";
	if (!mkdtemp(dir)) {
		printf("FAIL mkdtemp %s\n", errno_name(errno));
		return 1;
	}
	if (chdir(dir) != 0) {
		printf("FAIL chdir %s\n", errno_name(errno));
		return 1;
	}
	close(open("a", O_CREAT | O_WRONLY, 0644));
	close(open("a-file-with-a-longer-name", O_CREAT | O_WRONLY, 0644));
	mkdir("d", 0755);
	symlink("a", "l");
	mkfifo("p", 0644);

	/* getdents in 48-byte batches: one or two records per call. */
	int fd = open(".", O_RDONLY | O_DIRECTORY);
	char *names[16];
	int n = 0, calls = 0, bad = 0;
	char buf[48];
	for (;;) {
		long got = syscall(SYS_getdents, fd, buf, sizeof buf);
		if (got < 0) {
			printf("getdents: %s\n", errno_name(errno));
			break;
		}
		if (got == 0)
			break;
		calls++;
		for (long at = 0; at < got;) {
			unsigned short reclen;
			memcpy(&reclen, buf + at + 16, 2);
			if (reclen % 8 != 0 || reclen < 20 || at + reclen > got) {
				bad++;
				break;
			}
			const char *name = buf + at + 18;
			unsigned char type = (unsigned char)buf[at + reclen - 1];
			if (n < 16 && asprintf(&names[n], "%s type %u", name, type) > 0)
				n++;
			at += reclen;
		}
	}
	close(fd);
	qsort(names, n, sizeof *names, by_name);
	for (int i = 0; i < n; i++)
		printf("getdents: %s\n", names[i]);
	printf("getdents: %d entries, more than one call: %s, bad records: %d\n", n,
	       calls > 1 ? "yes" : "no", bad);
	char tiny[8];
	fd = open(".", O_RDONLY | O_DIRECTORY);
	result("getdents with an 8-byte buffer", syscall(SYS_getdents, fd, tiny, sizeof tiny));
	close(fd);
	fd = open("a", O_RDONLY);
	result("getdents of a file", syscall(SYS_getdents, fd, buf, sizeof buf));
	close(fd);
	result("getdents of a bad fd", syscall(SYS_getdents, 999, buf, sizeof buf));

	struct timeval tv[2] = { { 1000000000, 500000 }, { 1200000000, 250000 } };
	printf("utimes: %ld\n", syscall(SYS_utimes, "a", tv));
	times_of("a after utimes", "a");
	struct utimbuf ub = { 123456789, 987654321 };
	printf("utime: %ld\n", syscall(SYS_utime, "a-file-with-a-longer-name", &ub));
	times_of("long after utime", "a-file-with-a-longer-name");
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	struct timeval tv2[2] = { { 1300000000, 1 }, { 1400000000, 999999 } };
	printf("futimesat: %ld\n", syscall(SYS_futimesat, dfd, "d", tv2));
	times_of("d after futimesat", "d");
	close(dfd);
	struct timeval badtv[2] = { { 1, 1000000 }, { 1, 0 } };
	result("utimes with usec 1000000", syscall(SYS_utimes, "a", badtv));
	result("utimes of a missing file", syscall(SYS_utimes, "missing", tv));
	result("utimes with a null path", syscall(SYS_utimes, NULL, tv));
	result("utime with a null path", syscall(SYS_utime, NULL, &ub));
	struct stat before, after;
	stat("a", &before);
	printf("utimes(NULL times): %ld\n", syscall(SYS_utimes, "a", NULL));
	stat("a", &after);
	printf("utimes(NULL times) moved mtime forward: %s\n",
	       after.st_mtim.tv_sec > before.st_mtim.tv_sec ? "yes" : "no");

	unlink("a");
	unlink("a-file-with-a-longer-name");
	unlink("l");
	unlink("p");
	rmdir("d");
	chdir("/");
	if (rmdir(dir) != 0)
		printf("FAIL rmdir %s\n", errno_name(errno));
	return 0;
}
