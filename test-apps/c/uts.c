/* uts: sethostname/setdomainname in the caller's UTS namespace (run
 * natively under `unshare --uts`, and in a sandbox, which is its own):
 * the new names in uname and /proc/sys/kernel/hostname, EINVAL for a name
 * over 64 bytes, EFAULT for a bad pointer; with "drop", after dropping
 * CAP_SYS_ADMIN from the bounding and effective sets, EPERM (runc's
 * default set has no CAP_SYS_ADMIN). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#define CAP_SYS_ADMIN 21

static void show(void)
{
	struct utsname u;
	uname(&u);
	char buf[128] = "";
	FILE *f = fopen("/proc/sys/kernel/hostname", "r");
	if (f) {
		if (!fgets(buf, sizeof buf, f))
			buf[0] = 0;
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = 0;
	printf("nodename %s, domainname %s, /proc hostname %s\n", u.nodename, u.domainname, buf);
}

static void rc(const char *what, long r)
{
	printf("%s: %s\n", what, r == 0 ? "0" : strerror(errno));
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc > 1 && strcmp(argv[1], "drop") == 0) {
		/* Effective set without CAP_SYS_ADMIN: capset via the raw call. */
		struct { unsigned v; int pid; } h = { 0x20080522, 0 };
		struct { unsigned eff, perm, inh; } d[2];
		syscall(SYS_capget, &h, d);
		d[0].eff &= ~(1u << CAP_SYS_ADMIN);
		rc("capset without CAP_SYS_ADMIN", syscall(SYS_capset, &h, d));
		rc("sethostname", sethostname("nope", 4));
		rc("setdomainname", setdomainname("nope", 4));
		show();
		return 0;
	}
	rc("sethostname qrun-uts-test", sethostname("qrun-uts-test", 13));
	rc("setdomainname example.test", setdomainname("example.test", 12));
	show();
	char big[65];
	memset(big, 'x', sizeof big);
	rc("sethostname of 65 bytes", sethostname(big, 65));
	rc("sethostname of 64 bytes", sethostname(big, 64));
	rc("sethostname bad pointer", syscall(SYS_sethostname, (void *)8, 4));
	rc("sethostname empty", sethostname("", 0));
	show();
	return 0;
}
