/* capget as Linux answers it: the version probe (an unknown version gets
 * _LINUX_CAPABILITY_VERSION_3 written back), the caller's sets with v3 and
 * v1, and a pid that is not the caller's. Output is the same on every run. */
#include <errno.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

struct header {
	unsigned int version;
	int pid;
};

struct data {
	unsigned int effective, permitted, inheritable;
};

static long capget(struct header *h, struct data *d)
{
	return syscall(SYS_capget, h, d);
}

int main(void)
{
	struct header h = { 0, 0 };
	struct data d[2] = { { 0 } };
	long r;

	r = capget(&h, NULL);
	printf("probe: %ld version %#x\n", r, h.version);
	h.version = 0x12345678;
	r = capget(&h, d);
	printf("bad version: %ld errno %d version %#x\n", r, r ? errno : 0, h.version);
	h.version = 0x20080522;
	r = capget(&h, d);
	printf("v3: %ld eff %#x %#x prm %#x %#x inh %#x %#x\n", r, d[0].effective,
	       d[1].effective, d[0].permitted, d[1].permitted, d[0].inheritable,
	       d[1].inheritable);
	h.version = 0x19980330;
	h.pid = getpid();
	r = capget(&h, d);
	printf("v1 own pid: %ld eff %#x\n", r, d[0].effective);
	h.version = 0x20080522;
	h.pid = 999999;
	r = capget(&h, d);
	printf("no such pid: %ld errno %d\n", r, r ? errno : 0);
	return 0;
}
