/* sig_graceful MODE: a server-style main loop that waits until SIGTERM.
 * The SIGTERM handler (no SA_RESTART) sets a flag; the blocked call must
 * return EINTR so the loop sees the flag, prints "graceful" and exits 0.
 * MODE: read (a pipe nobody writes), epoll (epoll_wait on it), sleep
 * (nanosleep), pause, ppoll (SIGTERM blocked except during the ppoll, the
 * race-free server pattern), or restart (SA_RESTART: the handler writes a
 * byte into the pipe and the read, restarted, returns it).
 * Prints "ready" once the handler is installed and it is about to block. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static int fds[2];  /* what the loop waits on */
static int sink[2]; /* where the handler writes when the wait must not end */
static int restart;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
    if (write(restart ? fds[1] : sink[1], "x", 1) != 1)
        stop = 2;
}

static const char *err(int r)
{
    if (r >= 0)
        return "ok";
    return errno == EINTR ? "EINTR" : strerror(errno);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "read";
    restart = strcmp(mode, "restart") == 0;
    setvbuf(stdout, NULL, _IONBF, 0);
    if (pipe(fds) != 0 || pipe(sink) != 0)
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigset_t term, none;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigemptyset(&none);
    if (strcmp(mode, "ppoll") == 0)
        sigprocmask(SIG_BLOCK, &term, NULL);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, fds[0], &ev);
    printf("ready\n");
    while (!stop) {
        char c;
        int r;
        if (strcmp(mode, "epoll") == 0) {
            struct epoll_event out;
            r = epoll_wait(ep, &out, 1, -1);
        } else if (strcmp(mode, "sleep") == 0) {
            struct timespec ts = {.tv_sec = 60};
            r = nanosleep(&ts, &ts);
        } else if (strcmp(mode, "ppoll") == 0) {
            struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
            r = ppoll(&pfd, 1, NULL, &none);
        } else if (strcmp(mode, "pause") == 0) {
            r = pause();
        } else {
            r = (int)read(fds[0], &c, 1);
        }
        printf("%s returned: %s, stop=%d\n", mode, err(r), stop);
        if (restart && r == 1)
            break;
    }
    printf("graceful\n");
    return 0;
}
