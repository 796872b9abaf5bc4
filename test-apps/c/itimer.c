/*
 * itimer [MODE]: alarm(2), setitimer/getitimer(ITIMER_REAL) and SIGALRM,
 * with output that is the same natively and in the sandbox.
 *   (no mode) all of the below in order, printing one line each;
 *   default   alarm(1) then pause() with no handler: killed by SIGALRM (142).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t alarms;
static volatile int last_code;

static void on_alarm(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	alarms++;
	last_code = si->si_code;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "default") == 0) {
		alarm(1);
		pause();
		puts("not reached");
		return 0;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_alarm;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGALRM, &sa, NULL);

	/* alarm returns what was left of the previous one. */
	printf("alarm(5) -> %u\n", alarm(5));
	printf("alarm(0) -> %u (nothing left after it)\n", alarm(0));
	struct itimerval it;
	getitimer(ITIMER_REAL, &it);
	printf("disarmed: %ld.%06ld\n", (long)it.it_value.tv_sec, (long)it.it_value.tv_usec);

	/* pause() wakes with EINTR when the alarm's handler has run. */
	double t0 = now();
	alarm(1);
	int r = pause();
	printf("pause -> %d %s, alarms %d, si_code %s, after ~%.0f s\n", r,
	       errno == EINTR ? "EINTR" : "?", alarms,
	       last_code == SI_KERNEL ? "SI_KERNEL" : "other", now() - t0);

	/* A sleep cut short by the alarm (no SA_RESTART for nanosleep). The
	 * time left is 2 s minus the alarm's delivery latency (plus Linux's
	 * 50 us timer slack natively), so it sits right at 2 s: musl's
	 * sleep() truncates it to 1 or 2 depending on that latency. Print it
	 * rounded and check its range instead (a loaded host may add a few
	 * hundred ms of latency, but never make it more than 2 s). */
	alarm(1);
	struct timespec req = {3, 0}, rem = {0, 0};
	r = nanosleep(&req, &rem);
	double left = rem.tv_sec + rem.tv_nsec / 1e9;
	printf("sleep(3) -> %d %s, ~%.0f s left (%s), alarms %d\n", r,
	       errno == EINTR ? "EINTR" : "?", left,
	       left > 1.5 && left <= 2.001 ? "in (1.5, 2]" : "wrong", alarms);

	/* An interval timer firing while the program only computes: the
	 * sandbox must interrupt a program that makes no syscall. */
	struct itimerval iv = {{0, 50000}, {0, 50000}};
	setitimer(ITIMER_REAL, &iv, NULL);
	volatile unsigned long spin = 0;
	while (alarms < 2 + 5)
		spin++;
	struct itimerval old;
	memset(&iv, 0, sizeof iv);
	setitimer(ITIMER_REAL, &iv, &old);
	printf("interval: 5 more while spinning; old interval %ld.%06ld, value set %s\n",
	       (long)old.it_interval.tv_sec, (long)old.it_interval.tv_usec,
	       old.it_value.tv_sec == 0 && old.it_value.tv_usec > 0 &&
	       old.it_value.tv_usec <= 50000 ? "<= 50 ms" : "wrong");

	/* Bad input. */
	struct itimerval bad = {{0, 0}, {0, 1000000}};
	int rc = setitimer(ITIMER_REAL, &bad, NULL);
	printf("usec 1000000 -> %d %s\n", rc, errno == EINVAL ? "EINVAL" : "?");
	rc = setitimer(ITIMER_REAL, (void *)8, NULL);
	printf("bad pointer -> %d %s\n", rc, errno == EFAULT ? "EFAULT" : "?");
	rc = getitimer(7, &it);
	printf("which 7 -> %d %s\n", rc, errno == EINVAL ? "EINVAL" : "?");

	/* A blocked SIGALRM stays pending until unblocked. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGALRM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	int before = alarms;
	alarm(1);
	sleep(2);
	sigset_t pending;
	sigpending(&pending);
	printf("blocked: pending %d, handled meanwhile %d\n", sigismember(&pending, SIGALRM),
	       alarms - before);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	printf("unblocked: handled %d\n", alarms - before);

	/* A lone process waits in sigtimedwait (3 s) for its alarm (1 s). */
	sigprocmask(SIG_BLOCK, &set, NULL);
	double w0 = now();
	alarm(1);
	struct timespec three = { 3, 0 };
	int got = sigtimedwait(&set, NULL, &three);
	printf("sigtimedwait ends at the alarm: %s\n",
	       got == SIGALRM && now() - w0 < 2 ? "yes" : "no (wrong)");

	/* A child waits in sigwait for its own alarm while its parent waits
	 * on a pipe (no task runs, the child waited last): the alarm must end
	 * the child's wait.
	 * The parent gives up after 5 s (its own alarm: read gets EINTR). */
	int p[2];
	if (pipe(p) != 0)
		return 1;
	fflush(stdout);
	pid_t kid = fork();
	if (kid == 0) {
		/* The parent blocks first: the child is the last to wait. */
		struct timespec nap = { 0, 200000000 };
		nanosleep(&nap, NULL);
		int got = 0;
		double t0 = now();
		alarm(1);
		sigwait(&set, &got);
		char c = got == SIGALRM && now() - t0 < 4 ? 'y' : 'n';
		write(p[1], &c, 1);
		_exit(0);
	}
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	sa.sa_flags = SA_SIGINFO; /* no SA_RESTART: the read ends with EINTR */
	sigaction(SIGALRM, &sa, NULL);
	alarm(5);
	char c = '?';
	ssize_t n = read(p[0], &c, 1);
	alarm(0);
	printf("sigwait in a child ends at its alarm: %s\n", n == 1 && c == 'y' ? "yes" : "no (wrong)");
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
	return 0;
}
