/* Pipes, readiness and event fds, one line per check, for a differential
 * test: pipe/pipe2, poll/ppoll, select/pselect6, epoll_create1/ctl/wait/
 * pwait, eventfd2 and timerfd_create/settime. No arguments. Timeouts are
 * short and only their outcome is printed, never a duration. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"

static char buf[70000];

static long ms_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

static void pipes(void) {
    int p[2];
    rc_line("pipe", pipe(p));
    rc_line("write 5 to pipe", write(p[1], "hello", 5));
    ssize_t n = read(p[0], buf, sizeof buf);
    printf("read from pipe: %zd '%.*s'\n", n, (int)(n > 0 ? n : 0), buf);
    rc_line("close write end", close(p[1]));
    rc_line("read at EOF", read(p[0], buf, 10));
    close(p[0]);

    rc_line("pipe2 O_NONBLOCK|O_CLOEXEC", pipe2(p, O_NONBLOCK | O_CLOEXEC));
    rc_line("F_GETFD of pipe2 end", fcntl(p[0], F_GETFD));
    printf("F_GETFL of read end: %#x\n", fcntl(p[0], F_GETFL) & (O_ACCMODE | O_NONBLOCK));
    printf("F_GETFL of write end: %#x\n", fcntl(p[1], F_GETFL) & (O_ACCMODE | O_NONBLOCK));
    err_line("read empty non-blocking pipe", read(p[0], buf, 10), EAGAIN);
    err_line("write to the read end", write(p[0], "x", 1), EBADF);
    /* Fill it: a non-blocking writer gets a short count, then EAGAIN. */
    memset(buf, 'p', sizeof buf);
    long total = 0;
    for (;;) {
        n = write(p[1], buf, sizeof buf);
        if (n < 0)
            break;
        total += n;
    }
    err_line("write to a full pipe", -1, errno);
    expect_line("pipe took at least 4096 bytes", total >= 4096, 1);
    long drained = 0;
    while ((n = read(p[0], buf, sizeof buf)) > 0)
        drained += n;
    expect_line("drained what was written", drained == total, 1);
    close(p[0]);
    signal(SIGPIPE, SIG_IGN);
    err_line("write with no reader", write(p[1], "x", 1), EPIPE);
    close(p[1]);
}

static void polling(void) {
    int p[2];
    pipe(p);
    struct pollfd fds[2] = {{p[0], POLLIN, 0}, {p[1], POLLOUT, 0}};
    int rc = poll(fds, 2, 0);
    printf("poll empty pipe: %d in %#x out %#x\n", rc, fds[0].revents, fds[1].revents);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = poll(fds, 1, 30);
    expect_line("poll timeout 30 ms returns 0 after >= 30 ms", rc == 0 && ms_since(&t0) >= 29, 1);
    write(p[1], "x", 1);
    rc = poll(fds, 2, 1000);
    printf("poll with data: %d in %#x out %#x\n", rc, fds[0].revents, fds[1].revents);
    struct timespec ts = {0, 1000000};
    sigset_t none;
    sigemptyset(&none);
    rc = ppoll(fds, 1, &ts, &none);
    printf("ppoll with data: %d in %#x\n", rc, fds[0].revents);
    err_line("poll with fds at 0x1", syscall(SYS_poll, (void *)1, 1, 0), EFAULT);
    struct pollfd bad = {9999, POLLIN, 0};
    rc = poll(&bad, 1, 0);
    printf("poll an invalid fd: %d revents %#x\n", rc, bad.revents);

    fd_set r, w;
    FD_ZERO(&r);
    FD_ZERO(&w);
    FD_SET(p[0], &r);
    FD_SET(p[1], &w);
    struct timeval tv = {0, 0};
    rc = select(p[1] + 1, &r, &w, NULL, &tv);
    printf("select with data: %d read %d write %d\n", rc, FD_ISSET(p[0], &r), FD_ISSET(p[1], &w));
    read(p[0], buf, 1);
    FD_ZERO(&r);
    FD_SET(p[0], &r);
    struct timespec pts = {0, 20000000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = pselect(p[0] + 1, &r, NULL, NULL, &pts, &none);
    expect_line("pselect6 empty pipe times out after >= 20 ms", rc == 0 && ms_since(&t0) >= 19, 1);
    FD_ZERO(&r);
    FD_SET(p[0], &r);
    close(p[1]);
    rc = select(p[0] + 1, &r, NULL, NULL, &tv);
    printf("select after writer closed: %d read %d\n", rc, FD_ISSET(p[0], &r));
    fds[0].revents = 0;
    rc = poll(fds, 1, 0);
    printf("poll after writer closed: %d revents %#x\n", rc, fds[0].revents);
    close(p[0]);
}

static void epolling(void) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    ok_line("epoll_create1", ep);
    rc_line("F_GETFD of epoll fd", fcntl(ep, F_GETFD));
    int p[2];
    pipe(p);
    struct epoll_event ev = {EPOLLIN, {.u64 = 0x1122334455667788ull}}, out[4];
    rc_line("epoll_ctl ADD", epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev));
    err_line("epoll_ctl ADD twice", epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev), EEXIST);
    rc_line("epoll_wait nothing ready", epoll_wait(ep, out, 4, 0));
    write(p[1], "ab", 2);
    int n = epoll_wait(ep, out, 4, 1000);
    printf("epoll_wait ready: %d events %#x data %#llx\n", n, n > 0 ? out[0].events : 0,
           n > 0 ? (unsigned long long)out[0].data.u64 : 0ull);
    n = epoll_wait(ep, out, 4, 0);
    printf("epoll_wait level-triggered again: %d\n", n);
    ev.events = EPOLLIN | EPOLLET;
    ev.data.u64 = 7;
    rc_line("epoll_ctl MOD to edge-triggered", epoll_ctl(ep, EPOLL_CTL_MOD, p[0], &ev));
    n = epoll_wait(ep, out, 4, 0);
    printf("epoll_wait after MOD: %d data %llu\n", n, n > 0 ? (unsigned long long)out[0].data.u64 : 0ull);
    printf("epoll_wait edge-triggered again: %d\n", epoll_wait(ep, out, 4, 0));
    sigset_t none;
    sigemptyset(&none);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    read(p[0], buf, 2);
    n = epoll_pwait(ep, out, 4, 25, &none);
    expect_line("epoll_pwait times out after >= 25 ms", n == 0 && ms_since(&t0) >= 24, 1);
    ev.events = EPOLLOUT;
    rc_line("epoll_ctl ADD write end", epoll_ctl(ep, EPOLL_CTL_ADD, p[1], &ev));
    n = epoll_wait(ep, out, 4, 0);
    printf("epoll_wait writable: %d events %#x\n", n, n > 0 ? out[0].events : 0);
    rc_line("epoll_ctl DEL", epoll_ctl(ep, EPOLL_CTL_DEL, p[1], NULL));
    err_line("epoll_ctl DEL again", epoll_ctl(ep, EPOLL_CTL_DEL, p[1], NULL), ENOENT);
    err_line("epoll_ctl bad fd", epoll_ctl(ep, EPOLL_CTL_ADD, 9999, &ev), EBADF);
    err_line("epoll_ctl on itself", epoll_ctl(ep, EPOLL_CTL_ADD, ep, &ev), EINVAL);
    err_line("epoll_wait on a pipe", epoll_wait(p[0], out, 4, 0), EINVAL);
    err_line("epoll_wait maxevents 0", epoll_wait(ep, out, 0, 0), EINVAL);
    /* Linux checks the whole array up front only against the user range. */
    err_line("epoll_wait events in the kernel",
             syscall(SYS_epoll_wait, ep, (void *)0xffff880000000000ul, 4, 0), EFAULT);
    close(p[1]);
    n = epoll_wait(ep, out, 4, 1000);
    printf("epoll_wait after writer closed: %d events %#x\n", n, n > 0 ? out[0].events : 0);
    close(p[0]);
    close(ep);
}

