/* metacache MODE: file metadata seen again after changes, for the guest's
 * cache of frozen rootfs metadata (docs/coldstart.md). Runs in a container
 * whose rootfs holds /img (data.txt, sub/, the symlink tow -> ../w) and
 * whose /w is a writable bind mount and /r a read-only one. MODE "ro": the root is read-only
 * (root.readonly), so lookups under /img are frozen and may be cached;
 * "rw": it is not, nothing is cached. Every check is one stable line;
 * `runtime-shim/tests/metacache.rs` compares the output with runc's.
 *
 * The host side creates HOST/hostfile once this program has created
 * HOST/ready (HOST = /w in "ro" mode, /img in "rw" mode): the program
 * must see it appear after its first stat said ENOENT. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"

static long size_of(const char *path) {
    struct stat st;
    return stat(path, &st) < 0 ? -1 : (long)st.st_size;
}

static void stat_line(const char *what, const char *path) {
    struct stat st;
    if (stat(path, &st) < 0) {
        show_line(what, -1);
        return;
    }
    line("%s: size %ld mode %o", what, (long)st.st_size, (unsigned)st.st_mode);
}

static int cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names of `dir` (without . and ..) on one line. */
static void list_line(const char *what, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        show_line(what, -1);
        return;
    }
    char *names[64];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 64) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp);
    printf("%s:", what);
    for (int i = 0; i < n; i++) {
        printf(" %s", names[i]);
        free(names[i]);
    }
    putchar('\n');
}

