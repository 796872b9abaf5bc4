/* Shared by the I/O compatibility programs (fileops, ioops, netops):
 * one stable text line per check, so that a diff of a native run against a
 * sandboxed run shows exactly which check differs. Lines never contain
 * fd numbers, pids, addresses, inode numbers or times. A check whose
 * result contradicts Linux is printed with "FAIL" so a broken native run
 * is caught by the test harness before any comparison. */
#ifndef QRUN_CHECKS_H
#define QRUN_CHECKS_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A setup step that must work: else say which and stop. */
#define CHECK(x)                                                                  \
	do {                                                                      \
		if (!(x)) {                                                       \
			printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #x,     \
			       strerror(errno));                                  \
			exit(99);                                                 \
		}                                                                 \
	} while (0)

static inline const char *errno_name(int e) {
    switch (e) {
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case ESRCH: return "ESRCH";
    case EINTR: return "EINTR";
    case EIO: return "EIO";
    case E2BIG: return "E2BIG";
    case ENOEXEC: return "ENOEXEC";
    case ELIBBAD: return "ELIBBAD";
    case EBADF: return "EBADF";
    case EAGAIN: return "EAGAIN";
    case ENOMEM: return "ENOMEM";
    case EACCES: return "EACCES";
    case EFAULT: return "EFAULT";
    case EEXIST: return "EEXIST";
    case EXDEV: return "EXDEV";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case EINVAL: return "EINVAL";
    case EMFILE: return "EMFILE";
    case ENOTTY: return "ENOTTY";
    case ENXIO: return "ENXIO";
    case EFBIG: return "EFBIG";
    case ESPIPE: return "ESPIPE";
    case EROFS: return "EROFS";
    case EPIPE: return "EPIPE";
    case EBUSY: return "EBUSY";
    case ERANGE: return "ERANGE";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case ENOSYS: return "ENOSYS";
    case ENOTEMPTY: return "ENOTEMPTY";
    case ELOOP: return "ELOOP";
    case ENOTSOCK: return "ENOTSOCK";
    case EDESTADDRREQ: return "EDESTADDRREQ";
    case EMSGSIZE: return "EMSGSIZE";
    case EPROTOTYPE: return "EPROTOTYPE";
    case ENOPROTOOPT: return "ENOPROTOOPT";
    case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
    case ESOCKTNOSUPPORT: return "ESOCKTNOSUPPORT";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case EAFNOSUPPORT: return "EAFNOSUPPORT";
    case EADDRINUSE: return "EADDRINUSE";
    case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
    case ENETUNREACH: return "ENETUNREACH";
    case ECONNRESET: return "ECONNRESET";
    case EISCONN: return "EISCONN";
    case ENOTCONN: return "ENOTCONN";
    case ETIMEDOUT: return "ETIMEDOUT";
    case ECONNREFUSED: return "ECONNREFUSED";
    case EALREADY: return "EALREADY";
    case EINPROGRESS: return "EINPROGRESS";
    default: return NULL;
    }
}

/* "-1 ENOENT" for a failed call, else the return value. */
static inline const char *rc_text(long rc) {
    static char buf[64];
    if (rc >= 0) {
        snprintf(buf, sizeof buf, "%ld", rc);
    } else {
        const char *name = errno_name(errno);
        if (name)
            snprintf(buf, sizeof buf, "-1 %s", name);
        else
            snprintf(buf, sizeof buf, "-1 errno %d", errno);
    }
    return buf;
}

/* `what: <rc>` for a call that must succeed with a stable value (0, a
 * length); FAIL when it fails. */
static inline void rc_line(const char *what, long rc) {
    printf("%s: %s%s\n", what, rc < 0 ? "FAIL " : "", rc_text(rc));
}

/* `what: ok` for a call that must succeed with a varying value (an fd). */
static inline void ok_line(const char *what, long rc) {
    if (rc >= 0)
        printf("%s: ok\n", what);
    else
        printf("%s: FAIL %s\n", what, rc_text(rc));
}

/* `what: <rc>` whatever it is (no verdict). */
static inline void show_line(const char *what, long rc) {
    printf("%s: %s\n", what, rc_text(rc));
}

/* `what: <errno name>`; FAIL unless the call failed with `want`. */
static inline void err_line(const char *what, long rc, int want) {
    int e = errno;
    if (rc < 0 && e == want)
        printf("%s: %s\n", what, errno_name(want));
    else
        printf("%s: FAIL want %s, got %s\n", what, errno_name(want), rc_text(rc));
}

/* `what: <got>`; FAIL unless it equals `want`. */
static inline void eq_line(const char *what, long got, long want) {
    printf("%s: %ld%s\n", what, got, got == want ? "" : " FAIL");
}

/* `what: yes|no`; FAIL unless it is `want`. */
static inline void expect_line(const char *what, int got, int want) {
    printf("%s: %s%s\n", what, got ? "yes" : "no", (!got) == (!want) ? "" : " FAIL");
}

/* A free-form line. */
static inline void line(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

#endif
