/*
 * Ancillary data other than fds and credentials, natively and in the
 * sandbox (docs/ancillary-data.md): IPv6 UDP over ::1 with
 * IPV6_RECVHOPLIMIT/IPV6_RECVTCLASS, sending IPV6_HOPLIMIT/IPV6_TCLASS;
 * IPv4 UDP over 127.0.0.1 with IP_PKTINFO/IP_RECVTTL/IP_RECVTOS, sending
 * IP_TTL/IP_TOS/IP_PKTINFO; SO_TIMESTAMP and SO_TIMESTAMPNS (present and
 * near the clock, never the value); the truncation rules of a control
 * buffer that is exact, one message short, cut inside a message, shorter
 * than a header, empty or absent (msg_controllen, MSG_CTRUNC); malformed
 * outgoing control data (EINVAL); an IP message on a Unix socket
 * (ignored); SCM_CREDENTIALS and SCM_RIGHTS cut by short rooms. Prints no address but loopback's, no port, no time.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "checks.h"

static const char *name(int level, int type)
{
	if (level == IPPROTO_IPV6 && type == IPV6_HOPLIMIT)
		return "IPV6_HOPLIMIT";
	if (level == IPPROTO_IPV6 && type == IPV6_TCLASS)
		return "IPV6_TCLASS";
	if (level == IPPROTO_IPV6 && type == IPV6_PKTINFO)
		return "IPV6_PKTINFO";
	if (level == IPPROTO_IP && type == IP_TTL)
		return "IP_TTL";
	if (level == IPPROTO_IP && type == IP_TOS)
		return "IP_TOS";
	if (level == IPPROTO_IP && type == IP_PKTINFO)
		return "IP_PKTINFO";
	if (level == SOL_SOCKET && type == SCM_TIMESTAMP)
		return "SCM_TIMESTAMP";
	if (level == SOL_SOCKET && type == SCM_TIMESTAMPNS)
		return "SCM_TIMESTAMPNS";
	return "other";
}

/* Seconds between a received timestamp and now: 0 when within 5 s. */
static int far_from_now(time_t sec)
{
	struct timeval now;
	gettimeofday(&now, NULL);
	long d = (long)(now.tv_sec - sec);
	return d < -5 || d > 5;
}

/* Prints the messages in the first `len` bytes of `buf` (walked by hand,
 * so a message cut at the end shows what is left of it). */
static void dump(const unsigned char *buf, size_t len)
{
	size_t off = 0;
	while (off + sizeof(struct cmsghdr) <= len) {
		struct cmsghdr h;
		memcpy(&h, buf + off, sizeof h);
		if (h.cmsg_len < sizeof h) {
			printf("  bad cmsg_len %zu\n", (size_t)h.cmsg_len);
			return;
		}
		size_t end = h.cmsg_len < len - off ? h.cmsg_len : len - off;
		size_t have = end - sizeof h;
		const unsigned char *d = buf + off + sizeof h;
		printf("  %s len %zu data %zu:", name(h.cmsg_level, h.cmsg_type), (size_t)h.cmsg_len,
		       have);
		if (h.cmsg_level == SOL_SOCKET && h.cmsg_type == SCM_TIMESTAMP &&
		    have >= sizeof(struct timeval)) {
			struct timeval tv;
			memcpy(&tv, d, sizeof tv);
			printf(" near now %s", far_from_now(tv.tv_sec) ? "no" : "yes");
		} else if (h.cmsg_level == SOL_SOCKET && h.cmsg_type == SCM_TIMESTAMPNS &&
			   have >= sizeof(struct timespec)) {
			struct timespec ts;
			memcpy(&ts, d, sizeof ts);
			printf(" near now %s", far_from_now(ts.tv_sec) ? "no" : "yes");
		} else if (h.cmsg_level == IPPROTO_IP && h.cmsg_type == IP_PKTINFO &&
			   have >= sizeof(struct in_pktinfo)) {
			struct in_pktinfo pi;
			char a[INET_ADDRSTRLEN], s[INET_ADDRSTRLEN];
			memcpy(&pi, d, sizeof pi);
			inet_ntop(AF_INET, &pi.ipi_addr, a, sizeof a);
			inet_ntop(AF_INET, &pi.ipi_spec_dst, s, sizeof s);
			printf(" ifindex %s addr %s spec_dst %s",
			       pi.ipi_ifindex > 0 ? "set" : "none", a, s);
		} else if (h.cmsg_level == IPPROTO_IPV6 && h.cmsg_type == IPV6_PKTINFO &&
			   have >= sizeof(struct in6_pktinfo)) {
			struct in6_pktinfo pi;
			char a[INET6_ADDRSTRLEN];
			memcpy(&pi, d, sizeof pi);
			inet_ntop(AF_INET6, &pi.ipi6_addr, a, sizeof a);
			printf(" ifindex %s addr %s", pi.ipi6_ifindex > 0 ? "set" : "none", a);
		} else {
			for (size_t i = 0; i < have && i < 16; i++)
				printf(" %02x", d[i]);
		}
		printf("\n");
		off += CMSG_ALIGN(h.cmsg_len);
	}
}

