/*
 * procnet [UNIX_PATH]: the program's own sockets appear in /proc/net as
 * on Linux (runtime-shim/tests/linux_surface.rs). It opens a TCP listener
 * and a UDP socket on 127.0.0.1, a listening AF_UNIX socket bound to
 * UNIX_PATH (default "procnet.sock" in the cwd) and one bound to an
 * abstract name, then looks for each in /proc/net/{tcp,udp,unix} by port
 * and name, checks /proc/net/dev lists lo and /proc/net/route has its
 * header. Prints yes/no per check (no ports, inodes or pids), so native
 * and sandboxed runs print the same.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap + 1);
	size_t got;
	while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap) {
			cap *= 2;
			buf = realloc(buf, cap + 1);
		}
	}
	fclose(f);
	if (buf)
		buf[n] = 0;
	return buf;
}

/* Whether a line of `text` contains both `a` and `b`. */
static int line_with(const char *text, const char *a, const char *b)
{
	for (const char *l = text; l && *l;) {
		const char *end = strchr(l, '\n');
		size_t len = end ? (size_t)(end - l) : strlen(l);
		char line[512];
		size_t m = len < sizeof line - 1 ? len : sizeof line - 1;
		memcpy(line, l, m);
		line[m] = 0;
		if (strstr(line, a) && strstr(line, b))
			return 1;
		l = end ? end + 1 : NULL;
	}
	return 0;
}

static int inet_socket(int type, char *key, size_t keylen)
{
	int s = socket(AF_INET, type, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof a;
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
	    (type == SOCK_STREAM && listen(s, 4) != 0) ||
	    getsockname(s, (struct sockaddr *)&a, &len) != 0)
		return -1;
	snprintf(key, keylen, "0100007F:%04X", ntohs(a.sin_port));
	return s;
}

static const char *yes(int ok)
{
	return ok ? "yes" : "no";
}

int main(int argc, char **argv)
{
	const char *upath = argc > 1 ? argv[1] : "procnet.sock";
	char tcp_key[32], udp_key[32];
	if (inet_socket(SOCK_STREAM, tcp_key, sizeof tcp_key) < 0 ||
	    inet_socket(SOCK_DGRAM, udp_key, sizeof udp_key) < 0) {
		perror("inet");
		return 1;
	}
	unlink(upath);
	int u = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un ua = {.sun_family = AF_UNIX};
	strncpy(ua.sun_path, upath, sizeof ua.sun_path - 1);
	if (u < 0 || bind(u, (struct sockaddr *)&ua, sizeof ua) != 0 || listen(u, 4) != 0) {
		perror("unix");
		return 1;
	}
	int v = socket(AF_UNIX, SOCK_DGRAM, 0);
	struct sockaddr_un va = {.sun_family = AF_UNIX};
	char abs_name[64];
	snprintf(abs_name, sizeof abs_name, "procnet-%d", (int)getpid());
	memcpy(va.sun_path + 1, abs_name, strlen(abs_name));
	socklen_t vlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(abs_name));
	if (v < 0 || bind(v, (struct sockaddr *)&va, vlen) != 0) {
		perror("abstract");
		return 1;
	}

	char *tcp = slurp("/proc/net/tcp"), *udp = slurp("/proc/net/udp");
	char *unix_ = slurp("/proc/net/unix"), *dev = slurp("/proc/net/dev");
	char *route = slurp("/proc/net/route");
	char want_path[128], want_abs[80];
	snprintf(want_path, sizeof want_path, " %s", upath);
	snprintf(want_abs, sizeof want_abs, " @%s", abs_name);
	printf("tcp listener listed: %s\n", yes(tcp && line_with(tcp, tcp_key, " 0A ")));
	printf("udp socket listed: %s\n", yes(udp && line_with(udp, udp_key, " 07 ")));
	printf("unix path listed as bound: %s\n", yes(unix_ && line_with(unix_, want_path, " 01 ")));
	printf("abstract name listed: %s\n", yes(unix_ && line_with(unix_, want_abs, " ")));
	printf("unix header: %s\n", yes(unix_ && !strncmp(unix_, "Num       RefCount", 18)));
	printf("dev lists lo: %s\n", yes(dev && line_with(dev, "lo:", " ")));
	printf("route header: %s\n", yes(route && !strncmp(route, "Iface\tDestination", 17)));
	unlink(upath);
	return 0;
}
