/*
 * threads: POSIX threads and the raw futex/tgkill calls under them.
 * `threads CASE [ARG]`; one stable line per check (no tids, no times), so
 * a native run and a sandboxed one print the same text.
 *
 *   checksum N  N threads each sum their own slice; joined; the total
 *   pingpong    a mutex and two condition variables, 2000 round trips
 *   futex       raw futex: EAGAIN, WAKE, timeouts, bitsets, requeue, WAKE_OP
 *   exitgroup   a non-leader thread calls exit(7): the process ends with 7
 *   sigproc     kill() to the process, blocked by main, handled by a worker
 *   tgkill      tgkill/tkill to one thread; a wrong tgid is ESRCH
 *   exec        execve from a non-leader thread: the pid stays
 *   hib MIB     two threads, each with MIB MiB; "ready", wait for stdin,
 *               then both check their bytes
 *   misc        gettid/getpid, affinity, getcpu, sched_yield, thread names
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* <linux/futex.h> (musl-gcc has no kernel headers). */
#define FUTEX_WAIT 0
#define FUTEX_WAKE 1
#define FUTEX_CMP_REQUEUE 4
#define FUTEX_WAKE_OP 5
#define FUTEX_LOCK_PI 6
#define FUTEX_WAIT_BITSET 9
#define FUTEX_WAKE_BITSET 10
#define FUTEX_PRIVATE_FLAG 128
#define FUTEX_CLOCK_REALTIME 256
#define FUTEX_WAIT_PRIVATE (FUTEX_WAIT | FUTEX_PRIVATE_FLAG)
#define FUTEX_WAKE_PRIVATE (FUTEX_WAKE | FUTEX_PRIVATE_FLAG)
#define FUTEX_CMP_REQUEUE_PRIVATE (FUTEX_CMP_REQUEUE | FUTEX_PRIVATE_FLAG)
#define FUTEX_WAKE_OP_PRIVATE (FUTEX_WAKE_OP | FUTEX_PRIVATE_FLAG)
#define FUTEX_LOCK_PI_PRIVATE (FUTEX_LOCK_PI | FUTEX_PRIVATE_FLAG)
#define FUTEX_WAIT_BITSET_PRIVATE (FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG)
#define FUTEX_WAKE_BITSET_PRIVATE (FUTEX_WAKE_BITSET | FUTEX_PRIVATE_FLAG)
#define FUTEX_BITSET_MATCH_ANY 0xffffffff
#define FUTEX_OP_ADD 1
#define FUTEX_OP_CMP_EQ 0
#define FUTEX_OP(op, oparg, cmp, cmparg) \
	(((op & 0xf) << 28) | ((cmp & 0xf) << 24) | ((oparg & 0xfff) << 12) | (cmparg & 0xfff))

static long futex(volatile int *uaddr, int op, int val, const struct timespec *ts,
		  volatile int *uaddr2, int val3)
{
	return syscall(SYS_futex, uaddr, op, val, ts, uaddr2, val3);
}

static pid_t tid(void) { return (pid_t)syscall(SYS_gettid); }

static double now(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* ---- checksum ---- */
#define SLICE 100000
static void *sum_slice(void *arg)
{
	uint64_t i = (uintptr_t)arg, s = 0;
	for (uint64_t k = i * SLICE; k < (i + 1) * SLICE; k++)
		s += k * k % 7919;
	if (getpid() == tid())
		s = 0; /* a thread must not have the process's id */
	return (void *)(uintptr_t)s;
}

static int checksum(int n)
{
	pthread_t t[256];
	uint64_t total = 0, expect = 0;
	if (n > 256)
		n = 256;
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, sum_slice, (void *)(uintptr_t)i)) {
			printf("create %d failed\n", i);
			return 1;
		}
	for (int i = 0; i < n; i++) {
		void *r;
		pthread_join(t[i], &r);
		total += (uintptr_t)r;
	}
	for (uint64_t k = 0; k < (uint64_t)n * SLICE; k++)
		expect += k * k % 7919;
	printf("checksum %d threads: %llu %s\n", n, (unsigned long long)total,
	       total == expect ? "ok" : "WRONG");
	return 0;
}

/* ---- pingpong ---- */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c_ping = PTHREAD_COND_INITIALIZER, c_pong = PTHREAD_COND_INITIALIZER;
static int turn, rounds_done;
#define ROUNDS 2000
static void *ponger(void *a)
{
	(void)a;
	for (int i = 0; i < ROUNDS; i++) {
		pthread_mutex_lock(&mu);
		while (turn != 1)
			pthread_cond_wait(&c_ping, &mu);
		turn = 0;
		rounds_done++;
		pthread_cond_signal(&c_pong);
		pthread_mutex_unlock(&mu);
	}
	return NULL;
}

