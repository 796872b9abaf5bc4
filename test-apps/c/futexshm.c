/*
 * Futexes in MAP_SHARED | MAP_ANONYMOUS memory between a parent and its
 * forked child, natively and in the sandbox: a shared FUTEX_WAIT in one
 * process is woken by the other's FUTEX_WAKE (also with the region
 * mremap'ed to another address in the waker), a private one is not, and a
 * robust process-shared mutex held by a child that exits is handed to the
 * waiting parent with EOWNERDEAD.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* <linux/futex.h>'s, which musl's headers do not carry. */
#define FUTEX_WAIT 0
#define FUTEX_WAKE 1
#define FUTEX_PRIVATE_FLAG 128
#define FUTEX_WAIT_PRIVATE (FUTEX_WAIT | FUTEX_PRIVATE_FLAG)
#define FUTEX_WAKE_PRIVATE (FUTEX_WAKE | FUTEX_PRIVATE_FLAG)

struct shared {
	volatile uint32_t word;
	volatile uint32_t waiting;
	pthread_mutex_t lock;
};

static long futex(volatile uint32_t *w, int op, uint32_t val, long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	return syscall(SYS_futex, w, op, val, ms ? &ts : NULL, NULL, 0);
}

static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* The child waits on the word (`op`); the parent wakes it once the child
 * is waiting. Prints what each side saw. */
static void wake_across(struct shared *s, const char *what, int op, int move)
{
	s->word = 0;
	s->waiting = 0;
	pid_t c = fork();
	if (c == 0) {
		s->waiting = 1;
		long r = futex(&s->word, op, 0, 3000);
		_exit(r == 0 ? 0 : errno == ETIMEDOUT ? 1 : 2);
	}
	while (!s->waiting)
		pause_ms(1);
	pause_ms(100);
	volatile uint32_t *w = &s->word;
	struct shared *moved = NULL;
	if (move) {
		/* The waker's mapping moves; the word is the same. */
		moved = mremap(s, 4096, 4096, MREMAP_MAYMOVE | MREMAP_FIXED,
			       (char *)s + (1 << 20));
		if (moved == MAP_FAILED) {
			printf("%s: mremap failed %d\n", what, errno);
			exit(1);
		}
		w = &moved->word;
	}
	*w = 1;
	long woken = futex(w, op == FUTEX_WAIT ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, 1, 0);
	int st;
	waitpid(c, &st, 0);
	const char *how = WEXITSTATUS(st) == 0 ? "woken" : WEXITSTATUS(st) == 1 ? "timed out" : "error";
	printf("%s: wake returned %ld, child %s\n", what, woken, how);
	if (move && mremap(moved, 4096, 4096, MREMAP_MAYMOVE | MREMAP_FIXED, s) == MAP_FAILED) {
		printf("%s: mremap back failed\n", what);
		exit(1);
	}
}

static void robust(struct shared *s)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&s->lock, &a);
	s->waiting = 0;
	pid_t c = fork();
	if (c == 0) {
		pthread_mutex_lock(&s->lock);
		s->waiting = 1;
		pause_ms(300);
		_exit(0); /* dies holding it */
	}
	while (!s->waiting)
		pause_ms(1);
	int r = pthread_mutex_lock(&s->lock);
	printf("robust: lock after the owner died: %s\n",
	       r == EOWNERDEAD ? "EOWNERDEAD" : r == 0 ? "0" : "other");
	if (r == EOWNERDEAD) {
		pthread_mutex_consistent(&s->lock);
		pthread_mutex_unlock(&s->lock);
	}
	waitpid(c, NULL, 0);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct shared *s = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (s == MAP_FAILED)
		return 1;
	wake_across(s, "shared", FUTEX_WAIT, 0);
	wake_across(s, "shared, waker's mapping moved", FUTEX_WAIT, 1);
	wake_across(s, "private", FUTEX_WAIT_PRIVATE, 0);
	robust(s);
	return 0;
}