/* Receives one datagram with `room` bytes of control buffer (NULL when
 * `room` < 0) and prints what came. */
static void recv_show(const char *what, int fd, int room)
{
	char data[64];
	struct iovec iov = { data, sizeof data };
	union {
		unsigned char buf[512];
		struct cmsghdr align;
	} u;
	memset(&u, 0xee, sizeof u);
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (room >= 0) {
		msg.msg_control = u.buf;
		msg.msg_controllen = (size_t)room;
	} else {
		msg.msg_controllen = 99; /* ignored with no buffer */
	}
	ssize_t n = recvmsg(fd, &msg, 0);
	if (n < 0) {
		printf("%s: recvmsg %s\n", what, errno_name(errno));
		return;
	}
	printf("%s: %zd bytes controllen %zu%s%s\n", what, n, (size_t)msg.msg_controllen,
	       msg.msg_flags & MSG_CTRUNC ? " CTRUNC" : "", msg.msg_flags & MSG_TRUNC ? " TRUNC" : "");
	if (room > 0) {
		dump(u.buf, msg.msg_controllen);
		/* Bytes past msg_controllen are left alone. */
		size_t past = msg.msg_controllen;
		if (past < (size_t)room)
			printf("  untouched after: %s\n", u.buf[past] == 0xee ? "yes" : "no");
	}
}

/* Appends one message to `buf` at `*used`. */
static void put(unsigned char *buf, size_t *used, int level, int type, const void *data,
		size_t len)
{
	struct cmsghdr h = { .cmsg_len = CMSG_LEN(len), .cmsg_level = level, .cmsg_type = type };
	memcpy(buf + *used, &h, sizeof h);
	memcpy(buf + *used + sizeof h, data, len);
	*used += CMSG_SPACE(len);
}

/* Sends "payload" to `to` with `len` bytes of control data `ctl`. */
static int send_ctl(int fd, const struct sockaddr *to, socklen_t tolen, const void *ctl,
		    size_t len)
{
	char data[] = "payload";
	struct iovec iov = { data, sizeof data - 1 };
	struct msghdr msg = { .msg_name = (void *)to, .msg_namelen = tolen, .msg_iov = &iov,
			      .msg_iovlen = 1, .msg_control = (void *)ctl, .msg_controllen = len };
	ssize_t n = sendmsg(fd, &msg, 0);
	return n < 0 ? -errno : (int)n;
}

static void say_send(const char *what, int rc)
{
	if (rc < 0)
		printf("%s: sendmsg %s\n", what, errno_name(-rc));
	else
		printf("%s: sent %d\n", what, rc);
}

static void on(int fd, int level, int opt)
{
	int one = 1;
	CHECK(setsockopt(fd, level, opt, &one, sizeof one) == 0);
}

