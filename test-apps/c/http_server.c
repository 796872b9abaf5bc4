/* A single-threaded HTTP/1.1 function server on epoll, for the sandbox's
 * socket tests and the HTTP benchmark:
 *
 *   http_server [--port N] [--addr A]      (default 127.0.0.1, port 0)
 *
 * prints `listening on <port>` once the socket listens, then serves
 * keep-alive (and pipelined) GET requests with Content-Length responses:
 *   /            200 "hello\n"
 *   /work?mb=N   allocates and touches N MiB, answers its checksum, frees it
 *   /fill?mb=N   fills a persistent N MiB buffer with a pattern, remembers
 *                its checksum
 *   /verify      re-checks that buffer: 200 "ok <sum>" or 500 "CORRUPT ..."
 *   /quit        answers "bye\n", then exits 0 once the answer is sent
 *   other        404; a method other than GET: 405; a bad request: 400
 * Level-triggered, one read per readiness event: a keep-alive request
 * costs one epoll_wait, one read and one write. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define IN_CAP 16384
#define MAX_MB 4096
#define MAX_EVENTS 64

struct conn {
    int fd;
    size_t in_len;
    char in[IN_CAP];
    char *out;          /* unsent response bytes: out[out_off..out_len) */
    size_t out_len, out_off, out_cap;
    int close_after;    /* close once `out` is sent */
    int watching_out;   /* EPOLLOUT registered */
    int quit;           /* asked for /quit */
};

static int ep;
static int quit_now;    /* the /quit connection is done: exit */
static uint64_t *fill_buf;
static size_t fill_words;
static uint64_t fill_sum;

static uint64_t pattern(size_t i, uint64_t seed) {
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
    return x ^ (x >> 29);
}

/* Fills `words` words with the pattern of `seed`; returns their checksum. */
static uint64_t fill(uint64_t *p, size_t words, uint64_t seed) {
    uint64_t sum = 0;
    for (size_t i = 0; i < words; i++) {
        p[i] = pattern(i, seed);
        sum = (sum ^ p[i]) * 0x100000001b3ull;
    }
    return sum;
}

static uint64_t checksum(const uint64_t *p, size_t words) {
    uint64_t sum = 0;
    for (size_t i = 0; i < words; i++)
        sum = (sum ^ p[i]) * 0x100000001b3ull;
    return sum;
}

/* N from a `?mb=N` query, or -1. */
static long mb_param(const char *query) {
    if (!query || strncmp(query, "mb=", 3) != 0)
        return -1;
    char *end;
    errno = 0;
    long mb = strtol(query + 3, &end, 10);
    if (errno || end == query + 3 || *end || mb < 0 || mb > MAX_MB)
        return -1;
    return mb;
}

static void append(struct conn *c, const char *data, size_t n) {
    if (c->out_len + n > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 4096;
        while (cap < c->out_len + n)
            cap *= 2;
        char *p = realloc(c->out, cap);
        if (!p) {
            c->close_after = 1;
            return;
        }
        c->out = p;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, data, n);
    c->out_len += n;
}

static void respond(struct conn *c, int status, const char *body) {
    const char *reason = status == 200 ? "OK" : status == 400 ? "Bad Request" : status == 404 ? "Not Found"
                       : status == 405 ? "Method Not Allowed" : status == 431 ? "Request Header Fields Too Large"
                       : status == 503 ? "Service Unavailable" : "Internal Server Error";
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n%s\r\n", status,
                     reason, strlen(body), c->close_after ? "Connection: close\r\n" : "");
    append(c, head, (size_t)n);
    append(c, body, strlen(body));
}

static void route(struct conn *c, const char *method, char *target) {
    char body[256];
    char *query = strchr(target, '?');
    if (query)
        *query++ = 0;
    if (strcmp(method, "GET") != 0) {
        respond(c, 405, "method not allowed\n");
    } else if (!strcmp(target, "/")) {
        respond(c, 200, "hello\n");
    } else if (!strcmp(target, "/work") || !strcmp(target, "/fill")) {
        long mb = mb_param(query);
        if (mb < 0) {
            respond(c, 400, "expected ?mb=N with 0 <= N <= 4096\n");
            return;
        }
        size_t words = (size_t)mb << 17;
        uint64_t *p = words ? malloc(words * 8) : NULL;
        if (words && !p) {
            respond(c, 503, "out of memory\n");
            return;
        }
        uint64_t sum = fill(p, words, (uint64_t)mb);
        if (target[1] == 'w') {
            uint64_t back = checksum(p, words); /* read it all back */
            free(p);
            snprintf(body, sizeof body, "work mb=%ld checksum=%016llx\n", mb, (unsigned long long)back);
            respond(c, back == sum ? 200 : 500, body);
            return;
        } else {
            free(fill_buf);
            fill_buf = p;
            fill_words = words;
            fill_sum = sum;
            snprintf(body, sizeof body, "filled mb=%ld checksum=%016llx\n", mb, (unsigned long long)sum);
        }
        respond(c, 200, body);
    } else if (!strcmp(target, "/verify")) {
        uint64_t sum = checksum(fill_buf, fill_words);
        size_t bad = 0;
        while (bad < fill_words && fill_buf[bad] == pattern(bad, fill_words >> 17))
            bad++;
        if (sum == fill_sum && bad == fill_words) {
            snprintf(body, sizeof body, "ok %016llx\n", (unsigned long long)sum);
            respond(c, 200, body);
        } else {
            snprintf(body, sizeof body, "CORRUPT checksum %016llx expected %016llx first bad word %zu of %zu\n",
                     (unsigned long long)sum, (unsigned long long)fill_sum, bad, fill_words);
            respond(c, 500, body);
        }
    } else if (!strcmp(target, "/quit")) {
        c->close_after = 1;
        c->quit = 1;
        respond(c, 200, "bye\n");
    } else {
        respond(c, 404, "not found\n");
    }
}

