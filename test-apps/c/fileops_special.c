/* Special files and bad input, one line per check, for a differential
 * test: `fileops_special DIR`, DIR prepared as for fileops (`data.txt`
 * and `link`). /dev/null, /dev/zero, /dev/urandom, /proc/self/exe,
 * /proc/self/fd, /proc/cpuinfo, /proc/meminfo, a writable /tmp; then
 * invalid fds (EBADF), missing or malformed paths (ENOENT, ENOTDIR,
 * ENAMETOOLONG ...), bad pointers (EFAULT) and bad lengths (EINVAL):
 * Linux's answer every time, never a crash. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "checks.h"

static char base[4096];
static char buf[8192];

static int all_zero(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

static void pread_line(const char *what, int fd, size_t len, off_t off) {
    ssize_t n = pread(fd, buf, len, off);
    if (n < 0) {
        rc_line(what, n);
        return;
    }
    buf[n] = 0;
    printf("%s: %zd '%s'\n", what, n, buf);
}

static void contains_line(const char *what, const char *path, const char *needle) {
    int fd = open(path, O_RDONLY);
    ssize_t n, total = 0;
    while (fd >= 0 && total < (ssize_t)sizeof buf - 1 && (n = read(fd, buf + total, sizeof buf - 1 - total)) > 0)
        total += n;
    buf[total] = 0;
    if (fd < 0)
        printf("%s: FAIL %s\n", what, rc_text(fd));
    else
        expect_line(what, strstr(buf, needle) != NULL, 1);
    close(fd);
}

static void special_files(const char *argv0) {
    int fd = open("/dev/null", O_RDWR);
    rc_line("write /dev/null", write(fd, "abcde", 5));
    rc_line("read /dev/null", read(fd, buf, 10));
    close(fd);
    fd = open("/dev/zero", O_RDONLY);
    memset(buf, 1, 4096);
    ssize_t n = read(fd, buf, 4096);
    expect_line("/dev/zero reads zeros", n == 4096 && all_zero(buf, 4096), 1);
    close(fd);
    fd = open("/dev/urandom", O_RDONLY);
    char r1[32], r2[32];
    rc_line("read /dev/urandom 32", read(fd, r1, 32));
    read(fd, r2, 32);
    expect_line("/dev/urandom differs", memcmp(r1, r2, 32) != 0, 1);
    close(fd);
    struct stat st;
    expect_line("/dev/null is a char device", stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode), 1);

    n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    expect_line("/proc/self/exe is argv[0]", !strcmp(buf, argv0), 1);
    fd = open("data.txt", O_RDONLY);
    char fdpath[64];
    snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", fd);
    n = readlink(fdpath, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    expect_line("/proc/self/fd/N names the file", n > 9 && !strcmp(buf + n - 9, "/data.txt"), 1);
    DIR *dir = opendir("/proc/self/fd");
    int seen = 0;
    for (struct dirent *e; dir && (e = readdir(dir));)
        seen += atoi(e->d_name) == fd || !strcmp(e->d_name, "0") || !strcmp(e->d_name, "2");
    expect_line("/proc/self/fd lists 0, 2 and the file", seen == 3, 1);
    if (dir)
        closedir(dir);
    close(fd);
    contains_line("/proc/cpuinfo has processor lines", "/proc/cpuinfo", "processor\t:");
    contains_line("/proc/meminfo has MemTotal", "/proc/meminfo", "MemTotal:");

    snprintf(fdpath, sizeof fdpath, "/tmp/fileops-%s", strrchr(base, '/') + 1);
    fd = open(fdpath, O_CREAT | O_EXCL | O_RDWR, 0600);
    ok_line("create in /tmp", fd);
    rc_line("write in /tmp", write(fd, "tmp", 3));
    pread_line("read back in /tmp", fd, 10, 0);
    close(fd);
    rc_line("unlink in /tmp", unlink(fdpath));
}

/* Addresses no user program may touch. */
#define BAD ((void *)1)
#define KERNEL ((void *)0xffff880000000000ul)

