/*
 * mq_notify with SIGEV_SIGNAL, natively and in the sandbox: a message in
 * the empty queue raises the signal once (SI_MESGQ), the registration is
 * then gone; a second registration from another process is EBUSY while
 * one is held; NULL removes it; SIGEV_NONE registers silently.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <mqueue.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checks.h"

#define Q "/qrun-test-mqnotify"

static volatile sig_atomic_t notified;

static void on_usr1(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)ctx;
	notified = si->si_code == SI_MESGQ ? 1 : 2;
}

static void show(const char *what, long rc)
{
	if (rc < 0)
		printf("%s: %s\n", what, errno_name(errno));
	else
		printf("%s: ok\n", what);
}

static void wait_notified(const char *what)
{
	for (int i = 0; i < 200 && !notified; i++)
		usleep(1000);
	printf("%s: notified %d\n", what, notified);
	notified = 0;
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	mq_unlink(Q);
	mqd_t q = mq_open(Q, O_RDWR | O_CREAT, 0600, NULL);
	show("create", q);
	if (q < 0)
		return 1;
	char buf[8192];
	struct sigaction sa = { .sa_sigaction = on_usr1, .sa_flags = SA_SIGINFO };
	sigaction(SIGUSR1, &sa, NULL);
	struct sigevent ev = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR1 };
	show("notify", mq_notify(q, &ev));
	pid_t c = fork();
	if (c == 0) {
		int r = mq_notify(q, &ev);
		_exit(r < 0 && errno == EBUSY ? 0 : 1);
	}
	int st;
	waitpid(c, &st, 0);
	printf("another process while held: %s\n", WEXITSTATUS(st) == 0 ? "EBUSY" : "other");
	mq_send(q, "n", 1, 0);
	wait_notified("first message");
	mq_receive(q, buf, sizeof buf, NULL);
	mq_send(q, "m", 1, 0);
	usleep(50000);
	printf("after the registration was used: notified %d\n", notified);
	mq_receive(q, buf, sizeof buf, NULL);
	show("notify again", mq_notify(q, &ev));
	show("remove", mq_notify(q, NULL));
	mq_send(q, "o", 1, 0);
	usleep(50000);
	printf("after removal: notified %d\n", notified);
	mq_receive(q, buf, sizeof buf, NULL);
	struct sigevent none = { .sigev_notify = SIGEV_NONE };
	show("SIGEV_NONE", mq_notify(q, &none));
	mq_send(q, "p", 1, 0);
	usleep(50000);
	printf("SIGEV_NONE: notified %d\n", notified);
	struct sigevent bad = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = 0 };
	mq_receive(q, buf, sizeof buf, NULL);
	show("SIGEV_SIGNAL with signal 0", mq_notify(q, &bad));
	mq_close(q);
	mq_unlink(Q);
	return 0;
}