/* Whether the header block [p, end) has `name: value` (case-insensitive). */
static int has_header(const char *p, const char *end, const char *name, const char *value) {
    size_t nl = strlen(name), vl = strlen(value);
    for (const char *l = p; l < end;) {
        const char *e = memchr(l, '\n', (size_t)(end - l));
        if (!e)
            e = end;
        const char *v = l + nl + 1;
        if ((size_t)(e - l) > nl && !strncasecmp(l, name, nl) && l[nl] == ':') {
            while (v < e && *v == ' ')
                v++;
            if ((size_t)(e - v) >= vl && !strncasecmp(v, value, vl))
                return 1;
        }
        l = e + 1;
    }
    return 0;
}

/* Answers every complete request in c->in; keeps a partial one. */
static void parse(struct conn *c) {
    size_t off = 0;
    while (!c->close_after) {
        char *start = c->in + off;
        char *end = memmem(start, c->in_len - off, "\r\n\r\n", 4);
        if (!end)
            break;
        *end = 0;
        char method[16], target[1024], version[16];
        int ok = sscanf(start, "%15s %1023s %15s", method, target, version) == 3 &&
                 !strncmp(version, "HTTP/1.", 7);
        char *headers = strchr(start, '\n');
        headers = headers ? headers + 1 : end;
        if (!ok ||
            (has_header(headers, end, "Content-Length", "") && !has_header(headers, end, "Content-Length", "0"))) {
            /* No request bodies here: a request with one cannot be framed. */
            c->close_after = 1;
            respond(c, 400, "bad request\n");
            break;
        }
        if (has_header(headers, end, "Connection", "close") ||
            (!strcmp(version, "HTTP/1.0") && !has_header(headers, end, "Connection", "keep-alive")))
            c->close_after = 1;
        route(c, method, target);
        off = (size_t)(end + 4 - c->in);
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
    if (c->in_len == IN_CAP && !c->close_after) {
        c->close_after = 1;
        respond(c, 431, "request header too large\n");
    }
}

static void drop(struct conn *c) {
    quit_now |= c->quit;
    close(c->fd); /* also removes it from the epoll set */
    free(c->out);
    free(c);
}

/* Sends what it can; returns -1 when the connection is done with. */
static int flush(struct conn *c) {
    while (c->out_off < c->out_len) {
        ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0)
            return -1;
        c->out_off += (size_t)n;
    }
    int pending = c->out_off < c->out_len;
    if (!pending) {
        c->out_off = c->out_len = 0;
        if (c->close_after)
            return -1;
    }
    if (pending != c->watching_out) {
        struct epoll_event ev = {EPOLLIN | (pending ? EPOLLOUT : 0), {.ptr = c}};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        c->watching_out = pending;
    }
    return 0;
}

static void on_readable(struct conn *c) {
    ssize_t n = read(c->fd, c->in + c->in_len, IN_CAP - c->in_len);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) { /* the client closed (or reset) the connection */
        drop(c);
        return;
    }
    c->in_len += (size_t)n;
    parse(c);
    if (flush(c) < 0)
        drop(c);
}

static void on_listener(int l) {
    for (;;) {
        int fd = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                perror("http_server: accept4");
            return;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
        struct conn *c = calloc(1, sizeof *c);
        struct epoll_event ev = {EPOLLIN, {.ptr = c}};
        if (!c || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close(fd);
            free(c);
            continue;
        }
        c->fd = fd;
    }
}

int main(int argc, char **argv) {
    const char *addr = "127.0.0.1";
    long port = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--port") && i + 1 < argc) {
            port = strtol(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--addr") && i + 1 < argc) {
            addr = argv[++i];
        } else {
            fprintf(stderr, "usage: http_server [--port N] [--addr A]\n");
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (port < 0 || port > 65535 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
        fprintf(stderr, "http_server: bad address %s port %ld\n", addr, port);
        return 2;
    }
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    socklen_t len = sizeof sa;
    if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &(int){1}, sizeof(int)) < 0 ||
        bind(l, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(l, 128) < 0 ||
        getsockname(l, (struct sockaddr *)&sa, &len) < 0) {
        perror("http_server: listening socket");
        return 1;
    }
    ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {EPOLLIN, {.ptr = NULL}}, events[MAX_EVENTS];
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev) < 0) {
        perror("http_server: epoll");
        return 1;
    }
    printf("listening on %d\n", ntohs(sa.sin_port));
    fflush(stdout);
    for (;;) {
        int n = epoll_wait(ep, events, MAX_EVENTS, -1);
        if (n < 0 && errno != EINTR) {
            perror("http_server: epoll_wait");
            return 1;
        }
        for (int i = 0; i < n; i++) {
            struct conn *c = events[i].data.ptr;
            if (!c) {
                on_listener(l);
            } else if (events[i].events & EPOLLIN) {
                on_readable(c); /* a hang-up shows up as a 0-byte read */
            } else if (events[i].events & EPOLLOUT) {
                if (flush(c) < 0)
                    drop(c);
            } else {
                drop(c); /* EPOLLERR or EPOLLHUP without EPOLLIN */
            }
            if (quit_now) /* after its answer was sent, or its client left */
                return 0;
        }
    }
}
