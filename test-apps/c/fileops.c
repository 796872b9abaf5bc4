/* File syscalls, one line per check, for a differential test (native run
 * against a sandboxed run): `fileops DIR`. DIR must be an empty-but-for
 * two entries directory prepared by the test: `data.txt` holding DATA and
 * `link`, a symlink to `data.txt`. Everything else is created here.
 * Printed paths are relative to DIR; no fd numbers, inodes or times. The
 * special files (/dev, /proc, /tmp) and bad input (EBADF, ENOENT,
 * EFAULT, ...) are in fileops_special.c; pipes, polling and sockets in
 * ioops.c and netops.c. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "checks.h"

#define DATA "line one\nline two\nline three\n"

static char base[4096];
static char buf[8192];

static const char *type_name(mode_t m) {
    return S_ISREG(m) ? "reg" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "lnk" : S_ISCHR(m) ? "chr" : "other";
}

static void stat_line(const char *what, int rc, const struct stat *st) {
    if (rc < 0) {
        show_line(what, rc);
        return;
    }
    printf("%s: %s mode %04o size %lld nlink %lu\n", what, type_name(st->st_mode),
           (unsigned)(st->st_mode & 07777), S_ISDIR(st->st_mode) ? 0LL : (long long)st->st_size,
           (unsigned long)st->st_nlink);
}

/* The bytes at [off, off+len) of fd as text. */
static void pread_line(const char *what, int fd, size_t len, off_t off) {
    ssize_t n = pread(fd, buf, len, off);
    if (n < 0) {
        rc_line(what, n);
        return;
    }
    buf[n] = 0;
    printf("%s: %zd '%s'\n", what, n, buf);
}

/* The first bytes of the file at `path` as text. */
static void file_line(const char *what, const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        printf("%s: FAIL %s\n", what, rc_text(fd));
    else
        pread_line(what, fd, 64, 0);
    close(fd);
}

