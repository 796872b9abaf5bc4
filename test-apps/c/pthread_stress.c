/*
 * pthread_stress CASE: pthreads under load, for native vs sandbox
 * comparison (built with musl, and with glibc as pthread_stress_glibc).
 * Every case prints deterministic lines and exits 0, or prints WRONG.
 *   create N     N threads created and joined in batches of 100, each
 *                returning a value derived from its index
 *   mutex        8 threads x 20000 increments under one mutex
 *   condvar      4 producers, 4 consumers, a 16-slot queue
 *   barrier      5 threads x 200 rounds of pthread_barrier_wait
 *   tls          __thread values (initialised and set) per thread
 *   cancel       pthread_cancel of threads blocked in sleep() and read()
 *                (cleanup handlers run), and of a thread with
 *                cancellation disabled until it re-enables it
 *   sigwait      a dedicated thread sigwait()s signals sent with kill()
 *                and pthread_kill()
 *   kill         pthread_kill to one thread runs the handler there
 *   fault        a thread dereferences NULL: the process dies of SIGSEGV
 *   all          every case but fault, create with 10000
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int failed;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			printf("WRONG %s:%d: ", __func__, __LINE__);         \
			printf(__VA_ARGS__);                                 \
			printf("\n");                                        \
			failed = 1;                                          \
		}                                                            \
	} while (0)

static void *square(void *arg)
{
	uintptr_t i = (uintptr_t)arg;
	return (void *)(i * i + 1);
}

static void case_create(int n)
{
	enum { BATCH = 100 };
	pthread_t t[BATCH];
	unsigned long long sum = 0, want = 0;
	int made = 0;
	while (made < n) {
		int k = n - made < BATCH ? n - made : BATCH;
		for (int j = 0; j < k; j++) {
			int e = pthread_create(&t[j], NULL, square,
					       (void *)(uintptr_t)(made + j));
			CHECK(e == 0, "pthread_create %d: %s", made + j,
			      strerror(e));
			if (e)
				return;
		}
		for (int j = 0; j < k; j++) {
			void *r;
			int e = pthread_join(t[j], &r);
			CHECK(e == 0, "pthread_join: %s", strerror(e));
			sum += (uintptr_t)r;
			unsigned long long i = made + j;
			want += i * i + 1;
		}
		made += k;
	}
	CHECK(sum == want, "sum %llu want %llu", sum, want);
	printf("create: %d threads joined, sum %llu\n", made, sum);
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long shared_count;

static void *incr(void *arg)
{
	(void)arg;
	for (int i = 0; i < 20000; i++) {
		pthread_mutex_lock(&mu);
		long v = shared_count;
		if ((i & 255) == 0)
			sched_yield();
		shared_count = v + 1;
		pthread_mutex_unlock(&mu);
	}
	return NULL;
}

static void case_mutex(void)
{
	pthread_t t[8];
	for (int i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, incr, NULL);
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	CHECK(shared_count == 8 * 20000, "count %ld", shared_count);
	printf("mutex: count %ld\n", shared_count);
	CHECK(pthread_mutex_trylock(&mu) == 0, "trylock of a free mutex");
	int e = pthread_mutex_trylock(&mu);
	CHECK(e == EBUSY, "trylock of a held mutex: %d", e);
	pthread_mutex_unlock(&mu);
	printf("mutex: trylock busy ok\n");
}

enum { SLOTS = 16, ITEMS = 5000, PRODUCERS = 4, CONSUMERS = 4 };
static int queue[SLOTS];
static int q_head, q_len, q_done;
static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t q_not_full = PTHREAD_COND_INITIALIZER;
static long long consumed_sum[CONSUMERS];

static void *producer(void *arg)
{
	int base = (int)(uintptr_t)arg * ITEMS;
	for (int i = 0; i < ITEMS; i++) {
		pthread_mutex_lock(&q_mu);
		while (q_len == SLOTS)
			pthread_cond_wait(&q_not_full, &q_mu);
		queue[(q_head + q_len) % SLOTS] = base + i;
		q_len++;
		pthread_cond_signal(&q_not_empty);
		pthread_mutex_unlock(&q_mu);
	}
	return NULL;
}

static void *consumer(void *arg)
{
	int me = (int)(uintptr_t)arg;
	for (;;) {
		pthread_mutex_lock(&q_mu);
		while (q_len == 0 && !q_done)
			pthread_cond_wait(&q_not_empty, &q_mu);
		if (q_len == 0) {
			pthread_mutex_unlock(&q_mu);
			return NULL;
		}
		int v = queue[q_head];
		q_head = (q_head + 1) % SLOTS;
		q_len--;
		pthread_cond_signal(&q_not_full);
		pthread_mutex_unlock(&q_mu);
		consumed_sum[me] += v;
	}
}

static void case_condvar(void)
{
	pthread_t p[PRODUCERS], c[CONSUMERS];
	for (int i = 0; i < CONSUMERS; i++)
		pthread_create(&c[i], NULL, consumer, (void *)(uintptr_t)i);
	for (int i = 0; i < PRODUCERS; i++)
		pthread_create(&p[i], NULL, producer, (void *)(uintptr_t)i);
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(p[i], NULL);
	pthread_mutex_lock(&q_mu);
	q_done = 1;
	pthread_cond_broadcast(&q_not_empty);
	pthread_mutex_unlock(&q_mu);
	long long sum = 0;
	for (int i = 0; i < CONSUMERS; i++) {
		pthread_join(c[i], NULL);
		sum += consumed_sum[i];
	}
	long long n = (long long)PRODUCERS * ITEMS;
	CHECK(sum == n * (n - 1) / 2, "sum %lld", sum);
	printf("condvar: %lld items, sum %lld\n", n, sum);

	/* A timed wait that nobody signals times out. */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 20 * 1000 * 1000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&q_mu);
	int e = pthread_cond_timedwait(&q_not_empty, &q_mu, &ts);
	pthread_mutex_unlock(&q_mu);
	CHECK(e == ETIMEDOUT, "timedwait: %d", e);
	printf("condvar: timedwait %s\n", e == ETIMEDOUT ? "ETIMEDOUT" : "?");
}

