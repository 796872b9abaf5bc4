/* What a container sees of its config's devices and mounts, as runc makes
 * them: /dev/ptmx a symlink to pts/ptmx (c 5:2), each path given as an
 * argument stat'ed (type, numbers, permissions, owner), and the
 * /proc/self/mountinfo rows whose mount point is under /tmp/ or /mnt/
 * (mount point, file system type, source for a tmpfs, the last component
 * of the mounted root for a bind, read-only or not). Output is the same
 * on every run. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static const char *kind(mode_t m)
{
	return S_ISCHR(m) ? "chr" : S_ISBLK(m) ? "blk" : S_ISFIFO(m) ? "fifo" : S_ISLNK(m) ? "link" : "other";
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct stat st;
	char to[256] = { 0 };
	if (lstat("/dev/ptmx", &st) == 0)
		printf("/dev/ptmx: lstat %s\n", kind(st.st_mode));
	if (readlink("/dev/ptmx", to, sizeof to - 1) > 0)
		printf("/dev/ptmx -> %s\n", to);
	for (int i = 0; i < 2; i++) {
		const char *p = i ? "/dev/pts/ptmx" : "/dev/ptmx";
		if (stat(p, &st) == 0)
			printf("%s: %s %u:%u\n", p, kind(st.st_mode), major(st.st_rdev), minor(st.st_rdev));
		else
			printf("%s: errno %d\n", p, errno);
	}
	for (int i = 1; i < argc; i++) {
		if (stat(argv[i], &st) != 0) {
			printf("%s: errno %d\n", argv[i], errno);
			continue;
		}
		printf("%s: %s %u:%u mode %o uid %u gid %u\n", argv[i], kind(st.st_mode),
		       S_ISFIFO(st.st_mode) ? 0 : major(st.st_rdev),
		       S_ISFIFO(st.st_mode) ? 0 : minor(st.st_rdev), st.st_mode & 07777, st.st_uid,
		       st.st_gid);
	}
	/* Each name once in the listing, the config's beside the kernel's. */
	const char *names[] = { "tty", "null", "test1", "test3", "net" };
	for (unsigned i = 0; i < sizeof names / sizeof *names; i++) {
		DIR *d = opendir("/dev");
		int n = 0;
		for (struct dirent *e; d && (e = readdir(d));)
			n += strcmp(e->d_name, names[i]) == 0;
		if (d)
			closedir(d);
		printf("/dev lists %s: %d\n", names[i], n);
	}
	FILE *f = fopen("/proc/self/mountinfo", "r");
	if (!f) {
		printf("mountinfo: errno %d\n", errno);
		return 1;
	}
	char line[4096];
	while (fgets(line, sizeof line, f)) {
		char root[1024], point[1024], opts[1024], fstype[256], source[1024];
		const char *dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*s %*s %*s %1023s %1023s %1023s", root, point, opts) != 3 ||
		    sscanf(dash + 3, "%255s %1023s", fstype, source) != 2)
			continue;
		if (strncmp(point, "/tmp/", 5) != 0 && strncmp(point, "/mnt/", 5) != 0)
			continue;
		const char *base = strrchr(root, '/');
		int ro = strncmp(opts, "ro", 2) == 0 && (opts[2] == ',' || opts[2] == 0);
		if (strcmp(fstype, "tmpfs") == 0)
			printf("mount %s: tmpfs from %s, %s\n", point, source, ro ? "ro" : "rw");
		else
			printf("mount %s: bind of .../%s, %s\n", point, base ? base + 1 : root, ro ? "ro" : "rw");
	}
	fclose(f);
	return 0;
}