static void event_fds(void) {
    int e = eventfd(3, EFD_NONBLOCK);
    ok_line("eventfd2", e);
    uint64_t v = 4;
    rc_line("eventfd write 4", write(e, &v, 8));
    v = 0;
    rc_line("eventfd read", read(e, &v, 8));
    printf("eventfd value: %llu\n", (unsigned long long)v);
    err_line("eventfd read when zero", read(e, &v, 8), EAGAIN);
    err_line("eventfd short read", read(e, &v, 4), EINVAL);
    struct pollfd pf = {e, POLLIN | POLLOUT, 0};
    int rc = poll(&pf, 1, 0);
    printf("poll eventfd at zero: %d revents %#x\n", rc, pf.revents);
    close(e);
    e = eventfd(2, EFD_SEMAPHORE | EFD_NONBLOCK);
    read(e, &v, 8);
    printf("semaphore eventfd read: %llu\n", (unsigned long long)v);
    read(e, &v, 8);
    err_line("semaphore eventfd third read", read(e, &v, 8), EAGAIN);
    close(e);

    int t = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    ok_line("timerfd_create", t);
    err_line("timerfd read unarmed", read(t, &v, 8), EAGAIN);
    struct itimerspec its = {{0, 0}, {0, 20000000}}, cur;
    rc_line("timerfd_settime 20 ms", timerfd_settime(t, 0, &its, NULL));
    rc_line("timerfd_gettime", timerfd_gettime(t, &cur));
    expect_line("timer armed", cur.it_value.tv_sec == 0 && cur.it_value.tv_nsec > 0, 1);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pf.fd = t;
    pf.events = POLLIN;
    rc = poll(&pf, 1, 2000);
    printf("poll timerfd: %d revents %#x\n", rc, pf.revents);
    expect_line("timerfd fired after >= 19 ms", ms_since(&t0) >= 19, 1);
    v = 0;
    rc_line("timerfd read", read(t, &v, 8));
    printf("timerfd expirations: %llu\n", (unsigned long long)v);
    struct itimerspec bad = {{0, 0}, {0, 2000000000}};
    err_line("timerfd_settime bad nsec", timerfd_settime(t, 0, &bad, NULL), EINVAL);
    close(t);
    err_line("timerfd_create bad clock", timerfd_create(12345, 0), EINVAL);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    pipes();
    polling();
    epolling();
    event_fds();
    printf("done\n");
    return 0;
}
