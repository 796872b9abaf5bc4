/*
 * pipes [MODE]: pipe semantics, one stable line per check (checks.h), for
 * a native run and a sandboxed run to be compared.
 *   (none)         every semantic check below
 *   alone          a process alone: EOF with no writer; a read from a pipe
 *                  whose only writer is itself blocks until a signal
 *   execchild W C  (internal) run by exec: writes to inherited fd W and
 *                  reports whether fd C (O_CLOEXEC) is still open
 *   hib            two processes, the parent blocked reading a pipe, the
 *                  child blocked on stdin with 40000 bytes buffered in
 *                  another pipe: the test hibernates and wakes meanwhile,
 *                  then writes a line; 4 MiB then flow, checksummed
 *   selfblock      alone, blocked reading its own pipe (prints "ready"),
 *                  until SIGUSR1 ends the read with EINTR
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"

static const char *self_path;

static void msleep(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int child_status(pid_t pid)
{
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return -1000;
	if (WIFSIGNALED(st))
		return -WTERMSIG(st);
	return WEXITSTATUS(st);
}

static volatile int caught;
static void on_sig(int s)
{
	(void)s;
	caught++;
}

static void handle(int sig, int restart)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sig;
	sa.sa_flags = restart ? SA_RESTART : 0;
	sigaction(sig, &sa, NULL);
}

static void timer_ms(int ms)
{
	struct itimerval it = {{0, 0}, {ms / 1000, (ms % 1000) * 1000}};
	setitimer(ITIMER_REAL, &it, NULL);
}

static void flags_and_identity(void)
{
	int p[2], q[2];
	rc_line("pipe", pipe(p));
	eq_line("pipe: read end FD_CLOEXEC", fcntl(p[0], F_GETFD), 0);
	rc_line("pipe2 O_CLOEXEC", pipe2(q, O_CLOEXEC));
	eq_line("pipe2: read end FD_CLOEXEC", fcntl(q[0], F_GETFD), FD_CLOEXEC);
	eq_line("pipe2: write end FD_CLOEXEC", fcntl(q[1], F_GETFD), FD_CLOEXEC);
	eq_line("F_GETFL read end", fcntl(p[0], F_GETFL) & (O_ACCMODE | O_NONBLOCK), O_RDONLY);
	eq_line("F_GETFL write end", fcntl(p[1], F_GETFL) & (O_ACCMODE | O_NONBLOCK), O_WRONLY);
	rc_line("F_SETFL O_NONBLOCK", fcntl(p[0], F_SETFL, O_NONBLOCK));
	eq_line("F_GETFL after", fcntl(p[0], F_GETFL) & (O_ACCMODE | O_NONBLOCK), O_NONBLOCK);
	struct stat a, b;
	rc_line("fstat read end", fstat(p[0], &a));
	rc_line("fstat write end", fstat(p[1], &b));
	expect_line("S_ISFIFO both", S_ISFIFO(a.st_mode) && S_ISFIFO(b.st_mode), 1);
	expect_line("same inode", a.st_ino == b.st_ino, 1);
	char path[64], l0[64] = {0}, l1[64] = {0};
	snprintf(path, sizeof path, "/proc/self/fd/%d", p[0]);
	long n0 = readlink(path, l0, sizeof l0 - 1);
	snprintf(path, sizeof path, "/proc/self/fd/%d", p[1]);
	long n1 = readlink(path, l1, sizeof l1 - 1);
	expect_line("readlink same for both ends", n0 > 0 && n0 == n1 && !strcmp(l0, l1), 1);
	unsigned long long ino = 0;
	expect_line("readlink is pipe:[st_ino]",
		    sscanf(l0, "pipe:[%llu]", &ino) == 1 && ino == (unsigned long long)a.st_ino, 1);
	err_line("lseek", lseek(p[0], 0, SEEK_CUR), ESPIPE);
	char c;
	err_line("pread", pread(p[0], &c, 1, 0), ESPIPE);
	err_line("read from write end", read(p[1], &c, 1), EBADF);
	err_line("write to read end", write(p[0], "x", 1), EBADF);
	close(p[0]);
	close(p[1]);
	close(q[0]);
	close(q[1]);
}

static void nonblocking_and_sizes(void)
{
	int p[2];
	char buf[8192];
	rc_line("pipe2 O_NONBLOCK", pipe2(p, O_NONBLOCK));
	err_line("read empty", read(p[0], buf, 10), EAGAIN);
	rc_line("write hello", write(p[1], "hello", 5));
	int n = -1;
	rc_line("FIONREAD", ioctl(p[0], FIONREAD, &n));
	eq_line("FIONREAD count", n, 5);
	rc_line("read 3", read(p[0], buf, 3));
	printf("read 3 bytes: %.3s\n", buf);
	ioctl(p[0], FIONREAD, &n);
	eq_line("FIONREAD after", n, 2);
	rc_line("read rest", read(p[0], buf, 100));
	eq_line("F_GETPIPE_SZ", fcntl(p[1], F_GETPIPE_SZ), 65536);
	memset(buf, 'a', sizeof buf);
	int writes = 0;
	while (write(p[1], buf, 4096) == 4096 && writes < 100)
		writes++;
	err_line("write to full pipe", write(p[1], buf, 4096), EAGAIN);
	eq_line("4096-byte writes that fit", writes, 16);
	err_line("big write to full pipe", write(p[1], buf, 10000), EAGAIN);
	struct pollfd pf[2] = {{p[0], POLLIN | POLLOUT, 0}, {p[1], POLLIN | POLLOUT, 0}};
	eq_line("poll full: ready", poll(pf, 2, 0), 1);
	eq_line("poll full: read end", pf[0].revents, POLLIN);
	eq_line("poll full: write end", pf[1].revents, 0);
	err_line("F_SETPIPE_SZ smaller than content", fcntl(p[1], F_SETPIPE_SZ, 4096), EBUSY);
	rc_line("read 4096", read(p[0], buf, 4096));
	rc_line("write 8192 with 4096 free", write(p[1], buf, 8192));
	while (read(p[0], buf, sizeof buf) > 0)
		;
	eq_line("F_SETPIPE_SZ 5000", fcntl(p[1], F_SETPIPE_SZ, 5000), 8192);
	eq_line("F_GETPIPE_SZ after", fcntl(p[0], F_GETPIPE_SZ), 8192);
	eq_line("F_SETPIPE_SZ 0", fcntl(p[1], F_SETPIPE_SZ, 0), 4096);
	writes = 0;
	while (write(p[1], buf, 1000) == 1000 && writes < 100)
		writes++;
	eq_line("1000-byte writes into 4096", writes, 4);
	rc_line("96 more bytes fit", write(p[1], buf, 96));
	err_line("one more byte", write(p[1], buf, 1), EAGAIN);
	eq_line("F_SETPIPE_SZ 65536", fcntl(p[1], F_SETPIPE_SZ, 65536), 65536);
	close(p[0]);
	close(p[1]);
}

static void vectors(void)
{
	int p[2];
	pipe(p);
	struct iovec w[3] = {{"abc", 3}, {"", 0}, {"defgh", 5}};
	rc_line("writev", writev(p[1], w, 3));
	char x[2], y[10];
	memset(y, 0, sizeof y);
	struct iovec r[2] = {{x, 2}, {y, 10}};
	rc_line("readv", readv(p[0], r, 2));
	printf("readv: %.2s|%s\n", x, y);
	rc_line("read of 0 bytes", read(p[0], y, 0));
	rc_line("write of 0 bytes", write(p[1], y, 0));
	close(p[0]);
	close(p[1]);
}

static void eof_and_epipe(void)
{
	int p[2];
	char c;
	pipe2(p, O_NONBLOCK);
	int d = dup(p[1]);
	close(p[1]);
	err_line("read with a dup'd writer open", read(p[0], &c, 1), EAGAIN);
	pid_t pid = fork();
	if (pid == 0) {
		close(d);
		_exit(0);
	}
	child_status(pid);
	err_line("read after the child closed its copy", read(p[0], &c, 1), EAGAIN);
	close(d);
	rc_line("read with no writer (EOF)", read(p[0], &c, 1));
	struct pollfd pf = {p[0], POLLIN, 0};
	eq_line("poll read end without writers", poll(&pf, 1, 0), 1);
	eq_line("revents", pf.revents, POLLHUP);
	close(p[0]);

	pipe(p);
	write(p[1], "data", 4);
	close(p[1]);
	char buf[8];
	rc_line("read buffered data after writers closed", read(p[0], buf, 8));
	rc_line("then EOF", read(p[0], buf, 8));
	close(p[0]);

	pipe(p);
	close(p[0]);
	handle(SIGPIPE, 0);
	caught = 0;
	err_line("write with no reader", write(p[1], "x", 1), EPIPE);
	eq_line("SIGPIPE caught", caught, 1);
	pf.fd = p[1];
	pf.events = POLLOUT;
	poll(&pf, 1, 0);
	eq_line("poll write end without readers", pf.revents, POLLOUT | POLLERR);
	signal(SIGPIPE, SIG_DFL);
	pid = fork();
	if (pid == 0) {
		write(p[1], "x", 1);
		_exit(0);
	}
	eq_line("child writing with no reader dies of", child_status(pid), -SIGPIPE);
	close(p[1]);
}

static void blocking_between_processes(void)
{
	int p[2];
	char buf[64];
	pipe(p);
	pid_t pid = fork();
	if (pid == 0) {
		msleep(50);
		write(p[1], "late", 4);
		_exit(0);
	}
	rc_line("blocking read waits for the writer", read(p[0], buf, sizeof buf));
	child_status(pid);
	close(p[0]);
	close(p[1]);

	/* A 1 MiB write completes whole while the reader reads in small
	 * pieces. */
	pipe(p);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		size_t len = 1 << 20;
		unsigned char *m = malloc(len);
		for (size_t i = 0; i < len; i++)
			m[i] = (unsigned char)(i * 7 + (i >> 11));
		ssize_t w = write(p[1], m, len);
		_exit(w == (ssize_t)len ? 0 : 1);
	}
	close(p[1]);
	size_t total = 0, bad = 0;
	ssize_t r;
	unsigned char chunk[1000];
	while ((r = read(p[0], chunk, sizeof chunk)) > 0) {
		for (ssize_t i = 0; i < r; i++)
			bad += chunk[i] != (unsigned char)((total + i) * 7 + ((total + i) >> 11));
		total += r;
	}
	eq_line("1 MiB write: bytes read", (long)total, 1 << 20);
	eq_line("1 MiB write: bad bytes", (long)bad, 0);
	eq_line("1 MiB write: writer status", child_status(pid), 0);
	close(p[0]);

	/* PIPE_BUF atomicity: two writers of 4096-byte blocks never
	 * interleave inside a block. */
	pipe(p);
	pid_t w[2];
	for (int k = 0; k < 2; k++) {
		w[k] = fork();
		if (w[k] == 0) {
			close(p[0]);
			char blk[PIPE_BUF];
			memset(blk, 'A' + k, sizeof blk);
			for (int i = 0; i < 64; i++)
				if (write(p[1], blk, sizeof blk) != sizeof blk)
					_exit(1);
			_exit(0);
		}
	}
	close(p[1]);
	static char all[2 * 64 * PIPE_BUF];
	total = 0;
	while ((r = read(p[0], all + total, 777 < sizeof all - total ? 777 : sizeof all - total)) > 0)
		total += r;
	int mixed = 0;
	for (size_t i = 0; i < total; i += PIPE_BUF)
		for (size_t j = 1; j < PIPE_BUF; j++)
			mixed |= all[i + j] != all[i];
	eq_line("atomic writes: bytes", (long)total, 2 * 64 * PIPE_BUF);
	expect_line("atomic writes: no block mixed", !mixed, 1);
	child_status(w[0]);
	child_status(w[1]);
	close(p[0]);
}

