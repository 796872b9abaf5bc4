/*
 * SCM_RIGHTS over Unix sockets, natively and in the sandbox: a parent
 * passes an open file (at offset 3) and a pipe's write end to its child
 * over a socketpair and closes its own copies; the child reads the file
 * from the shared offset and answers through the pipe. Then, in one
 * process: the control message's shape, MSG_CTRUNC when the buffer holds
 * fewer fds than were sent, MSG_CMSG_CLOEXEC, and the errors for a bad
 * fd and an unknown control message. `scm DIR` works in scratch DIR.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checks.h"

static int send_fds(int sock, const int *fds, int n)
{
	char data = 'x';
	struct iovec iov = { &data, 1 };
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof u);
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			      .msg_controllen = CMSG_SPACE(sizeof(int) * n) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
	return sendmsg(sock, &msg, 0);
}

/* Receives up to `room` fds into fds; returns the count or -1; *flags
 * gets msg_flags and *clen the first cmsg_len (0 if none). */
static int recv_fds(int sock, int *fds, int room, int rflags, int *flags, size_t *clen)
{
	char data;
	struct iovec iov = { &data, 1 };
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof u);
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			      .msg_controllen = CMSG_SPACE(sizeof(int) * room) };
	if (recvmsg(sock, &msg, rflags) < 0)
		return -1;
	*flags = msg.msg_flags;
	*clen = 0;
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	if (!c)
		return 0;
	*clen = c->cmsg_len;
	if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
		return -2;
	int n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
	memcpy(fds, CMSG_DATA(c), sizeof(int) * n);
	return n;
}

static void between_processes(void)
{
	int sv[2], p[2];
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	pipe(p);
	int file = open("secret", O_RDWR | O_CREAT | O_TRUNC, 0600);
	write(file, "abcsecret", 9);
	lseek(file, 3, SEEK_SET);
	pid_t kid = fork();
	if (kid == 0) {
		close(sv[0]);
		close(p[1]);
		close(p[0]);
		close(file);
		int fds[4], flags;
		size_t clen;
		/* Without waiting in recvmsg: the sandbox's recvmsg would hold
		 * its one vCPU (docs/processes.md); yield to the sender. */
		int n;
		while ((n = recv_fds(sv[1], fds, 4, MSG_DONTWAIT, &flags, &clen)) < 0 && errno == EAGAIN)
			sched_yield();
		char buf[16] = { 0 };
		int got = n == 2 ? (int)read(fds[0], buf, sizeof buf - 1) : -1;
		char msg[64];
		int len = snprintf(msg, sizeof msg, "child got %d fds, read %d: %s", n, got, buf);
		write(n == 2 ? fds[1] : 1, msg, len);
		_exit(n == 2 ? 0 : 1);
	}
	close(sv[1]);
	int fds[2] = { file, p[1] };
	rc_line("sendmsg 2 fds", send_fds(sv[0], fds, 2));
	close(file);
	close(p[1]);
	char buf[80] = { 0 };
	read(p[0], buf, sizeof buf - 1);
	line("parent heard: %s", buf);
	int st;
	waitpid(kid, &st, 0);
	eq_line("child exit", WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0);
	close(p[0]);
	close(sv[0]);
}

static void in_one_process(void)
{
	int sv[2];
	socketpair(AF_UNIX, SOCK_DGRAM, 0, sv);
	int file = open("secret", O_RDONLY);
	int three[3] = { file, file, file };
	int fds[4], flags;
	size_t clen;

	rc_line("sendmsg 1 fd", send_fds(sv[0], &file, 1));
	int n = recv_fds(sv[1], fds, 4, MSG_CMSG_CLOEXEC, &flags, &clen);
	eq_line("received", n, 1);
	eq_line("cmsg_len is CMSG_LEN(4)", clen, CMSG_LEN(4));
	expect_line("a new fd number", n == 1 && fds[0] != file, 1);
	eq_line("MSG_CMSG_CLOEXEC set FD_CLOEXEC", n == 1 ? fcntl(fds[0], F_GETFD) : -1, FD_CLOEXEC);
	struct stat a, b;
	fstat(file, &a);
	expect_line("same file", n == 1 && fstat(fds[0], &b) == 0 && a.st_ino == b.st_ino, 1);
	if (n == 1)
		close(fds[0]);

	/* CMSG_SPACE(4) is CMSG_SPACE(8): room for two of the three. */
	rc_line("sendmsg 3 fds, CMSG_SPACE(4) of room", send_fds(sv[0], three, 3));
	n = recv_fds(sv[1], fds, 1, 0, &flags, &clen);
	eq_line("received", n, 2);
	expect_line("MSG_CTRUNC", flags & MSG_CTRUNC, 1);
	eq_line("no other msg_flags", flags & ~MSG_CTRUNC, 0);
	for (int i = 0; i < n && i < 4; i++)
		close(fds[i]);

	int bad = 999;
	err_line("sendmsg a bad fd", send_fds(sv[0], &bad, 1), EBADF);

	char data = 'y';
	struct iovec iov = { &data, 1 };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof u);
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			      .msg_controllen = sizeof u.buf };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = 77;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	err_line("sendmsg unknown control", sendmsg(sv[0], &msg, 0), EINVAL);

	rc_line("plain send", send(sv[0], "z", 1, 0));
	n = recv_fds(sv[1], fds, 4, 0, &flags, &clen);
	eq_line("no fds with plain data", n, 0);
	close(file);
	close(sv[0]);
	close(sv[1]);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc < 2 || chdir(argv[1]) != 0) {
		printf("usage: scm DIR\n");
		return 2;
	}
	between_processes();
	in_one_process();
	return 0;
}
