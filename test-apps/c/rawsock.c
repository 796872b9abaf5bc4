/*
 * rawsock: what raw and ICMP sockets give (runtime-shim/tests/linux_surface.rs).
 * Prints "ok" or the errno name for a raw IPv4 ICMP socket, a raw IPv6
 * socket and an unprivileged ICMP ("ping") datagram socket. In the sandbox
 * all three are refused with EPERM or EACCES, as for a Linux process without
 * CAP_NET_RAW outside ping_group_range; natively the answers depend on the
 * caller's rights, so the test checks the sandboxed run only.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *name(int e)
{
	switch (e) {
	case EPERM:
		return "EPERM";
	case EACCES:
		return "EACCES";
	case ESOCKTNOSUPPORT:
		return "ESOCKTNOSUPPORT";
	case EPROTONOSUPPORT:
		return "EPROTONOSUPPORT";
	default:
		return strerror(e);
	}
}

static void try(const char *what, int dom, int type, int proto)
{
	int s = socket(dom, type, proto);
	printf("%s: %s\n", what, s >= 0 ? "ok" : name(errno));
	if (s >= 0)
		close(s);
}

int main(void)
{
	try("raw icmp", AF_INET, SOCK_RAW, IPPROTO_ICMP);
	try("raw ipv6", AF_INET6, SOCK_RAW, IPPROTO_ICMPV6);
	try("ping", AF_INET, SOCK_DGRAM, IPPROTO_ICMP);
	return 0;
}
