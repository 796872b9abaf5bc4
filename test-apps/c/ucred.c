/*
 * SO_PEERCRED and SCM_CREDENTIALS over Unix sockets, natively and in the
 * sandbox: who a socketpair's, a connection's and a datagram's peer is,
 * what a receiver with SO_PASSCRED reads (the sending process, or the
 * credentials it claimed), the order of SCM_CREDENTIALS and SCM_RIGHTS,
 * MSG_CTRUNC when the control buffer is short. Pids are printed as who
 * they are (self, parent, child), never as numbers. `ucred DIR` works in
 * scratch DIR.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checks.h"

static pid_t parent, child;

static const char *who(pid_t pid)
{
	if (pid == getpid())
		return "self";
	if (pid == parent)
		return "parent";
	if (pid == child && child != 0)
		return "child";
	if (pid == 0)
		return "none";
	return "other";
}

static void show_peer(const char *what, int fd)
{
	struct ucred c;
	socklen_t len = sizeof c;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) != 0) {
		printf("%s: SO_PEERCRED errno %d\n", what, errno);
		return;
	}
	printf("%s: peer %s uid %s gid %s len %u\n", what, who(c.pid),
	       c.uid == geteuid() ? "same" : "other", c.gid == getegid() ? "same" : "other", len);
}

static void passcred(int fd)
{
	int one = 1;
	CHECK(setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) == 0);
	int v = 0;
	socklen_t len = sizeof v;
	CHECK(getsockopt(fd, SOL_SOCKET, SO_PASSCRED, &v, &len) == 0);
	printf("SO_PASSCRED reads %d\n", v);
}

/* Sends one byte, with the claimed credentials if `claim`, and an fd if
 * `pass` >= 0. */
static int send_one(int fd, char byte, const struct ucred *claim, int pass)
{
	struct iovec iov = { &byte, 1 };
	union {
		char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof u);
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	size_t used = 0;
	if (claim) {
		struct cmsghdr *c = (struct cmsghdr *)(u.buf + used);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_CREDENTIALS;
		c->cmsg_len = CMSG_LEN(sizeof *claim);
		memcpy(CMSG_DATA(c), claim, sizeof *claim);
		used += CMSG_SPACE(sizeof *claim);
	}
	if (pass >= 0) {
		struct cmsghdr *c = (struct cmsghdr *)(u.buf + used);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pass, sizeof(int));
		used += CMSG_SPACE(sizeof(int));
	}
	if (used) {
		msg.msg_control = u.buf;
		msg.msg_controllen = used;
	}
	return sendmsg(fd, &msg, 0) == 1 ? 0 : -errno;
}

/* Receives one byte with a control buffer of `room` bytes and prints
 * what came with it. */
static void recv_one(const char *what, int fd, size_t room)
{
	char byte = 0;
	struct iovec iov = { &byte, 1 };
	union {
		char buf[256];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof u);
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			      .msg_controllen = room };
	ssize_t n = recvmsg(fd, &msg, 0);
	if (n != 1) {
		printf("%s: recvmsg %zd errno %d\n", what, n, errno);
		return;
	}
	printf("%s: byte %c controllen %zu%s\n", what, byte, (size_t)msg.msg_controllen,
	       msg.msg_flags & MSG_CTRUNC ? " CTRUNC" : "");
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
			struct ucred cr;
			memcpy(&cr, CMSG_DATA(c), sizeof cr);
			printf("  SCM_CREDENTIALS len %zu pid %s uid %s gid %s\n", (size_t)c->cmsg_len,
			       who(cr.pid),
			       cr.uid == getuid() ? "same" : cr.uid == 4321 ? "4321" : "other",
			       cr.gid == getgid() ? "same" : "other");
		} else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int got;
			memcpy(&got, CMSG_DATA(c), sizeof got);
			printf("  SCM_RIGHTS len %zu fd valid %d\n", (size_t)c->cmsg_len,
			       fcntl(got, F_GETFD) >= 0);
			close(got);
		} else {
			printf("  cmsg level %d type %d\n", c->cmsg_level, c->cmsg_type);
		}
	}
}