static void signals_and_partial(void)
{
	int p[2];
	char buf[16];
	pipe(p);
	handle(SIGALRM, 0);
	caught = 0;
	timer_ms(50);
	err_line("blocking read interrupted (no SA_RESTART)", read(p[0], buf, 1), EINTR);
	eq_line("SIGALRM caught", caught, 1);
	/* With SA_RESTART the read restarts and gets the child's byte. */
	handle(SIGALRM, 1);
	pid_t pid = fork();
	if (pid == 0) {
		msleep(150);
		write(p[1], "r", 1);
		_exit(0);
	}
	caught = 0;
	timer_ms(30);
	rc_line("read with SA_RESTART", read(p[0], buf, 1));
	eq_line("SIGALRM caught", caught, 1);
	child_status(pid);
	/* A blocking write bigger than the pipe, cut by a signal, returns
	 * what it wrote. */
	handle(SIGALRM, 0);
	static char big[200000];
	timer_ms(50);
	rc_line("big write interrupted returns the bytes written", write(p[1], big, sizeof big));
	close(p[0]);
	close(p[1]);
}

static void exec_sharing(void)
{
	int p[2], c[2];
	pipe(p);
	pipe2(c, O_CLOEXEC);
	pid_t pid = fork();
	if (pid == 0) {
		char a[16], b[16];
		snprintf(a, sizeof a, "%d", p[1]);
		snprintf(b, sizeof b, "%d", c[1]);
		execl(self_path, self_path, "execchild", a, b, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	close(c[1]);
	char buf[128] = {0};
	size_t total = 0;
	ssize_t r;
	while ((r = read(p[0], buf + total, sizeof buf - 1 - total)) > 0)
		total += r;
	printf("from the exec'd child: %s", buf);
	char x;
	rc_line("cloexec pipe: EOF once the exec closed it", read(c[0], &x, 1));
	eq_line("exec'd child status", child_status(pid), 0);
	close(p[0]);
	close(c[0]);
}

static void poll_family(void)
{
	int p[2], s[2];
	pipe(p);
	socketpair(AF_UNIX, SOCK_STREAM, 0, s);
	struct pollfd pf[2] = {{p[0], POLLIN, 0}, {s[0], POLLIN, 0}};
	eq_line("poll timeout, nothing ready", poll(pf, 2, 30), 0);
	pid_t pid = fork();
	if (pid == 0) {
		msleep(30);
		write(p[1], "p", 1);
		msleep(30);
		write(s[1], "s", 1);
		_exit(0);
	}
	eq_line("poll: pipe becomes ready", poll(pf, 2, -1), 1);
	eq_line("poll: pipe revents", pf[0].revents, POLLIN);
	char c;
	read(p[0], &c, 1);
	eq_line("poll: socket becomes ready", poll(pf, 2, -1), 1);
	eq_line("poll: socket revents", pf[1].revents, POLLIN);
	read(s[0], &c, 1);
	child_status(pid);

	fd_set rd;
	struct timeval tv = {0, 30000};
	FD_ZERO(&rd);
	FD_SET(p[0], &rd);
	FD_SET(s[0], &rd);
	int nfds = (p[0] > s[0] ? p[0] : s[0]) + 1;
	eq_line("select timeout", select(nfds, &rd, NULL, NULL, &tv), 0);
	pid = fork();
	if (pid == 0) {
		msleep(30);
		write(p[1], "p", 1);
		_exit(0);
	}
	FD_ZERO(&rd);
	FD_SET(p[0], &rd);
	FD_SET(s[0], &rd);
	eq_line("select: pipe becomes ready", select(nfds, &rd, NULL, NULL, NULL), 1);
	expect_line("select: pipe in the set", FD_ISSET(p[0], &rd) && !FD_ISSET(s[0], &rd), 1);
	read(p[0], &c, 1);
	child_status(pid);
	fd_set wr;
	FD_ZERO(&wr);
	FD_SET(p[1], &wr);
	struct timespec ts = {0, 0};
	eq_line("pselect: write end writable", pselect(p[1] + 1, NULL, &wr, NULL, &ts, NULL), 1);

	pid = fork();
	if (pid == 0) {
		msleep(30);
		write(p[1], "p", 1);
		_exit(0);
	}
	sigset_t mask;
	sigemptyset(&mask);
	struct timespec two = {2, 0};
	eq_line("ppoll: pipe becomes ready", ppoll(pf, 2, &two, &mask), 1);
	read(p[0], &c, 1);
	child_status(pid);

	/* epoll with a pipe and a socket. */
	int ep = epoll_create1(0);
	struct epoll_event ev = {EPOLLIN, {.u64 = 11}}, out[4];
	rc_line("epoll_ctl ADD pipe", epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev));
	err_line("epoll_ctl ADD pipe again", epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev), EEXIST);
	ev.data.u64 = 22;
	rc_line("epoll_ctl ADD socket", epoll_ctl(ep, EPOLL_CTL_ADD, s[0], &ev));
	eq_line("epoll_wait timeout", epoll_wait(ep, out, 4, 30), 0);
	pid = fork();
	if (pid == 0) {
		msleep(30);
		write(p[1], "p", 1);
		msleep(30);
		write(s[1], "s", 1);
		_exit(0);
	}
	eq_line("epoll_wait: pipe", epoll_wait(ep, out, 4, -1), 1);
	eq_line("epoll_wait: pipe data", (long)out[0].data.u64, 11);
	eq_line("epoll_wait: pipe events", out[0].events, EPOLLIN);
	read(p[0], &c, 1);
	eq_line("epoll_wait: socket", epoll_wait(ep, out, 4, -1), 1);
	eq_line("epoll_wait: socket data", (long)out[0].data.u64, 22);
	child_status(pid);
	write(p[1], "xy", 2);
	eq_line("epoll_wait: both ready", epoll_wait(ep, out, 4, 0), 2);
	eq_line("epoll_wait: maxevents 1", epoll_wait(ep, out, 1, 0), 1);
	read(s[0], &c, 1);
	ev.events = EPOLLIN | EPOLLET;
	ev.data.u64 = 33;
	rc_line("epoll_ctl MOD EPOLLET", epoll_ctl(ep, EPOLL_CTL_MOD, p[0], &ev));
	eq_line("EPOLLET: first wait", epoll_wait(ep, out, 4, 0), 1);
	eq_line("EPOLLET: again, no new data", epoll_wait(ep, out, 4, 0), 0);
	write(p[1], "z", 1);
	eq_line("EPOLLET: after a write", epoll_wait(ep, out, 4, 0), 1);
	ev.events = EPOLLIN | EPOLLONESHOT;
	rc_line("epoll_ctl MOD EPOLLONESHOT", epoll_ctl(ep, EPOLL_CTL_MOD, p[0], &ev));
	eq_line("EPOLLONESHOT: first", epoll_wait(ep, out, 4, 0), 1);
	eq_line("EPOLLONESHOT: disabled", epoll_wait(ep, out, 4, 0), 0);
	rc_line("epoll_ctl DEL pipe", epoll_ctl(ep, EPOLL_CTL_DEL, p[0], NULL));
	err_line("epoll_ctl DEL again", epoll_ctl(ep, EPOLL_CTL_DEL, p[0], NULL), ENOENT);
	eq_line("epoll_wait after DEL", epoll_wait(ep, out, 4, 0), 0);
	ev.events = EPOLLOUT;
	rc_line("epoll_ctl ADD write end", epoll_ctl(ep, EPOLL_CTL_ADD, p[1], &ev));
	eq_line("epoll_wait: write end writable", epoll_wait(ep, out, 4, 0), 1);
	close(p[1]);
	eq_line("epoll_wait: closed write end is gone", epoll_wait(ep, out, 4, 0), 0);
	close(ep);
	close(p[0]);
	close(s[0]);
	close(s[1]);
}

