/*
 * netlink: the sandbox's interfaces as rtnetlink and the interface ioctls
 * show them, with output that is the same natively and in the sandbox:
 *   - getifaddrs() (musl: RTM_GETLINK and RTM_GETADDR dumps): lo's
 *     entries in full (families, addresses, netmasks, flags); every link
 *     has an index that if_nametoindex (SIOCGIFINDEX) and if_indextoname
 *     agree on; if_nameindex lists lo first;
 *   - a raw NETLINK_ROUTE socket: getsockname before and after bind,
 *     a dump's message types and its NLMSG_DONE, MSG_PEEK|MSG_TRUNC,
 *     the sender address, and the answers to bad requests (unknown type:
 *     EOPNOTSUPP, short RTM_GETLINK: EINVAL, unknown index: ENODEV,
 *     short header: nothing), sendto another port: ECONNREFUSED, other
 *     netlink protocols and socket types refused;
 *   - SIOCGIFFLAGS/MTU/ADDR/NETMASK of lo, SIOCGIFCONF lists 127.0.0.1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "checks.h"

/* What <linux/netlink.h> and <linux/rtnetlink.h> define (musl-gcc has no
 * kernel headers). */
#define NETLINK_ROUTE 0
struct sockaddr_nl {
	unsigned short nl_family, nl_pad;
	unsigned nl_pid, nl_groups;
};
struct nlmsghdr {
	unsigned nlmsg_len;
	unsigned short nlmsg_type, nlmsg_flags;
	unsigned nlmsg_seq, nlmsg_pid;
};
struct nlmsgerr {
	int error;
	struct nlmsghdr msg;
};
struct ifinfomsg {
	unsigned char ifi_family, pad;
	unsigned short ifi_type;
	int ifi_index;
	unsigned ifi_flags, ifi_change;
};
struct ifaddrmsg {
	unsigned char ifa_family, ifa_prefixlen, ifa_flags, ifa_scope;
	unsigned ifa_index;
};
struct rtattr {
	unsigned short rta_len, rta_type;
};
#define NLMSG_NOOP 1
#define NLMSG_ERROR 2
#define NLMSG_DONE 3
#define NLM_F_REQUEST 1
#define NLM_F_MULTI 2
#define NLM_F_ACK 4
#define NLM_F_DUMP 0x300
#define RTM_NEWLINK 16
#define RTM_GETLINK 18
#define RTM_GETADDR 22
#define IFA_LOCAL 2
#define RT_SCOPE_HOST 254
#define NLMSG_ALIGN(len) (((len) + 3) & ~3)
#define NLMSG_HDRLEN ((int)NLMSG_ALIGN(sizeof(struct nlmsghdr)))
#define NLMSG_LENGTH(len) ((len) + NLMSG_HDRLEN)
#define NLMSG_DATA(nlh) ((void *)(((char *)(nlh)) + NLMSG_HDRLEN))
#define NLMSG_OK(nlh, len) ((len) >= (int)sizeof(struct nlmsghdr) && \
	(nlh)->nlmsg_len >= sizeof(struct nlmsghdr) && (nlh)->nlmsg_len <= (unsigned)(len))
#define NLMSG_NEXT(nlh, len) ((len) -= NLMSG_ALIGN((nlh)->nlmsg_len), \
	(struct nlmsghdr *)(((char *)(nlh)) + NLMSG_ALIGN((nlh)->nlmsg_len)))
#define RTA_ALIGN(len) (((len) + 3) & ~3)
#define RTA_OK(rta, len) ((len) >= (int)sizeof(struct rtattr) && \
	(rta)->rta_len >= sizeof(struct rtattr) && (rta)->rta_len <= (unsigned)(len))
#define RTA_NEXT(rta, attrlen) ((attrlen) -= RTA_ALIGN((rta)->rta_len), \
	(struct rtattr *)(((char *)(rta)) + RTA_ALIGN((rta)->rta_len)))
#define RTA_DATA(rta) ((void *)(((char *)(rta)) + RTA_ALIGN(sizeof(struct rtattr))))
#define IFA_RTA(r) ((struct rtattr *)(((char *)(r)) + NLMSG_ALIGN(sizeof(struct ifaddrmsg))))
#define IFA_PAYLOAD(n) ((int)((n)->nlmsg_len - NLMSG_LENGTH(sizeof(struct ifaddrmsg))))

/* errno_name, knowing ENODEV too. */
static const char *ename(int e)
{
	static char b[32];
	if (e == ENODEV)
		return "ENODEV";
	if (errno_name(e))
		return errno_name(e);
	snprintf(b, sizeof b, "errno %d", e);
	return b;
}

