/*
 * More of the Linux surface, natively and in the sandbox: mkfifo/mknod
 * (FIFOs and regular files), fallocate, memfd_create (read, write,
 * ftruncate, mmap, its /proc/self/fd name), msync's checks,
 * sched_setaffinity, F_GETPIPE_SZ/F_SETPIPE_SZ, chroot's lookups, O_PATH
 * opens and file names that are not UTF-8.
 *
 * `surface2 DIR` runs the comparable checks in scratch directory DIR.
 * `surface2 container DIR` checks, in the sandbox only, what a
 * container's root may not do (natively the test may hold every
 * capability): device nodes, sethostname, setdomainname, chroot
 * elsewhere than /.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "checks.h"

static void fifos(void)
{
	umask(022);
	rc_line("mkfifo", mkfifo("fifo", 0666));
	struct stat st;
	expect_line("fifo is a FIFO", stat("fifo", &st) == 0 && S_ISFIFO(st.st_mode), 1);
	line("fifo mode: %o", st.st_mode & 07777);
	err_line("mkfifo again", mkfifo("fifo", 0666), EEXIST);
	/* Linux never opens it: no wait for a reader. */
	err_line("truncate a fifo", truncate("fifo", 0), EINVAL);
	err_line("truncate a directory", truncate(".", 0), EISDIR);
	int r = open("fifo", O_RDONLY | O_NONBLOCK);
	int w = open("fifo", O_WRONLY | O_NONBLOCK);
	ok_line("open fifo both ends", r < 0 ? r : w);
	char buf[8] = { 0 };
	rc_line("write fifo", write(w, "abc", 3));
	rc_line("read fifo", read(r, buf, sizeof buf));
	line("fifo carried: %s", buf);
	close(r);
	close(w);
	rc_line("mknod S_IFIFO", mknod("fifo2", S_IFIFO | 0600, 0));
	rc_line("mknod S_IFREG", mknod("reg", S_IFREG | 0640, 0));
	expect_line("mknod made a regular file", stat("reg", &st) == 0 && S_ISREG(st.st_mode), 1);
	line("reg mode: %o", st.st_mode & 07777);
	err_line("mknod bad type", mknod("bad", 0170000 | 0600, 0), EINVAL);
	err_line("mknod in a missing dir", mknod("nodir/x", S_IFIFO | 0600, 0), ENOENT);
	err_line("mkfifo over /dev/null", mkfifo("/dev/null", 0600), EEXIST);
}

static void falloc(void)
{
	int fd = open("falloc", O_RDWR | O_CREAT | O_TRUNC, 0600);
	struct stat st;
	rc_line("fallocate 0..8192", fallocate(fd, 0, 0, 8192));
	fstat(fd, &st);
	eq_line("size after fallocate", st.st_size, 8192);
	rc_line("fallocate KEEP_SIZE past the end", fallocate(fd, FALLOC_FL_KEEP_SIZE, 8192, 8192));
	fstat(fd, &st);
	eq_line("size kept", st.st_size, 8192);
	err_line("fallocate len 0", fallocate(fd, 0, 0, 0), EINVAL);
	err_line("fallocate negative offset", fallocate(fd, 0, -1, 10), EINVAL);
	close(fd);
	fd = open("falloc", O_RDONLY);
	err_line("fallocate read-only fd", fallocate(fd, 0, 0, 10), EBADF);
	close(fd);
	int p[2];
	pipe(p);
	err_line("fallocate pipe", fallocate(p[1], 0, 0, 10), ESPIPE);
	close(p[0]);
	close(p[1]);
}

static void memfd(void)
{
	int fd = memfd_create("surface", MFD_CLOEXEC);
	ok_line("memfd_create", fd);
	eq_line("memfd close-on-exec", fcntl(fd, F_GETFD), FD_CLOEXEC);
	char path[64], link[128] = { 0 };
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	readlink(path, link, sizeof link - 1);
	line("memfd link: %s", link);
	rc_line("memfd write", write(fd, "hello", 5));
	rc_line("memfd lseek", lseek(fd, 0, SEEK_SET));
	char buf[16] = { 0 };
	rc_line("memfd read", read(fd, buf, sizeof buf));
	line("memfd holds: %s", buf);
	rc_line("memfd ftruncate", ftruncate(fd, 8192));
	struct stat st;
	fstat(fd, &st);
	expect_line("memfd is a regular file of 8192 bytes", S_ISREG(st.st_mode) && st.st_size == 8192, 1);
	char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	expect_line("memfd mmap private", m != MAP_FAILED && memcmp(m, "hello", 5) == 0, 1);
	char *s = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	expect_line("memfd mmap shared read-only", s != MAP_FAILED && memcmp(s, "hello", 5) == 0, 1);
	rc_line("msync MS_SYNC", msync(m, 8192, MS_SYNC));
	rc_line("msync MS_ASYNC", msync(m, 100, MS_ASYNC));
	err_line("msync unaligned", msync(m + 1, 100, MS_SYNC), EINVAL);
	err_line("msync ASYNC|SYNC", msync(m, 100, MS_SYNC | MS_ASYNC), EINVAL);
	err_line("msync bad flag", msync(m, 100, 0x100), EINVAL);
	munmap(m, 8192);
	err_line("msync unmapped", msync(m, 4096, MS_SYNC), ENOMEM);
	munmap(s, 4096);
	close(fd);
	err_line("memfd_create bad flags", memfd_create("x", 0x1000), EINVAL);
	char name[300];
	memset(name, 'n', sizeof name - 1);
	name[sizeof name - 1] = 0;
	err_line("memfd_create long name", memfd_create(name, 0), EINVAL);
}