static int pingpong(void)
{
	pthread_t t;
	pthread_create(&t, NULL, ponger, NULL);
	for (int i = 0; i < ROUNDS; i++) {
		pthread_mutex_lock(&mu);
		turn = 1;
		pthread_cond_signal(&c_ping);
		while (turn != 0)
			pthread_cond_wait(&c_pong, &mu);
		pthread_mutex_unlock(&mu);
	}
	pthread_join(t, NULL);
	printf("pingpong: %d rounds\n", rounds_done);
	return 0;
}

/* ---- futex ---- */
static volatile int fw, fw2, woke;
static void *waiter(void *a)
{
	long r = futex(&fw, (int)(uintptr_t)a, 0, NULL, NULL, FUTEX_BITSET_MATCH_ANY);
	__atomic_fetch_add(&woke, 1, __ATOMIC_SEQ_CST);
	return (void *)r;
}

static void report(const char *what, long r)
{
	printf("%s: %s\n", what, r == 0 ? "0" : r > 0 ? "positive" : strerror(errno));
}

static void timed(const char *what, int op, int absolute, clockid_t clk)
{
	struct timespec ts = {0, 50 * 1000 * 1000};
	double t0 = now(CLOCK_MONOTONIC);
	if (absolute) {
		clock_gettime(clk, &ts);
		ts.tv_nsec += 50 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
	}
	long r = futex(&fw, op, 0, &ts, NULL, FUTEX_BITSET_MATCH_ANY);
	double dt = now(CLOCK_MONOTONIC) - t0;
	printf("%s: %s, %s\n", what, r == 0 ? "0" : strerror(errno),
	       dt >= 0.045 && dt < 2.0 ? "in time" : "WRONG time");
}

static int futexes(void)
{
	fw = 1;
	report("wait on a changed value", futex(&fw, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0));
	fw = 0;
	report("wake with no waiter", futex(&fw, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0));
	report("misaligned", futex((volatile int *)((char *)&fw + 1), FUTEX_WAKE, 1, NULL, NULL, 0));
	report("bitset 0", futex(&fw, FUTEX_WAIT_BITSET, 0, NULL, NULL, 0));
	report("unmapped", futex((volatile int *)8, FUTEX_WAIT, 0, NULL, NULL, 0));
	report("realtime flag on WAIT", futex(&fw, FUTEX_WAIT | FUTEX_CLOCK_REALTIME, 0, NULL, NULL, 0));
	timed("relative timeout", FUTEX_WAIT_PRIVATE, 0, CLOCK_MONOTONIC);
	timed("absolute monotonic", FUTEX_WAIT_BITSET_PRIVATE, 1, CLOCK_MONOTONIC);
	timed("absolute realtime", FUTEX_WAIT_BITSET_PRIVATE | FUTEX_CLOCK_REALTIME, 1, CLOCK_REALTIME);
	timed("shared relative", FUTEX_WAIT, 0, CLOCK_MONOTONIC);

	/* Three waiters. */
	pthread_t t[3];
	woke = 0;
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, waiter, (void *)(uintptr_t)(i == 2 ? FUTEX_WAIT_PRIVATE : FUTEX_WAIT_BITSET_PRIVATE));
	while (1) { /* let all three block */
		usleep(20000);
		break;
	}
	for (int i = 0; i < 10; i++)
		sched_yield();
	printf("woken before wake: %d\n", woke);
	printf("wake 1: %ld\n", futex(&fw, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0));
	/* CMP_REQUEUE with a wrong expected value. */
	report("cmp_requeue mismatch", futex(&fw, FUTEX_CMP_REQUEUE_PRIVATE, 0, (void *)1, &fw2, 5));
	/* Requeue the other two to fw2, wake none now. */
	printf("cmp_requeue: %ld\n", futex(&fw, FUTEX_CMP_REQUEUE_PRIVATE, 0, (void *)8, &fw2, 0));
	printf("wake on the old word: %ld\n", futex(&fw, FUTEX_WAKE_PRIVATE, 8, NULL, NULL, 0));
	/* WAKE_OP: fw2 = old + 1; wake 1 on fw; if old == 0 wake 8 on fw2. */
	int op = FUTEX_OP(FUTEX_OP_ADD, 1, FUTEX_OP_CMP_EQ, 0);
	long n = futex(&fw, FUTEX_WAKE_OP_PRIVATE, 1, (void *)8, &fw2, op);
	printf("wake_op: %ld, word now %d\n", n, fw2);
	for (int i = 0; i < 3; i++) {
		void *r;
		pthread_join(t[i], &r);
		printf("waiter %d returned %ld\n", i, (long)r);
	}
	/* WAKE_BITSET that misses the waiter's bits. */
	fw = 0;
	woke = 0;
	pthread_create(&t[0], NULL, waiter, (void *)(uintptr_t)FUTEX_WAIT_BITSET_PRIVATE);
	for (int i = 0; i < 10; i++)
		sched_yield();
	/* Linux keys private and shared futexes apart. */
	printf("shared wake of a private waiter: %ld\n", futex(&fw, FUTEX_WAKE, 1, NULL, NULL, 0));
	while (futex(&fw, FUTEX_WAKE_BITSET_PRIVATE, 1, NULL, NULL, 2) != 1)
		usleep(1000);
	pthread_join(t[0], NULL);
	printf("wake_bitset 0x2 woke the waiter\n");
	return 0;
}