static int semantics(void)
{
	flags_and_identity();
	nonblocking_and_sizes();
	vectors();
	eof_and_epipe();
	blocking_between_processes();
	signals_and_partial();
	exec_sharing();
	poll_family();
	return 0;
}

static int alone(void)
{
	int p[2];
	char c;
	pipe(p);
	close(p[1]);
	rc_line("alone: read with no writer", read(p[0], &c, 1));
	close(p[0]);
	pipe(p);
	handle(SIGALRM, 0);
	timer_ms(100);
	err_line("alone: read with itself as the writer, until SIGALRM", read(p[0], &c, 1), EINTR);
	struct pollfd pf = {p[0], POLLIN, 0};
	timer_ms(50);
	err_line("alone: poll forever, until SIGALRM", poll(&pf, 1, -1), EINTR);
	eq_line("alone: poll with a timeout", poll(&pf, 1, 20), 0);
	return 0;
}

static uint64_t mix(uint64_t h, const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ULL;
	return h;
}

static int hib(void)
{
	int a[2], b[2];
	pipe(a);
	pipe(b);
	const size_t big = 4 << 20, small = 40000;
	unsigned char *m = malloc(big);
	for (size_t i = 0; i < big; i++)
		m[i] = (unsigned char)(i * 31 + (i >> 9));
	uint64_t want_big = mix(14695981039346656037ULL, m, big);
	uint64_t want_small = mix(14695981039346656037ULL, m, small);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		close(a[0]);
		close(b[0]);
		if (write(a[1], m, small) != (ssize_t)small)
			_exit(2);
		close(a[1]);
		printf("ready\n");
		fflush(stdout);
		char line[64];
		if (!fgets(line, sizeof line, stdin))
			_exit(3);
		_exit(write(b[1], m, big) == (ssize_t)big ? 0 : 4);
	}
	close(a[1]);
	close(b[1]);
	unsigned char *got = malloc(big);
	size_t total = 0;
	ssize_t r;
	while ((r = read(b[0], got + total, big - total)) > 0)
		total += r;
	printf("parent: big %s (%zu bytes)\n",
	       total == big && mix(14695981039346656037ULL, got, big) == want_big ? "ok" : "BAD",
	       total);
	total = 0;
	while ((r = read(a[0], got + total, big - total)) > 0)
		total += r;
	printf("parent: buffered %s (%zu bytes)\n",
	       total == small && mix(14695981039346656037ULL, got, small) == want_small ? "ok" : "BAD",
	       total);
	printf("parent: child status %d\n", child_status(pid));
	return 0;
}

static int selfblock(void)
{
	int p[2];
	char c;
	pipe(p);
	handle(SIGUSR1, 0);
	printf("ready\n");
	fflush(stdout);
	long r = read(p[0], &c, 1);
	printf("selfblock: read %s, signals %d\n", rc_text(r), caught);
	return 0;
}

int main(int argc, char **argv)
{
	self_path = argv[0];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "alone"))
		return alone();
	if (argc > 1 && !strcmp(argv[1], "hib"))
		return hib();
	if (argc > 1 && !strcmp(argv[1], "selfblock"))
		return selfblock();
	if (argc > 3 && !strcmp(argv[1], "execchild")) {
		int w = atoi(argv[2]), c = atoi(argv[3]);
		char msg[80];
		int open_c = fcntl(c, F_GETFD) >= 0;
		snprintf(msg, sizeof msg, "hello, cloexec fd %s\n", open_c ? "open" : "closed");
		return write(w, msg, strlen(msg)) > 0 ? 0 : 1;
	}
	return semantics();
}
