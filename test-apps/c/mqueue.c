/*
 * mqueue: POSIX message queues, one stable line per check, for a native
 * run and a sandboxed run to be compared (docs/terminal.md,
 * "/dev/mqueue"): mq_open errors (ENOENT, EEXIST, EINVAL attributes,
 * EACCES for a '/' inside the name), attributes and mq_getsetattr,
 * priority order (FIFO within one), EMSGSIZE both ways, bad priority,
 * O_NONBLOCK EAGAIN both ways, timeouts (ETIMEDOUT, EINVAL), EBADF, a
 * receiver and a sender blocked in a child until the parent moves, poll,
 * fstat, and mq_unlink leaving open descriptors working. The queue name
 * carries the pid so runs never meet; it is never printed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"

static char name[64];

static void show(const char *what, long rc)
{
	if (rc < 0)
		printf("%s: %s\n", what, errno_name(errno));
	else
		printf("%s: %ld\n", what, rc);
	fflush(stdout);
}

static void attr(const char *what, mqd_t q)
{
	struct mq_attr a;
	if (mq_getattr(q, &a) < 0) {
		show(what, -1);
		return;
	}
	printf("%s: flags %s maxmsg %ld msgsize %ld curmsgs %ld\n", what,
	       a.mq_flags & O_NONBLOCK ? "O_NONBLOCK" : "0", a.mq_maxmsg, a.mq_msgsize, a.mq_curmsgs);
	fflush(stdout);
}

static struct timespec in_ms(int ms)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_nsec += (long)ms * 1000000L;
	t.tv_sec += t.tv_nsec / 1000000000L;
	t.tv_nsec %= 1000000000L;
	return t;
}

static void msleep(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

int main(void)
{
	snprintf(name, sizeof name, "/qrun-mq-%d", (int)getpid());
	struct mq_attr a = {.mq_maxmsg = 4, .mq_msgsize = 64};

	show("open missing", mq_open(name, O_RDWR));
	struct mq_attr bad = {.mq_maxmsg = 0, .mq_msgsize = 64};
	show("create maxmsg 0", mq_open(name, O_RDWR | O_CREAT, 0600, &bad));
	bad.mq_maxmsg = 4;
	bad.mq_msgsize = -1;
	show("create msgsize -1", mq_open(name, O_RDWR | O_CREAT, 0600, &bad));
	show("name with a slash", mq_open("/a/b", O_RDWR | O_CREAT, 0600, &a));
	mqd_t q = mq_open(name, O_RDWR | O_CREAT | O_EXCL, 0600, &a);
	show("create", q < 0 ? -1 : 0);
	show("create again O_EXCL", mq_open(name, O_RDWR | O_CREAT | O_EXCL, 0600, &a));
	mqd_t q2 = mq_open(name, O_RDWR);
	show("open existing", q2 < 0 ? -1 : 0);
	attr("attr", q);

	struct stat st;
	show("fstat", fstat(q, &st));
	printf("fstat: regular %d mode %o\n", S_ISREG(st.st_mode), st.st_mode & 07777);

	/* Priority order, FIFO within one priority. */
	const char *texts[] = {"one", "five-a", "three", "five-b"};
	unsigned prios[] = {1, 5, 3, 5};
	for (int i = 0; i < 4; i++)
		show("send", mq_send(q, texts[i], strlen(texts[i]), prios[i]));
	attr("attr full", q);
	struct pollfd pf = {q, POLLIN | POLLOUT, 0};
	show("poll full", poll(&pf, 1, 0));
	printf("poll full: in %d out %d\n", !!(pf.revents & POLLIN), !!(pf.revents & POLLOUT));
	struct mq_attr nb = {.mq_flags = O_NONBLOCK}, old;
	show("setattr O_NONBLOCK", mq_setattr(q, &nb, &old));
	printf("old flags: %s\n", old.mq_flags & O_NONBLOCK ? "O_NONBLOCK" : "0");
	show("send full nonblocking", mq_send(q, "x", 1, 0));
	struct timespec t = in_ms(30);
	show("timedsend full (q2)", mq_timedsend(q2, "x", 1, 0, &t));
	char buf[128];
	for (int i = 0; i < 4; i++) {
		unsigned prio = 99;
		ssize_t n = mq_receive(q, buf, sizeof buf, &prio);
		if (n < 0) {
			show("receive", -1);
			continue;
		}
		printf("receive: %.*s prio %u\n", (int)n, buf, prio);
	}
	show("receive empty nonblocking", mq_receive(q, buf, sizeof buf, NULL));
	t = in_ms(30);
	show("timedreceive empty (q2)", mq_timedreceive(q2, buf, sizeof buf, NULL, &t));
	struct timespec inval = {0, 2000000000L};
	show("timedreceive bad timespec", mq_timedreceive(q2, buf, sizeof buf, NULL, &inval));
	show("send too long", mq_send(q, buf, 65, 0));
	show("send prio 32768", mq_send(q, "x", 1, 32768));
	show("send 64 bytes", mq_send(q, buf, 64, 0));
	show("receive small buffer", mq_receive(q, buf, 63, NULL));
	show("receive 64 bytes", mq_receive(q, buf, 64, NULL));
	show("send on stdin", mq_send(0, "x", 1, 0));
	mqd_t ro = mq_open(name, O_RDONLY);
	show("send on O_RDONLY", mq_send(ro, "x", 1, 0));
	mq_close(ro);

	/* A child blocks in receive until the parent sends; then in send on
	 * a full queue until the parent receives. */
	pid_t pid = fork();
	if (pid == 0) {
		unsigned prio = 0;
		ssize_t n = mq_receive(q2, buf, sizeof buf, &prio);
		printf("child received: %.*s prio %u\n", n < 0 ? 0 : (int)n, buf, prio);
		fflush(stdout);
		for (int i = 0; i < 5; i++)
			mq_send(q2, "f", 1, 0);
		printf("child sent 5 into 4 places\n");
		fflush(stdout);
		_exit(0);
	}
	msleep(100);
	long sent = mq_send(q2, "hello", 5, 7);
	/* The child prints, then blocks on its fifth send. */
	msleep(200);
	show("send to the waiting child", sent);
	attr("attr with the child blocked", q2);
	long got = mq_receive(q2, buf, sizeof buf, NULL);
	int e = errno;
	int status = 0;
	waitpid(pid, &status, 0);
	errno = e;
	show("receive for the blocked child", got);
	printf("child status %d\n", WEXITSTATUS(status));
	attr("attr after the child", q2);

	show("unlink", mq_unlink(name));
	show("unlink again", mq_unlink(name));
	show("open after unlink", mq_open(name, O_RDWR));
	show("receive after unlink", mq_receive(q2, buf, sizeof buf, NULL));
	mq_close(q);
	mq_close(q2);
	printf("done\n");
	return 0;
}