/* ---- exitgroup ---- */
static void *exiter(void *a)
{
	(void)a;
	usleep(10000);
	exit(7);
}

static int exitgroup(void)
{
	pthread_t t;
	pthread_create(&t, NULL, exiter, NULL);
	pthread_join(t, NULL);
	printf("join returned: WRONG\n");
	return 0;
}

/* ---- sigproc / tgkill ---- */
static volatile int flag;
static volatile pid_t handled_by;
static void on_sig(int s)
{
	(void)s;
	handled_by = tid();
	flag = 1;
}

static volatile pid_t worker_tid;
static void *flag_waiter(void *a)
{
	(void)a;
	worker_tid = tid();
	while (!flag)
		futex(&flag, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	return NULL;
}

static int sigproc(void)
{
	struct sigaction sa = {.sa_handler = on_sig};
	sigaction(SIGUSR1, &sa, NULL);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_t t;
	pthread_create(&t, NULL, flag_waiter, NULL);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	while (!worker_tid)
		sched_yield();
	usleep(10000);
	kill(getpid(), SIGUSR1);
	pthread_join(t, NULL);
	printf("handled by the worker: %s\n", handled_by == worker_tid ? "yes" : "WRONG");
	sigset_t pend;
	sigpending(&pend);
	printf("pending in main: %s\n", sigismember(&pend, SIGUSR1) ? "yes" : "no");
	return 0;
}

static int tgkills(void)
{
	struct sigaction sa = {.sa_handler = on_sig};
	sigaction(SIGUSR2, &sa, NULL);
	pthread_t t;
	pthread_create(&t, NULL, flag_waiter, NULL);
	while (!worker_tid)
		sched_yield();
	usleep(10000);
	report("tgkill wrong tgid", syscall(SYS_tgkill, getpid() + 100000, worker_tid, SIGUSR2));
	report("tgkill", syscall(SYS_tgkill, getpid(), worker_tid, SIGUSR2));
	pthread_join(t, NULL);
	printf("tgkill handled by the target: %s\n", handled_by == worker_tid ? "yes" : "WRONG");
	flag = 0;
	worker_tid = 0;
	pthread_create(&t, NULL, flag_waiter, NULL);
	while (!worker_tid)
		sched_yield();
	report("tkill", syscall(SYS_tkill, worker_tid, SIGUSR2));
	pthread_join(t, NULL);
	printf("tkill handled by the target: %s\n", handled_by == worker_tid ? "yes" : "WRONG");
	/* A fatal signal to one thread ends the whole process. */
	flag = 0;
	worker_tid = 0;
	pthread_create(&t, NULL, flag_waiter, NULL);
	while (!worker_tid)
		sched_yield();
	fflush(stdout);
	syscall(SYS_tgkill, getpid(), worker_tid, SIGTERM);
	pthread_join(t, NULL);
	printf("survived SIGTERM: WRONG\n");
	return 0;
}

/* ---- exec ---- */
static char *self;
static void *execer(void *a)
{
	char pid[32];
	snprintf(pid, sizeof pid, "%d", (int)getpid());
	char *argv[] = {self, "execd", pid, NULL};
	(void)a;
	execv(self, argv);
	printf("execv: %s\n", strerror(errno));
	return NULL;
}

static int exec_from_thread(void)
{
	pthread_t t;
	fflush(stdout);
	pthread_create(&t, NULL, execer, NULL);
	pthread_join(t, NULL);
	printf("join returned: WRONG\n");
	return 0;
}

static int execd(const char *pid)
{
	printf("exec'd: pid kept %s, tid = pid %s\n", atoi(pid) == getpid() ? "yes" : "WRONG",
	       tid() == getpid() ? "yes" : "WRONG");
	return 0;
}

/* ---- hib ---- */
static size_t hib_len;
static unsigned char *hib_main;
static int bad(const unsigned char *p, size_t n, unsigned seed)
{
	int b = 0;
	for (size_t i = 0; i < n; i++)
		b += p[i] != (unsigned char)(i * 131 + seed);
	return b;
}
static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 131 + seed);
}