static void bad_fds(void) {
    struct stat st;
    err_line("read fd -1", read(-1, buf, 1), EBADF);
    err_line("read fd 9999", read(9999, buf, 1), EBADF);
    err_line("write fd 9999", write(9999, "x", 1), EBADF);
    err_line("close fd 9999", close(9999), EBADF);
    err_line("fstat fd 9999", fstat(9999, &st), EBADF);
    err_line("lseek fd 9999", lseek(9999, 0, SEEK_SET), EBADF);
    err_line("pread fd 9999", pread(9999, buf, 1, 0), EBADF);
    err_line("dup fd 9999", dup(9999), EBADF);
    err_line("dup2 onto -1", dup2(0, -1), EBADF);
    err_line("fcntl F_GETFL fd 9999", fcntl(9999, F_GETFL), EBADF);
    err_line("openat with dirfd 9999", openat(9999, "data.txt", O_RDONLY), EBADF);
    err_line("fsync fd 9999", fsync(9999), EBADF);
    err_line("getdents64 fd 9999", syscall(SYS_getdents64, 9999, buf, sizeof buf), EBADF);
    int fd = open("data.txt", O_RDONLY);
    err_line("openat with a file as dirfd", openat(fd, "x", O_RDONLY), ENOTDIR);
    err_line("getdents64 on a file", syscall(SYS_getdents64, fd, buf, sizeof buf), ENOTDIR);
    err_line("ftruncate a read-only fd", ftruncate(fd, 0), EINVAL);
    close(fd);
    int p[2];
    rc_line("pipe", pipe(p));
    err_line("lseek on a pipe", lseek(p[0], 0, SEEK_CUR), ESPIPE);
    err_line("pread on a pipe", pread(p[0], buf, 1, 0), ESPIPE);
    close(p[0]);
    close(p[1]);
}

static void bad_paths(void) {
    struct stat st;
    char longname[300], longpath[5000];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    for (size_t i = 0; i + 2 < sizeof longpath; i += 2)
        memcpy(longpath + i, "a/", 2);
    longpath[sizeof longpath - 1] = 0;
    err_line("open missing", open("missing", O_RDONLY), ENOENT);
    err_line("open in a missing dir", open("nodir/x", O_RDONLY), ENOENT);
    err_line("open below a file", open("data.txt/x", O_RDONLY), ENOTDIR);
    err_line("open with a trailing slash", open("data.txt/", O_RDONLY), ENOTDIR);
    err_line("open empty path", open("", O_RDONLY), ENOENT);
    err_line("open a dir for writing", open(".", O_WRONLY), EISDIR);
    err_line("O_DIRECTORY on a file", open("data.txt", O_RDONLY | O_DIRECTORY), ENOTDIR);
    err_line("stat missing", stat("missing", &st), ENOENT);
    err_line("lstat missing", lstat("missing", &st), ENOENT);
    err_line("readlink missing", readlink("missing", buf, 10), ENOENT);
    err_line("open a 299-byte name", open(longname, O_RDONLY), ENAMETOOLONG);
    err_line("open a 4999-byte path", open(longpath, O_RDONLY), ENAMETOOLONG);
    err_line("mkdir empty path", mkdir("", 0755), ENOENT);
    err_line("rmdir .", rmdir("."), EINVAL);
    err_line("unlink missing", unlink("missing"), ENOENT);
}

