/* A container in a user namespace of its own (linux.uidMappings and
 * gidMappings): its ids, its /proc/self/uid_map and gid_map, the owner it
 * sees of a file the host's root owns (the overflow id) and of a file it
 * creates (itself), and that it cannot chown that file to an unmapped id.
 * The file it creates is argv[1]; the test checks its host owner. Output
 * is the same on every run. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void cat(const char *path)
{
	char buf[512];
	FILE *f = fopen(path, "r");
	if (!f) {
		printf("%s: errno %d\n", path, errno);
		return;
	}
	printf("%s:\n", path);
	while (fgets(buf, sizeof buf, f))
		fputs(buf, stdout);
	fclose(f);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3) {
		printf("usage: userns NEW-FILE HOST-ROOT-FILE\n");
		return 2;
	}
	printf("uid %u euid %u gid %u egid %u\n", getuid(), geteuid(), getgid(), getegid());
	cat("/proc/self/uid_map");
	cat("/proc/self/gid_map");
	struct stat st;
	if (stat(argv[2], &st) == 0)
		printf("%s: owner %u:%u\n", argv[2], st.st_uid, st.st_gid);
	int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644);
	if (fd < 0) {
		printf("create %s: errno %d\n", argv[1], errno);
		return 1;
	}
	close(fd);
	if (stat(argv[1], &st) == 0)
		printf("%s: owner %u:%u\n", argv[1], st.st_uid, st.st_gid);
	int r = chown(argv[1], 5, 5);
	printf("chown to 5: %d errno %s\n", r, r ? strerror(errno) : "-");
	r = chown(argv[1], 70000, 70000);
	printf("chown to the unmapped 70000: %d errno %s\n", r, r ? strerror(errno) : "-");
	if (stat(argv[1], &st) == 0)
		printf("%s: owner %u:%u\n", argv[1], st.st_uid, st.st_gid);
	return 0;
}
