/*
 * mmsg: the sendmmsg and recvmmsg system calls over UDP on loopback, as
 * Linux gives them. sendmmsg: three
 * datagrams in one call (each entry's msg_len set), vlen 0, an entry
 * with a bad iovec after a good one (the count sent so far), bad
 * pointers and fds, a full non-blocking socket buffer (the count that
 * fit), and what the receiver got, in order. recvmmsg with
 * MSG_WAITFORONE and MSG_DONTWAIT: the datagrams queued, each entry's
 * msg_len, a timeout written back, EAGAIN, EINVAL, EFAULT.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"

/* The raw call: musl's wrapper sends entry by entry with sendmsg. */
static int mm(int fd, struct mmsghdr *v, unsigned n, int flags)
{
	return syscall(SYS_sendmmsg, fd, v, n, flags);
}

static int rmm(int fd, struct mmsghdr *v, unsigned n, int flags, struct timespec *t)
{
	return syscall(SYS_recvmmsg, fd, v, n, flags, t);
}

static void say(const char *what, int rc)
{
	if (rc < 0)
		printf("%s: %s\n", what, errno_name(errno));
	else
		printf("%s: %d\n", what, rc);
}

/* recvmmsg of up to 5 datagrams into `bufs`; prints what came. */
static void receive(int r, int flags, struct timespec *t, const char *tag)
{
	static char bufs[5][64];
	struct iovec iov[5];
	struct mmsghdr v[5];
	memset(v, 0, sizeof v);
	for (int i = 0; i < 5; i++) {
		iov[i].iov_base = bufs[i];
		iov[i].iov_len = sizeof bufs[i];
		v[i].msg_hdr.msg_iov = &iov[i];
		v[i].msg_hdr.msg_iovlen = 1;
	}
	int n = rmm(r, v, 5, flags, t);
	say(tag, n);
	for (int i = 0; i < n; i++)
		printf("  %u bytes: %.*s\n", v[i].msg_len, (int)v[i].msg_len, bufs[i]);
}

static int udp(struct sockaddr_in *bound)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	if (bound) {
		memset(bound, 0, sizeof *bound);
		bound->sin_family = AF_INET;
		bound->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		bind(s, (struct sockaddr *)bound, sizeof *bound);
		socklen_t len = sizeof *bound;
		getsockname(s, (struct sockaddr *)bound, &len);
	}
	return s;
}

/* Reads what is queued on `r` (non-blocking) and prints it. */
static void drain(int r, const char *tag)
{
	char buf[256];
	int n, count = 0;
	while ((n = recv(r, buf, sizeof buf, MSG_DONTWAIT)) >= 0) {
		printf("%s got %d bytes: %.*s\n", tag, n, n, buf);
		count++;
	}
	printf("%s: %d datagrams, then %s\n", tag, count, errno_name(errno));
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	struct sockaddr_in to;
	int r = udp(&to), s = udp(NULL);
	connect(s, (struct sockaddr *)&to, sizeof to);

	char *texts[3] = { "one", "second", "third one" };
	struct iovec iov[3];
	struct mmsghdr m[3];
	memset(m, 0, sizeof m);
	for (int i = 0; i < 3; i++) {
		iov[i].iov_base = texts[i];
		iov[i].iov_len = strlen(texts[i]);
		m[i].msg_hdr.msg_iov = &iov[i];
		m[i].msg_hdr.msg_iovlen = 1;
		m[i].msg_len = 12345;
	}
	say("sendmmsg 3", mm(s, m, 3, 0));
	printf("msg_len: %u %u %u\n", m[0].msg_len, m[1].msg_len, m[2].msg_len);
	drain(r, "three");

	say("sendmmsg vlen 0", mm(s, m, 0, 0));

	/* The second entry's iovec is a bad pointer: the first goes. */
	struct mmsghdr bad[2];
	memcpy(bad, m, sizeof bad);
	bad[1].msg_hdr.msg_iov = (struct iovec *)8;
	bad[0].msg_len = bad[1].msg_len = 7;
	say("sendmmsg good then bad", mm(s, bad, 2, 0));
	printf("msg_len: %u %u\n", bad[0].msg_len, bad[1].msg_len);
	drain(r, "good then bad");

	/* The first bad: the error. */
	say("sendmmsg bad first", mm(s, bad + 1, 1, 0));
	say("sendmmsg bad vector", mm(s, (struct mmsghdr *)8, 2, 0));
	say("sendmmsg bad fd", mm(99, m, 1, 0));
	say("sendmmsg on a pipe", mm(0, m, 1, 0) < 0 && errno == ENOTSOCK ? 0 : -1);

	/* Per-entry destinations on an unconnected socket. */
	int u = udp(NULL);
	struct mmsghdr d[2];
	memcpy(d, m, sizeof d);
	for (int i = 0; i < 2; i++) {
		d[i].msg_hdr.msg_name = &to;
		d[i].msg_hdr.msg_namelen = sizeof to;
	}
	say("sendmmsg with addresses", mm(u, d, 2, 0));
	drain(r, "addressed");

	/* recvmmsg. */
	say("sendmmsg 3 again", mm(s, m, 3, 0));
	receive(r, MSG_WAITFORONE, NULL, "recvmmsg MSG_WAITFORONE");
	receive(r, MSG_DONTWAIT, NULL, "recvmmsg empty, MSG_DONTWAIT");
	say("sendmmsg 2", mm(s, m, 2, 0));
	struct timespec t = { 5, 0 };
	receive(r, MSG_DONTWAIT, &t, "recvmmsg with a 5 s timeout");
	printf("timeout written back, 4 s < left <= 5 s: %s\n",
	       (t.tv_sec == 4 || (t.tv_sec == 5 && t.tv_nsec == 0)) ? "yes" : "no");
	struct timespec badt = { 0, 1000000000 };
	receive(r, MSG_DONTWAIT, &badt, "recvmmsg, tv_nsec 1e9");
	say("recvmmsg bad vector", rmm(r, (struct mmsghdr *)8, 2, 0, NULL));
	say("recvmmsg bad fd", rmm(99, NULL, 1, 0, NULL));

	/* A small send buffer, non-blocking: some go, the call says how many. */
	int small = 4096;
	setsockopt(s, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
	int rsmall = 4096;
	setsockopt(r, SOL_SOCKET, SO_RCVBUF, &rsmall, sizeof rsmall);
	static char big[1400];
	memset(big, 'x', sizeof big);
	struct iovec biov = { big, sizeof big };
	struct mmsghdr many[200];
	memset(many, 0, sizeof many);
	for (int i = 0; i < 200; i++) {
		many[i].msg_hdr.msg_iov = &biov;
		many[i].msg_hdr.msg_iovlen = 1;
	}
	int n = mm(s, many, 200, MSG_DONTWAIT);
	printf("sendmmsg 200 x 1400 bytes, non-blocking: %s\n", n >= 1 && n <= 200 ? "some sent" : "none");
	close(r);
	close(s);
	close(u);
	puts("done");
	return 0;
}