static const char *fam(int f)
{
	return f == AF_INET ? "inet" : f == AF_INET6 ? "inet6" : f == AF_PACKET ? "packet" : "other";
}

static void addr_text(struct sockaddr *sa, char *out, size_t n)
{
	if (!sa) {
		snprintf(out, n, "-");
	} else if (sa->sa_family == AF_INET) {
		inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, out, n);
	} else if (sa->sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)sa)->sin6_addr, out, n);
	} else {
		snprintf(out, n, "family %d", sa->sa_family);
	}
}

static void ifaddrs_view(void)
{
	struct ifaddrs *list, *i;
	rc_line("getifaddrs", getifaddrs(&list));
	int links = 0, agree = 1;
	for (i = list; i; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_PACKET) {
			links++;
			unsigned idx = if_nametoindex(i->ifa_name);
			char name[IF_NAMESIZE];
			if (idx == 0 || !if_indextoname(idx, name) || strcmp(name, i->ifa_name) != 0)
				agree = 0;
		}
		if (strcmp(i->ifa_name, "lo") != 0)
			continue;
		char a[64], m[64];
		addr_text(i->ifa_addr, a, sizeof a);
		addr_text(i->ifa_netmask, m, sizeof m);
		if (i->ifa_addr->sa_family == AF_PACKET)
			line("lo %s flags 0x%x", fam(i->ifa_addr->sa_family), i->ifa_flags);
		else
			line("lo %s %s netmask %s flags 0x%x", fam(i->ifa_addr->sa_family), a, m,
			     i->ifa_flags);
	}
	freeifaddrs(list);
	expect_line("getifaddrs lists links", links > 0, 1);
	expect_line("if_nametoindex and if_indextoname agree on every link", agree, 1);
	struct if_nameindex *ni = if_nameindex();
	expect_line("if_nameindex", ni != NULL, 1);
	if (ni) {
		int n = 0;
		while (ni[n].if_index)
			n++;
		line("if_nameindex first: %u %s", ni[0].if_index, ni[0].if_name);
		expect_line("if_nameindex has as many links as getifaddrs", n == links, 1);
		if_freenameindex(ni);
	}
	eq_line("if_nametoindex(lo)", if_nametoindex("lo"), 1);
	errno = 0;
	eq_line("if_nametoindex(nosuchif0)", if_nametoindex("nosuchif0"), 0);
}

struct req {
	struct nlmsghdr h;
	unsigned char body[16];
};

/* Sends a request of `len` bytes (header included) with `type`/`flags`. */
static long send_req(int fd, unsigned len, int type, int flags, const void *body, size_t blen)
{
	struct req r;
	memset(&r, 0, sizeof r);
	r.h.nlmsg_len = len;
	r.h.nlmsg_type = type;
	r.h.nlmsg_flags = flags;
	r.h.nlmsg_seq = 42;
	if (body)
		memcpy(r.body, body, blen);
	return send(fd, &r, len < sizeof r ? len : sizeof r, 0);
}

/* The error code of the one NLMSG_ERROR answer, or a description. */
static void answer_line(const char *what, int fd)
{
	char buf[8192];
	long n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
	if (n < 0) {
		line("%s: no answer (%s)", what, errno_name(errno));
		return;
	}
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	if (h->nlmsg_type == NLMSG_ERROR) {
		struct nlmsgerr *e = NLMSG_DATA(h);
		line("%s: NLMSG_ERROR %s, seq %u, echoes the request: %s", what,
		     e->error ? ename(-e->error) : "0 (ack)", h->nlmsg_seq,
		     e->msg.nlmsg_seq == 42 ? "yes" : "no");
	} else {
		line("%s: message type %d", what, h->nlmsg_type);
	}
}

