/* Sockets, one line per check, for a differential test: `netops DIR`
 * (DIR is a scratch directory for an AF_UNIX socket path). TCP over
 * 127.0.0.1 and ::1, UDP over both, AF_UNIX stream (path and socketpair),
 * non-blocking mode, socket options, shutdown, and bad input (unsupported
 * families, wrong types, bad fds and pointers). Ports are ephemeral and
 * never printed. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "checks.h"

static char buf[1 << 16];

/* The loopback address of `family`, port 0. */
static socklen_t loopback(int family, struct sockaddr_storage *ss) {
    memset(ss, 0, sizeof *ss);
    if (family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        in->sin_family = AF_INET;
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return sizeof *in;
    }
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_loopback;
    return sizeof *in6;
}

static int port_of(const struct sockaddr_storage *ss) {
    return ss->ss_family == AF_INET ? ntohs(((const struct sockaddr_in *)ss)->sin_port)
                                    : ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}

static int same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b, socklen_t len) {
    return !memcmp(a, b, len);
}

static int opt(int fd, int level, int name) {
    int v = -1;
    socklen_t len = sizeof v;
    return getsockopt(fd, level, name, &v, &len) < 0 ? -1 : v;
}

static int wait_for(int fd, short events) {
    struct pollfd p = {fd, events, 0};
    return poll(&p, 1, 2000) == 1 ? p.revents : -1;
}

static void recv_line(const char *what, int fd, int flags) {
    ssize_t n = recv(fd, buf, sizeof buf, flags);
    if (n < 0)
        show_line(what, n);
    else
        printf("%s: %zd '%.*s'\n", what, n, (int)n, buf);
}

/* Bound (port 0), listening socket; its address in *ss. */
static int listener(int family, struct sockaddr_storage *ss, socklen_t *len) {
    int l = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    *len = loopback(family, ss);
    if (bind(l, (struct sockaddr *)ss, *len) < 0 || listen(l, 16) < 0 ||
        getsockname(l, (struct sockaddr *)ss, len) < 0)
        printf("listener: FAIL %s\n", rc_text(-1));
    return l;
}

