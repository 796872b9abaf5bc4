/*
 * threadbomb: the threads issue's bad input (runtime-shim/tests/threads.rs).
 *
 *   threadbomb bomb [MAX]  creates threads that wait on a pipe until
 *                          pthread_create fails or MAX (default 300) run;
 *                          prints how far it got and the error, releases
 *                          and joins them all, then checks that a new
 *                          thread works. The sandbox caps tasks, so there
 *                          it stops with EAGAIN; natively MAX is reached.
 *   threadbomb wild        in forked children: a raw clone(CLONE_THREAD)
 *                          whose stack is unmapped, one whose TLS (FS
 *                          base) is unmapped, and one whose TLS is not
 *                          canonical; prints how each child ended. The
 *                          first two die of SIGSEGV (the whole thread
 *                          group), the third's clone fails with EPERM.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREAD_FLAGS 0x50f00UL /* VM|FS|FILES|SIGHAND|THREAD|SYSVSEM */
#define CLONE_SETTLS_ 0x80000UL

static int gate[2];

static void *waiter(void *arg)
{
	(void)arg;
	char c;
	(void)!read(gate[0], &c, 1);
	return NULL;
}

static void *nothing(void *arg)
{
	return arg;
}

static int bomb(int max)
{
	pthread_t *t = calloc((size_t)max, sizeof *t);
	if (!t || pipe(gate) != 0)
		return 2;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	int n = 0, err = 0;
	while (n < max) {
		err = pthread_create(&t[n], &attr, waiter, NULL);
		if (err)
			break;
		n++;
	}
	printf("created %d threads, then %s\n", n,
	       err == EAGAIN ? "EAGAIN" : err ? strerror(err) : "stopped at the limit asked");
	close(gate[1]);
	int joined = 0;
	for (int i = 0; i < n; i++)
		joined += pthread_join(t[i], NULL) == 0;
	printf("joined %d\n", joined);
	pthread_t again;
	void *ret = NULL;
	int ok = pthread_create(&again, NULL, nothing, (void *)7) == 0 &&
		 pthread_join(again, &ret) == 0 && ret == (void *)7;
	printf("a thread afterwards: %s\n", ok ? "works" : "FAILS");
	return ok ? 0 : 1;
}

/*
 * clone(flags, stack, NULL, NULL, tls) as a raw syscall. The child
 * returns from the syscall with the given stack and TLS and runs `child`
 * code right there: it loads from %fs:0 (faults when the TLS is bad),
 * pushes (faults when the stack is bad), then exits its thread.
 */
static long raw_clone(unsigned long flags, void *stack, unsigned long tls)
{
	long ret;
	register long r10 __asm__("r10") = 0;
	register unsigned long r8 __asm__("r8") = tls;
	__asm__ volatile("syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 /* The child. */
			 "mov %%fs:0, %%rcx\n\t"
			 "push %%rcx\n\t"
			 "mov $60, %%eax\n\t"
			 "xor %%edi, %%edi\n\t"
			 "syscall\n\t"
			 "ud2\n"
			 "1:"
			 : "=a"(ret)
			 : "a"(SYS_clone), "D"(flags), "S"(stack), "d"(0), "r"(r10), "r"(r8)
			 : "rcx", "r11", "memory");
	return ret;
}

/* In a forked child: the clone, then the parent thread waits. */
static void wild_child(unsigned long flags, void *stack, unsigned long tls)
{
	long r = raw_clone(flags, stack, tls);
	if (r < 0)
		_exit((int)-r);
	/* The new thread kills the group; wait for it. */
	for (;;)
		pause();
}

static void wild_case(const char *what, unsigned long flags, void *stack, unsigned long tls)
{
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		alarm(10);
		wild_child(flags, stack, tls);
	}
	int st;
	if (c < 0 || waitpid(c, &st, 0) != c) {
		printf("%s: fork/wait failed\n", what);
		return;
	}
	if (WIFSIGNALED(st))
		printf("%s: killed by %s\n", what, strsignal(WTERMSIG(st)));
	else
		printf("%s: exit %d (%s)\n", what, WEXITSTATUS(st), strerror(WEXITSTATUS(st)));
}

static int wild(void)
{
	static char good_stack[16384] __attribute__((aligned(16)));
	void *top = good_stack + sizeof good_stack;
	wild_case("unmapped stack", THREAD_FLAGS, (void *)0x1000, 0);
	wild_case("unmapped TLS", THREAD_FLAGS | CLONE_SETTLS_, top, 0x10000);
	wild_case("non-canonical TLS", THREAD_FLAGS | CLONE_SETTLS_, top, 0x8000000000000000UL);
	wild_case("kernel-half stack", THREAD_FLAGS, (void *)0xffff888000000000UL, 0);
	/* And the parent itself is unharmed. */
	printf("parent: alive\n");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc > 1 && strcmp(argv[1], "bomb") == 0)
		return bomb(argc > 2 ? atoi(argv[2]) : 300);
	if (argc > 1 && strcmp(argv[1], "wild") == 0)
		return wild();
	fprintf(stderr, "usage: threadbomb bomb [MAX] | wild\n");
	return 2;
}