static void bad_pointers(void) {
    int fd = open("data.txt", O_RDONLY);
    int wfd = open("scratch", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    int dfd = open(".", O_RDONLY | O_DIRECTORY);
    int p[2];
    pipe(p);
    /* Raw syscalls, so that libc cannot answer for the kernel. */
    err_line("openat path at 0x1", syscall(SYS_openat, AT_FDCWD, BAD, O_RDONLY), EFAULT);
    err_line("openat path in the kernel", syscall(SYS_openat, AT_FDCWD, KERNEL, O_RDONLY), EFAULT);
    err_line("newfstatat path at 0x1", syscall(SYS_newfstatat, AT_FDCWD, BAD, buf, 0), EFAULT);
    err_line("newfstatat buffer at 0x1", syscall(SYS_newfstatat, AT_FDCWD, "data.txt", BAD, 0), EFAULT);
    err_line("fstat buffer at 0x1", syscall(SYS_fstat, fd, BAD), EFAULT);
    err_line("statx buffer at 0x1", syscall(SYS_statx, AT_FDCWD, "data.txt", 0, 0x7ff, BAD), EFAULT);
    err_line("read into 0x1", syscall(SYS_read, fd, BAD, 10), EFAULT);
    err_line("read into the kernel", syscall(SYS_read, fd, KERNEL, 10), EFAULT);
    err_line("pread into 0x1", syscall(SYS_pread64, fd, BAD, 10, 0), EFAULT);
    err_line("write from 0x1", syscall(SYS_write, wfd, BAD, 10), EFAULT);
    err_line("write to a pipe from 0x1", syscall(SYS_write, p[1], BAD, 10), EFAULT);
    err_line("readv with iovecs at 0x1", syscall(SYS_readv, fd, BAD, 1), EFAULT);
    struct iovec iov = {BAD, 10};
    err_line("readv into an iovec at 0x1", syscall(SYS_readv, fd, &iov, 1), EFAULT);
    err_line("getcwd into 0x1", syscall(SYS_getcwd, BAD, 100), EFAULT);
    err_line("pipe2 into 0x1", syscall(SYS_pipe2, BAD, 0), EFAULT);
    err_line("readlink into 0x1", syscall(SYS_readlink, "link", BAD, 10), EFAULT);
    err_line("getdents64 into 0x1", syscall(SYS_getdents64, dfd, BAD, 4096), EFAULT);
    err_line("mkdir path at 0x1", syscall(SYS_mkdir, BAD, 0755), EFAULT);
    err_line("rename from 0x1", syscall(SYS_rename, BAD, "x"), EFAULT);
    rc_line("file intact after bad writes", lseek(wfd, 0, SEEK_END));
    close(fd);
    close(wfd);
    close(dfd);
    close(p[0]);
    close(p[1]);
}

static void bad_lengths(void) {
    int fd = open("data.txt", O_RDONLY);
    struct iovec iov = {buf, 10};
    err_line("read with a length past the address space", syscall(SYS_read, fd, buf, 1ul << 62), EFAULT);
    err_line("readv with -1 iovecs", syscall(SYS_readv, fd, &iov, -1), EINVAL);
    err_line("readv with 1025 iovecs", syscall(SYS_readv, fd, &iov, 1025), EINVAL);
    err_line("writev with -1 iovecs", syscall(SYS_writev, 1, &iov, -1), EINVAL);
    err_line("lseek whence 99", lseek(fd, 0, 99), EINVAL);
    err_line("lseek to -1", lseek(fd, -1, SEEK_SET), EINVAL);
    err_line("pread at offset -1", syscall(SYS_pread64, fd, buf, 1, -1l), EINVAL);
    int dfd = open(".", O_RDONLY | O_DIRECTORY);
    err_line("getdents64 into 1 byte", syscall(SYS_getdents64, dfd, buf, 1), EINVAL);
    err_line("readlink into 0 bytes", syscall(SYS_readlink, "link", buf, 0), EINVAL);
    int wfd = open("scratch", O_WRONLY);
    err_line("ftruncate to -1", ftruncate(wfd, -1), EINVAL);
    err_line("mmap of length 0", (long)mmap(NULL, 0, PROT_READ, MAP_PRIVATE, fd, 0), EINVAL);
    err_line("mmap at an unaligned offset", (long)mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 1), EINVAL);
    close(fd);
    close(dfd);
    close(wfd);
}

int main(int argc, char **argv) {
    if (argc != 2 || argv[1][0] != '/') {
        fprintf(stderr, "usage: fileops_special ABSOLUTE-DIR\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (chdir(argv[1]) < 0 || !getcwd(base, sizeof base)) {
        printf("chdir %s: FAIL %s\n", argv[1], rc_text(-1));
        return 1;
    }
    special_files(argv[0]);
    bad_fds();
    bad_paths();
    bad_pointers();
    bad_lengths();
    printf("done\n");
    return 0;
}