static void ipv6(void)
{
	int r = socket(AF_INET6, SOCK_DGRAM, 0);
	int s = socket(AF_INET6, SOCK_DGRAM, 0);
	CHECK(r >= 0 && s >= 0);
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	CHECK(bind(r, (struct sockaddr *)&a, sizeof a) == 0);
	socklen_t alen = sizeof a;
	CHECK(getsockname(r, (struct sockaddr *)&a, &alen) == 0);
	const struct sockaddr *to = (const struct sockaddr *)&a;
	on(r, IPPROTO_IPV6, IPV6_RECVHOPLIMIT);
	on(r, IPPROTO_IPV6, IPV6_RECVTCLASS);

	union {
		unsigned char buf[256];
		struct cmsghdr align;
	} c;
	size_t used = 0;
	int hop = 7, tclass = 0x20;
	put(c.buf, &used, IPPROTO_IPV6, IPV6_HOPLIMIT, &hop, sizeof hop);
	put(c.buf, &used, IPPROTO_IPV6, IPV6_TCLASS, &tclass, sizeof tclass);

	int exact = (int)(2 * CMSG_SPACE(sizeof(int)));
	int rooms[] = { exact, 512, (int)CMSG_SPACE(sizeof(int)), (int)CMSG_LEN(sizeof(int)),
			(int)CMSG_SPACE(sizeof(int)) + (int)CMSG_LEN(2), (int)CMSG_LEN(2),
			(int)sizeof(struct cmsghdr) - 1, 0, -1 };
	for (size_t i = 0; i < sizeof rooms / sizeof rooms[0]; i++) {
		say_send("v6 hoplimit 7 tclass 0x20", send_ctl(s, to, alen, c.buf, used));
		char what[64];
		snprintf(what, sizeof what, "v6 room %d", rooms[i]);
		recv_show(what, r, rooms[i]);
	}
	/* No control data sent: the socket's defaults arrive. */
	say_send("v6 plain", send_ctl(s, to, alen, NULL, 0));
	recv_show("v6 plain room 512", r, 512);
	/* The last message unpadded, and a tail shorter than a header. */
	say_send("v6 unpadded", send_ctl(s, to, alen, c.buf, CMSG_LEN(sizeof(int))));
	recv_show("v6 unpadded", r, 512);
	say_send("v6 short tail", send_ctl(s, to, alen, c.buf, CMSG_SPACE(sizeof(int)) + 10));
	recv_show("v6 short tail", r, 512);

	/* Malformed or refused control data: nothing is sent. */
	union {
		unsigned char buf[64];
		struct cmsghdr align;
	} bad;
	size_t bu = 0;
	put(bad.buf, &bu, IPPROTO_IPV6, IPV6_HOPLIMIT, &hop, sizeof hop);
	struct cmsghdr *h = (struct cmsghdr *)bad.buf;
	h->cmsg_len = 8;
	say_send("v6 cmsg_len 8", send_ctl(s, to, alen, bad.buf, bu));
	h->cmsg_len = 200;
	say_send("v6 cmsg_len past the buffer", send_ctl(s, to, alen, bad.buf, bu));
	h->cmsg_len = CMSG_LEN(sizeof(int));
	int big = 300;
	memcpy(CMSG_DATA(h), &big, sizeof big);
	say_send("v6 hoplimit 300", send_ctl(s, to, alen, bad.buf, bu));
	h->cmsg_type = 9999;
	say_send("v6 unknown type", send_ctl(s, to, alen, bad.buf, bu));
	h->cmsg_level = SOL_SOCKET;
	say_send("SOL_SOCKET unknown type", send_ctl(s, to, alen, bad.buf, bu));

	/* Timestamps. */
	on(r, SOL_SOCKET, SO_TIMESTAMP);
	say_send("v6 plain", send_ctl(s, to, alen, NULL, 0));
	recv_show("v6 SO_TIMESTAMP", r, 512);
	int off = 0;
	CHECK(setsockopt(r, SOL_SOCKET, SO_TIMESTAMP, &off, sizeof off) == 0);
	on(r, SOL_SOCKET, SO_TIMESTAMPNS);
	say_send("v6 plain", send_ctl(s, to, alen, NULL, 0));
	recv_show("v6 SO_TIMESTAMPNS", r, 512);
	close(r);
	close(s);
}

