/*
 * waits MODE: blocking calls of one process while others run
 * (docs/processes.md, "Armed waits").
 *
 *   tcp       a loopback TCP server (accept, poll, epoll_wait, select,
 *             recv/send, read/write) and its client (connect, send, recv)
 *             in two processes; prints what each side saw.
 *   sleep     a child sleeps 600 ms in nanosleep while the parent computes
 *             for 400 ms; the parent prints whether they overlapped.
 *   alarm     a child arms ITIMER_REAL and blocks reading a pipe while
 *             the parent (no SIGALRM handler: the signal would kill it)
 *             computes; the child's handler must run (read: EINTR), the
 *             parent must live; then the parent's own alarm().
 *   accept    a server blocked in a plain accept(): prints "port N",
 *             answers one connection and exits.
 *   accept3   three processes: the parent waits in wait4, one child reads
 *             a pipe, the other accepts; the connection's request is
 *             passed through the pipe. Prints "port N" first.
 *   pollserve a server looping on poll(listener, 500 ms) as Python's
 *             serve_forever does; answers one connection and exits.
 *   pingpong N  N one-byte round trips over two pipes between two
 *             processes; prints the mean microseconds per round trip.
 *   epolltimeout  epoll_wait on a listening socket with a child alive
 *             (so the wait parks): five 50 ms timeouts return 0, then
 *             the child's connection (after 800 ms) is reported.
 *   sendfile  a blocking sendfile of a 4 MiB file into a socket whose only
 *             reader is a child: it must wait for the child, not hold the
 *             vCPU (the parent gives up after 10 s).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die(const char *what)
{
	printf("%s: %s\n", what, strerror(errno));
	fflush(stdout);
	_exit(1);
}

/* A listener on 127.0.0.1 at an ephemeral port; *port gets it. */
static int listener(int *port)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0)
		die("socket");
	struct sockaddr_in a = {.sin_family = AF_INET};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(s, (struct sockaddr *)&a, sizeof a) < 0)
		die("bind");
	if (listen(s, 8) < 0)
		die("listen");
	socklen_t l = sizeof a;
	getsockname(s, (struct sockaddr *)&a, &l);
	*port = ntohs(a.sin_port);
	return s;
}

/* Reads one request and answers it on `c`. */
static void answer(int c, const char *who)
{
	char buf[256];
	ssize_t n = read(c, buf, sizeof buf - 1);
	if (n < 0)
		die("read request");
	buf[n] = 0;
	char out[400];
	int m = snprintf(out, sizeof out, "%s got %zd bytes\n", who, n);
	if (write(c, out, m) != m)
		die("write answer");
}

static int tcp(void)
{
	alarm(20); /* a deadlock ends the run instead of hanging it */
	int port;
	int s = listener(&port);
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		close(s);
		int c = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (connect(c, (struct sockaddr *)&a, sizeof a) < 0)
			die("connect");
		for (int i = 0; i < 5; i++) {
			char msg[32], rep[64];
			int m = snprintf(msg, sizeof msg, "ping %d", i);
			if (send(c, msg, m, 0) != m)
				die("send");
			ssize_t n = recv(c, rep, sizeof rep - 1, 0);
			if (n <= 0)
				die("recv");
			rep[n] = 0;
			printf("client: %s\n", rep);
		}
		shutdown(c, SHUT_WR);
		char rest[8];
		printf("client: eof %zd\n", recv(c, rest, sizeof rest, 0));
		fflush(stdout);
		_exit(0);
	}
	int c = accept(s, NULL, NULL);
	if (c < 0)
		die("accept");
	int ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 7};
	epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
	for (int i = 0;; i++) {
		/* Each wait in turn: poll, epoll_wait, select. */
		int r;
		if (i % 3 == 0) {
			struct pollfd p = {.fd = c, .events = POLLIN};
			r = poll(&p, 1, 5000);
		} else if (i % 3 == 1) {
			struct epoll_event out;
			r = epoll_wait(ep, &out, 1, 5000);
			if (r == 1 && out.data.u32 != 7)
				die("epoll data");
		} else {
			fd_set rd;
			FD_ZERO(&rd);
			FD_SET(c, &rd);
			struct timeval tv = {5, 0};
			r = select(c + 1, &rd, NULL, NULL, &tv);
		}
		if (r != 1) {
			printf("server: wait %d returned %d\n", i, r);
			break;
		}
		char buf[64];
		ssize_t n = recv(c, buf, sizeof buf - 1, 0);
		if (n <= 0) {
			printf("server: eof after %d messages\n", i);
			break;
		}
		buf[n] = 0;
		char rep[96];
		int m = snprintf(rep, sizeof rep, "pong (%s)", buf);
		send(c, rep, m, 0);
	}
	close(c);
	int st;
	waitpid(pid, &st, 0);
	printf("server: client status %d\n", WEXITSTATUS(st));
	return 0;
}

