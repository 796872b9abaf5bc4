/*
 * bench_threads N: thread costs, timed inside the program (natively and in
 * the sandbox, for the bench's ratios). Prints, in ns:
 *   thread_create_join_ns  pthread_create of a thread that returns at
 *                          once, then pthread_join, per round
 *   futex_pingpong_ns      one round trip between two threads that hand a
 *                          word back and forth with FUTEX_WAIT/FUTEX_WAKE
 *                          (two wake-ups, two switches), per round
 *   mutex_contended_ns     4 threads each take and release one
 *                          pthread_mutex 10*N times, a little work inside;
 *                          wall time per lock+unlock of all threads
 */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* <linux/futex.h> is not in musl-gcc's include path. */
#define FUTEX_WAIT 0
#define FUTEX_WAKE 1
#define FUTEX_PRIVATE_FLAG 128

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void *nothing(void *arg)
{
	return arg;
}

static long futex(atomic_int *uaddr, int op, int val)
{
	return syscall(SYS_futex, uaddr, op | FUTEX_PRIVATE_FLAG, val, NULL,
		       NULL, 0);
}

/* 0: the main thread's turn to be answered, 1: the partner's turn. */
static atomic_int turn;
static int rounds;

static void wait_for(int want)
{
	int v;
	while ((v = atomic_load(&turn)) != want)
		futex(&turn, FUTEX_WAIT, v);
}

static void pass_to(int next)
{
	atomic_store(&turn, next);
	futex(&turn, FUTEX_WAKE, 1);
}

static void *partner(void *arg)
{
	(void)arg;
	for (int i = 0; i < rounds; i++) {
		wait_for(1);
		pass_to(0);
	}
	return NULL;
}

#define CONTENDERS 4
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long counter, mixed;
static int per_thread;

static void *contend(void *arg)
{
	(void)arg;
	for (int i = 0; i < per_thread; i++) {
		pthread_mutex_lock(&lock);
		for (int k = 0; k < 16; k++)
			mixed = mixed * 33 + k;
		counter++;
		pthread_mutex_unlock(&lock);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	if (n <= 0)
		return 2;
	pthread_t t;

	double t0 = now_ns();
	for (int i = 0; i < n; i++)
		if (pthread_create(&t, NULL, nothing, NULL) != 0 ||
		    pthread_join(t, NULL) != 0)
			return 1;
	printf("thread_create_join_ns %.0f\n", (now_ns() - t0) / n);

	rounds = n * 10;
	atomic_store(&turn, 0);
	if (pthread_create(&t, NULL, partner, NULL) != 0)
		return 1;
	t0 = now_ns();
	for (int i = 0; i < rounds; i++) {
		pass_to(1);
		wait_for(0);
	}
	double pp = (now_ns() - t0) / rounds;
	if (pthread_join(t, NULL) != 0)
		return 1;
	printf("futex_pingpong_ns %.0f\n", pp);

	per_thread = n * 10;
	pthread_t c[CONTENDERS];
	t0 = now_ns();
	for (int i = 0; i < CONTENDERS; i++)
		if (pthread_create(&c[i], NULL, contend, NULL) != 0)
			return 1;
	for (int i = 0; i < CONTENDERS; i++)
		if (pthread_join(c[i], NULL) != 0)
			return 1;
	double mu = (now_ns() - t0) / ((double)per_thread * CONTENDERS);
	if (counter != (unsigned long)per_thread * CONTENDERS)
		return 1;
	printf("mutex_contended_ns %.0f\n", mu);
	return 0;
}