static void tcp(int family) {
    const char *f = family == AF_INET ? "tcp4" : "tcp6";
    char what[128];
#define W(s) (snprintf(what, sizeof what, "%s %s", f, s), what)
    struct sockaddr_storage addr, peer, local;
    socklen_t len = loopback(family, &addr), plen = sizeof peer;
    int l = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ok_line(W("socket"), l);
    rc_line(W("SO_REUSEADDR"), setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &(int){1}, sizeof(int)));
    eq_line(W("getsockopt SO_REUSEADDR"), opt(l, SOL_SOCKET, SO_REUSEADDR), 1);
    eq_line(W("getsockopt SO_TYPE"), opt(l, SOL_SOCKET, SO_TYPE), SOCK_STREAM);
    rc_line(W("bind loopback port 0"), bind(l, (struct sockaddr *)&addr, len));
    rc_line(W("getsockname"), getsockname(l, (struct sockaddr *)&addr, &len));
    expect_line(W("ephemeral port assigned"), port_of(&addr) != 0, 1);
    rc_line(W("listen"), listen(l, 16));
    eq_line(W("SO_ACCEPTCONN"), opt(l, SOL_SOCKET, SO_ACCEPTCONN), 1);
    fcntl(l, F_SETFL, O_NONBLOCK);
    err_line(W("accept4 with no client"), accept4(l, NULL, NULL, 0), EAGAIN);
    int c = socket(family, SOCK_STREAM, 0);
    rc_line(W("connect"), connect(c, (struct sockaddr *)&addr, len));
    err_line(W("connect again"), connect(c, (struct sockaddr *)&addr, len), EISCONN);
    wait_for(l, POLLIN);
    int a = accept4(l, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
    ok_line(W("accept4"), a);
    printf("%s: nonblock %d cloexec %d\n", W("accepted flags"), !!(fcntl(a, F_GETFL) & O_NONBLOCK),
           fcntl(a, F_GETFD));
    socklen_t llen = sizeof local;
    getsockname(c, (struct sockaddr *)&local, &llen);
    expect_line(W("accept's peer is the client"), plen == llen && same_addr(&peer, &local, plen), 1);
    llen = sizeof local;
    getpeername(c, (struct sockaddr *)&local, &llen);
    expect_line(W("getpeername is the listener"), llen == len && same_addr(&local, &addr, len), 1);
    rc_line(W("TCP_NODELAY"), setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int)));
    eq_line(W("getsockopt TCP_NODELAY"), opt(c, IPPROTO_TCP, TCP_NODELAY), 1);

    rc_line(W("send"), send(c, "ping", 4, 0));
    printf("%s: %#x\n", W("poll accepted"), wait_for(a, POLLIN));
    recv_line(W("recv"), a, 0);
    err_line(W("recv non-blocking, nothing there"), recv(a, buf, 10, 0), EAGAIN);
    struct iovec iov[2] = {{"po", 2}, {"ng", 2}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
    rc_line(W("sendmsg 2 iovecs"), sendmsg(a, &mh, 0));
    char r1[3], r2[8];
    struct iovec riov[2] = {{r1, 3}, {r2, 8}};
    struct msghdr rh = {.msg_iov = riov, .msg_iovlen = 2};
    ssize_t n = recvmsg(c, &rh, 0);
    printf("%s: %zd '%.3s' '%.*s' flags %#x\n", W("recvmsg"), n, r1, (int)(n > 3 ? n - 3 : 0), r2, rh.msg_flags);
    rc_line(W("sendto without address"), sendto(c, "peek", 4, 0, NULL, 0));
    wait_for(a, POLLIN);
    recv_line(W("recv MSG_PEEK"), a, MSG_PEEK);
    struct sockaddr_storage from;
    socklen_t flen = sizeof from;
    n = recvfrom(a, buf, sizeof buf, 0, (struct sockaddr *)&from, &flen);
    printf("%s: %zd '%.*s'\n", W("recvfrom after peek"), n, (int)(n > 0 ? n : 0), buf);

    /* Flow control: fill the connection without blocking, then drain. */
    fcntl(c, F_SETFL, O_NONBLOCK);
    memset(buf, 'x', sizeof buf);
    long sent = 0, got = 0;
    while ((n = send(c, buf, sizeof buf, 0)) > 0)
        sent += n;
    err_line(W("send to a full connection"), n, EAGAIN);
    expect_line(W("full after at least 64 KiB"), sent >= 65536, 1);
    while (got < sent && wait_for(a, POLLIN) > 0 && (n = recv(a, buf, sizeof buf, 0)) > 0)
        got += n;
    expect_line(W("received all that was sent"), got == sent, 1);

    rc_line(W("shutdown SHUT_WR"), shutdown(c, SHUT_WR));
    printf("%s: %#x\n", W("poll after peer shutdown"), wait_for(a, POLLIN));
    rc_line(W("recv after peer shutdown"), recv(a, buf, 10, 0));
    rc_line(W("send from the side still open"), send(a, "bye", 3, 0));
    wait_for(c, POLLIN);
    recv_line(W("recv on half-closed socket"), c, 0);
    close(a);
    wait_for(c, POLLIN);
    rc_line(W("recv after peer close"), recv(c, buf, 10, 0));
    eq_line(W("SO_ERROR"), opt(c, SOL_SOCKET, SO_ERROR), 0);
    close(c);
    close(l);

    /* A port nobody listens on: bind one, note it, close it. */
    int tmp = socket(family, SOCK_STREAM, 0);
    struct sockaddr_storage gone;
    socklen_t glen = loopback(family, &gone);
    bind(tmp, (struct sockaddr *)&gone, glen);
    getsockname(tmp, (struct sockaddr *)&gone, &glen);
    close(tmp);
    c = socket(family, SOCK_STREAM, 0);
    err_line(W("connect to a closed port"), connect(c, (struct sockaddr *)&gone, glen), ECONNREFUSED);
    close(c);

    l = listener(family, &addr, &len);
    c = socket(family, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int rc = connect(c, (struct sockaddr *)&addr, len);
    printf("%s: %s\n", W("non-blocking connect"), rc == 0 || errno == EINPROGRESS ? "ok" : rc_text(rc));
    printf("%s: %#x\n", W("poll connecting socket"), wait_for(c, POLLOUT));
    eq_line(W("SO_ERROR after connect"), opt(c, SOL_SOCKET, SO_ERROR), 0);
    close(c);
    close(l);
#undef W
}

static void udp(int family) {
    const char *f = family == AF_INET ? "udp4" : "udp6";
    char what[128];
#define W(s) (snprintf(what, sizeof what, "%s %s", f, s), what)
    struct sockaddr_storage a1, a2, from;
    socklen_t l1 = loopback(family, &a1), l2 = loopback(family, &a2), flen = sizeof from;
    int s1 = socket(family, SOCK_DGRAM, 0), s2 = socket(family, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    ok_line(W("socket"), s1);
    eq_line(W("SO_TYPE"), opt(s1, SOL_SOCKET, SO_TYPE), SOCK_DGRAM);
    rc_line(W("bind s1"), bind(s1, (struct sockaddr *)&a1, l1));
    rc_line(W("bind s2"), bind(s2, (struct sockaddr *)&a2, l2));
    getsockname(s1, (struct sockaddr *)&a1, &l1);
    getsockname(s2, (struct sockaddr *)&a2, &l2);
    err_line(W("recvfrom with nothing queued"), recvfrom(s2, buf, sizeof buf, 0, NULL, NULL), EAGAIN);
    err_line(W("send without a destination"), send(s1, "x", 1, 0), EDESTADDRREQ);
    rc_line(W("sendto"), sendto(s1, "dgram1", 6, 0, (struct sockaddr *)&a2, l2));
    wait_for(s2, POLLIN);
    ssize_t n = recvfrom(s2, buf, sizeof buf, 0, (struct sockaddr *)&from, &flen);
    printf("%s: %zd '%.*s'\n", W("recvfrom"), n, (int)(n > 0 ? n : 0), buf);
    expect_line(W("source is s1"), flen == l1 && same_addr(&from, &a1, l1), 1);
    rc_line(W("connect s1 to s2"), connect(s1, (struct sockaddr *)&a2, l2));
    const char *msgs[] = {"a", "bb", "ccc"};
    for (int i = 0; i < 3; i++)
        send(s1, msgs[i], strlen(msgs[i]), 0);
    for (int i = 0; i < 3; i++) {
        wait_for(s2, POLLIN);
        rc_line(W("datagram boundaries kept"), recv(s2, buf, sizeof buf, 0));
    }
    send(s1, "0123456789", 10, 0);
    wait_for(s2, POLLIN);
    char small[4];
    struct iovec iov = {small, sizeof small};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    n = recvmsg(s2, &mh, 0);
    printf("%s: %zd trunc %d\n", W("recvmsg into 4 bytes"), n, !!(mh.msg_flags & MSG_TRUNC));
    close(s1);
    close(s2);
#undef W
}

static void unix_stream(const char *dir) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX}, got;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/sock", dir);
    socklen_t len = sizeof sa, glen = sizeof got;
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    ok_line("unix socket", l);
    rc_line("unix bind", bind(l, (struct sockaddr *)&sa, len));
    struct stat st;
    expect_line("unix socket file exists", stat(sa.sun_path, &st) == 0 && S_ISSOCK(st.st_mode), 1);
    err_line("unix bind again", bind(socket(AF_UNIX, SOCK_STREAM, 0), (struct sockaddr *)&sa, len), EADDRINUSE);
    rc_line("unix listen", listen(l, 4));
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    rc_line("unix connect", connect(c, (struct sockaddr *)&sa, len));
    int a = accept(l, NULL, NULL);
    ok_line("unix accept", a);
    getpeername(c, (struct sockaddr *)&got, &glen);
    expect_line("unix getpeername is the path", !strcmp(got.sun_path, sa.sun_path), 1);
    rc_line("unix write", write(c, "over unix", 9));
    recv_line("unix read", a, 0);
    rc_line("unix shutdown SHUT_WR", shutdown(c, SHUT_WR));
    rc_line("unix read after shutdown", read(a, buf, 10));
    close(a);
    close(c);
    close(l);
    rc_line("unlink socket path", unlink(sa.sun_path));
    c = socket(AF_UNIX, SOCK_STREAM, 0);
    err_line("unix connect to a missing path", connect(c, (struct sockaddr *)&sa, len), ENOENT);
    close(c);

    int sv[2];
    rc_line("socketpair", socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    write(sv[0], "left", 4);
    recv_line("socketpair left to right", sv[1], 0);
    write(sv[1], "right", 5);
    recv_line("socketpair right to left", sv[0], 0);
    close(sv[0]);
    close(sv[1]);
}

static void bad_sockets(void) {
    struct sockaddr_storage ss;
    socklen_t len = loopback(AF_INET, &ss);
    err_line("socket family 1000", socket(1000, SOCK_STREAM, 0), EAFNOSUPPORT);
    err_line("socket AF_INET type 99", socket(AF_INET, 99, 0), EINVAL);
    err_line("socket AF_INET stream with IPPROTO_UDP", socket(AF_INET, SOCK_STREAM, IPPROTO_UDP), EPROTONOSUPPORT);
    err_line("socket AF_UNIX protocol 5", socket(AF_UNIX, SOCK_STREAM, 5), EPROTONOSUPPORT);
    int p[2];
    pipe(p);
    err_line("getsockopt on a pipe", getsockopt(p[0], SOL_SOCKET, SO_TYPE, buf, &len), ENOTSOCK);
    err_line("accept on a pipe", accept(p[0], NULL, NULL), ENOTSOCK);
    err_line("connect fd 9999", connect(9999, (struct sockaddr *)&ss, len), EBADF);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    err_line("accept on a socket not listening", accept(s, NULL, NULL), EINVAL);
    err_line("recv on an unconnected socket", recv(s, buf, 10, 0), ENOTCONN);
    err_line("getpeername unconnected", getpeername(s, (struct sockaddr *)&ss, &len), ENOTCONN);
    err_line("bind with addrlen 3", bind(s, (struct sockaddr *)&ss, 3), EINVAL);
    err_line("bind address at 0x1", syscall(SYS_bind, s, (void *)1, 16), EFAULT);
    err_line("setsockopt unknown option", setsockopt(s, SOL_SOCKET, 9999, &(int){1}, sizeof(int)), ENOPROTOOPT);
    err_line("setsockopt value at 0x1", syscall(SYS_setsockopt, s, SOL_SOCKET, SO_REUSEADDR, (void *)1, 4), EFAULT);
    struct sockaddr_in remote = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x08080808)};
    err_line("bind a non-local address", bind(s, (struct sockaddr *)&remote, sizeof remote), EADDRNOTAVAIL);
    close(s);
    s = socket(AF_INET, SOCK_DGRAM, 0);
    err_line("listen on UDP", listen(s, 1), EOPNOTSUPP);
    close(s);
    close(p[0]);
    close(p[1]);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: netops DIR\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    tcp(AF_INET);
    tcp(AF_INET6);
    udp(AF_INET);
    udp(AF_INET6);
    unix_stream(argv[1]);
    bad_sockets();
    printf("done\n");
    return 0;
}
