/*
 * The shape of the system files of /proc, natively and in the sandbox:
 * loadavg, uptime, meminfo, cpuinfo, stat, mounts, self/mountinfo,
 * version and the sys/ entries. Prints which fields are present and how
 * values relate to each other (free <= total, one cpuinfo entry per
 * online CPU, the root mount's device is stat("/")'s), never the values
 * themselves, which differ between a host and a guest.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
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

/* The text after "name:" in a "name: value" line of buf, or NULL. */
static const char *field(const char *name)
{
	size_t len = strlen(name);
	for (const char *l = buf; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		if (strncmp(l, name, len) == 0 && (l[len] == ':' || l[len] == ' ' || l[len] == '\t')) {
			const char *c = strchr(l, ':');
			return c ? c + 1 : l + len;
		}
	}
	return NULL;
}

static void loadavg(void)
{
	double a, b, c;
	int run, total, pid;
	expect_line("loadavg read", slurp("/proc/loadavg") > 0, 1);
	int n = sscanf(buf, "%lf %lf %lf %d/%d %d", &a, &b, &c, &run, &total, &pid);
	expect_line("loadavg: 3 floats, running/total, last pid", n == 6, 1);
	expect_line("loadavg: values sane",
		    a >= 0 && b >= 0 && c >= 0 && run >= 1 && total >= run && pid >= 1, 1);
}

static void uptime(void)
{
	double up, idle;
	expect_line("uptime read", slurp("/proc/uptime") > 0, 1);
	expect_line("uptime: 2 floats", sscanf(buf, "%lf %lf", &up, &idle) == 2, 1);
	expect_line("uptime: not negative", up >= 0 && idle >= 0, 1);
	struct timespec nap = { 0, 100000000 };
	nanosleep(&nap, NULL);
	double up2, idle2;
	slurp("/proc/uptime");
	sscanf(buf, "%lf %lf", &up2, &idle2);
	expect_line("uptime: advances 0.1 s in a 0.1 s sleep", up2 - up >= 0.09 && up2 - up < 5, 1);
}

static void meminfo(void)
{
	static const char *names[] = { "MemTotal", "MemFree", "MemAvailable", "Buffers",
				       "Cached", "SwapTotal", "SwapFree", "Shmem",
				       "SReclaimable", "Committed_AS", NULL };
	expect_line("meminfo read", slurp("/proc/meminfo") > 0, 1);
	for (int i = 0; names[i]; i++) {
		const char *v = field(names[i]);
		char what[64];
		snprintf(what, sizeof what, "meminfo: %s in kB", names[i]);
		expect_line(what, v && strstr(v, " kB") && strchr(v, '\n') > strstr(v, " kB"), 1);
	}
	long total = atol(field("MemTotal")), free_ = atol(field("MemFree"));
	long avail = atol(field("MemAvailable"));
	expect_line("meminfo: 0 < free <= total, available <= total",
		    total > 0 && free_ > 0 && free_ <= total && avail <= total, 1);
}