static void affinity(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	rc_line("sched_setaffinity cpu 0", sched_setaffinity(0, sizeof set, &set));
	CPU_ZERO(&set);
	CPU_SET(1000, &set);
	err_line("sched_setaffinity cpu 1000 only", sched_setaffinity(0, sizeof set, &set), EINVAL);
}

static void pipe_size(void)
{
	int p[2];
	pipe(p);
	rc_line("F_GETPIPE_SZ", fcntl(p[0], F_GETPIPE_SZ));
	rc_line("F_SETPIPE_SZ 131072", fcntl(p[1], F_SETPIPE_SZ, 131072));
	rc_line("F_GETPIPE_SZ after", fcntl(p[0], F_GETPIPE_SZ));
	rc_line("F_SETPIPE_SZ 100 rounds up", fcntl(p[1], F_SETPIPE_SZ, 100));
	close(p[0]);
	close(p[1]);
	int fd = open("reg", O_RDONLY);
	err_line("F_GETPIPE_SZ on a file", fcntl(fd, F_GETPIPE_SZ), EBADF);
	close(fd);
}

static void chroot_lookups(void)
{
	err_line("chroot missing", chroot("no/such/dir"), ENOENT);
	err_line("chroot a file", chroot("reg"), ENOTDIR);
}

static void o_path(void)
{
	int fd = open("reg", O_PATH);
	ok_line("open O_PATH", fd);
	char buf[4];
	err_line("read O_PATH", read(fd, buf, 1), EBADF);
	err_line("write O_PATH", write(fd, "x", 1), EBADF);
	struct stat st;
	rc_line("fstat O_PATH", fstat(fd, &st));
	expect_line("fstat O_PATH is the file", S_ISREG(st.st_mode), 1);
	rc_line("fstatat AT_EMPTY_PATH", fstatat(fd, "", &st, AT_EMPTY_PATH));
	eq_line("F_GETFL has O_PATH", !!(fcntl(fd, F_GETFL) & O_PATH), 1);
	rc_line("close O_PATH", close(fd));
	int d = open(".", O_PATH | O_DIRECTORY);
	ok_line("open dir O_PATH", d);
	rc_line("fstatat via O_PATH dir", fstatat(d, "reg", &st, 0));
	int f = openat(d, "reg", O_RDONLY);
	ok_line("openat via O_PATH dir", f);
	close(f);
	char cwd[512], cwd2[512];
	getcwd(cwd, sizeof cwd);
	rc_line("chdir /", chdir("/"));
	rc_line("fchdir O_PATH dir", fchdir(d));
	getcwd(cwd2, sizeof cwd2);
	expect_line("fchdir went back", strcmp(cwd, cwd2) == 0, 1);
	close(d);
	symlink("reg", "link");
	int l = open("link", O_PATH | O_NOFOLLOW);
	ok_line("open symlink O_PATH|O_NOFOLLOW", l);
	expect_line("fstat says link", fstat(l, &st) == 0 && S_ISLNK(st.st_mode), 1);
	close(l);
}

static void bytes_names(void)
{
	const char *name = "caf\xe9-\xff\xfe";
	int fd = open(name, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ok_line("create a non-UTF-8 name", fd);
	close(fd);
	struct stat st;
	rc_line("stat it", stat(name, &st));
	DIR *dir = opendir(".");
	int found = 0;
	struct dirent *e;
	while ((e = readdir(dir)))
		if (strcmp(e->d_name, name) == 0)
			found = 1;
	closedir(dir);
	expect_line("readdir returns the same bytes", found, 1);
	rc_line("rename it", rename(name, "renamed-\xff"));
	rc_line("unlink it", unlink("renamed-\xff"));
}

static void container(void)
{
	err_line("mknod char device", mknod("null2", S_IFCHR | 0600, makedev(1, 3)), EPERM);
	err_line("mknod block device", mknod("blk", S_IFBLK | 0600, makedev(7, 0)), EPERM);
	err_line("sethostname", sethostname("x", 1), EPERM);
	err_line("setdomainname", setdomainname("x", 1), EPERM);
	rc_line("chroot /", chroot("/"));
	err_line("chroot elsewhere", chroot("."), EPERM);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	int is_container = argc > 2 && strcmp(argv[1], "container") == 0;
	const char *dir = argv[argc - 1];
	if (argc < 2 || chdir(dir) != 0) {
		printf("usage: surface2 [container] DIR\n");
		return 2;
	}
	if (is_container) {
		container();
		return 0;
	}
	fifos();
	falloc();
	memfd();
	affinity();
	pipe_size();
	chroot_lookups();
	o_path();
	bytes_names();
	return 0;
}
