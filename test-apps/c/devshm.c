/* What a container's /dev holds, as runc makes it: the devices' types and
 * numbers (stat), the symlinks /dev/fd, /dev/stdin, /dev/stdout and
 * /dev/stderr, and a /dev/shm where POSIX shared memory (shm_open) and
 * named semaphores (sem_open) work between a parent and its child.
 * Output is the same on every run. */
#include <errno.h>
#include <fcntl.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *devs[] = { "/dev/null", "/dev/zero", "/dev/full", "/dev/random",
			       "/dev/urandom" };
	for (unsigned i = 0; i < sizeof devs / sizeof *devs; i++) {
		struct stat st;
		if (stat(devs[i], &st) == 0)
			printf("%s: %s %u:%u\n", devs[i], S_ISCHR(st.st_mode) ? "chr" : "other",
			       major(st.st_rdev), minor(st.st_rdev));
		else
			printf("%s: errno %d\n", devs[i], errno);
	}
	const char *links[] = { "/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr" };
	for (unsigned i = 0; i < sizeof links / sizeof *links; i++) {
		char to[256] = { 0 };
		ssize_t n = readlink(links[i], to, sizeof to - 1);
		printf("%s -> %s\n", links[i], n < 0 ? strerror(errno) : to);
	}
	char buf[4];
	int fd = open("/dev/full", O_WRONLY);
	printf("write /dev/full: %zd errno %d\n", write(fd, "x", 1), errno);
	close(fd);
	fd = open("/dev/zero", O_RDONLY);
	printf("read /dev/zero: %zd %d\n", read(fd, buf, 4), buf[0]);
	close(fd);

	struct stat sh;
	printf("/dev/shm: %s\n", stat("/dev/shm", &sh) == 0 && S_ISDIR(sh.st_mode) ? "dir" : "missing");
	int m = shm_open("/qrun-shm", O_CREAT | O_RDWR, 0600);
	if (m < 0) {
		printf("shm_open: errno %d\n", errno);
		return 1;
	}
	if (ftruncate(m, 4096) != 0) {
		printf("ftruncate: errno %d\n", errno);
		return 1;
	}
	char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, m, 0);
	if (p == MAP_FAILED) {
		printf("mmap: errno %d\n", errno);
		return 1;
	}
	sem_t *s = sem_open("/qrun-sem", O_CREAT, 0600, 0);
	if (s == SEM_FAILED) {
		printf("sem_open: errno %d\n", errno);
		return 1;
	}
	pid_t c = fork();
	if (c == 0) {
		/* Let the parent block in sem_wait first: the post must wake it
		 * across the two address spaces. */
		usleep(200 * 1000);
		strcpy(p, "written by the child");
		sem_post(s);
		/* Stay: the child's exit (SIGCHLD) must not be what wakes the
		 * parent. */
		sleep(10);
		_exit(0);
	}
	sem_wait(s);
	printf("parent reads: %s\n", p);
	kill(c, SIGKILL);
	int st;
	waitpid(c, &st, 0);
	printf("/dev/shm/qrun-shm: %s\n", access("/dev/shm/qrun-shm", F_OK) == 0 ? "there" : "absent");
	printf("unlink: %d %d\n", shm_unlink("/qrun-shm"), sem_unlink("/qrun-sem"));
	return 0;
}