static int all_zero(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

static void read_write_seek(void) {
    int fd = open("f1", O_CREAT | O_RDWR | O_TRUNC, 0644);
    ok_line("open f1 O_CREAT|O_RDWR", fd);
    rc_line("write 11 bytes", write(fd, "hello world", 11));
    rc_line("lseek SEEK_CUR", lseek(fd, 0, SEEK_CUR));
    rc_line("lseek SEEK_SET 6", lseek(fd, 6, SEEK_SET));
    ssize_t n = read(fd, buf, 100);
    buf[n > 0 ? n : 0] = 0;
    printf("read after seek: %zd '%s'\n", n, buf);
    rc_line("read at eof", read(fd, buf, 10));
    rc_line("lseek SEEK_END -5", lseek(fd, -5, SEEK_END));
    rc_line("pwrite at 0", pwrite(fd, "HELLO", 5, 0));
    rc_line("offset after pwrite", lseek(fd, 0, SEEK_CUR));
    pread_line("pread 0..11", fd, 11, 0);

    struct iovec w[3] = {{"ab", 2}, {"", 0}, {"cdef", 4}};
    lseek(fd, 0, SEEK_END);
    rc_line("writev 3 iovecs", writev(fd, w, 3));
    char a[3], b[4], c[64];
    struct iovec r[3] = {{a, 3}, {b, 4}, {c, sizeof c}};
    lseek(fd, 0, SEEK_SET);
    n = readv(fd, r, 3);
    printf("readv: %zd '%.3s' '%.4s' '%.*s'\n", n, a, b, (int)(n > 7 ? n - 7 : 0), c);
    struct iovec pw[2] = {{"xy", 2}, {"z", 1}};
    rc_line("pwritev at 2", pwritev(fd, pw, 2, 2));
    struct iovec pr[2] = {{a, 3}, {b, 4}};
    n = preadv(fd, pr, 2, 1);
    printf("preadv at 1: %zd '%.3s' '%.4s'\n", n, a, b);
    rc_line("offset after preadv", lseek(fd, 0, SEEK_CUR));

    rc_line("lseek past end", lseek(fd, 100, SEEK_SET));
    rc_line("write after hole", write(fd, "!", 1));
    struct stat st;
    stat_line("fstat after hole", fstat(fd, &st), &st);
    n = pread(fd, buf, 50, 40);
    expect_line("hole reads as zeros", n == 50 && all_zero(buf, 50), 1);
    rc_line("ftruncate to 5", ftruncate(fd, 5));
    stat_line("fstat after shrink", fstat(fd, &st), &st);
    rc_line("ftruncate to 4096", ftruncate(fd, 4096));
    n = pread(fd, buf, 4096, 0);
    printf("pread after grow: %zd, tail zero %s\n", n, n == 4096 && all_zero(buf + 5, 4091) ? "yes" : "no FAIL");
    rc_line("fsync", fsync(fd));
    rc_line("fdatasync", fdatasync(fd));
    rc_line("close", close(fd));
    err_line("close again", close(fd), EBADF);

    fd = open("f1", O_WRONLY | O_APPEND);
    lseek(fd, 0, SEEK_SET);
    rc_line("O_APPEND write", write(fd, "Z", 1));
    rc_line("O_APPEND offset", lseek(fd, 0, SEEK_CUR));
    err_line("read from O_WRONLY", read(fd, buf, 1), EBADF);
    close(fd);
    fd = open("f1", O_RDONLY);
    err_line("write to O_RDONLY", write(fd, "x", 1), EBADF);
    close(fd);
    fd = open("f1", O_RDWR | O_TRUNC);
    stat_line("after O_TRUNC", fstat(fd, &st), &st);
    close(fd);
    err_line("O_CREAT|O_EXCL existing", open("f1", O_CREAT | O_EXCL | O_WRONLY, 0644), EEXIST);
}

/* Enough of struct statx (linux/stat.h) for the basic fields. */
struct statx_basic {
    uint32_t mask, blksize;
    uint64_t attributes;
    uint32_t nlink, uid, gid;
    uint16_t mode, pad0;
    uint64_t ino, size, blocks, attributes_mask;
    char rest[256 - 64];
};

static void stats(void) {
    struct stat st;
    stat_line("stat data.txt", stat("data.txt", &st), &st);
    stat_line("lstat link", lstat("link", &st), &st);
    stat_line("stat link", stat("link", &st), &st);
    stat_line("fstatat link NOFOLLOW", fstatat(AT_FDCWD, "link", &st, AT_SYMLINK_NOFOLLOW), &st);
    int dfd = open(".", O_RDONLY | O_DIRECTORY);
    ok_line("open . O_DIRECTORY", dfd);
    stat_line("fstatat dirfd data.txt", fstatat(dfd, "data.txt", &st, 0), &st);
    int fd = open("data.txt", O_RDONLY);
    stat_line("fstatat AT_EMPTY_PATH", fstatat(fd, "", &st, AT_EMPTY_PATH), &st);
    close(fd);
    rc_line("mkdir sd", mkdir("sd", 0750));
    rc_line("mkdir sd/inner", mkdir("sd/inner", 0700));
    stat_line("stat sd", stat("sd", &st), &st);

    struct statx_basic sx;
    memset(&sx, 0, sizeof sx);
    long rc = syscall(SYS_statx, AT_FDCWD, "data.txt", 0, 0x7ffu /* STATX_BASIC_STATS */, &sx);
    if (rc < 0)
        show_line("statx data.txt", rc);
    else
        printf("statx data.txt: basic %s mode %o size %llu nlink %u\n",
               (sx.mask & 0x7ffu) == 0x7ffu ? "yes" : "no", sx.mode, (unsigned long long)sx.size, sx.nlink);
    rc = syscall(SYS_statx, AT_FDCWD, "link", 0x100 /* AT_SYMLINK_NOFOLLOW */, 0x7ffu, &sx);
    printf("statx link NOFOLLOW: %s type %s size %llu\n", rc_text(rc), type_name(sx.mode),
           (unsigned long long)sx.size);

    rc_line("access R_OK|W_OK", access("data.txt", R_OK | W_OK));
    err_line("access X_OK on 0644", access("data.txt", X_OK), EACCES);
    err_line("access missing", access("missing", F_OK), ENOENT);
    rc_line("faccessat dirfd", faccessat(dfd, "data.txt", R_OK, 0));
    rc_line("faccessat2 NOFOLLOW", syscall(SYS_faccessat2, AT_FDCWD, "link", F_OK, AT_SYMLINK_NOFOLLOW));

    ssize_t n = readlink("link", buf, sizeof buf);
    printf("readlink link: %zd '%.*s'\n", n, (int)(n > 0 ? n : 0), buf);
    n = readlinkat(dfd, "link", buf, 3);
    printf("readlinkat 3 bytes: %zd '%.*s'\n", n, (int)(n > 0 ? n : 0), buf);
    err_line("readlink of a file", readlink("data.txt", buf, sizeof buf), EINVAL);
    close(dfd);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* `what: name/type ...` of a directory through raw getdents64, sorted. */
static void list_dir(const char *what, const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    char dents[4096], *names[64];
    int count = 0;
    long n;
    while ((n = syscall(SYS_getdents64, fd, dents, sizeof dents)) > 0) {
        for (long off = 0; off < n && count < 64;) {
            /* struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, name */
            unsigned short reclen;
            memcpy(&reclen, dents + off + 16, 2);
            unsigned char t = (unsigned char)dents[off + 18];
            const char *tn = t == DT_DIR ? "d" : t == DT_REG ? "f" : t == DT_LNK ? "l" : "?";
            if (asprintf(&names[count], "%s:%s", dents + off + 19, tn) >= 0)
                count++;
            off += reclen;
        }
    }
    if (n < 0)
        show_line(what, n);
    close(fd);
    qsort(names, count, sizeof *names, cmp_str);
    printf("%s:", what);
    for (int i = 0; i < count; i++) {
        printf(" %s", names[i]);
        free(names[i]);
    }
    putchar('\n');
}

static void touch(const char *path) {
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0 || write(fd, path, strlen(path)) < 0)
        printf("create %s: FAIL %s\n", path, rc_text(-1));
    close(fd);
}

static void directories(void) {
    rc_line("mkdir d", mkdir("d", 0755));
    err_line("mkdir d again", mkdir("d", 0755), EEXIST);
    err_line("mkdir d/a/b", mkdir("d/a/b", 0755), ENOENT);
    touch("d/one");
    touch("d/two");
    touch("d/three");
    rc_line("mkdirat d/sub", mkdirat(AT_FDCWD, "d/sub", 0755));
    list_dir("getdents64 d", "d");
    rc_line("rename d/one d/uno", rename("d/one", "d/uno"));
    rc_line("rename over existing", rename("d/two", "d/three"));
    file_line("replaced content", "d/three");
    rc_line("rename dir", rename("d/sub", "d/sub2"));
    int dfd = open("d", O_RDONLY | O_DIRECTORY);
    rc_line("renameat", renameat(dfd, "uno", dfd, "one"));
    err_line("rename missing", rename("d/missing", "d/x"), ENOENT);
    rc_line("mkdir d/full", mkdir("d/full", 0755));
    touch("d/full/f");
    err_line("rename dir over non-empty dir", rename("d/sub2", "d/full"), ENOTEMPTY);
    err_line("rename file over dir", rename("d/one", "d/full"), EISDIR);
    list_dir("getdents64 d after renames", "d");
    rc_line("unlink d/one", unlink("d/one"));
    err_line("unlink a dir", unlink("d/sub2"), EISDIR);
    rc_line("unlinkat AT_REMOVEDIR", unlinkat(dfd, "sub2", AT_REMOVEDIR));
    err_line("rmdir non-empty", rmdir("d/full"), ENOTEMPTY);
    err_line("unlink missing", unlink("d/one"), ENOENT);
    list_dir("getdents64 d at the end", "d");

    char cwd[4096];
    rc_line("chdir d", chdir("d"));
    const char *c = getcwd(cwd, sizeof cwd);
    printf("getcwd: %s\n", c && !strncmp(c, base, strlen(base)) ? c + strlen(base) : "FAIL");
    rc_line("chdir ..", chdir(".."));
    rc_line("fchdir d", fchdir(dfd));
    c = getcwd(cwd, sizeof cwd);
    printf("getcwd after fchdir: %s\n", c && !strncmp(c, base, strlen(base)) ? c + strlen(base) : "FAIL");
    rc_line("chdir base", chdir(base));
    int ffd = open("data.txt", O_RDONLY);
    err_line("fchdir to a file", fchdir(ffd), ENOTDIR);
    close(ffd);
    err_line("chdir missing", chdir("missing"), ENOENT);
    err_line("chdir to a file", chdir("data.txt"), ENOTDIR);
    err_line("getcwd into 2 bytes", syscall(SYS_getcwd, cwd, 2), ERANGE);
    close(dfd);

    umask(022);
    printf("umask previous: %03o\n", (unsigned)umask(077));
    struct stat st;
    touch("masked");
    stat_line("file under umask 077", stat("masked", &st), &st);
    rc_line("mkdir under umask 077", mkdir("maskdir", 0777));
    stat_line("dir under umask 077", stat("maskdir", &st), &st);
    umask(022);
}

static void mapping_and_sendfile(void) {
    int fd = open("data.txt", O_RDONLY);
    char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        show_line("mmap MAP_PRIVATE", -1);
    } else {
        expect_line("mmap content matches", !memcmp(p, DATA, strlen(DATA)), 1);
        expect_line("mmap tail of page zero", all_zero(p + strlen(DATA), 4096 - strlen(DATA)), 1);
        p[0] = 'X';
        pread(fd, buf, 1, 0);
        expect_line("private write leaves file alone", buf[0] == 'l' && p[0] == 'X', 1);
        rc_line("munmap", munmap(p, 4096));
    }
    p = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE, fd, 4096);
    if (p == MAP_FAILED) {
        show_line("mmap at offset past EOF", -1);
    } else {
        /* Mapping beyond EOF succeeds; touching it would be SIGBUS. */
        printf("mmap at offset past EOF: ok\n");
        munmap(p, 8192);
    }
    int wfd = open("wonly", O_CREAT | O_WRONLY, 0644);
    err_line("mmap of O_WRONLY fd", (long)mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, wfd, 0), EACCES);
    close(wfd);

    int out = open("copy", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    rc_line("sendfile whole file", sendfile(out, fd, NULL, 1000));
    rc_line("input offset after sendfile", lseek(fd, 0, SEEK_CUR));
    off_t off = 5;
    rc_line("sendfile 4 bytes at 5", sendfile(out, fd, &off, 4));
    printf("sendfile offset now: %lld\n", (long long)off);
    close(out);
    file_line("copy content", "copy");
    close(fd);
}

