/* gsbase: the program's GS base survives what the kernel does between
 * its instructions: syscalls, page faults, a signal handler, a fork, a
 * thread switch (each thread its own GS base). The kernel keeps its own
 * per-CPU pointer in GS while it runs (docs/smp.md), so every way back
 * to user mode must put the program's back. Reads go through %gs, so the
 * hardware base is checked, not only what arch_prctl(ARCH_GET_GS) says.
 * Prints "gs ok" and exits 0, or names the first check that failed. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* <asm/prctl.h> is not in musl's headers. */
#define ARCH_SET_GS 0x1001

static unsigned long main_slots[2] = {0x6d61696e, 0x11111111};
static unsigned long thread_slots[2] = {0x74687264, 0x22222222};
static volatile unsigned long in_handler;

static unsigned long gs8(void)
{
	unsigned long v;
	__asm__ volatile("mov %%gs:8, %0" : "=r"(v));
	return v;
}

static void check(const char *what, unsigned long want)
{
	unsigned long got = gs8();
	if (got != want) {
		printf("gs lost after %s: %#lx, want %#lx\n", what, got, want);
		exit(1);
	}
}

static int set_gs(void *base)
{
	return syscall(SYS_arch_prctl, ARCH_SET_GS, (unsigned long)base);
}

static void on_usr1(int sig)
{
	(void)sig;
	in_handler = gs8();
}

static void *thread_main(void *arg)
{
	(void)arg;
	if (set_gs(thread_slots) != 0)
		return (void *)1;
	for (int i = 0; i < 200; i++) {
		sched_yield();
		if (gs8() != 0x22222222)
			return (void *)2;
	}
	return NULL;
}

int main(void)
{
	if (set_gs(main_slots) != 0) {
		perror("arch_prctl(ARCH_SET_GS)");
		return 1;
	}
	check("arch_prctl", 0x11111111);
	for (int i = 0; i < 100; i++)
		getppid();
	check("syscalls", 0x11111111);
	size_t n = 8 << 20;
	char *p = malloc(n);
	memset(p, 1, n);
	check("page faults", 0x11111111);
	free(p);
	signal(SIGUSR1, on_usr1);
	raise(SIGUSR1);
	check("a signal", 0x11111111);
	if (in_handler != 0x11111111) {
		printf("gs in the handler: %#lx\n", in_handler);
		return 1;
	}
	pid_t child = fork();
	if (child == 0)
		_exit(gs8() == 0x11111111 ? 0 : 3);
	int status = 0;
	waitpid(child, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		printf("gs in the child: status %#x\n", status);
		return 1;
	}
	check("fork", 0x11111111);
	pthread_t t;
	pthread_create(&t, NULL, thread_main, NULL);
	for (int i = 0; i < 200; i++) {
		sched_yield();
		check("a thread switch", 0x11111111);
	}
	void *ret;
	pthread_join(t, &ret);
	if (ret != NULL) {
		printf("thread gs check failed: %ld\n", (long)ret);
		return 1;
	}
	check("join", 0x11111111);
	puts("gs ok");
	return 0;
}
