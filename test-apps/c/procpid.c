/*
 * The per-process directories of /proc, natively and in the sandbox:
 * /proc/self is a link to /proc/<pid>; stat, status, cmdline, comm,
 * environ, maps, statm, limits, the exe/cwd/root links and fd/ describe
 * this process; a child's directory shows its parent, its own name
 * (PR_SET_NAME), its sleeping state, then Z once it exited, and is gone
 * once reaped. Prints relations (this equals getpid(), ...), never the
 * values. Run with PROCPID_TEST=1 in the environment.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"

static char buf[1 << 16];

/* Reads a whole file into buf; its length, or -1. */
static long slurp(const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	long n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
		if (r <= 0)
			break;
		n += r;
	}
	close(fd);
	buf[n] = 0;
	return n;
}

/* The value after "name:\t" in status text buf, or NULL. */
static const char *status_field(const char *name)
{
	size_t len = strlen(name);
	for (const char *l = buf; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (strncmp(l, name, len) == 0 && l[len] == ':')
			return l + len + 1 + strspn(l + len + 1, " \t");
	return NULL;
}

/* Parses /proc/<pid>/stat in buf: comm into comm, state, ppid; the
 * number of fields after the comm into *nfields. */
static int parse_stat(char *comm, size_t n, char *state, long *ppid, int *nfields)
{
	char *open = strchr(buf, '(');
	char *close = strrchr(buf, ')');
	if (!open || !close || close < open)
		return -1;
	size_t len = (size_t)(close - open - 1);
	if (len >= n)
		len = n - 1;
	memcpy(comm, open + 1, len);
	comm[len] = 0;
	if (sscanf(close + 2, "%c %ld", state, ppid) != 2)
		return -1;
	int count = 0;
	for (char *t = strtok(close + 2, " \n"); t; t = strtok(NULL, " \n"))
		count++;
	*nfields = count + 2;
	return 0;
}

static int listed(const char *dir, const char *name)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	struct dirent *e;
	int found = 0;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, name) == 0)
			found = 1;
	closedir(d);
	return found;
}

static void self_files(int argc, char **argv)
{
	char path[256], link[256], want[64];
	pid_t me = getpid();
	snprintf(want, sizeof want, "%d", (int)me);
	ssize_t n = readlink("/proc/self", link, sizeof link - 1);
	link[n > 0 ? n : 0] = 0;
	expect_line("readlink /proc/self is the pid", n > 0 && strcmp(link, want) == 0, 1);
	struct stat st;
	expect_line("lstat /proc/self is a link", lstat("/proc/self", &st) == 0 && S_ISLNK(st.st_mode), 1);
	expect_line("stat /proc/self is a directory", stat("/proc/self", &st) == 0 && S_ISDIR(st.st_mode), 1);
	expect_line("/proc/<pid> owned by the uid", stat("/proc/self", &st) == 0 && st.st_uid == getuid(), 1);
	expect_line("/proc lists the pid", listed("/proc", want), 1);
	expect_line("/proc/self/task lists the pid (one thread)", listed("/proc/self/task", want), 1);
	snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)me);
	expect_line("task/<tid>/stat starts with the tid", slurp(path) > 0 && atol(buf) == me, 1);

	char comm[64], state;
	long ppid;
	int nf = 0;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)me);
	expect_line("stat read", slurp(path) > 0, 1);
	expect_line("stat: pid first", atol(buf) == me, 1);
	expect_line("stat parses", parse_stat(comm, sizeof comm, &state, &ppid, &nf) == 0, 1);
	line("stat: comm %s, state %c", comm, state);
	expect_line("stat: ppid is getppid()", ppid == getppid(), 1);
	expect_line("stat: at least 52 fields", nf >= 52, 1);

	expect_line("status read", slurp("/proc/self/status") > 0, 1);
	const char *f = status_field("Name");
	line("status Name: %.*s", f ? (int)strcspn(f, "\n") : 0, f ? f : "");
	f = status_field("Pid");
	expect_line("status Pid is getpid()", f && atol(f) == me, 1);
	f = status_field("PPid");
	expect_line("status PPid is getppid()", f && atol(f) == getppid(), 1);
	f = status_field("Uid");
	expect_line("status Uid is getuid()", f && atol(f) == (long)getuid(), 1);
	f = status_field("State");
	line("status State: %.1s", f ? f : "?");
	f = status_field("VmRSS");
	expect_line("status VmRSS > 0", f && atol(f) > 0, 1);
	f = status_field("Threads");
	line("status Threads: %ld", f ? atol(f) : -1);
	f = status_field("SigCgt");
	expect_line("status SigCgt shows the SIGUSR1 handler",
		    f && (strtoull(f, NULL, 16) & (1ull << (SIGUSR1 - 1))), 1);

	long len = slurp("/proc/self/cmdline");
	long want_len = 0;
	int same = 1;
	for (int i = 0; i < argc; i++) {
		if (want_len + (long)strlen(argv[i]) + 1 > len ||
		    strcmp(buf + want_len, argv[i]) != 0)
			same = 0;
		want_len += strlen(argv[i]) + 1;
	}
	expect_line("cmdline is argv", same && len == want_len, 1);

	len = slurp("/proc/self/environ");
	int found = 0;
	for (long i = 0; i < len; i += strlen(buf + i) + 1)
		if (strcmp(buf + i, "PROCPID_TEST=1") == 0)
			found = 1;
	expect_line("environ holds PROCPID_TEST=1", found, 1);

	slurp("/proc/self/comm");
	line("comm: %s", strtok(buf, "\n"));

	n = readlink("/proc/self/exe", link, sizeof link - 1);
	link[n > 0 ? n : 0] = 0;
	const char *base = strrchr(link, '/');
	line("exe ends in: %s", base ? base : "(none)");
	char cwd[256];
	n = readlink("/proc/self/cwd", link, sizeof link - 1);
	link[n > 0 ? n : 0] = 0;
	expect_line("cwd link is getcwd()", getcwd(cwd, sizeof cwd) && strcmp(cwd, link) == 0, 1);
	n = readlink("/proc/self/root", link, sizeof link - 1);
	link[n > 0 ? n : 0] = 0;
	line("root link: %s", link);

	int low = open("/proc/self/maps", O_RDONLY);
	int fd = fcntl(low, F_DUPFD, 100);
	close(low);
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof link - 1);
	link[n > 0 ? n : 0] = 0;
	line("fd link of an open /proc/self/maps: %s",
	     strstr(link, "/maps") ? "ends in /maps" : link);
	snprintf(want, sizeof want, "%d", fd);
	expect_line("fd/ lists it", listed("/proc/self/fd", want), 1);
	close(fd);
	expect_line("fd/ no longer lists it", listed("/proc/self/fd", want), 0);

	slurp("/proc/self/maps");
	expect_line("maps has [stack]", strstr(buf, "[stack]") != NULL, 1);
	unsigned long lo, hi;
	char perms[8];
	expect_line("maps line shape",
		    sscanf(buf, "%lx-%lx %4s", &lo, &hi, perms) == 3 && lo < hi, 1);

	unsigned long size, rss;
	slurp("/proc/self/statm");
	expect_line("statm: size >= resident > 0",
		    sscanf(buf, "%lu %lu", &size, &rss) == 2 && size >= rss && rss > 0, 1);

	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	slurp("/proc/self/limits");
	const char *l = strstr(buf, "Max open files");
	expect_line("limits: header", strncmp(buf, "Limit", 5) == 0, 1);
	expect_line("limits: open files is getrlimit's",
		    l && strtoul(l + 26, NULL, 10) == rl.rlim_cur, 1);
	expect_line("mounts read", slurp("/proc/self/mounts") > 0, 1);
	expect_line("no /proc/self/nonexistent", open("/proc/self/nonexistent", O_RDONLY) < 0 && errno == ENOENT, 1);
	expect_line("no /proc/999999", access("/proc/999999", F_OK) < 0 && errno == ENOENT, 1);
}

