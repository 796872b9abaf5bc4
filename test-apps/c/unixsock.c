/* AF_UNIX path and abstract sockets, and the path operations that go with
 * them (symlink, link, linkat AT_SYMLINK_FOLLOW, chmod, chown, utimes),
 * for the security tests (runtime-shim/tests/security_unix.rs).
 *
 *   unixsock ops DIR
 *       Everything happens inside DIR (a scratch directory) and on an
 *       abstract name of its own: the output is the same natively and in a
 *       sandbox, or in an OCI container, whose DIR is its own.
 *   unixsock escape DIR ABSTRACT HOST_DGRAM
 *       Probes toward sockets outside DIR that the test prepared: DIR holds
 *       symlinks (absolute, relative with .., a symlinked directory) to a
 *       host stream listener and a host datagram socket (HOST_DGRAM, also
 *       tried by its host path), and ABSTRACT is an abstract name a host
 *       process listens on (ABSTRACT.dgram: a datagram one). Natively each probe
 *       reaches the host socket ("connected", "sent"); in a sandbox whose
 *       rootfs is DIR none may.
 *
 * Every line is stable: no fds, pids or inode numbers. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "checks.h"

static struct sockaddr_un addr;

/* `addr` for `DIR/name`; returns its length. */
static socklen_t at(const char *dir, const char *name) {
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s/%s", dir, name);
    return sizeof addr;
}