static void wait_child(const char *what)
{
	int st;
	CHECK(waitpid(child, &st, 0) == child);
	printf("%s: child exited %d\n", what, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	child = 0;
}

static void over_socketpair(void)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	show_peer("pair end 0", sv[0]);
	show_peer("pair end 1", sv[1]);
	passcred(sv[0]);
	int sync[2];
	CHECK(pipe(sync) == 0);
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		child = getpid();
		close(sv[0]);
		struct ucred me = { getpid(), getuid(), getgid() };
		struct ucred other_uid = { getpid(), 4321, getgid() };
		struct ucred parents = { parent, getuid(), getgid() };
		int r1 = send_one(sv[1], 'a', NULL, -1);
		char c;
		CHECK(read(sync[0], &c, 1) == 1);
		int r2 = send_one(sv[1], 'b', &me, -1);
		CHECK(read(sync[0], &c, 1) == 1);
		int r3 = send_one(sv[1], 'c', getuid() == 0 ? &other_uid : &me, -1);
		CHECK(read(sync[0], &c, 1) == 1);
		int r4 = send_one(sv[1], 'd', NULL, sync[0]);
		CHECK(read(sync[0], &c, 1) == 1);
		int r5 = send_one(sv[1], 'e', NULL, -1);
		CHECK(read(sync[0], &c, 1) == 1);
		int r6 = getuid() == 0 ? -EPERM : send_one(sv[1], 'f', &parents, -1);
		_exit(r1 == 0 && r2 == 0 && r3 == 0 && r4 == 0 && r5 == 0 && r6 == -EPERM ? 0 : 10);
	}
	close(sv[1]);
	recv_one("plain send", sv[0], 256);
	CHECK(write(sync[1], "x", 1) == 1);
	recv_one("claimed self", sv[0], 256);
	CHECK(write(sync[1], "x", 1) == 1);
	recv_one("claimed uid (root) or self", sv[0], 256);
	CHECK(write(sync[1], "x", 1) == 1);
	recv_one("creds and an fd", sv[0], 256);
	CHECK(write(sync[1], "x", 1) == 1);
	recv_one("room for less than the creds", sv[0], 8);
	CHECK(write(sync[1], "x", 1) == 1);
	wait_child("socketpair");
	close(sv[0]);
	close(sync[0]);
	close(sync[1]);
}

static void without_passcred(void)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0);
	CHECK(send_one(sv[1], 'n', NULL, -1) == 0);
	recv_one("no SO_PASSCRED", sv[0], 256);
	struct ucred bad = { getpid() + 100000, getuid(), getgid() };
	/* EPERM, or ESRCH for root (CAP_SYS_ADMIN may claim any live pid). */
	int r = send_one(sv[1], 'x', &bad, -1);
	printf("claiming another pid: %s\n", r == -EPERM || r == -ESRCH ? "refused" : "sent");
	close(sv[0]);
	close(sv[1]);
}

static void over_a_connection(const char *dir)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof a.sun_path, "%s/ucred.sock", dir);
	unlink(a.sun_path);
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(l >= 0);
	CHECK(bind(l, (struct sockaddr *)&a, sizeof a) == 0);
	CHECK(listen(l, 4) == 0);
	show_peer("listener", l);
	int sync[2];
	CHECK(pipe(sync) == 0);
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		child = getpid();
		close(l);
		int s = socket(AF_UNIX, SOCK_STREAM, 0);
		CHECK(s >= 0);
		CHECK(connect(s, (struct sockaddr *)&a, sizeof a) == 0);
		show_peer("connector (before accept)", s);
		fflush(stdout);
		CHECK(write(sync[1], "x", 1) == 1);
		char c;
		CHECK(read(s, &c, 1) == 1);
		show_peer("connector", s);
		fflush(stdout);
		int r = send_one(s, 'k', NULL, -1);
		CHECK(read(s, &c, 1) == 0);
		_exit(r == 0 ? 0 : 11);
	}
	char c;
	CHECK(read(sync[0], &c, 1) == 1);
	int s = accept(l, NULL, NULL);
	CHECK(s >= 0);
	show_peer("accepted", s);
	fflush(stdout);
	passcred(s);
	CHECK(write(s, "g", 1) == 1);
	recv_one("over a connection", s, 256);
	close(s);
	wait_child("connection");
	close(l);
	close(sync[0]);
	close(sync[1]);
	unlink(a.sun_path);
}

static void datagrams(const char *dir)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof a.sun_path, "%s/ucred.dgram", dir);
	unlink(a.sun_path);
	int r = socket(AF_UNIX, SOCK_DGRAM, 0);
	CHECK(r >= 0);
	CHECK(bind(r, (struct sockaddr *)&a, sizeof a) == 0);
	passcred(r);
	show_peer("unconnected datagram socket", r);
	fflush(stdout);
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		child = getpid();
		int s = socket(AF_UNIX, SOCK_DGRAM, 0);
		CHECK(s >= 0);
		_exit(sendto(s, "q", 1, 0, (struct sockaddr *)&a, sizeof a) == 1 ? 0 : 12);
	}
	recv_one("a datagram", r, 256);
	wait_child("datagram");
	close(r);
	unlink(a.sun_path);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *dir = argc > 1 ? argv[1] : "/tmp";
	parent = getpid();
	over_socketpair();
	without_passcred();
	over_a_connection(dir);
	datagrams(dir);
	printf("done\n");
	return 0;
}