enum { B_THREADS = 5, B_ROUNDS = 200 };
static pthread_barrier_t barrier;
static int phase[B_THREADS];
static int serials;

static void *barrier_worker(void *arg)
{
	int me = (int)(uintptr_t)arg;
	for (int r = 0; r < B_ROUNDS; r++) {
		phase[me] = r;
		int e = pthread_barrier_wait(&barrier);
		if (e == PTHREAD_BARRIER_SERIAL_THREAD)
			__atomic_add_fetch(&serials, 1, __ATOMIC_SEQ_CST);
		else
			CHECK(e == 0, "barrier_wait %d", e);
		/* everyone has reached round r */
		for (int k = 0; k < B_THREADS; k++)
			CHECK(phase[k] >= r, "thread %d at %d in round %d", k,
			      phase[k], r);
		pthread_barrier_wait(&barrier);
	}
	return NULL;
}

static void case_barrier(void)
{
	pthread_t t[B_THREADS];
	pthread_barrier_init(&barrier, NULL, B_THREADS);
	for (int i = 0; i < B_THREADS; i++)
		pthread_create(&t[i], NULL, barrier_worker, (void *)(uintptr_t)i);
	for (int i = 0; i < B_THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&barrier);
	CHECK(serials == B_ROUNDS, "serial threads %d", serials);
	printf("barrier: %d rounds, %d serial\n", B_ROUNDS, serials);
}

static __thread int tls_init = 42;
static __thread long tls_val;
static __thread char tls_buf[64];

static void *tls_worker(void *arg)
{
	long me = (long)(uintptr_t)arg;
	int ok = tls_init == 42 && tls_val == 0 && tls_buf[0] == 0;
	tls_init = (int)me;
	tls_val = me * 1000 + 7;
	snprintf(tls_buf, sizeof tls_buf, "thread %ld", me);
	for (int i = 0; i < 50; i++) {
		sched_yield();
		char want[64];
		snprintf(want, sizeof want, "thread %ld", me);
		if (tls_init != me || tls_val != me * 1000 + 7 ||
		    strcmp(tls_buf, want) != 0)
			ok = 0;
	}
	return (void *)(uintptr_t)ok;
}