static void ipv4(void)
{
	int r = socket(AF_INET, SOCK_DGRAM, 0);
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(r >= 0 && s >= 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	CHECK(bind(r, (struct sockaddr *)&a, sizeof a) == 0);
	socklen_t alen = sizeof a;
	CHECK(getsockname(r, (struct sockaddr *)&a, &alen) == 0);
	const struct sockaddr *to = (const struct sockaddr *)&a;
	on(r, IPPROTO_IP, IP_PKTINFO);
	on(r, IPPROTO_IP, IP_RECVTTL);
	on(r, IPPROTO_IP, IP_RECVTOS);

	union {
		unsigned char buf[256];
		struct cmsghdr align;
	} c;
	size_t used = 0;
	int ttl = 9, tos = 0x10;
	put(c.buf, &used, IPPROTO_IP, IP_TTL, &ttl, sizeof ttl);
	put(c.buf, &used, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
	say_send("v4 ttl 9 tos 0x10", send_ctl(s, to, alen, c.buf, used));
	recv_show("v4 room 512", r, 512);
	say_send("v4 ttl 9 tos 0x10", send_ctl(s, to, alen, c.buf, used));
	recv_show("v4 room 40", r, 40);
	say_send("v4 ttl 9 tos 0x10", send_ctl(s, to, alen, c.buf, used));
	recv_show("v4 room 0", r, 0);

	/* The source address chosen with IP_PKTINFO. */
	struct in_pktinfo pi = { 0 };
	pi.ipi_spec_dst.s_addr = htonl(INADDR_LOOPBACK);
	used = 0;
	put(c.buf, &used, IPPROTO_IP, IP_PKTINFO, &pi, sizeof pi);
	say_send("v4 pktinfo 127.0.0.1", send_ctl(s, to, alen, c.buf, used));
	recv_show("v4 pktinfo", r, 512);
	int bad_ttl = 0;
	used = 0;
	put(c.buf, &used, IPPROTO_IP, IP_TTL, &bad_ttl, sizeof bad_ttl);
	say_send("v4 ttl 0", send_ctl(s, to, alen, c.buf, used));
	close(r);
	close(s);
}

/* Receives one message from `fd` with `room` bytes of control buffer
 * and prints its credentials and fds (closing them). */
static void recv_creds_fds(int fd, int room)
{
	char data[16];
	struct iovec iov = { data, sizeof data };
	union {
		unsigned char buf[128];
		struct cmsghdr align;
	} u;
	memset(&u, 0xee, sizeof u);
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			      .msg_controllen = (size_t)room };
	ssize_t n = recvmsg(fd, &msg, 0);
	if (n < 0) {
		printf("unix room %d: recvmsg %s\n", room, errno_name(errno));
		return;
	}
	printf("unix room %d: %zd bytes controllen %zu%s\n", room, n,
	       (size_t)msg.msg_controllen, msg.msg_flags & MSG_CTRUNC ? " CTRUNC" : "");
	size_t off = 0;
	while (off + sizeof(struct cmsghdr) <= msg.msg_controllen) {
		struct cmsghdr h;
		memcpy(&h, u.buf + off, sizeof h);
		if (h.cmsg_len < sizeof h)
			break;
		size_t end = h.cmsg_len < msg.msg_controllen - off ? h.cmsg_len
								  : msg.msg_controllen - off;
		size_t have = end - sizeof h;
		const unsigned char *d = u.buf + off + sizeof h;
		if (h.cmsg_level == SOL_SOCKET && h.cmsg_type == SCM_CREDENTIALS) {
			pid_t pid = -1;
			if (have >= sizeof pid)
				memcpy(&pid, d, sizeof pid);
			printf("  SCM_CREDENTIALS len %zu data %zu pid %s\n", (size_t)h.cmsg_len,
			       have, have < sizeof pid ? "cut" : pid == getpid() ? "self" : "other");
		} else if (h.cmsg_level == SOL_SOCKET && h.cmsg_type == SCM_RIGHTS) {
			printf("  SCM_RIGHTS len %zu fds", (size_t)h.cmsg_len);
			for (size_t k = 0; k + sizeof(int) <= have; k += sizeof(int)) {
				int fd;
				memcpy(&fd, d + k, sizeof fd);
				printf(" %s", fcntl(fd, F_GETFD) >= 0 ? "valid" : "bad");
				close(fd);
			}
			printf("\n");
		} else {
			printf("  %s len %zu\n", name(h.cmsg_level, h.cmsg_type), (size_t)h.cmsg_len);
		}
		off += CMSG_ALIGN(h.cmsg_len);
	}
}

/* Credentials and two fds through control rooms of every size: the
 * credentials cut inside, the fds cut to what fits (MSG_CTRUNC). */
static void unix_truncation(void)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0);
	on(sv[1], SOL_SOCKET, SO_PASSCRED);
	int pass[2] = { open("/", O_RDONLY), open("/", O_RDONLY) };
	CHECK(pass[0] >= 0 && pass[1] >= 0);
	union {
		unsigned char buf[64];
		struct cmsghdr align;
	} c;
	size_t used = 0;
	put(c.buf, &used, SOL_SOCKET, SCM_RIGHTS, pass, sizeof pass);
	int space = (int)(CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof pass));
	int rooms[] = { space, space - 1, (int)CMSG_SPACE(sizeof(struct ucred)) + (int)CMSG_LEN(4),
			(int)CMSG_SPACE(sizeof(struct ucred)) + 16,
			(int)CMSG_SPACE(sizeof(struct ucred)), 20, 8, 0 };
	for (size_t i = 0; i < sizeof rooms / sizeof rooms[0]; i++) {
		say_send("unix 2 fds", send_ctl(sv[0], NULL, 0, c.buf, used));
		recv_creds_fds(sv[1], rooms[i]);
	}
	/* Room for one more fd only: the message ends at the fd installed. */
	struct rlimit old, one;
	CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0);
	int top = fcntl(0, F_DUPFD, 0);
	CHECK(top >= 0);
	close(top);
	one = old;
	one.rlim_cur = (rlim_t)top + 1;
	CHECK(setrlimit(RLIMIT_NOFILE, &one) == 0);
	say_send("unix 2 fds, one fd free", send_ctl(sv[0], NULL, 0, c.buf, used));
	recv_creds_fds(sv[1], space);
	CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0);
	close(pass[0]);
	close(pass[1]);
	close(sv[0]);
	close(sv[1]);
}

