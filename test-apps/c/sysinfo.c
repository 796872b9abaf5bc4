/*
 * Process and system facts that are the same natively and in the sandbox:
 * uname sysname/machine, pid/ppid sanity, CPU affinity, getrandom and
 * prlimit. Prints nothing that varies between runs.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

static int failures;

static void check(int ok, const char *what)
{
	if (ok) {
		printf("%s ok\n", what);
	} else {
		printf("FAIL %s\n", what);
		failures++;
	}
}

int main(void)
{
	struct utsname u;
	if (uname(&u) == 0) {
		printf("sysname %s\n", u.sysname);
		printf("machine %s\n", u.machine);
	} else {
		check(0, "uname");
	}

	check(getpid() > 0, "pid");
	check(getppid() >= 0, "ppid");

	cpu_set_t set;
	CPU_ZERO(&set);
	check(sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0,
	      "affinity");

	unsigned char buf[32];
	check(getrandom(buf, sizeof(buf), 0) == (ssize_t)sizeof(buf), "getrandom");

	struct rlimit lim;
	check(prlimit(0, RLIMIT_STACK, NULL, &lim) == 0 && lim.rlim_cur > 0,
	      "rlimit");

	return failures == 0 ? 0 : 1;
}
