/* What an OCI process gets of its config's process.capabilities,
 * process.user.additionalGids and process.rlimits, and whether the kernel
 * holds it to them: the capability sets (capget, /proc/self/status,
 * PR_CAPBSET_READ, PR_CAP_AMBIENT), the groups (getgroups, status), every
 * resource limit, how many fds RLIMIT_NOFILE lets it open, raising a hard
 * limit, chroot (CAP_SYS_CHROOT), setgroups (CAP_SETGID), capset and
 * PR_CAPBSET_DROP, and the sets after setuid to a user and after execve.
 * Output is the same on every run under the same config.
 *
 * `creds` prints; `creds exec` prints what a re-executed copy sees. */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

struct header {
	unsigned int version;
	int pid;
};

struct data {
	unsigned int effective, permitted, inheritable;
};

static void sets(const char *when)
{
	struct header h = { 0x20080522, 0 };
	struct data d[2] = { { 0 } };
	long r = syscall(SYS_capget, &h, d);
	printf("%s capget %ld eff %08x%08x prm %08x%08x inh %08x%08x\n", when, r,
	       d[1].effective, d[0].effective, d[1].permitted, d[0].permitted,
	       d[1].inheritable, d[0].inheritable);
	unsigned long long bnd = 0, amb = 0;
	for (int c = 0; c <= 40; c++) {
		if (prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1)
			bnd |= 1ULL << c;
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0) == 1)
			amb |= 1ULL << c;
	}
	printf("%s bounding %016llx ambient %016llx\n", when, bnd, amb);
	FILE *f = fopen("/proc/self/status", "r");
	char line[512];
	while (f && fgets(line, sizeof line, f)) {
		if (!strncmp(line, "Cap", 3) || !strncmp(line, "Groups:", 7) ||
		    !strncmp(line, "Uid:", 4) || !strncmp(line, "Gid:", 4))
			printf("%s status %s", when, line);
	}
	if (f)
		fclose(f);
	gid_t g[64];
	int n = getgroups(64, g);
	printf("%s getgroups %d:", when, n);
	for (int i = 0; i < n; i++)
		printf(" %u", g[i]);
	printf("\n");
}

static void limits(void)
{
	for (int r = 0; r < 16; r++) {
		struct rlimit l;
		if (getrlimit(r, &l) == 0)
			printf("rlimit %d %llu %llu\n", r, (unsigned long long)l.rlim_cur,
			       (unsigned long long)l.rlim_max);
		else
			printf("rlimit %d errno %d\n", r, errno);
	}
	int opened = 0, fd = 0, err = 0;
	while ((fd = dup(0)) >= 0 || (fd = dup(1)) >= 0)
		opened++;
	err = errno;
	printf("dup until %s after %d fds\n", err == EMFILE ? "EMFILE" : strerror(err), opened);
	struct rlimit l;
	getrlimit(RLIMIT_NOFILE, &l);
	for (int i = 3; i < 3 + opened; i++)
		close(i);
	printf("dup2 past the soft limit: %d errno %d\n",
	       dup2(0, (int)l.rlim_cur) < 0 ? -1 : 0, errno);
	struct rlimit up = { l.rlim_max + 1, l.rlim_max + 1 };
	int r = setrlimit(RLIMIT_NOFILE, &up);
	printf("raise the hard limit: %d errno %d\n", r, r ? errno : 0);
	struct rlimit down = { 64, l.rlim_max };
	r = setrlimit(RLIMIT_NOFILE, &down);
	opened = 0;
	while (dup(0) >= 0)
		opened++;
	printf("soft 64: %d, then %d more fds\n", r, opened);
	for (int i = 3; i < 64; i++)
		close(i);
}

static void privileged(void)
{
	int r = chroot("/");
	printf("chroot: %d errno %d\n", r, r ? errno : 0);
	gid_t one = 4242;
	r = setgroups(1, &one);
	printf("setgroups: %d errno %d\n", r, r ? errno : 0);
	r = prctl(PR_CAPBSET_DROP, 31, 0, 0, 0); /* CAP_SETFCAP */
	printf("capbset_drop: %d errno %d now %d\n", r, r ? errno : 0,
	       prctl(PR_CAPBSET_READ, 31, 0, 0, 0));
	struct header h = { 0x20080522, 0 };
	struct data d[2] = { { 0 } };
	syscall(SYS_capget, &h, d);
	d[0].effective &= ~(1u << 18); /* drop CAP_SYS_CHROOT from effective */
	r = syscall(SYS_capset, &h, d);
	printf("capset drop: %d errno %d\n", r, r ? errno : 0);
	r = chroot("/");
	printf("chroot without it: %d errno %d\n", r, r ? errno : 0);
	d[0].permitted |= 1u << 21; /* CAP_SYS_ADMIN: never allowed */
	d[0].effective |= 1u << 21;
	r = syscall(SYS_capset, &h, d);
	printf("capset raise: %d errno %d\n", r, r ? errno : 0);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "exec")) {
		sets("after-exec");
		return 0;
	}
	sets("start");
	limits();
	if (argc > 1 && !strcmp(argv[1], "setuid")) {
		int r = setuid(1000);
		printf("setuid: %d\n", r);
		sets("user");
		return 0;
	}
	privileged();
	sets("later");
	fflush(stdout);
	execl("/creds", "/creds", "exec", (char *)NULL);
	printf("execl: errno %d\n", errno);
	return 1;
}