/* Empty datagrams are datagrams: alone, with an fd, with a hop limit. */
static void empty_datagrams(void)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0);
	char none[1];
	struct iovec iov = { none, 0 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	printf("unix empty: sendmsg %zd\n", sendmsg(sv[0], &msg, 0));
	recv_creds_fds(sv[1], 64);
	int fd = open("/", O_RDONLY);
	CHECK(fd >= 0);
	union {
		unsigned char buf[64];
		struct cmsghdr align;
	} c;
	size_t used = 0;
	put(c.buf, &used, SOL_SOCKET, SCM_RIGHTS, &fd, sizeof fd);
	msg.msg_control = c.buf;
	msg.msg_controllen = used;
	printf("unix empty with an fd: sendmsg %zd\n", sendmsg(sv[0], &msg, 0));
	recv_creds_fds(sv[1], 64);
	close(fd);
	close(sv[0]);
	close(sv[1]);

	int r = socket(AF_INET6, SOCK_DGRAM, 0);
	int s = socket(AF_INET6, SOCK_DGRAM, 0);
	CHECK(r >= 0 && s >= 0);
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	CHECK(bind(r, (struct sockaddr *)&a, sizeof a) == 0);
	socklen_t alen = sizeof a;
	CHECK(getsockname(r, (struct sockaddr *)&a, &alen) == 0);
	on(r, IPPROTO_IPV6, IPV6_RECVHOPLIMIT);
	int hop = 3;
	used = 0;
	put(c.buf, &used, IPPROTO_IPV6, IPV6_HOPLIMIT, &hop, sizeof hop);
	msg.msg_name = &a;
	msg.msg_namelen = alen;
	msg.msg_control = c.buf;
	msg.msg_controllen = used;
	printf("v6 empty with hoplimit 3: sendmsg %zd\n", sendmsg(s, &msg, 0));
	recv_show("v6 empty", r, 64);
	close(r);
	close(s);
}

/* On a Unix socket Linux ignores what is not SOL_SOCKET. */
static void unix_ignores_ip(void)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0);
	union {
		unsigned char buf[64];
		struct cmsghdr align;
	} c;
	size_t used = 0;
	int ttl = 9;
	put(c.buf, &used, IPPROTO_IP, IP_TTL, &ttl, sizeof ttl);
	say_send("unix with IP_TTL", send_ctl(sv[0], NULL, 0, c.buf, used));
	recv_show("unix", sv[1], 64);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	ipv6();
	ipv4();
	unix_ignores_ip();
	unix_truncation();
	empty_datagrams();
	printf("done\n");
	return 0;
}