static void *hib_worker(void *a)
{
	(void)a;
	unsigned char *mine = malloc(hib_len);
	fill(mine, hib_len, 7);
	printf("ready\n");
	fflush(stdout);
	char buf[16];
	if (read(0, buf, sizeof buf) <= 0)
		printf("stdin: closed early\n");
	printf("worker: %d bad bytes, main's: %d bad bytes\n", bad(mine, hib_len, 7),
	       bad(hib_main, hib_len, 3));
	return NULL;
}

static int hib(int mib)
{
	hib_len = (size_t)mib << 20;
	hib_main = malloc(hib_len);
	fill(hib_main, hib_len, 3);
	pthread_t t;
	pthread_create(&t, NULL, hib_worker, NULL);
	pthread_join(t, NULL);
	printf("main: %d bad bytes\n", bad(hib_main, hib_len, 3));
	return 0;
}

/* ---- misc ---- */
static void *misc_thread(void *a)
{
	(void)a;
	char name[16] = "";
	prctl(PR_SET_NAME, "worker");
	prctl(PR_GET_NAME, name);
	printf("thread name: %s\n", name);
	printf("thread getpid == process: %s, gettid differs: %s\n",
	       getpid() == *(pid_t *)a ? "yes" : "WRONG", tid() != getpid() ? "yes" : "WRONG");
	return NULL;
}

static int misc(void)
{
	pid_t me = getpid();
	printf("main gettid == getpid: %s\n", tid() == me ? "yes" : "WRONG");
	/* Linux returns the caller's tid (musl takes its main thread's tid
	 * from it at start). The main thread's clear-tid word only matters at
	 * its exit, which ends the process. */
	static int ctid;
	long st = syscall(SYS_set_tid_address, &ctid);
	printf("set_tid_address returns the tid: %s\n", st == me ? "yes" : "WRONG");
	cpu_set_t set;
	CPU_ZERO(&set);
	report("getaffinity", sched_getaffinity(0, sizeof set, &set) == 0 && CPU_ISSET(0, &set) ? 0 : -1);
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	report("setaffinity cpu 0", sched_setaffinity(0, sizeof set, &set));
	CPU_ZERO(&set);
	report("setaffinity empty", sched_setaffinity(0, sizeof set, &set));
	unsigned cpu = 99, node = 99;
	report("getcpu", syscall(SYS_getcpu, &cpu, &node, NULL));
	printf("cpu %s\n", cpu < 1024 ? "valid" : "WRONG");
	pthread_t t;
	pthread_create(&t, NULL, misc_thread, (void *)&me);
	pthread_join(t, NULL);
	char name[16] = "";
	prctl(PR_GET_NAME, name);
	printf("main name unchanged: %s\n", strcmp(name, "worker") ? "yes" : "WRONG");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	self = argv[0];
	if (argc < 2)
		return 2;
	const char *c = argv[1];
	if (!strcmp(c, "child") && argc > 2) {
		/* The case in a forked child (not pid 1 in the sandbox). */
		fflush(stdout);
		pid_t p = fork();
		if (p == 0) {
			argv[1] = argv[0];
			exit(main(argc - 1, argv + 1));
		}
		int st;
		waitpid(p, &st, 0);
		if (WIFEXITED(st))
			printf("child exited %d\n", WEXITSTATUS(st));
		else
			printf("child killed by signal %d\n", WTERMSIG(st));
		return 0;
	}
	if (!strcmp(c, "checksum"))
		return checksum(argc > 2 ? atoi(argv[2]) : 8);
	if (!strcmp(c, "pingpong"))
		return pingpong();
	if (!strcmp(c, "futex"))
		return futexes();
	if (!strcmp(c, "exitgroup"))
		return exitgroup();
	if (!strcmp(c, "sigproc"))
		return sigproc();
	if (!strcmp(c, "tgkill"))
		return tgkills();
	if (!strcmp(c, "exec"))
		return exec_from_thread();
	if (!strcmp(c, "execd"))
		return execd(argc > 2 ? argv[2] : "0");
	if (!strcmp(c, "hib"))
		return hib(argc > 2 ? atoi(argv[2]) : 8);
	if (!strcmp(c, "misc"))
		return misc();
	return 2;
}
