/*
 * fd_hog FILE
 *
 * For the VMM robustness tests: opens FILE, sockets and pipes, in turn,
 * until an open fails, and prints "full <errno name>" (EMFILE or ENFILE;
 * anything else is "FAIL ..."). Then it serves one command per line on
 * stdin (a blocking read, where a hibernated sandbox waits):
 *
 *   ping     "pong"
 *   close    closes every fd it opened and opens FILE once more: "reopened"
 *   quit     exits 0
 *
 * The number of fds held is not printed (it depends on the limits).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "checks.h"

static int held[70000];
static int n;

int main(int argc, char **argv)
{
	if (argc < 2) {
		printf("FAIL usage\n");
		return 2;
	}
	int err = 0;
	while (n < (int)(sizeof held / sizeof held[0]) - 2) {
		int fd;
		switch (n % 3) {
		case 0:
			fd = open(argv[1], O_RDONLY);
			break;
		case 1:
			fd = socket(AF_INET, SOCK_STREAM, 0);
			break;
		default: {
			int p[2];
			fd = pipe(p) == 0 ? p[0] : -1;
			if (fd >= 0)
				held[n++] = p[1];
		}
		}
		if (fd < 0) {
			err = errno;
			break;
		}
		held[n++] = fd;
	}
	if (err == EMFILE || err == ENFILE)
		printf("full %s\n", errno_name(err));
	else
		printf("FAIL no EMFILE: %s\n", errno_name(err));
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (strncmp(line, "ping", 4) == 0) {
			printf("pong\n");
		} else if (strncmp(line, "close", 5) == 0) {
			while (n > 0)
				close(held[--n]);
			int fd = open(argv[1], O_RDONLY);
			printf(fd >= 0 ? "reopened\n" : "FAIL reopen\n");
			if (fd >= 0)
				close(fd);
		} else if (strncmp(line, "quit", 4) == 0) {
			return 0;
		} else {
			printf("FAIL unknown command\n");
		}
		fflush(stdout);
	}
	return 0;
}
