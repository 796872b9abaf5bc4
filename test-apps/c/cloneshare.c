/*
 * cloneshare: what clone's CLONE_FILES, CLONE_FS and CLONE_SIGHAND share
 * between two processes (not threads), and what unshare and execve take
 * back (processes.rs::clone_shares_files_fs_and_handlers). Each case
 * prints one line; the test compares them with a native run.
 *
 * Children report through their exit status (they share no memory
 * unless CLONE_VM) and wait for the parent on a pipe.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define FUTEX_WAIT 0
#define FUTEX_WAKE 1
#define FUTEX_PRIVATE_FLAG 128
#define FUTEX_WAIT_PRIVATE (FUTEX_WAIT | FUTEX_PRIVATE_FLAG)
#define FUTEX_WAKE_PRIVATE (FUTEX_WAKE | FUTEX_PRIVATE_FLAG)

static char stack[256 * 1024] __attribute__((aligned(16)));
static char *self;
static int sync_pipe[2];
static int probe_fd = -1;

static void *stack_top(void)
{
	return stack + sizeof(stack);
}

/* Starts `fn` in a child made with `flags` | SIGCHLD; returns its exit
 * status (or 100 + signal), -errno if clone failed. */
static int run(int (*fn)(void *), int flags)
{
	pid_t c = clone(fn, stack_top(), flags | SIGCHLD, NULL);
	if (c < 0)
		return -errno;
	int st;
	if (waitpid(c, &st, 0) != c)
		return -1000;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

/* Like run(), but the parent does `between` while the child waits on the
 * sync pipe, then lets it go on. */
static int run_sync(int (*fn)(void *), int flags, void (*between)(void))
{
	if (pipe(sync_pipe) != 0)
		return -2000;
	pid_t c = clone(fn, stack_top(), flags | SIGCHLD, NULL);
	if (c < 0)
		return -errno;
	between();
	char b = 'g';
	if (write(sync_pipe[1], &b, 1) != 1)
		return -3000;
	int st;
	if (waitpid(c, &st, 0) != c)
		return -1000;
	close(sync_pipe[0]);
	close(sync_pipe[1]);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

static void wait_parent(void)
{
	char b;
	while (read(sync_pipe[0], &b, 1) < 0 && errno == EINTR)
		;
}

static int fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

/* The child opens this program; its fd number is the exit status. */
static int child_opens(void *arg)
{
	(void)arg;
	int fd = open(self, O_RDONLY);
	return fd < 0 ? 255 : fd;
}

/* The child checks probe_fd after the parent closed it: 1 if EBADF. */
static int child_probe_after(void *arg)
{
	(void)arg;
	wait_parent();
	return fcntl(probe_fd, F_GETFD) < 0 && errno == EBADF;
}

static void parent_closes_probe(void)
{
	close(probe_fd);
}

static void files_case(const char *name, int flags)
{
	int fd = run(child_opens, flags);
	char magic[4] = {0};
	int seen = fd >= 0 && fd < 255 && fd_open(fd);
	if (seen && pread(fd, magic, 4, 0) != 4)
		seen = 0;
	printf("%s: child's fd %s in the parent%s\n", name, seen ? "open" : "not open",
	       seen && memcmp(magic, "\177ELF", 4) == 0 ? " (reads the ELF magic)" : "");
	if (seen)
		close(fd);
	probe_fd = open("/dev/null", O_RDONLY);
	int r = run_sync(child_probe_after, flags, parent_closes_probe);
	printf("%s: fd the parent closed is %s in the child\n", name,
	       r == 1 ? "EBADF" : r == 0 ? "still open" : "?");
}

static int child_moves(void *arg)
{
	(void)arg;
	if (chdir("/usr") != 0)
		return 1;
	umask(027);
	return 0;
}

static void fs_case(const char *name, int flags)
{
	if (chdir("/") != 0)
		return;
	umask(022);
	int r = run(child_moves, flags);
	char cwd[256];
	if (!getcwd(cwd, sizeof(cwd)))
		strcpy(cwd, "?");
	mode_t m = umask(022);
	printf("%s: child status %d, parent cwd %s umask %03o\n", name, r, cwd, (unsigned)m);
	if (chdir("/") != 0)
		return;
}

static volatile sig_atomic_t got;

static void handler(int sig)
{
	got = sig;
}

static int child_installs(void *arg)
{
	(void)arg;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	return sigaction(SIGUSR1, &sa, NULL) != 0;
}

static void sighand_case(const char *name, int flags)
{
	signal(SIGUSR1, SIG_IGN);
	int r = run(child_installs, flags);
	struct sigaction old;
	sigaction(SIGUSR1, NULL, &old);
	const char *what = old.sa_handler == handler ? "the child's handler"
			   : old.sa_handler == SIG_IGN ? "SIG_IGN"
						       : "other";
	got = 0;
	if (old.sa_handler == handler)
		raise(SIGUSR1);
	printf("%s: child status %d, parent's SIGUSR1 is %s, handler ran %d\n", name, r, what,
	       got == SIGUSR1);
	signal(SIGUSR1, SIG_DFL);
}

static int child_execs_sig(void *arg)
{
	(void)arg;
	char *argv[] = {self, "sig-child", NULL};
	execv(self, argv);
	return 99;
}

/* After the exec in a CLONE_SIGHAND child: SIGUSR2 handled before the
 * exec is SIG_DFL now (1), SIGUSR1 ignored stays ignored (2). */
static int sig_child(void)
{
	struct sigaction a, b;
	sigaction(SIGUSR2, NULL, &a);
	sigaction(SIGUSR1, NULL, &b);
	return (a.sa_handler == SIG_DFL) | ((b.sa_handler == SIG_IGN) << 1);
}

static void sighand_exec_case(void)
{
	signal(SIGUSR2, handler);
	signal(SIGUSR1, SIG_IGN);
	int r = run(child_execs_sig, CLONE_SIGHAND | CLONE_VM | CLONE_VFORK);
	struct sigaction a;
	sigaction(SIGUSR2, NULL, &a);
	printf("exec in a CLONE_SIGHAND child: status %d (3: reset, ignored kept), "
	       "parent's SIGUSR2 %s\n",
	       r, a.sa_handler == handler ? "still handled" : "lost");
	signal(SIGUSR2, SIG_DFL);
	signal(SIGUSR1, SIG_DFL);
}

static int unshare_opened = -1;

/* The parent unshared its table, then opened `unshare_opened` and closed
 * probe_fd: the child sees neither change (bit 0: probe_fd still open,
 * bit 1: the new fd not open). */
static int child_after_unshare(void *arg)
{
	(void)arg;
	wait_parent();
	return fd_open(probe_fd) | (!fd_open(unshare_opened) << 1);
}

static void parent_unshares_files(void)
{
	if (unshare(CLONE_FILES) != 0)
		printf("unshare(CLONE_FILES): %s\n", strerror(errno));
	unshare_opened = open("/dev/zero", O_RDONLY);
	close(probe_fd);
}

static int child_cwd_after_unshare(void *arg)
{
	(void)arg;
	wait_parent();
	char cwd[256];
	if (!getcwd(cwd, sizeof(cwd)))
		return 9;
	return strcmp(cwd, "/") == 0 ? 1 : 2;
}

static void parent_unshares_fs(void)
{
	if (unshare(CLONE_FS) != 0)
		printf("unshare(CLONE_FS): %s\n", strerror(errno));
	if (chdir("/usr") != 0)
		printf("chdir: %s\n", strerror(errno));
}

static void unshare_cases(void)
{
	probe_fd = open("/dev/null", O_RDONLY);
	int r = run_sync(child_after_unshare, CLONE_FILES, parent_unshares_files);
	printf("unshare(CLONE_FILES) in the parent: child status %d (3: unaffected)\n", r);
	printf("unshare(CLONE_FILES): parent's new fd %s, closed fd %s\n",
	       fd_open(unshare_opened) ? "open" : "not open",
	       fd_open(probe_fd) ? "open" : "closed");
	close(unshare_opened);
	if (chdir("/") != 0)
		return;
	r = run_sync(child_cwd_after_unshare, CLONE_FS, parent_unshares_fs);
	char cwd[256];
	if (!getcwd(cwd, sizeof(cwd)))
		strcpy(cwd, "?");
	printf("unshare(CLONE_FS) in the parent: child status %d (1: still /), parent cwd %s\n", r,
	       cwd);
	if (chdir("/") != 0)
		return;
	printf("unshare(CLONE_FILES|CLONE_FS) alone: %d\n", unshare(CLONE_FILES | CLONE_FS));
	printf("unshare(CLONE_SIGHAND) alone: %d\n", unshare(CLONE_SIGHAND));
	errno = 0;
	int u = unshare(1);
	printf("unshare(0x1): %d %s\n", u, strerror(errno));
}

static int cloexec_fd = -1, plain_fd = -1;

static int child_execs(void *arg)
{
	(void)arg;
	char a[16], b[16];
	snprintf(a, sizeof(a), "%d", cloexec_fd);
	snprintf(b, sizeof(b), "%d", plain_fd);
	char *argv[] = {self, "exec-child", a, b, NULL};
	execv(self, argv);
	return 99;
}

/* After the exec in a CLONE_FILES child: the close-on-exec fd is closed,
 * the other open; it closes that one and opens two files. */
static int exec_child(int cloexec, int plain)
{
	int st = (!fd_open(cloexec)) | (fd_open(plain) << 1);
	close(plain);
	open("/dev/null", O_RDONLY);
	open("/dev/null", O_RDONLY);
	return st;
}

static void exec_case(void)
{
	cloexec_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	plain_fd = open("/dev/null", O_RDONLY);
	int free_before = dup(0);
	close(free_before);
	int r = run(child_execs, CLONE_FILES);
	int free_after = dup(0);
	close(free_after);
	printf("exec in a CLONE_FILES child: status %d (3: cloexec closed, other open)\n", r);
	printf("exec in a CLONE_FILES child: parent's cloexec fd %s, other fd %s, "
	       "lowest free fd %s\n",
	       fd_open(cloexec_fd) ? "open" : "closed", fd_open(plain_fd) ? "open" : "closed",
	       free_before == free_after ? "unchanged" : "changed");
	close(cloexec_fd);
	close(plain_fd);
}

/* CLONE_VM without CLONE_THREAD or CLONE_VFORK: a process on the
 * parent's memory, with its own pid and exit status. */
static volatile int shared_word;
static volatile int child_pid_seen;
static char *volatile child_map;
static int vm_pipe[2];

static int vm_child_writes(void *arg)
{
	(void)arg;
	shared_word = 42;
	child_pid_seen = getpid();
	child_map = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (child_map != MAP_FAILED)
		strcpy(child_map + 4096, "mapped by the child");
	return 7;
}

/* Waits for a value the parent stores after the clone, doubles it. */
static int vm_child_answers(void *arg)
{
	(void)arg;
	char b;
	if (read(vm_pipe[0], &b, 1) != 1)
		return 1;
	shared_word *= 2;
	return 0;
}

static int vm_child_futex(void *arg)
{
	(void)arg;
	shared_word = 1;
	syscall(SYS_futex, &shared_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	_exit(5);
}

static int vm_child_faults(void *arg)
{
	(void)arg;
	shared_word = 3;
	volatile int *volatile target = NULL;
	*target = 1;
	return 0;
}

static int vm_child_blocks(void *arg)
{
	(void)arg;
	char b;
	shared_word = 11;
	return read(vm_pipe[0], &b, 1) == 1 ? 0 : 1;
}

static int q_pipe[2], block_pipe[2];
static char maps_a[65536], maps_b[65536];

/* /proc/PID/maps of `a` and `b` (0: self) read into maps_a and maps_b:
 * "same", "differ" or "unreadable". */
static const char *same_maps(pid_t a, pid_t b)
{
	char *bufs[2] = {maps_a, maps_b};
	pid_t pids[2] = {a, b};
	for (int i = 0; i < 2; i++) {
		char path[64];
		if (pids[i])
			snprintf(path, sizeof(path), "/proc/%d/maps", pids[i]);
		else
			strcpy(path, "/proc/self/maps");
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			return "unreadable";
		size_t len = 0;
		ssize_t n;
		while ((n = read(fd, bufs[i] + len, sizeof(maps_a) - 1 - len)) > 0)
			len += n;
		close(fd);
		bufs[i][len] = 0;
		if (len == 0)
			return "empty";
	}
	return strcmp(maps_a, maps_b) == 0 ? "same" : "differ";
}

/* Runs after its parent blocked in waitpid, tells the killer, blocks. */
static int vm_child_last(void *arg)
{
	(void)arg;
	char b;
	if (read(vm_pipe[0], &b, 1) != 1)
		return 1;
	shared_word = 77;
	if (write(q_pipe[1], "x", 1) != 1)
		return 2;
	return read(block_pipe[0], &b, 1) == 1 ? 0 : 3;
}

static int vm_child_execs(void *arg)
{
	(void)arg;
	shared_word = 6;
	char *argv[] = {self, "exit-4", NULL};
	execv(self, argv);
	return 99;
}

/* A process whose CLONE_VM parent exits first: it goes on on the space. */
static int vm_orphan(void *arg)
{
	(void)arg;
	char b;
	if (read(vm_pipe[0], &b, 1) != 1)
		return 1;
	shared_word += 100;
	char msg[32];
	int n = snprintf(msg, sizeof(msg), "%d", shared_word);
	return write(sync_pipe[1], msg, n) == n ? 9 : 2;
}

static volatile unsigned long spin_count;
static volatile int spin_stop;

/* Computes until the parent, computing too, sees it counted. */
static int vm_child_spins(void *arg)
{
	(void)arg;
	while (!spin_stop)
		spin_count++;
	return 0;
}

static int status_of(pid_t c)
{
	int st;
	if (waitpid(c, &st, 0) != c)
		return -1000;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

static void vm_cases(void)
{
	const int f = CLONE_VM | SIGCHLD;
	shared_word = 0;
	pid_t c = clone(vm_child_writes, stack_top(), f, NULL);
	int r = status_of(c);
	printf("CLONE_VM: status %d, word %d, own pid %s, mapping \"%s\"\n", r, shared_word,
	       child_pid_seen == c && c != getpid() ? "yes" : "no",
	       child_map == MAP_FAILED || !child_map ? "none" : child_map + 4096);

	if (pipe(vm_pipe) != 0)
		return;
	shared_word = 0;
	c = clone(vm_child_answers, stack_top(), f, NULL);
	shared_word = 21;
	if (write(vm_pipe[1], "x", 1) != 1)
		return;
	r = status_of(c);
	printf("CLONE_VM: parent stored 21 after the clone, child doubled it: %d (status %d)\n",
	       shared_word, r);

	shared_word = 0;
	pid_t ctid = -1;
	c = clone(vm_child_futex, stack_top(), f | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID, NULL,
		  NULL, NULL, &ctid);
	while (shared_word == 0)
		syscall(SYS_futex, &shared_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	while (ctid != 0)
		syscall(SYS_futex, &ctid, FUTEX_WAIT, ctid, NULL, NULL, 0);
	r = status_of(c);
	printf("CLONE_VM: futex wake from the child, ctid cleared at its _exit, status %d\n", r);

	shared_word = 0;
	c = clone(vm_child_faults, stack_top(), f, NULL);
	r = status_of(c);
	printf("CLONE_VM: child faulted: status %d, word %d, parent goes on\n", r, shared_word);

	shared_word = 0;
	c = clone(vm_child_blocks, stack_top(), f, NULL);
	while (shared_word != 11)
		sched_yield();
	printf("CLONE_VM: the child's /proc/PID/maps and the parent's: %s\n", same_maps(c, 0));
	kill(c, SIGKILL);
	r = status_of(c);
	printf("CLONE_VM: child killed while blocked: status %d\n", r);

	/* Killed by another process (not sharing the space) while it was
	 * the last of the two to run. */
	if (pipe(q_pipe) != 0 || pipe(block_pipe) != 0)
		return;
	int pid_pipe[2];
	if (pipe(pid_pipe) != 0)
		return;
	shared_word = 0;
	pid_t q = fork();
	if (q == 0) {
		pid_t v;
		char b;
		if (read(pid_pipe[0], &v, sizeof(v)) != sizeof(v) || read(q_pipe[0], &b, 1) != 1)
			_exit(1);
		/* Both are blocked; the child ran last. */
		const char *m = same_maps(v, getppid());
		_exit((kill(v, SIGKILL) == 0 ? 0 : 2) | (strcmp(m, "same") == 0 ? 0 : 4));
	}
	c = clone(vm_child_last, stack_top(), f, NULL);
	if (write(pid_pipe[1], &c, sizeof(c)) != sizeof(c) || write(vm_pipe[1], "x", 1) != 1)
		return;
	r = status_of(c);
	int qs = status_of(q);
	printf("CLONE_VM: child killed by a third process: status %d, word %d, killer %d "
	       "(0: its maps of the two were the same)\n",
	       r,
	       shared_word, qs);
	close(pid_pipe[0]);
	close(pid_pipe[1]);
	close(q_pipe[0]);
	close(q_pipe[1]);
	close(block_pipe[0]);
	close(block_pipe[1]);

	shared_word = 0;
	c = clone(vm_child_execs, stack_top(), f, NULL);
	r = status_of(c);
	printf("CLONE_VM: child exec'd: status %d, word %d\n", r, shared_word);

	spin_count = 0;
	c = clone(vm_child_spins, stack_top(), f, NULL);
	unsigned long mine = 0;
	while (spin_count < 20000000)
		mine++;
	spin_stop = 1;
	r = status_of(c);
	printf("CLONE_VM: both computing on the space: the child counted, status %d\n", r);

	/* An intermediate process P makes a CLONE_VM child and exits at once;
	 * the child goes on on the space P left and reports through a pipe. */
	if (pipe(sync_pipe) != 0)
		return;
	pid_t p = fork();
	if (p == 0) {
		shared_word = 1000;
		pid_t o = clone(vm_orphan, stack_top(), f, NULL);
		_exit(o > 0 ? 0 : 1);
	}
	r = status_of(p);
	if (write(vm_pipe[1], "x", 1) != 1)
		return;
	char buf[32] = {0};
	ssize_t n = read(sync_pipe[0], buf, sizeof(buf) - 1);
	int orphan_status = -1;
	int st;
	pid_t w = wait(&st);
	if (w > 0)
		orphan_status = WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
	printf("CLONE_VM: parent P exited (%d) first; its child read %s, status %d\n", r,
	       n > 0 ? buf : "nothing", orphan_status);
	close(sync_pipe[0]);
	close(sync_pipe[1]);
	close(vm_pipe[0]);
	close(vm_pipe[1]);
	printf("CLONE_VM: unshare(CLONE_VM) alone: %d\n", unshare(CLONE_VM));
}

/* `cloneshare hib`: hibernation with two processes on one space. The
 * parent fills 16 MiB with pattern A; its CLONE_VM child rewrites the
 * second half with pattern B, says "ready" and blocks reading stdin (the
 * parent waits in wait4) while the test hibernates and wakes the
 * sandbox; then the child checks every byte and rewrites the first
 * quarter with pattern C, and the parent checks what it sees. */
#define HIB_LEN (16u << 20)
static unsigned char *hib_mem;

static unsigned char hib_value(size_t i, unsigned seed)
{
	return (unsigned char)((i >> 12) * 7 + (i & 0xfff) * 13 + seed);
}

static size_t hib_fill(size_t from, size_t to, unsigned seed, int check)
{
	size_t bad = 0;
	for (size_t i = from; i < to; i++) {
		if (check)
			bad += hib_mem[i] != hib_value(i, seed);
		else
			hib_mem[i] = hib_value(i, seed);
	}
	return bad;
}

static int hib_child(void *arg)
{
	(void)arg;
	hib_fill(HIB_LEN / 2, HIB_LEN, 'B', 0);
	if (write(1, "ready\n", 6) != 6)
		return 1;
	char line[16];
	if (read(0, line, sizeof(line)) <= 0)
		return 2;
	size_t bad = hib_fill(0, HIB_LEN / 2, 'A', 1) + hib_fill(HIB_LEN / 2, HIB_LEN, 'B', 1);
	hib_fill(0, HIB_LEN / 4, 'C', 0);
	char msg[64];
	int n = snprintf(msg, sizeof(msg), "child: %zu bad bytes\n", bad);
	return write(1, msg, n) == n ? 0 : 3;
}

static int hib_main(void)
{
	hib_mem = malloc(HIB_LEN);
	if (!hib_mem)
		return 2;
	hib_fill(0, HIB_LEN, 'A', 0);
	pid_t c = clone(hib_child, stack_top(), CLONE_VM | SIGCHLD, NULL);
	int r = status_of(c);
	size_t bad = hib_fill(0, HIB_LEN / 4, 'C', 1) + hib_fill(HIB_LEN / 4, HIB_LEN / 2, 'A', 1) +
		     hib_fill(HIB_LEN / 2, HIB_LEN, 'B', 1);
	printf("parent: %zu bad bytes, child status %d\n", bad, r);
	return 0;
}

/* vfork from a process with another thread (which computes meanwhile):
 * the child still runs on the parent's memory. */
static volatile int vfork_word;

static void *spinner(void *arg)
{
	(void)arg;
	while (!spin_stop)
		spin_count++;
	return NULL;
}

static void threaded_vfork_case(void)
{
	pthread_t t;
	spin_stop = 0;
	if (pthread_create(&t, NULL, spinner, NULL) != 0)
		return;
	vfork_word = 0;
	pid_t c = vfork();
	if (c == 0) {
		vfork_word = 5;
		_exit(3);
	}
	int r = status_of(c);
	spin_stop = 1;
	pthread_join(t, NULL);
	printf("vfork from a process with threads: status %d, word %d\n", r, vfork_word);

	/* posix_spawn of a missing program from a process with threads: glibc
	 * reports the exec error through the memory the child shares. */
	spin_stop = 0;
	if (pthread_create(&t, NULL, spinner, NULL) != 0)
		return;
	char *argv[] = {"/no/such/program", NULL};
	pid_t sp;
	int e = posix_spawn(&sp, argv[0], NULL, NULL, argv, NULL);
	if (e == 0)
		r = status_of(sp);
	spin_stop = 1;
	pthread_join(t, NULL);
	printf("posix_spawn from a process with threads: %s%s\n", strerror(e),
	       e == 0 && r == 127 ? " (child exited 127)" : "");
}

int main(int argc, char **argv)
{
	self = argv[0];
	if (argc == 4 && strcmp(argv[1], "exec-child") == 0)
		return exec_child(atoi(argv[2]), atoi(argv[3]));
	if (argc == 2 && strcmp(argv[1], "sig-child") == 0)
		return sig_child();
	if (argc == 2 && strcmp(argv[1], "exit-4") == 0)
		return 4;
	if (argc == 2 && strcmp(argv[1], "hib") == 0)
		return hib_main();
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	setvbuf(stdout, NULL, _IONBF, 0);

	files_case("CLONE_FILES", CLONE_FILES);
	files_case("no CLONE_FILES", 0);
	fs_case("CLONE_FS", CLONE_FS);
	fs_case("no CLONE_FS", 0);
	sighand_case("CLONE_SIGHAND|CLONE_VM|CLONE_VFORK",
		     CLONE_SIGHAND | CLONE_VM | CLONE_VFORK);
	sighand_case("CLONE_VM|CLONE_VFORK", CLONE_VM | CLONE_VFORK);
	sighand_case("no flags", 0);
	sighand_exec_case();
	errno = 0;
	long r = syscall(SYS_clone, CLONE_SIGHAND | SIGCHLD, 0, 0, 0, 0);
	if (r == 0)
		_exit(0);
	printf("CLONE_SIGHAND without CLONE_VM: %ld %s\n", r, strerror(errno));
	unshare_cases();
	exec_case();
	vm_cases();
	threaded_vfork_case();
	printf("done\n");
	return 0;
}
