/* execve, run as a chain of programs. `exec_chain start` sets up fds,
 * signal dispositions and a blocked signal, checks the errors execve must
 * return with the old program still running (ENOENT, EACCES, ENOEXEC,
 * EFAULT, E2BIG, ELOOP, execveat's), then execs itself
 * (/proc/self/exe) as `stage2` with a new argv and environment; stage2
 * checks what survives an exec and what does not, then execs a `#!`
 * script whose interpreter is itself (`stage3`), which cleans up and
 * execs /bin/echo (a dynamic program) to finish. Output is stable: no
 * fd numbers, pids or random names. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "checks.h"

extern char **environ;

static char dir[64];

static void on_usr1(int sig) { (void)sig; }

static void write_file(const char *name, const char *text, mode_t mode) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
        printf("FAIL cannot write %s\n", name);
        exit(1);
    }
    close(fd);
    chmod(path, mode);
}

static long try_exec(const char *name, char **argv) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return execve(path, argv, environ);
}

static const char *base(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static void start(void) {
    strcpy(dir, "/tmp/exec_chain.XXXXXX");
    if (!mkdtemp(dir)) {
        printf("FAIL mkdtemp\n");
        exit(1);
    }
    int keep = open("/dev/null", O_RDONLY);
    int cloexec = open("/dev/null", O_RDONLY | O_CLOEXEC);
    ok_line("open keep", keep);
    ok_line("open cloexec", cloexec);
    signal(SIGUSR1, on_usr1);
    signal(SIGUSR2, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);

    char *args[] = {"x", NULL};
    err_line("execve missing", execve("/nonexistent/prog", args, environ), ENOENT);
    err_line("execve directory", execve("/tmp", args, environ), EACCES);
    err_line("execve device", execve("/dev/null", args, environ), EACCES);
    write_file("plain", "#!/bin/sh\necho no\n", 0644);
    err_line("execve no x bit", try_exec("plain", args), EACCES);
    err_line("execve not a dir", try_exec("plain/x", args), ENOTDIR);
    write_file("garbage", "garbage, not a program\n", 0755);
    err_line("execve garbage", try_exec("garbage", args), ENOEXEC);
    write_file("empty", "", 0755);
    err_line("execve empty", try_exec("empty", args), ENOEXEC);
    write_file("badelf", "\177ELF\2\1\1\0\0\0\0\0\0\0\0\0\3\0\76\0", 0755);
    err_line("execve bad elf", try_exec("badelf", args), ENOEXEC);
    write_file("nointerp", "#!/nonexistent/interp -x\n", 0755);
    err_line("execve missing interpreter", try_exec("nointerp", args), ENOENT);
    char loop[256];
    snprintf(loop, sizeof loop, "#!%s/loop\n", dir);
    write_file("loop", loop, 0755);
    err_line("execve script loop", try_exec("loop", args), ELOOP);
    err_line("execve bad argv", syscall(SYS_execve, "/proc/self/exe", 8L, environ), EFAULT);
    char *bad_str[] = {"x", (char *)8, NULL};
    err_line("execve bad argv string", execve("/proc/self/exe", bad_str, environ), EFAULT);
    err_line("execve bad envp", syscall(SYS_execve, "/proc/self/exe", args, 8L), EFAULT);
    err_line("execve bad path", syscall(SYS_execve, 8L, args, environ), EFAULT);
    char *big = malloc(200000);
    memset(big, 'a', 199999);
    big[199999] = 0;
    char *big_args[] = {"x", big, NULL};
    err_line("execve huge string", execve("/proc/self/exe", big_args, environ), E2BIG);
    free(big);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    err_line("execveat garbage",
             syscall(SYS_execveat, dfd, "garbage", args, environ, 0), ENOEXEC);
    err_line("execveat empty path",
             syscall(SYS_execveat, AT_FDCWD, "", args, environ, 0), ENOENT);
    err_line("execveat bad flags",
             syscall(SYS_execveat, dfd, "garbage", args, environ, 0x4), EINVAL);
    close(dfd);
    line("still running after the errors");

    char env_keep[32], env_cloexec[32], env_dir[96];
    snprintf(env_keep, sizeof env_keep, "KEEP=%d", keep);
    snprintf(env_cloexec, sizeof env_cloexec, "CLOEXEC=%d", cloexec);
    snprintf(env_dir, sizeof env_dir, "DIR=%s", dir);
    char *argv[] = {"exec_chain", "stage2", "two words", "", NULL};
    char *envp[] = {"CHAIN=1", env_keep, env_cloexec, env_dir, NULL};
    fflush(stdout);
    execve("/proc/self/exe", argv, envp);
    printf("FAIL execve stage2: %s\n", rc_text(-1));
    exit(1);
}

static void stage2(int argc, char **argv) {
    printf("stage2: argc %d:", argc);
    for (int i = 0; i < argc; i++)
        printf(" [%s]", argv[i]);
    printf("\n");
    int n = 0;
    for (char **e = environ; *e; e++)
        n++;
    eq_line("stage2 env count", n, 4);
    printf("stage2 CHAIN=%s\n", getenv("CHAIN") ? getenv("CHAIN") : "(unset)");
    const char *execfn = (const char *)getauxval(AT_EXECFN);
    printf("stage2 AT_EXECFN=%s\n", execfn ? execfn : "(none)");
    int keep = atoi(getenv("KEEP") ? getenv("KEEP") : "-1");
    int cloexec = atoi(getenv("CLOEXEC") ? getenv("CLOEXEC") : "-1");
    expect_line("plain fd still open", fcntl(keep, F_GETFD) >= 0, 1);
    err_line("cloexec fd closed", fcntl(cloexec, F_GETFD), EBADF);
    struct sigaction sa;
    sigaction(SIGUSR1, NULL, &sa);
    expect_line("handled signal reset to SIG_DFL", sa.sa_handler == SIG_DFL, 1);
    sigaction(SIGUSR2, NULL, &sa);
    expect_line("ignored signal still ignored", sa.sa_handler == SIG_IGN, 1);
    sigset_t set;
    sigprocmask(SIG_BLOCK, NULL, &set);
    expect_line("blocked mask kept", sigismember(&set, SIGHUP), 1);
    stack_t ss;
    sigaltstack(NULL, &ss);
    expect_line("no alternate stack", ss.ss_flags == SS_DISABLE, 1);

    strcpy(dir, getenv("DIR") ? getenv("DIR") : "/nonexistent");
    write_file("next", "#!/proc/self/exe from-script\n", 0755);
    char path[128];
    snprintf(path, sizeof path, "%s/next", dir);
    char *next_argv[] = {"ignored argv0", "last", NULL};
    char *next_env[] = {"CHAIN=2", getenv("DIR") - 4, NULL};
    fflush(stdout);
    execve(path, next_argv, next_env);
    printf("FAIL execve script: %s\n", rc_text(-1));
    exit(1);
}

static void stage3(int argc, char **argv) {
    printf("stage3: argc %d: [%s] [%s] [%s] [%s]\n", argc, argv[0], argv[1],
           argc > 2 ? base(argv[2]) : "", argc > 3 ? argv[3] : "");
    const char *execfn = (const char *)getauxval(AT_EXECFN);
    printf("stage3 AT_EXECFN basename=%s\n", execfn ? base(execfn) : "(none)");
    printf("stage3 CHAIN=%s\n", getenv("CHAIN") ? getenv("CHAIN") : "(unset)");
    strcpy(dir, getenv("DIR") ? getenv("DIR") : "/nonexistent");
    const char *names[] = {"plain", "garbage", "empty", "badelf", "nointerp", "loop", "next"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rc_line("rmdir", rmdir(dir));
    char *echo_argv[] = {"echo", "chain", "done", NULL};
    char *echo_env[] = {NULL};
    fflush(stdout);
    execve("/bin/echo", echo_argv, echo_env);
    printf("FAIL execve /bin/echo: %s\n", rc_text(-1));
    exit(1);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc >= 2 && strcmp(argv[1], "start") == 0)
        start();
    else if (argc >= 2 && strcmp(argv[1], "stage2") == 0)
        stage2(argc, argv);
    else if (argc >= 2 && strcmp(argv[1], "from-script") == 0)
        stage3(argc, argv);
    printf("usage: exec_chain start\n");
    return 2;
}