static void raw_socket(void)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	ok_line("socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE)", fd);
	struct sockaddr_nl sa;
	socklen_t sl = sizeof sa;
	memset(&sa, 0xff, sizeof sa);
	rc_line("getsockname before bind", getsockname(fd, (struct sockaddr *)&sa, &sl));
	line("  family %d, pid %u, len %u", sa.nl_family, sa.nl_pid, sl);
	memset(&sa, 0, sizeof sa);
	sa.nl_family = AF_NETLINK;
	rc_line("bind(pid 0)", bind(fd, (struct sockaddr *)&sa, sizeof sa));
	sl = sizeof sa;
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	expect_line("bound pid is the process id", sa.nl_pid == (unsigned)getpid(), 1);
	sa.nl_pid = 12345;
	err_line("bind again to another pid", bind(fd, (struct sockaddr *)&sa, sizeof sa), EINVAL);

	/* RTM_GETLINK dump, read with MSG_PEEK|MSG_TRUNC first. */
	unsigned char gen = AF_UNSPEC;
	rc_line("send RTM_GETLINK dump", send_req(fd, NLMSG_LENGTH(1), RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, &gen, 1));
	char small[16];
	long peek = recv(fd, small, sizeof small, MSG_PEEK | MSG_TRUNC);
	expect_line("MSG_PEEK|MSG_TRUNC gives the datagram's full length", peek > 16, 1);
	int links = 0, done = 0, other = 0, multi = 1, seq = 1;
	static char buf[65536];
	while (!done) {
		struct sockaddr_nl from;
		struct iovec iov = { buf, sizeof buf };
		struct msghdr mh;
		memset(&mh, 0, sizeof mh);
		mh.msg_name = &from;
		mh.msg_namelen = sizeof from;
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		int n = recvmsg(fd, &mh, MSG_DONTWAIT);
		if (n < 0) {
			line("recvmsg: %s", errno_name(errno));
			break;
		}
		if (mh.msg_namelen != sizeof from || from.nl_pid != 0 || from.nl_family != AF_NETLINK)
			line("sender is not the kernel FAIL");
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != 42 || h->nlmsg_pid != (unsigned)getpid())
				seq = 0;
			if (!(h->nlmsg_flags & NLM_F_MULTI))
				multi = 0;
			if (h->nlmsg_type == RTM_NEWLINK)
				links++;
			else if (h->nlmsg_type == NLMSG_DONE)
				done = 1;
			else
				other++;
		}
	}
	expect_line("dump: RTM_NEWLINK messages then NLMSG_DONE", links > 0 && done && !other, 1);
	expect_line("dump: every message NLM_F_MULTI, our seq and pid", multi && seq, 1);
	err_line("recv with nothing queued (MSG_DONTWAIT)", recv(fd, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);

	/* RTM_GETADDR dump for AF_INET only: 127.0.0.1/8 on index 1. */
	gen = AF_INET;
	send_req(fd, NLMSG_LENGTH(1), RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, &gen, 1);
	int v4 = 1, lo = 0;
	done = 0;
	while (!done) {
		int n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n < 0)
			break;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE) {
				done = 1;
				continue;
			}
			struct ifaddrmsg *ia = NLMSG_DATA(h);
			if (ia->ifa_family != AF_INET)
				v4 = 0;
			int alen = IFA_PAYLOAD(h);
			for (struct rtattr *rt = IFA_RTA(ia); RTA_OK(rt, alen); rt = RTA_NEXT(rt, alen)) {
				unsigned char *ip = RTA_DATA(rt);
				if (rt->rta_type == IFA_LOCAL && ip[0] == 127 && ip[3] == 1 && ia->ifa_index == 1 &&
				    ia->ifa_prefixlen == 8 && ia->ifa_scope == RT_SCOPE_HOST)
					lo = 1;
			}
		}
	}
	expect_line("RTM_GETADDR AF_INET dump: only IPv4, ends with NLMSG_DONE", v4 && done, 1);
	expect_line("lo has 127.0.0.1/8 scope host", lo, 1);

	/* One link by index. */
	struct ifinfomsg ifi;
	memset(&ifi, 0, sizeof ifi);
	ifi.ifi_index = 1;
	send_req(fd, NLMSG_LENGTH(sizeof ifi), RTM_GETLINK, NLM_F_REQUEST, &ifi, sizeof ifi);
	answer_line("RTM_GETLINK index 1", fd);
	ifi.ifi_index = 99999;
	send_req(fd, NLMSG_LENGTH(sizeof ifi), RTM_GETLINK, NLM_F_REQUEST, &ifi, sizeof ifi);
	answer_line("RTM_GETLINK index 99999", fd);
	send_req(fd, NLMSG_LENGTH(4), RTM_GETLINK, NLM_F_REQUEST, NULL, 0);
	answer_line("RTM_GETLINK with a short payload", fd);
	send_req(fd, NLMSG_LENGTH(4), 999, NLM_F_REQUEST, NULL, 0);
	answer_line("type 999", fd);
	send_req(fd, NLMSG_LENGTH(4), NLMSG_NOOP, NLM_F_REQUEST | NLM_F_ACK, NULL, 0);
	answer_line("NLMSG_NOOP with NLM_F_ACK", fd);
	send_req(fd, 8, RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, NULL, 0);
	answer_line("8-byte datagram", fd);
	{
		struct req r;
		memset(&r, 0, sizeof r);
		r.h.nlmsg_len = 200; /* longer than sent */
		r.h.nlmsg_type = RTM_GETLINK;
		r.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
		send(fd, &r, sizeof r, 0);
		answer_line("header longer than the datagram", fd);
		r.h.nlmsg_len = 16;
		send(fd, &r, 16, 0);
		answer_line("dump request without a family", fd);
	}
	struct sockaddr_nl other_port = { .nl_family = AF_NETLINK, .nl_pid = 777 };
	err_line("sendto pid 777", sendto(fd, buf, 20, 0, (struct sockaddr *)&other_port, sizeof other_port),
		 ECONNREFUSED);
	int v;
	socklen_t vl = sizeof v;
	rc_line("getsockopt SO_TYPE", getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &vl));
	eq_line("  SO_TYPE", v, SOCK_RAW);
	v = 32768;
	rc_line("setsockopt SO_SNDBUF", setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v));
	err_line("listen", listen(fd, 1), EOPNOTSUPP);
	close(fd);

	err_line("socket(AF_NETLINK, SOCK_RAW, 99)", socket(AF_NETLINK, SOCK_RAW, 99), EPROTONOSUPPORT);
	err_line("socket(AF_NETLINK, SOCK_STREAM, NETLINK_ROUTE)", socket(AF_NETLINK, SOCK_STREAM, 0),
		 ESOCKTNOSUPPORT);
	int d = socket(AF_NETLINK, SOCK_DGRAM, NETLINK_ROUTE);
	ok_line("socket(AF_NETLINK, SOCK_DGRAM, NETLINK_ROUTE)", d);
	close(d);
}