static void case_tls(void)
{
	enum { N = 16 };
	pthread_t t[N];
	tls_init = -1;
	tls_val = -1;
	for (int i = 0; i < N; i++)
		pthread_create(&t[i], NULL, tls_worker, (void *)(uintptr_t)(i + 1));
	int good = 0;
	for (int i = 0; i < N; i++) {
		void *r;
		pthread_join(t[i], &r);
		good += r != NULL;
	}
	CHECK(good == N, "%d of %d threads saw their own TLS", good, N);
	CHECK(tls_init == -1 && tls_val == -1, "main's TLS changed");
	printf("tls: %d threads kept their own values, main's intact\n", good);
}

static int cleanups;
static int pipe_fds[2];
static volatile int started;

static void cleanup(void *arg)
{
	(void)arg;
	__atomic_add_fetch(&cleanups, 1, __ATOMIC_SEQ_CST);
}

static void *sleeper(void *arg)
{
	(void)arg;
	pthread_cleanup_push(cleanup, NULL);
	__atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
	sleep(100);
	pthread_cleanup_pop(0);
	return NULL;
}

static void *reader(void *arg)
{
	(void)arg;
	char c;
	pthread_cleanup_push(cleanup, NULL);
	__atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
	while (read(pipe_fds[0], &c, 1) >= 0 || errno == EINTR)
		;
	pthread_cleanup_pop(0);
	return NULL;
}

static volatile int may_enable;

static void *deferred(void *arg)
{
	(void)arg;
	int old;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	__atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
	while (!may_enable)
		usleep(1000);
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
	pthread_testcancel();
	return (void *)1;
}

static void case_cancel(void)
{
	if (pipe(pipe_fds) != 0) {
		CHECK(0, "pipe");
		return;
	}
	pthread_t s, r, d;
	pthread_create(&s, NULL, sleeper, NULL);
	pthread_create(&r, NULL, reader, NULL);
	pthread_create(&d, NULL, deferred, NULL);
	while (started < 3)
		usleep(1000);
	usleep(20000); /* let them block */
	pthread_cancel(s);
	pthread_cancel(r);
	pthread_cancel(d);
	void *rs, *rr;
	pthread_join(s, &rs);
	pthread_join(r, &rr);
	CHECK(rs == PTHREAD_CANCELED, "sleeper returned %p", rs);
	CHECK(rr == PTHREAD_CANCELED, "reader returned %p", rr);
	printf("cancel: sleep %s, read %s, cleanups %d\n",
	       rs == PTHREAD_CANCELED ? "canceled" : "returned",
	       rr == PTHREAD_CANCELED ? "canceled" : "returned", cleanups);
	may_enable = 1;
	void *rd;
	pthread_join(d, &rd);
	CHECK(rd == PTHREAD_CANCELED, "deferred returned %p", rd);
	printf("cancel: disabled then enabled: %s\n",
	       rd == PTHREAD_CANCELED ? "canceled" : "returned");
	close(pipe_fds[0]);
	close(pipe_fds[1]);
}

static sigset_t wait_set;
static int got[3];

static void *signal_thread(void *arg)
{
	(void)arg;
	for (int i = 0; i < 3; i++) {
		int sig = 0;
		int e = sigwait(&wait_set, &sig);
		CHECK(e == 0, "sigwait %d", e);
		got[i] = sig;
	}
	return NULL;
}