static void dup_and_fcntl(void) {
    int fd = open("data.txt", O_RDONLY);
    int d = dup(fd);
    ok_line("dup", d);
    read(fd, buf, 3);
    rc_line("dup shares offset", lseek(d, 0, SEEK_CUR));
    eq_line("dup2 to 100", dup2(fd, 100), 100);
    expect_line("dup2 same fd returns it", dup2(fd, fd) == fd, 1);
    eq_line("dup3 to 101 O_CLOEXEC", dup3(fd, 101, O_CLOEXEC), 101);
    rc_line("F_GETFD of dup3 O_CLOEXEC", fcntl(101, F_GETFD));
    rc_line("F_GETFD of dup2", fcntl(100, F_GETFD));
    /* Raw: musl's dup3 checks these itself. */
    err_line("dup3 same fd", syscall(SYS_dup3, fd, fd, 0), EINVAL);
    err_line("dup3 bad flags", syscall(SYS_dup3, fd, 102, 0x4), EINVAL);
    rc_line("F_SETFD FD_CLOEXEC", fcntl(fd, F_SETFD, FD_CLOEXEC));
    rc_line("F_GETFD after set", fcntl(fd, F_GETFD));
    int d50 = fcntl(fd, F_DUPFD, 50);
    expect_line("F_DUPFD 50 gives >= 50", d50 >= 50, 1);
    rc_line("F_GETFD of F_DUPFD", fcntl(d50, F_GETFD));
    int d60 = fcntl(fd, F_DUPFD_CLOEXEC, 60);
    expect_line("F_DUPFD_CLOEXEC 60 gives >= 60", d60 >= 60, 1);
    rc_line("F_GETFD of F_DUPFD_CLOEXEC", fcntl(d60, F_GETFD));
    int rw = open("f1", O_RDWR | O_APPEND);
    int fl = fcntl(rw, F_GETFL);
    printf("F_GETFL O_RDWR|O_APPEND: %#x\n", fl & (O_ACCMODE | O_APPEND | O_NONBLOCK));
    rc_line("F_SETFL O_NONBLOCK", fcntl(rw, F_SETFL, fl | O_NONBLOCK));
    printf("F_GETFL after F_SETFL: %#x\n", fcntl(rw, F_GETFL) & (O_ACCMODE | O_APPEND | O_NONBLOCK));
    err_line("fcntl unknown command", fcntl(fd, 0x7fff), EINVAL);
    int closed[] = {fd, d, 100, 101, d50, d60, rw};
    for (unsigned i = 0; i < sizeof closed / sizeof *closed; i++)
        close(closed[i]);
}

int main(int argc, char **argv) {
    if (argc != 2 || argv[1][0] != '/') {
        fprintf(stderr, "usage: fileops ABSOLUTE-DIR\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (chdir(argv[1]) < 0 || !getcwd(base, sizeof base)) {
        printf("chdir %s: FAIL %s\n", argv[1], rc_text(-1));
        return 1;
    }
    read_write_seek();
    stats();
    directories();
    mapping_and_sendfile();
    dup_and_fcntl();
    printf("done\n");
    return 0;
}