static void cpuinfo(void)
{
	expect_line("cpuinfo read", slurp("/proc/cpuinfo") > 0, 1);
	int entries = 0;
	for (const char *l = buf; l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (strncmp(l, "processor\t", 10) == 0)
			entries++;
	expect_line("cpuinfo: one entry per online CPU", entries == sysconf(_SC_NPROCESSORS_ONLN), 1);
	static const char *names[] = { "vendor_id", "cpu family", "model", "model name",
				       "stepping", "cpu MHz", "cpu cores", "flags",
				       "bogomips", "address sizes", NULL };
	for (int i = 0; names[i]; i++) {
		char what[64];
		snprintf(what, sizeof what, "cpuinfo: %s", names[i]);
		expect_line(what, field(names[i]) != NULL, 1);
	}
	const char *flags = field("flags");
	expect_line("cpuinfo: flags has fpu, tsc, sse2",
		    flags && strstr(flags, " fpu ") && strstr(flags, " tsc ") && strstr(flags, " sse2 "), 1);
}

static void stat_(void)
{
	expect_line("stat read", slurp("/proc/stat") > 0, 1);
	unsigned long long v[4];
	expect_line("stat: cpu line with user nice system idle",
		    sscanf(buf, "cpu  %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3]) == 4, 1);
	expect_line("stat: cpu0 line", strstr(buf, "\ncpu0 ") != NULL, 1);
	const char *bt = strstr(buf, "\nbtime ");
	long btime = bt ? atol(bt + 7) : 0;
	expect_line("stat: btime in the past", btime > 1000000000 && btime <= time(NULL), 1);
	const char *pr = strstr(buf, "\nprocesses ");
	const char *run = strstr(buf, "\nprocs_running ");
	expect_line("stat: processes, procs_running >= 1",
		    pr && atol(pr + 11) >= 1 && run && atol(run + 15) >= 1, 1);
	expect_line("stat: procs_blocked", strstr(buf, "\nprocs_blocked ") != NULL, 1);
}

static void mounts(void)
{
	expect_line("mounts read", slurp("/proc/mounts") > 0, 1);
	int root = 0, proc = 0, sys = 0, dev = 0, bad = 0;
	char *save, *line;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char src[256], dir[256], type[64], opts[512];
		int a, b;
		if (sscanf(line, "%255s %255s %63s %511s %d %d", src, dir, type, opts, &a, &b) != 6) {
			bad++;
			continue;
		}
		root |= strcmp(dir, "/") == 0;
		proc |= strcmp(dir, "/proc") == 0 && strcmp(type, "proc") == 0;
		sys |= strcmp(dir, "/sys") == 0 && strcmp(type, "sysfs") == 0;
		dev |= strcmp(dir, "/dev") == 0;
	}
	expect_line("mounts: every line has 6 fields", bad == 0, 1);
	expect_line("mounts: /", root, 1);
	expect_line("mounts: /proc proc", proc, 1);
	expect_line("mounts: /sys sysfs", sys, 1);
	expect_line("mounts: /dev", dev, 1);
	expect_line("self/mounts read", slurp("/proc/self/mounts") > 0, 1);
}

static void mountinfo(void)
{
	struct stat st;
	stat("/", &st);
	expect_line("mountinfo read", slurp("/proc/self/mountinfo") > 0, 1);
	int bad = 0, root_dev = 0;
	char *save, *line;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		int id, parent;
		unsigned maj, min;
		char root[256], dir[256], type[64], src[256];
		const char *sep = strstr(line, " - ");
		if (sscanf(line, "%d %d %u:%u %255s %255s", &id, &parent, &maj, &min, root, dir) != 6 ||
		    !sep || sscanf(sep, " - %63s %255s", type, src) != 2) {
			bad++;
			continue;
		}
		if (strcmp(dir, "/") == 0)
			root_dev = major(st.st_dev) == maj && minor(st.st_dev) == min;
	}
	expect_line("mountinfo: every line parses", bad == 0, 1);
	expect_line("mountinfo: / has stat(\"/\")'s device", root_dev, 1);
}

/* The first line of a file, without its newline. */
static const char *first_line(const char *path)
{
	if (slurp(path) < 0)
		return "(missing)";
	buf[strcspn(buf, "\n")] = 0;
	return buf;
}

static void sys(void)
{
	struct utsname u;
	uname(&u);
	expect_line("sys/kernel/hostname is uname's",
		    strcmp(first_line("/proc/sys/kernel/hostname"), u.nodename) == 0, 1);
	expect_line("sys/kernel/osrelease is uname's",
		    strcmp(first_line("/proc/sys/kernel/osrelease"), u.release) == 0, 1);
	printf("sys/kernel/ostype: %s\n", first_line("/proc/sys/kernel/ostype"));
	const char *oc = first_line("/proc/sys/vm/overcommit_memory");
	expect_line("sys/vm/overcommit_memory is 0, 1 or 2",
		    strlen(oc) == 1 && oc[0] >= '0' && oc[0] <= '2', 1);
	printf("sys/fs/pipe-max-size: %s\n", first_line("/proc/sys/fs/pipe-max-size"));
	slurp("/proc/version");
	expect_line("version: Linux version <release>",
		    strncmp(buf, "Linux version ", 14) == 0 && strstr(buf, u.release) != NULL, 1);
	err_line("open sys/kernel/ostype for writing",
		 open("/proc/sys/kernel/ostype", O_WRONLY), EACCES);
	err_line("sys/kernel/nonexistent", open("/proc/sys/kernel/nonexistent", O_RDONLY), ENOENT);
}

/* Whether directory `dir` lists every name in `names`. */
static void lists(const char *dir, const char **names)
{
	for (int i = 0; names[i]; i++) {
		DIR *d = opendir(dir);
		int found = 0;
		struct dirent *e;
		while (d && (e = readdir(d)))
			found |= strcmp(e->d_name, names[i]) == 0;
		if (d)
			closedir(d);
		char what[128];
		snprintf(what, sizeof what, "%s lists %s", dir, names[i]);
		expect_line(what, found, 1);
	}
}

int main(void)
{
	loadavg();
	uptime();
	meminfo();
	cpuinfo();
	stat_();
	mounts();
	mountinfo();
	sys();
	const char *proc[] = { "self", "loadavg", "uptime", "meminfo", "cpuinfo", "stat",
			       "mounts", "version", "sys", NULL };
	lists("/proc", proc);
	const char *kernel[] = { "hostname", "osrelease", "ostype", NULL };
	lists("/proc/sys/kernel", kernel);
	const char *sysd[] = { "kernel", "vm", "fs", NULL };
	lists("/proc/sys", sysd);
	return 0;
}