/* Reads, seeks and EOF of /img/data.txt through one open file. */
static void offsets(void) {
    long size = size_of("/img/data.txt");
    int fd = open("/img/data.txt", O_RDONLY);
    ok_line("open data.txt", fd);
    if (fd < 0)
        return;
    struct stat st;
    rc_line("fstat", fstat(fd, &st));
    eq_line("fstat size = stat size", st.st_size, size);
    char buf[256];
    rc_line("tell at open", lseek(fd, 0, SEEK_CUR));
    rc_line("read size+1", read(fd, buf, size + 1));
    rc_line("tell after", lseek(fd, 0, SEEK_CUR));
    rc_line("read at eof", read(fd, buf, 1));
    rc_line("seek set 0", lseek(fd, 0, SEEK_SET));
    rc_line("read 4", read(fd, buf, 4));
    rc_line("tell", lseek(fd, 0, SEEK_CUR));
    rc_line("pread 3 at 10", pread(fd, buf, 3, 10));
    rc_line("tell after pread", lseek(fd, 0, SEEK_CUR));
    rc_line("seek end", lseek(fd, 0, SEEK_END));
    rc_line("read at end", read(fd, buf, 8));
    rc_line("seek set 2", lseek(fd, 2, SEEK_SET));
    rc_line("read rest", read(fd, buf, sizeof buf));
    rc_line("read rest at eof", read(fd, buf, sizeof buf));
    rc_line("seek past end", lseek(fd, size + 100, SEEK_SET));
    rc_line("read past end", read(fd, buf, 4));
    rc_line("seek cur -100", lseek(fd, -100, SEEK_CUR));
    rc_line("read 5 there", read(fd, buf, 5));
    int dup_fd = dup(fd);
    rc_line("seek dup to 1", lseek(dup_fd, 1, SEEK_SET));
    rc_line("tell original", lseek(fd, 0, SEEK_CUR));
    pid_t pid = fork();
    if (pid == 0) {
        _exit(read(fd, buf, 6) == 6 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    eq_line("child read 6", WEXITSTATUS(status), 0);
    rc_line("tell after child", lseek(fd, 0, SEEK_CUR));
    rc_line("read after child", read(fd, buf, sizeof buf));
    rc_line("read after child at eof", read(fd, buf, sizeof buf));
    close(dup_fd);
    close(fd);
}

/* Lookups that stay on /img: found, missing, missing again. */
static void image(int ro) {
    stat_line("stat data.txt", "/img/data.txt");
    stat_line("stat data.txt again", "/img/data.txt");
    stat_line("stat sub", "/img/sub");
    stat_line("stat sub/", "/img/sub/");
    stat_line("stat data.txt/ ", "/img/data.txt/");
    stat_line("stat nope", "/img/nope");
    stat_line("stat nope again", "/img/nope");
    stat_line("stat nope/x", "/img/nope/x");
    err_line("open nope", open("/img/nope", O_RDONLY), ENOENT);
    err_line("open nope again", open("/img/nope", O_RDONLY), ENOENT);
    struct stat st;
    rc_line("lstat tow", lstat("/img/tow", &st));
    expect_line("tow is a link", S_ISLNK(st.st_mode), 1);
    rc_line("stat tow", stat("/img/tow", &st));
    expect_line("tow leads to a dir", S_ISDIR(st.st_mode), 1);
    stat_line("stat ../img/./data.txt", "/img/../img/./data.txt");
    list_line("list img", "/img");
    if (ro) {
        err_line("mkdir in img", mkdir("/img/x", 0755), EROFS);
        err_line("creat in img", open("/img/new", O_WRONLY | O_CREAT, 0644), EROFS);
        err_line("unlink in img", unlink("/img/data.txt"), EROFS);
        err_line("chmod in img", chmod("/img/data.txt", 0600), EROFS);
        stat_line("stat data.txt after refusals", "/img/data.txt");
        stat_line("stat new after refusal", "/img/new");
    }
    offsets();
}

/* Changes under /w, seen directly and through /img/tow (a path that
 * starts on the image and crosses into the writable mount). */
static void changes(void) {
    stat_line("stat tow/f", "/img/tow/f");
    err_line("open tow/f", open("/img/tow/f", O_RDONLY), ENOENT);
    int fd = open("/w/f", O_WRONLY | O_CREAT | O_EXCL, 0644);
    ok_line("create w/f", fd);
    stat_line("stat tow/f after create", "/img/tow/f");
    rc_line("write 3", write(fd, "abc", 3));
    struct stat st;
    rc_line("fstat", fstat(fd, &st));
    eq_line("fstat size", st.st_size, 3);
    stat_line("stat tow/f after write", "/img/tow/f");
    close(fd);
    rc_line("chmod 600", chmod("/w/f", 0600));
    stat_line("stat tow/f after chmod", "/img/tow/f");
    rc_line("truncate 1", truncate("/img/tow/f", 1));
    stat_line("stat w/f after truncate", "/w/f");
    struct timespec ts[2] = {{1000000000, 0}, {1234567890, 0}};
    rc_line("utimensat", utimensat(AT_FDCWD, "/w/f", ts, 0));
    rc_line("stat for mtime", stat("/img/tow/f", &st));
    eq_line("mtime", st.st_mtime, 1234567890);
    rc_line("rename f g", rename("/w/f", "/w/g"));
    stat_line("stat tow/f after rename", "/img/tow/f");
    stat_line("stat tow/g after rename", "/img/tow/g");
    list_line("list w", "/w");
    rc_line("mkdir w/d", mkdir("/w/d", 0700));
    stat_line("stat tow/d", "/img/tow/d");
    rc_line("symlink w/l", symlink("g", "/w/l"));
    rc_line("lstat w/l", lstat("/img/tow/l", &st));
    expect_line("w/l is a link", S_ISLNK(st.st_mode), 1);
    stat_line("stat through w/l", "/img/tow/l");
    list_line("list w after mkdir, symlink", "/img/tow");
    rc_line("unlink g", unlink("/w/g"));
    stat_line("stat tow/g after unlink", "/img/tow/g");
    stat_line("stat through w/l after unlink", "/img/tow/l");
    rc_line("rmdir d", rmdir("/img/tow/d"));
    stat_line("stat tow/d after rmdir", "/img/tow/d");
    rc_line("unlink l", unlink("/w/l"));
    list_line("list w at the end", "/w");
}

/* Lookups through /r, a read-only bind mount (frozen too on a read-only
 * root: only read-only mounts are crossed). */
static void readonly_bind(void) {
    stat_line("stat r/f", "/r/f");
    stat_line("stat r/f again", "/r/f");
    stat_line("stat r", "/r");
    stat_line("stat r/none", "/r/none");
    stat_line("stat r/none again", "/r/none");
    stat_line("stat r/../img/data.txt", "/r/../img/data.txt");
    err_line("mkdir in r", mkdir("/r/x", 0755), EROFS);
    int fd = open("/r/f", O_RDONLY);
    ok_line("open r/f", fd);
    char buf[64];
    rc_line("read r/f", read(fd, buf, sizeof buf));
    rc_line("read r/f at eof", read(fd, buf, sizeof buf));
    close(fd);
    list_line("list r", "/r");
}

/* A file the host creates while the program runs is seen. */
static void host_side(const char *dir) {
    char hostfile[64], ready[64];
    snprintf(hostfile, sizeof hostfile, "%s/hostfile", dir);
    snprintf(ready, sizeof ready, "%s/ready", dir);
    stat_line("stat hostfile before", hostfile);
    err_line("open hostfile before", open(hostfile, O_RDONLY), ENOENT);
    int fd = open(ready, O_WRONLY | O_CREAT, 0644);
    ok_line("create ready", fd);
    close(fd);
    int seen = 0;
    for (int i = 0; i < 2000 && !seen; i++) {
        struct stat st;
        seen = stat(hostfile, &st) == 0;
        if (!seen)
            usleep(5000);
    }
    expect_line("hostfile seen", seen, 1);
    stat_line("stat hostfile", hostfile);
    unlink(ready);
}

int main(int argc, char **argv) {
    int ro = argc > 1 && strcmp(argv[1], "ro") == 0;
    setvbuf(stdout, NULL, _IONBF, 0);
    image(ro);
    readonly_bind();
    changes();
    host_side(ro ? "/w" : "/img");
    line("done");
    return 0;
}