static void child_files(void)
{
	int ready[2], go[2];
	char path[64], comm[64], state;
	long ppid;
	int nf;
	pipe(ready);
	pipe(go);
	pid_t kid = fork();
	if (kid == 0) {
		prctl(PR_SET_NAME, "kid");
		char c = 1;
		write(ready[1], &c, 1);
		read(go[0], &c, 1);
		_exit(3);
	}
	char c;
	read(ready[0], &c, 1);
	struct timespec nap = { 0, 50000000 };
	nanosleep(&nap, NULL);
	snprintf(path, sizeof path, "%d", (int)kid);
	expect_line("/proc lists the child", listed("/proc", path), 1);
	snprintf(path, sizeof path, "/proc/%d/stat", (int)kid);
	slurp(path);
	parse_stat(comm, sizeof comm, &state, &ppid, &nf);
	line("child stat: comm %s, state %c", comm, state);
	expect_line("child stat: ppid is us", ppid == getpid(), 1);
	snprintf(path, sizeof path, "/proc/%d/comm", (int)kid);
	slurp(path);
	line("child comm: %s", strtok(buf, "\n"));
	slurp("/proc/self/comm");
	line("own comm after the child's PR_SET_NAME: %s", strtok(buf, "\n"));
	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)kid);
	long len = slurp(path);
	expect_line("child cmdline read", len > 0, 1);

	write(go[1], &c, 1);
	siginfo_t si;
	waitid(P_PID, kid, &si, WEXITED | WNOWAIT);
	snprintf(path, sizeof path, "/proc/%d/stat", (int)kid);
	slurp(path);
	parse_stat(comm, sizeof comm, &state, &ppid, &nf);
	line("exited child state: %c", state);
	line("exited child stat: comm %s, %d fields after it", comm, nf);
	snprintf(path, sizeof path, "/proc/%d/status", (int)kid);
	slurp(path);
	char *name = strstr(buf, "Name:\t"), *st = strstr(buf, "State:\t");
	line("exited child status: %s", name ? strtok(name, "\n") : "no Name line");
	line("exited child status: %s", st ? strtok(st, "\n") : "no State line");
	snprintf(path, sizeof path, "/proc/%d/comm", (int)kid);
	slurp(path);
	line("exited child comm: %s", strtok(buf, "\n"));
	snprintf(path, sizeof path, "/proc/%d/stat", (int)kid);
	waitpid(kid, NULL, 0);
	expect_line("reaped child's directory is gone", access(path, F_OK) < 0 && errno == ENOENT, 1);
}

static void on_usr1(int sig)
{
	(void)sig;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	signal(SIGUSR1, on_usr1);
	self_files(argc, argv);
	child_files();
	return 0;
}
