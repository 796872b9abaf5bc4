/* What a few system calls return, for the seccomp tests: run in the same
 * OCI bundle (same linux.seccomp) under runc and under qrun, the output
 * and exit status must match. argv[1] names the last call, which the
 * profile may make fatal: "mkdir" (SCMP_ACT_TRAP) or "sync"
 * (SCMP_ACT_KILL_PROCESS). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

static void report(const char *what, long r) {
    if (r < 0)
        printf("%s: errno %d (%s)\n", what, errno, strerror(errno));
    else
        printf("%s: ok\n", what);
    fflush(stdout);
}

int main(int argc, char **argv) {
    struct utsname u;
    report("getppid", syscall(SYS_getppid));
    report("getuid", syscall(SYS_getuid));
    int s = socket(AF_INET, SOCK_STREAM, 0);
    report("socket(AF_INET)", s);
    if (s >= 0)
        close(s);
    report("socket(AF_VSOCK)", socket(40, SOCK_STREAM, 0));
    report("uname", uname(&u));
    report("getpriority", syscall(SYS_getpriority, 0, 0));
    if (argc > 1 && strcmp(argv[1], "mkdir") == 0) {
        report("mkdir", mkdir("/tmp-seccomp", 0755));
    } else if (argc > 1 && strcmp(argv[1], "sync") == 0) {
        sync();
        printf("sync: returned\n");
    }
    printf("done\n");
    return 0;
}