/* `addr` for the abstract name `name`; returns its length. */
static socklen_t abstract(const char *name) {
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    size_t n = strlen(name);
    memcpy(addr.sun_path + 1, name, n);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static char path_buf[3][256];

static const char *p(int i, const char *dir, const char *name) {
    snprintf(path_buf[i], sizeof path_buf[i], "%s/%s", dir, name);
    return path_buf[i];
}

static int connect_to(socklen_t len) {
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    int rc = connect(c, (struct sockaddr *)&addr, len);
    int e = errno;
    close(c);
    errno = e;
    return rc;
}

static void mode_line(const char *what, const char *path) {
    struct stat st;
    if (lstat(path, &st) < 0)
        printf("%s: FAIL %s\n", what, rc_text(-1));
    else
        printf("%s: %s %o links %ld\n", what,
               S_ISREG(st.st_mode)    ? "file"
               : S_ISLNK(st.st_mode)  ? "symlink"
               : S_ISSOCK(st.st_mode) ? "socket"
                                      : "other",
               st.st_mode & 07777, (long)st.st_nlink);
}

static void stream_paths(const char *dir) {
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    socklen_t len = at(dir, "s.sock");
    struct sockaddr_un bound = addr;
    rc_line("bind a path", bind(l, (struct sockaddr *)&addr, len));
    struct stat st;
    expect_line("the path is a socket", stat(p(0, dir, "s.sock"), &st) == 0 && S_ISSOCK(st.st_mode),
                1);
    err_line("connect before listen", connect_to(len), ECONNREFUSED);
    rc_line("listen", listen(l, 8));
    rc_line("connect to the path", connect_to(len));
    err_line("bind the same path again",
             bind(socket(AF_UNIX, SOCK_STREAM, 0), (struct sockaddr *)&addr, len), EADDRINUSE);

    rc_line("symlink relative", symlink("s.sock", p(0, dir, "rel.link")));
    rc_line("connect through a relative symlink", connect_to(at(dir, "rel.link")));
    rc_line("symlink absolute", symlink(p(1, dir, "s.sock"), p(0, dir, "abs.link")));
    rc_line("connect through an absolute symlink", connect_to(at(dir, "abs.link")));
    rc_line("mkdir sub", mkdir(p(0, dir, "sub"), 0755));
    rc_line("symlink to a dir", symlink(dir, p(0, dir, "sub/up")));
    rc_line("connect through a dir symlink", connect_to(at(dir, "sub/up/s.sock")));
    rc_line("connect through dotdot", connect_to(at(dir, "sub/../s.sock")));
    err_line("bind onto a symlink", bind(socket(AF_UNIX, SOCK_STREAM, 0),
                                         (struct sockaddr *)&addr, at(dir, "abs.link")),
             EADDRINUSE);

    /* What accept and the names report. */
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    connect(c, (struct sockaddr *)&bound, sizeof bound);
    fcntl(l, F_SETFL, O_NONBLOCK); /* a missing connection fails, not hangs */
    int a = accept(l, NULL, NULL);
    ok_line("accept", a);
    struct sockaddr_un got;
    socklen_t glen = sizeof got;
    memset(&got, 0, sizeof got);
    getsockname(l, (struct sockaddr *)&got, &glen);
    expect_line("getsockname is the bound path", !strcmp(got.sun_path, bound.sun_path), 1);
    glen = sizeof got;
    memset(&got, 0, sizeof got);
    getpeername(c, (struct sockaddr *)&got, &glen);
    expect_line("getpeername is the bound path", !strcmp(got.sun_path, bound.sun_path), 1);
    rc_line("write", write(c, "x", 1));
    char b[4];
    rc_line("read the first queued (closed) connection", read(a, b, sizeof b));
    close(a);
    close(c);
    close(l);

    err_line("connect to a missing path", connect_to(at(dir, "missing")), ENOENT);
    close(open(p(0, dir, "plain"), O_CREAT | O_WRONLY, 0644));
    err_line("connect to a regular file", connect_to(at(dir, "plain")), ECONNREFUSED);
    err_line("connect below a regular file", connect_to(at(dir, "plain/x")), ENOTDIR);
    err_line("bind in a missing dir",
             bind(socket(AF_UNIX, SOCK_STREAM, 0), (struct sockaddr *)&addr,
                  at(dir, "nodir/x.sock")),
             ENOENT);
    rc_line("symlink dangling", symlink("gone", p(0, dir, "dangling")));
    err_line("connect through a dangling symlink", connect_to(at(dir, "dangling")), ENOENT);
    rc_line("unlink the socket", unlink(p(0, dir, "s.sock")));
    err_line("connect after unlink", connect_to(at(dir, "rel.link")), ENOENT);
}

static void dgram_paths(const char *dir) {
    int r = socket(AF_UNIX, SOCK_DGRAM, 0);
    rc_line("bind a datagram path", bind(r, (struct sockaddr *)&addr, at(dir, "d.sock")));
    rc_line("symlink to the datagram socket", symlink("d.sock", p(0, dir, "d.link")));
    int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    rc_line("sendto the path", sendto(s, "ab", 2, 0, (struct sockaddr *)&addr, at(dir, "d.sock")));
    rc_line("sendto through the symlink",
            sendto(s, "cde", 3, 0, (struct sockaddr *)&addr, at(dir, "d.link")));
    err_line("sendto a missing path",
             sendto(s, "f", 1, 0, (struct sockaddr *)&addr, at(dir, "missing")), ENOENT);
    char b[8];
    rc_line("recv", recv(r, b, sizeof b, MSG_DONTWAIT));
    rc_line("recv", recv(r, b, sizeof b, MSG_DONTWAIT));
    close(s);
    close(r);
}

static void abstract_names(void) {
    char name[64];
    snprintf(name, sizeof name, "qrun-unixsock-%d", (int)getpid());
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    socklen_t len = abstract(name);
    struct sockaddr_un bound = addr;
    rc_line("bind an abstract name", bind(l, (struct sockaddr *)&addr, len));
    rc_line("listen on it", listen(l, 4));
    err_line("bind it again", bind(socket(AF_UNIX, SOCK_STREAM, 0), (struct sockaddr *)&addr, len),
             EADDRINUSE);
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    rc_line("connect to it", connect(c, (struct sockaddr *)&addr, len));
    struct sockaddr_un got;
    socklen_t glen = sizeof got;
    memset(&got, 0, sizeof got);
    getsockname(l, (struct sockaddr *)&got, &glen);
    expect_line("getsockname is the abstract name",
                glen == len && !memcmp(&got, &bound, len), 1);
    glen = sizeof got;
    memset(&got, 0, sizeof got);
    getpeername(c, (struct sockaddr *)&got, &glen);
    expect_line("getpeername is the abstract name",
                glen == len && !memcmp(&got, &bound, len), 1);
    fcntl(l, F_SETFL, O_NONBLOCK); /* a missing connection fails, not hangs */
    int a = accept(l, NULL, NULL);
    ok_line("accept on it", a);
    close(a);
    close(c);
    close(l);
    snprintf(name, sizeof name, "qrun-unixsock-none-%d", (int)getpid());
    err_line("connect to an unbound abstract name", connect_to(abstract(name)), ECONNREFUSED);

    int d = socket(AF_UNIX, SOCK_DGRAM, 0);
    snprintf(name, sizeof name, "qrun-unixsock-dgram-%d", (int)getpid());
    len = abstract(name);
    rc_line("bind an abstract datagram name", bind(d, (struct sockaddr *)&addr, len));
    int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    rc_line("sendto it", sendto(s, "hi", 2, 0, (struct sockaddr *)&addr, len));
    char b[4];
    rc_line("recv from it", recv(d, b, sizeof b, MSG_DONTWAIT));
    close(s);
    close(d);

    /* An autobind name is abstract, five hex digits, and reachable. */
    int ab = socket(AF_UNIX, SOCK_DGRAM, 0);
    struct sockaddr_un empty = {.sun_family = AF_UNIX};
    rc_line("autobind", bind(ab, (struct sockaddr *)&empty, sizeof(sa_family_t)));
    glen = sizeof got;
    memset(&got, 0, sizeof got);
    getsockname(ab, (struct sockaddr *)&got, &glen);
    printf("autobind name: length %d, abstract %s\n", (int)glen, got.sun_path[0] ? "no" : "yes");
    s = socket(AF_UNIX, SOCK_DGRAM, 0);
    rc_line("sendto the autobind name", sendto(s, "abc", 3, 0, (struct sockaddr *)&got, glen));
    rc_line("recv on it", recv(ab, b, sizeof b, MSG_DONTWAIT));
    close(s);
    close(ab);
}

static void path_ops(const char *dir) {
    const char *file = p(2, dir, "file");
    int fd = open(file, O_CREAT | O_RDWR, 0644);
    rc_line("write the file", write(fd, "content", 7));
    rc_line("chmod", chmod(file, 0600));
    mode_line("after chmod", file);
    rc_line("fchmod", fchmod(fd, 0640));
    mode_line("after fchmod", file);
    rc_line("chown to itself", chown(file, (uid_t)-1, (gid_t)-1));
    rc_line("fchown to itself", fchown(fd, (uid_t)-1, (gid_t)-1));
    rc_line("utimensat now", utimensat(AT_FDCWD, file, NULL, 0));
    rc_line("symlink to the file", symlink("file", p(0, dir, "f.link")));
    rc_line("chmod through the symlink", chmod(p(0, dir, "f.link"), 0604));
    mode_line("the file after chmod through the symlink", file);
    rc_line("link", link(file, p(0, dir, "hard")));
    mode_line("the hard link", p(0, dir, "hard"));
    rc_line("link of a symlink", link(p(0, dir, "f.link"), p(1, dir, "hard.nofollow")));
    mode_line("link of a symlink is a symlink", p(0, dir, "hard.nofollow"));
    rc_line("linkat AT_SYMLINK_FOLLOW",
            linkat(AT_FDCWD, p(0, dir, "f.link"), AT_FDCWD, p(1, dir, "hard.follow"),
                   AT_SYMLINK_FOLLOW));
    mode_line("linkat AT_SYMLINK_FOLLOW links the target", p(0, dir, "hard.follow"));
    mode_line("the file has three names", file);
    err_line("linkat AT_SYMLINK_FOLLOW of a dangling link",
             linkat(AT_FDCWD, p(0, dir, "dangling"), AT_FDCWD, p(1, dir, "hard.dangling"),
                    AT_SYMLINK_FOLLOW),
             ENOENT);
    err_line("linkat with a bad flag",
             linkat(AT_FDCWD, file, AT_FDCWD, p(1, dir, "hard.bad"), 0x1), EINVAL);
    err_line("link onto an existing name", link(file, p(0, dir, "hard")), EEXIST);

    int sv[2];
    rc_line("socketpair", socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    off_t off = 0;
    rc_line("sendfile into the pair", sendfile(sv[0], fd, &off, 7));
    char b[16];
    rc_line("read from the pair", read(sv[1], b, sizeof b));
    close(sv[0]);
    close(sv[1]);
    close(fd);
}

/* Relative paths resolve from the cwd; the bound name stays relative. */
static void relative_paths(const char *dir) {
    rc_line("chdir to the dir", chdir(dir));
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un rel = {.sun_family = AF_UNIX, .sun_path = "r.sock"};
    rc_line("bind a relative path", bind(l, (struct sockaddr *)&rel, sizeof rel));
    rc_line("listen on it", listen(l, 4));
    struct stat st;
    expect_line("it is in the cwd", lstat(p(0, dir, "r.sock"), &st) == 0 && S_ISSOCK(st.st_mode), 1);
    struct sockaddr_un got;
    socklen_t glen = sizeof got;
    memset(&got, 0, sizeof got);
    getsockname(l, (struct sockaddr *)&got, &glen);
    printf("getsockname of a relative bind: %s\n", got.sun_path);
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    strcpy(addr.sun_path, "sub/../r.sock");
    rc_line("connect to a relative path", connect_to(sizeof addr));
    close(l);
    struct {
        struct sockaddr_un a;
        char more[8];
    } big;
    memset(&big, 'a', sizeof big);
    big.a.sun_family = AF_UNIX;
    err_line("connect with a too long address",
             connect(socket(AF_UNIX, SOCK_STREAM, 0), (struct sockaddr *)&big, sizeof big.a + 1),
             EINVAL);
}

/* Probes toward host sockets; natively they all get through. */
static void escape(const char *dir, const char *host_abstract, const char *host_dgram) {
    const char *stream[] = {"abs.sock", "rel.sock", "dirlink/host.sock", "sub/rel.sock"};
    for (size_t i = 0; i < sizeof stream / sizeof *stream; i++) {
        char what[96];
        snprintf(what, sizeof what, "connect %s", stream[i]);
        int rc = connect_to(at(dir, stream[i]));
        printf("%s: %s\n", what, rc == 0 ? "connected" : rc_text(rc));
    }
    const char *dgram[] = {"abs.dgram", "rel.dgram", "dirlink/host.dgram"};
    int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    for (size_t i = 0; i < sizeof dgram / sizeof *dgram; i++) {
        char what[96];
        snprintf(what, sizeof what, "sendto %s", dgram[i]);
        long rc = sendto(s, "x", 1, 0, (struct sockaddr *)&addr, at(dir, dgram[i]));
        printf("%s: %s\n", what, rc == 1 ? "sent" : rc_text(rc));
    }
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", host_dgram);
    long sent = sendto(s, "x", 1, 0, (struct sockaddr *)&addr, sizeof addr);
    printf("sendto the host path: %s\n", sent == 1 ? "sent" : rc_text(sent));
    close(s);
    int b = socket(AF_UNIX, SOCK_STREAM, 0);
    int rc = bind(b, (struct sockaddr *)&addr, at(dir, "dirlink/planted.sock"));
    printf("bind dirlink/planted.sock: %s\n", rc == 0 ? "bound" : rc_text(rc));
    close(b);
    rc = connect_to(abstract(host_abstract));
    printf("connect host abstract: %s\n", rc == 0 ? "connected" : rc_text(rc));
    s = socket(AF_UNIX, SOCK_DGRAM, 0);
    socklen_t len = abstract(host_abstract);
    memcpy(addr.sun_path + 1 + strlen(host_abstract), ".dgram", 6);
    long n = sendto(s, "x", 1, 0, (struct sockaddr *)&addr, len + 6);
    printf("sendto host abstract: %s\n", n == 1 ? "sent" : rc_text(n));
    close(s);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc == 3 && !strcmp(argv[1], "ops")) {
        stream_paths(argv[2]);
        dgram_paths(argv[2]);
        abstract_names();
        path_ops(argv[2]);
        relative_paths(argv[2]);
    } else if (argc == 5 && !strcmp(argv[1], "escape")) {
        escape(argv[2], argv[3], argv[4]);
    } else {
        fprintf(stderr, "usage: unixsock ops DIR | unixsock escape DIR ABSTRACT HOST_DGRAM\n");
        return 2;
    }
    puts("done");
    return 0;
}