static void ioctls(void)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct ifreq r;
	memset(&r, 0, sizeof r);
	strcpy(r.ifr_name, "lo");
	rc_line("SIOCGIFFLAGS lo", ioctl(s, SIOCGIFFLAGS, &r));
	line("  flags 0x%x", (unsigned short)r.ifr_flags);
	rc_line("SIOCGIFMTU lo", ioctl(s, SIOCGIFMTU, &r));
	line("  mtu %d", r.ifr_mtu);
	char a[64];
	rc_line("SIOCGIFADDR lo", ioctl(s, SIOCGIFADDR, &r));
	addr_text(&r.ifr_addr, a, sizeof a);
	line("  addr %s", a);
	rc_line("SIOCGIFNETMASK lo", ioctl(s, SIOCGIFNETMASK, &r));
	addr_text(&r.ifr_netmask, a, sizeof a);
	line("  netmask %s", a);
	rc_line("SIOCGIFINDEX lo", ioctl(s, SIOCGIFINDEX, &r));
	line("  index %d", r.ifr_ifindex);
	strcpy(r.ifr_name, "nosuchif0");
	long rc = ioctl(s, SIOCGIFFLAGS, &r);
	line("SIOCGIFFLAGS nosuchif0: %ld %s", rc, rc < 0 ? ename(errno) : "");
	struct ifreq many[64];
	struct ifconf ic = { .ifc_len = sizeof many, .ifc_req = many };
	rc_line("SIOCGIFCONF", ioctl(s, SIOCGIFCONF, &ic));
	int has_lo = 0;
	for (unsigned i = 0; i < ic.ifc_len / sizeof many[0]; i++) {
		addr_text(&many[i].ifr_addr, a, sizeof a);
		if (!strcmp(many[i].ifr_name, "lo") && !strcmp(a, "127.0.0.1"))
			has_lo = 1;
	}
	expect_line("SIOCGIFCONF lists lo 127.0.0.1", has_lo, 1);
	close(s);
}

/* `fuzz` mode, for the sandbox only (natively, as root, random requests
 * could change the host's network): random datagrams, mostly with a
 * plausible header, then drain the answers; the kernel must survive. */
static int fuzz(void)
{
	int fd = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
	if (fd < 0)
		return 1;
	unsigned seed = 12345;
	long answers = 0;
	static unsigned char buf[4096];
	for (int i = 0; i < 3000; i++) {
		size_t len = (seed = seed * 1103515245 + 12345) >> 16 & 255;
		for (size_t k = 0; k < len; k++)
			buf[k] = (seed = seed * 1103515245 + 12345) >> 16;
		if (len >= 16 && (i & 1)) {
			struct nlmsghdr *h = (struct nlmsghdr *)buf;
			h->nlmsg_len = (i & 2) ? len : h->nlmsg_len % 300;
			h->nlmsg_type = 16 + h->nlmsg_type % 16;
		}
		send(fd, buf, len, MSG_DONTWAIT);
		while (recv(fd, buf, (i & 4) ? 8 : sizeof buf, MSG_DONTWAIT | (i & 8 ? MSG_TRUNC : 0)) >= 0)
			answers++;
	}
	close(fd);
	fprintf(stderr, "fuzz: %ld answers\n", answers);
	puts("fuzz: done");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc > 1 && strcmp(argv[1], "fuzz") == 0)
		return fuzz();
	ifaddrs_view();
	raw_socket();
	ioctls();
	puts("done");
	return 0;
}