static int sleeper(void)
{
	double t0 = now_ms();
	pid_t pid = fork();
	if (pid == 0) {
		struct timespec ts = {0, 600 * 1000000L};
		nanosleep(&ts, NULL);
		_exit(0);
	}
	/* 400 ms of work from when the parent runs again: if the child's
	 * sleep held the vCPU, that is only after it. */
	double t1 = now_ms();
	volatile unsigned long x = 0;
	while (now_ms() - t1 < 400)
		x++;
	int st;
	waitpid(pid, &st, 0);
	double total = now_ms() - t0;
	printf("slept and computed at once: %s\n", total < 900 ? "yes" : "no");
	if (total >= 900)
		printf("(took %.0f ms)\n", total);
	return 0;
}

static volatile sig_atomic_t got;
static void on_alarm(int sig)
{
	(void)sig;
	got = 1;
}

static int alarmer(void)
{
	int p[2];
	if (pipe(p) < 0)
		die("pipe");
	pid_t pid = fork();
	if (pid == 0) {
		struct sigaction sa = {.sa_handler = on_alarm}; /* no SA_RESTART */
		sigaction(SIGALRM, &sa, NULL);
		struct itimerval it = {{0, 0}, {0, 200000}};
		setitimer(ITIMER_REAL, &it, NULL);
		/* Blocked in read while the parent computes: the timer fires
		 * while the parent runs, and must still come here. */
		char c;
		ssize_t n = read(p[0], &c, 1);
		printf("child: read %s, SIGALRM %s\n", n < 0 && errno == EINTR ? "EINTR" : "data",
		       got ? "handled" : "missing");
		fflush(stdout);
		_exit(0);
	}
	double t1 = now_ms();
	volatile unsigned long x = 0;
	while (now_ms() - t1 < 400)
		x++;
	if (write(p[1], "x", 1) != 1)
		die("write");
	int st;
	waitpid(pid, &st, 0);
	printf("parent: alive, child exited %d\n", WEXITSTATUS(st));
	/* alarm() in the parent: its own SIGALRM, to its handler. */
	got = 0;
	signal(SIGALRM, on_alarm);
	alarm(1);
	pause();
	printf("parent: own alarm %s\n", got ? "handled" : "missing");
	return 0;
}

static int accepter(void)
{
	int port;
	int s = listener(&port);
	printf("port %d\n", port);
	fflush(stdout);
	int c = accept(s, NULL, NULL);
	if (c < 0)
		die("accept");
	answer(c, "accept server");
	return 0;
}

static int accept3(void)
{
	int port;
	int s = listener(&port);
	int p[2];
	if (pipe(p) < 0)
		die("pipe");
	pid_t reader = fork();
	if (reader == 0) {
		close(p[1]);
		char buf[64];
		ssize_t n = read(p[0], buf, sizeof buf - 1);
		printf("reader: %zd bytes from the pipe\n", n);
		fflush(stdout);
		_exit(0);
	}
	pid_t acc = fork();
	if (acc == 0) {
		close(p[0]);
		int c = accept(s, NULL, NULL);
		if (c < 0)
			die("accept");
		answer(c, "accept3 server");
		if (write(p[1], "go", 2) != 2)
			die("write pipe");
		_exit(0);
	}
	close(p[0]);
	close(p[1]);
	close(s);
	printf("port %d\n", port);
	fflush(stdout);
	int st, n = 0;
	while (wait(&st) > 0)
		n++;
	printf("parent: reaped %d\n", n);
	return 0;
}

static int pollserve(void)
{
	int port;
	int s = listener(&port);
	printf("port %d\n", port);
	fflush(stdout);
	for (;;) {
		struct pollfd p = {.fd = s, .events = POLLIN};
		int r = poll(&p, 1, 500);
		if (r < 0 && errno != EINTR)
			die("poll");
		if (r == 1)
			break;
	}
	int c = accept(s, NULL, NULL);
	if (c < 0)
		die("accept");
	answer(c, "poll server");
	return 0;
}

