/* Tries to leave the sandbox's rootfs: `escape SECRET [PREFIX]`.
 *
 * SECRET is the host path of a file outside the rootfs; PREFIX (default
 * empty) is prepended to the paths meant to name the rootfs's root, so
 * that a native run with PREFIX = the rootfs directory shows that every
 * probe is a real attack (natively it reaches the secret), while in a
 * sandbox with that rootfs each must fail. The rootfs is prepared by the
 * test (runtime-shim/tests/rootfs_escape.rs): /escape, /inside.txt,
 * /sub/, good_link -> inside.txt, good_abs -> /inside.txt, abs_link ->
 * SECRET, abs_dirlink -> dirname(SECRET), rel_link -> ../../..(many)/SECRET.
 *
 * One line per probe: `name: read <n> '<text>'` or `name: <ERRNO>`; write
 * probes print `name: created` or `name: <ERRNO>`. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checks.h"

#define UP "/../../../../../../../../../../../../../../../../../../.."

static const char *prefix = "";
static const char *secret;
static char secret_dir[4096];

/* PREFIX + a + b, in one of a few rotating buffers. */
static const char *path(const char *a, const char *b) {
    static char bufs[4][8192];
    static int next;
    char *p = bufs[next++ % 4];
    snprintf(p, sizeof bufs[0], "%s%s%s", prefix, a, b);
    return p;
}

static const char *raw(const char *a, const char *b) {
    static char bufs[4][8192];
    static int next;
    char *p = bufs[next++ % 4];
    snprintf(p, sizeof bufs[0], "%s%s", a, b);
    return p;
}

static void read_fd(const char *name, int fd) {
    char buf[128];
    if (fd < 0) {
        show_line(name, fd);
        return;
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0) {
        show_line(name, n);
        return;
    }
    buf[n] = 0;
    buf[strcspn(buf, "\n")] = 0;
    printf("%s: read %zd '%s'\n", name, n, buf);
}

static void try_read(const char *name, const char *p) {
    read_fd(name, open(p, O_RDONLY));
}

static void created(const char *name, int rc) {
    if (rc < 0)
        show_line(name, rc);
    else
        printf("%s: created\n", name);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3 || argv[1][0] != '/') {
        fprintf(stderr, "usage: escape SECRET-HOST-PATH [PREFIX]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    secret = argv[1];
    if (argc == 3)
        prefix = argv[2];
    snprintf(secret_dir, sizeof secret_dir, "%s", secret);
    dirname(secret_dir);

    /* What must work: files of the rootfs, by every kind of path. */
    try_read("inside", path("/inside.txt", ""));
    try_read("inside via sub/..", path("/sub/../inside.txt", ""));
    try_read("inside via relative symlink", path("/good_link", ""));
    try_read("inside via absolute symlink", path("/good_abs", ""));

    /* Reads that must not reach the secret. */
    try_read("host absolute path", secret);
    try_read("dotdot chain", path(UP, secret));
    try_read("dotdot chain to /etc/hostname", path(UP, "/etc/hostname"));
    try_read("absolute symlink", path("/abs_link", ""));
    try_read("absolute symlink to a dir", path("/abs_dirlink/", strrchr(secret, '/') + 1));
    try_read("relative symlink with dotdots", path("/rel_link", ""));
    struct stat st;
    int rc = stat(path("/abs_link", ""), &st);
    if (rc < 0)
        show_line("stat through absolute symlink", rc);
    else
        printf("stat through absolute symlink: size %lld\n", (long long)st.st_size);
    try_read("/proc/self/root", raw("/proc/self/root", secret));
    try_read("/proc/self/cwd dotdots", raw("/proc/self/cwd" UP, secret));

    int dfd = open(path("/", ""), O_RDONLY | O_DIRECTORY);
    read_fd("openat root dirfd dotdots", openat(dfd, raw(UP + 1, secret), O_RDONLY));
    char fdlink[64];
    snprintf(fdlink, sizeof fdlink, "/proc/self/fd/%d", dfd);
    try_read("/proc/self/fd/N dotdots", raw(fdlink, raw(UP, secret)));
    if (chdir(path("/", "")) < 0)
        show_line("chdir to root", -1);
    for (int i = 0; i < 30; i++)
        chdir("..");
    try_read("chdir dotdots then relative", secret + 1);
    rc = fchdir(dfd);
    close(dfd);

    /* Writes that must not land outside. */
    created("create through absolute dir symlink",
            open(path("/abs_dirlink/planted", ""), O_CREAT | O_WRONLY | O_EXCL, 0644));
    created("create through dotdots", open(path(UP, raw(secret_dir, "/planted2")), O_CREAT | O_WRONLY | O_EXCL, 0644));
    created("mkdir through absolute dir symlink", mkdir(path("/abs_dirlink/planted_dir", ""), 0755));
    int fd = open(path("/tomove", ""), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    close(fd);
    created("rename out through absolute dir symlink", rename(path("/tomove", ""), path("/abs_dirlink/moved", "")));
    show_line("symlink to the secret", symlink(secret, path("/made_link", "")));
    try_read("read a symlink made inside", path("/made_link", ""));
    show_line("hard link to the secret", link(secret, path("/hard", "")));
    try_read("read the hard link", path("/hard", ""));

    /* A raw packet socket would see the host's traffic. */
    fd = socket(AF_PACKET, SOCK_RAW, 0);
    if (fd >= 0)
        printf("packet socket: created\n");
    else
        show_line("packet socket", fd);
    printf("done\n");
    return rc < 0;
}