static void case_sigwait(void)
{
	sigemptyset(&wait_set);
	sigaddset(&wait_set, SIGUSR1);
	sigaddset(&wait_set, SIGUSR2);
	sigaddset(&wait_set, SIGTERM);
	/* blocked in every thread, so only sigwait takes them */
	pthread_sigmask(SIG_BLOCK, &wait_set, NULL);
	pthread_t t;
	pthread_create(&t, NULL, signal_thread, NULL);
	usleep(20000);
	kill(getpid(), SIGUSR1);
	usleep(20000);
	pthread_kill(t, SIGUSR2);
	usleep(20000);
	kill(getpid(), SIGTERM);
	pthread_join(t, NULL);
	printf("sigwait: %s %s %s\n", strsignal(got[0]), strsignal(got[1]),
	       strsignal(got[2]));
	CHECK(got[0] == SIGUSR1 && got[1] == SIGUSR2 && got[2] == SIGTERM,
	      "order %d %d %d", got[0], got[1], got[2]);

	/* Nothing pending: a timed wait ends with EAGAIN. */
	struct timespec ts = {0, 20 * 1000 * 1000};
	siginfo_t si;
	int r = sigtimedwait(&wait_set, &si, &ts);
	printf("sigtimedwait, none pending: %d %s\n", r,
	       r < 0 && errno == EAGAIN ? "EAGAIN" : "?");
	/* One pending: taken at once with who sent it. */
	kill(getpid(), SIGUSR2);
	struct timespec zero = {0, 0};
	memset(&si, 0, sizeof si);
	r = sigtimedwait(&wait_set, &si, &zero);
	printf("sigtimedwait, pending: %s, code %d, from self %s\n",
	       strsignal(r), si.si_code, si.si_pid == getpid() ? "yes" : "no");
	pthread_sigmask(SIG_UNBLOCK, &wait_set, NULL);
}

static volatile pid_t handled_tid;
static volatile int target_go;

static void on_usr1(int sig)
{
	(void)sig;
	handled_tid = (pid_t)syscall(SYS_gettid);
}

static void *kill_target(void *arg)
{
	pid_t *tid = arg;
	*tid = (pid_t)syscall(SYS_gettid);
	__atomic_store_n(&target_go, 1, __ATOMIC_SEQ_CST);
	while (handled_tid == 0)
		usleep(1000);
	return NULL;
}

static void case_kill(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	pid_t tid = 0;
	pthread_t t;
	pthread_create(&t, NULL, kill_target, &tid);
	while (!target_go)
		usleep(1000);
	int e = pthread_kill(t, SIGUSR1);
	CHECK(e == 0, "pthread_kill %d", e);
	pthread_join(t, NULL);
	CHECK(handled_tid == tid, "handled in %d, target %d", handled_tid, tid);
	printf("kill: handled in the target thread: %s\n",
	       handled_tid == tid ? "yes" : "no");
	e = pthread_kill(pthread_self(), 0);
	printf("kill: signal 0 to self: %d\n", e);
	signal(SIGUSR1, SIG_DFL);
}

static void *faulter(void *arg)
{
	(void)arg;
	usleep(10000);
	*(volatile int *)(uintptr_t)arg = 1;
	return NULL;
}

static void case_fault(void)
{
	pthread_t t;
	printf("fault: a thread dereferences NULL\n");
	fflush(stdout);
	pthread_create(&t, NULL, faulter, NULL);
	pthread_join(t, NULL);
	printf("WRONG: the process survived\n");
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *c = argc > 1 ? argv[1] : "all";
	int all = strcmp(c, "all") == 0;
	if (strcmp(c, "create") == 0)
		case_create(argc > 2 ? atoi(argv[2]) : 10000);
	if (all)
		case_create(10000);
	if (all || strcmp(c, "mutex") == 0)
		case_mutex();
	if (all || strcmp(c, "condvar") == 0)
		case_condvar();
	if (all || strcmp(c, "barrier") == 0)
		case_barrier();
	if (all || strcmp(c, "tls") == 0)
		case_tls();
	if (all || strcmp(c, "cancel") == 0)
		case_cancel();
	if (all || strcmp(c, "sigwait") == 0)
		case_sigwait();
	if (all || strcmp(c, "kill") == 0)
		case_kill();
	if (strcmp(c, "fault") == 0)
		case_fault();
	return failed;
}
