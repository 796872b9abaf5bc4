/* spin_accept [poll]: a server whose other thread computes. A thread
 * spins without a syscall forever; the main thread accepts connections
 * on 127.0.0.1 (port 0: printed as "listening on PORT") and answers each
 * with "hello N\n" (N counts the connections), then closes it. With
 * `poll` the main thread never blocks: it computes too and tries a
 * non-blocking accept every 10 ms (as Go's runtime polls the network
 * when its P is busy), so no thread waits on the socket. Used by
 * runtime-shim/tests/servers.rs: hibernated while it computes (from the
 * kick interrupt), a connection must still wake it. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static volatile unsigned long spins;

static void *spin(void *arg)
{
    (void)arg;
    for (;;)
        spins++;
    return NULL;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Computes for about 10 ms, then accepts without blocking (-1: none). */
static int poll_accept(int s)
{
    for (;;) {
        double t0 = now();
        while (now() - t0 < 0.01)
            spins++;
        int c = accept(s, NULL, NULL);
        if (c >= 0 || errno != EAGAIN)
            return c;
    }
}

int main(int argc, char **argv)
{
    int polling = argc > 1 && strcmp(argv[1], "poll") == 0;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 16) < 0 ||
        getsockname(s, (struct sockaddr *)&a, &len) < 0) {
        perror("listen");
        return 1;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, spin, NULL) != 0) {
        perror("pthread_create");
        return 1;
    }
    if (polling && fcntl(s, F_SETFL, O_NONBLOCK) < 0) {
        perror("fcntl");
        return 1;
    }
    printf("listening on %d\n", ntohs(a.sin_port));
    fflush(stdout);
    for (unsigned n = 1;; n++) {
        int c = polling ? poll_accept(s) : accept(s, NULL, NULL);
        if (c < 0) {
            perror("accept");
            return 1;
        }
        char msg[32];
        int m = snprintf(msg, sizeof(msg), "hello %u\n", n);
        if (write(c, msg, (size_t)m) != m)
            perror("write");
        close(c);
    }
}