static int pingpong(int n)
{
	int a[2], b[2];
	if (pipe(a) < 0 || pipe(b) < 0)
		die("pipe");
	pid_t pid = fork();
	if (pid == 0) {
		char c;
		for (int i = 0; i < n; i++) {
			if (read(a[0], &c, 1) != 1 || write(b[1], &c, 1) != 1)
				_exit(1);
		}
		_exit(0);
	}
	double t0 = now_ms();
	char c = 'x';
	for (int i = 0; i < n; i++) {
		if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1)
			die("pingpong");
	}
	double t = now_ms() - t0;
	int st;
	waitpid(pid, &st, 0);
	printf("%.2f us per round trip\n", t * 1000 / n);
	return 0;
}

static void on_give_up(int sig)
{
	(void)sig;
	static const char msg[] = "sendfile: timed out (the reader never ran)\n";
	write(1, msg, sizeof msg - 1);
	_exit(1);
}

static int sendfiler(void)
{
	enum { SIZE = 4 << 20 };
	char path[] = "/tmp/waits-sendfile-XXXXXX";
	int f = mkstemp(path);
	if (f < 0)
		die("mkstemp");
	unlink(path);
	static char block[65536];
	memset(block, 'x', sizeof block);
	for (int i = 0; i < SIZE / (int)sizeof block; i++)
		if (write(f, block, sizeof block) != (ssize_t)sizeof block)
			die("write");
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		die("socketpair");
	fflush(stdout);
	pid_t kid = fork();
	if (kid == 0) {
		close(sv[0]);
		long total = 0;
		ssize_t n;
		while ((n = read(sv[1], block, sizeof block)) > 0)
			total += n;
		printf("child read %ld bytes\n", total);
		_exit(0);
	}
	close(sv[1]);
	signal(SIGALRM, on_give_up);
	alarm(10);
	off_t off = 0;
	long sent = 0;
	while (sent < SIZE) {
		ssize_t n = sendfile(sv[0], f, &off, SIZE - sent);
		if (n <= 0)
			die("sendfile");
		sent += n;
	}
	close(sv[0]);
	int st;
	waitpid(kid, &st, 0);
	alarm(0);
	printf("sent %ld bytes, offset %ld\n", sent, (long)off);
	return 0;
}

static int epolltimeout(void)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	if (l < 0 || bind(l, (void *)&a, sizeof a) || listen(l, 4) ||
	    getsockname(l, (void *)&a, &al))
		die("listen");
	int ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 9};
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev))
		die("epoll");
	pid_t c = fork();
	if (c == 0) {
		usleep(800 * 1000);
		int s = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(s, (void *)&a, sizeof a))
			_exit(1);
		usleep(200 * 1000);
		_exit(0);
	}
	int zeros = 0;
	struct epoll_event out;
	for (int i = 0; i < 5; i++)
		if (epoll_wait(ep, &out, 1, 50) == 0)
			zeros++;
	printf("timeouts: %d of 5\n", zeros);
	int r = epoll_wait(ep, &out, 1, 5000);
	printf("then ready: %d, data %u\n", r, r == 1 ? out.data.u32 : 0);
	int st = 0;
	waitpid(c, &st, 0);
	printf("child status %d\n", st);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *m = argc > 1 ? argv[1] : "";
	if (!strcmp(m, "tcp"))
		return tcp();
	if (!strcmp(m, "sleep"))
		return sleeper();
	if (!strcmp(m, "alarm"))
		return alarmer();
	if (!strcmp(m, "accept"))
		return accepter();
	if (!strcmp(m, "accept3"))
		return accept3();
	if (!strcmp(m, "pollserve"))
		return pollserve();
	if (!strcmp(m, "sendfile"))
		return sendfiler();
	if (!strcmp(m, "epolltimeout"))
		return epolltimeout();
	if (!strcmp(m, "pingpong"))
		return pingpong(argc > 2 ? atoi(argv[2]) : 1000);
	fprintf(stderr, "usage: waits tcp|sleep|alarm|accept|accept3|pollserve|sendfile|epolltimeout|pingpong N\n");
	return 2;
}
