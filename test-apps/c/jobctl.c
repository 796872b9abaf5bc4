/*
 * jobctl: job control, one stable line per check, for a native run and a
 * sandboxed run to be compared (docs/processes.md, "Job control"):
 * stop signals stopping a child (raise(SIGSTOP), kill(SIGTSTP)), wait4
 * WUNTRACED/WCONTINUED, waitid WSTOPPED/WCONTINUED/WNOWAIT, each event
 * reported once, SIGCHLD's si_code with and without SA_NOCLDSTOP, the
 * /proc state of a stopped process, SIGTERM to a stopped process ending
 * it once continued, SIGCONT discarding a pending stop signal and a stop signal
 * discarding a pending SIGCONT, a multi-threaded child stopped as a
 * whole, SIGTSTP to an orphaned process group discarded (SIGSTOP not),
 * SIGHUP and SIGCONT to a group with a stopped member that an exit
 * orphans,
 * SIGHUP to the foreground group when the session leader that controls
 * a pty exits, and SIGHUP + SIGCONT to the session leader when the pty
 * master closes (the slave then reads EOF and writes EIO), SIGTTOU for a
 * background write with TOSTOP and a background tcsetpgrp.
 *
 * `jobctl hold`: a child stops itself and the program waits for a line on
 * stdin, then checks that the child is still stopped, continues it and
 * reaps it (the hibernation test; "ready" is printed once it is stopped).
 * Pids are never printed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <pty.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static void pr(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

static void msleep(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Reads one byte from `fd` within `ms` milliseconds: the byte, or -1. */
static int get_byte(int fd, int ms)
{
	struct pollfd p = {fd, POLLIN, 0};
	char c;
	if (poll(&p, 1, ms) <= 0)
		return -1;
	if (read(fd, &c, 1) != 1)
		return -1;
	return (unsigned char)c;
}

static void put_byte(int fd, char c)
{
	if (write(fd, &c, 1) != 1)
		_exit(99);
}

static const char *show_status(int st)
{
	static char b[64];
	if (WIFEXITED(st))
		snprintf(b, sizeof b, "exited %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(b, sizeof b, "killed by %d", WTERMSIG(st));
	else if (WIFSTOPPED(st))
		snprintf(b, sizeof b, "stopped by %d", WSTOPSIG(st));
	else if (WIFCONTINUED(st))
		snprintf(b, sizeof b, "continued");
	else
		snprintf(b, sizeof b, "status %#x", st);
	return b;
}

/* waitpid, restarted on EINTR; prints what it reports. */
static void wait_show(const char *what, pid_t pid, int options)
{
	int st = 0;
	pid_t r;
	while ((r = waitpid(pid, &st, options)) < 0 && errno == EINTR)
		;
	if (r < 0)
		pr("%s: error %s\n", what, strerror(errno));
	else if (r == 0)
		pr("%s: nothing\n", what);
	else
		pr("%s: %s%s\n", what, show_status(st), r == pid ? "" : " (other pid)");
}

/* The state letter of /proc/PID/stat and the State: line of status. */
static void proc_state(const char *what, pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
	if (fd >= 0)
		close(fd);
	char st = '?';
	if (n > 0) {
		buf[n] = 0;
		char *p = strrchr(buf, ')');
		if (p && p[1] == ' ')
			st = p[2];
	}
	snprintf(path, sizeof path, "/proc/%d/status", pid);
	fd = open(path, O_RDONLY);
	n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
	if (fd >= 0)
		close(fd);
	char line[64] = "?";
	if (n > 0) {
		buf[n] = 0;
		char *p = strstr(buf, "State:\t");
		if (p) {
			p += 7;
			size_t k = strcspn(p, "\n");
			if (k >= sizeof line)
				k = sizeof line - 1;
			memcpy(line, p, k);
			line[k] = 0;
		}
	}
	pr("%s: stat %c, status %s\n", what, st, line);
}

/* SIGCHLD as the handler saw it. */
static volatile sig_atomic_t chld_count, chld_code, chld_status;

static void on_chld(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	chld_count++;
	chld_code = si->si_code;
	chld_status = si->si_status;
}

static const char *cld_name(int code)
{
	switch (code) {
	case CLD_EXITED: return "CLD_EXITED";
	case CLD_KILLED: return "CLD_KILLED";
	case CLD_DUMPED: return "CLD_DUMPED";
	case CLD_STOPPED: return "CLD_STOPPED";
	case CLD_CONTINUED: return "CLD_CONTINUED";
	default: return "?";
	}
}

static void set_chld(int flags)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_chld;
	sa.sa_flags = SA_SIGINFO | flags;
	sigaction(SIGCHLD, &sa, NULL);
	chld_count = 0;
}

static void reset_chld(void)
{
	signal(SIGCHLD, SIG_DFL);
}

/* A child that stops itself with raise(SIGSTOP), then waits for a byte
 * and exits 7; the parent's view: wait4, /proc, SIGCHLD. */
static void self_stop(void)
{
	int go[2];
	if (pipe(go) < 0)
		return;
	set_chld(0);
	pid_t pid = fork();
	if (pid == 0) {
		close(go[1]);
		raise(SIGSTOP);
		get_byte(go[0], 10000);
		_exit(7);
	}
	close(go[0]);
	wait_show("raise(SIGSTOP): wait4(WUNTRACED)", pid, WUNTRACED);
	pr("raise(SIGSTOP): SIGCHLD %d, %s, status %d\n", (int)chld_count,
	   cld_name(chld_code), (int)chld_status);
	proc_state("raise(SIGSTOP): stopped child", pid);
	wait_show("raise(SIGSTOP): stop reported once", pid, WUNTRACED | WNOHANG);
	kill(pid, SIGCONT);
	/* Linux sends the CLD_CONTINUED SIGCHLD when the child next runs:
	 * its timing is not checked. */
	wait_show("SIGCONT: wait4(WCONTINUED)", pid, WCONTINUED);
	wait_show("SIGCONT: continue reported once", pid, WCONTINUED | WNOHANG);
	put_byte(go[1], 'g');
	wait_show("after SIGCONT: exit", pid, 0);
	close(go[1]);
	reset_chld();
}

/* A child in its own process group gets SIGTSTP, SIGCONT, then SIGSTOP
 * and, while stopped, SIGTERM (which ends it). With SA_NOCLDSTOP the
 * parent gets no SIGCHLD for the stops. waitid variants. */
static void tstp_and_waitid(void)
{
	int ready[2];
	if (pipe(ready) < 0)
		return;
	set_chld(SA_NOCLDSTOP);
	pid_t pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		put_byte(ready[1], 'r');
		for (;;)
			pause();
	}
	setpgid(pid, pid);
	get_byte(ready[0], 10000);
	kill(pid, SIGTSTP);
	siginfo_t si;
	memset(&si, 0, sizeof si);
	int r = waitid(P_PID, pid, &si, WSTOPPED | WNOWAIT);
	pr("SIGTSTP: waitid(WSTOPPED|WNOWAIT) %d: %s, status %d, pid %s\n", r, cld_name(si.si_code),
	   si.si_status, si.si_pid == pid ? "right" : "wrong");
	memset(&si, 0, sizeof si);
	r = waitid(P_PID, pid, &si, WSTOPPED);
	pr("SIGTSTP: waitid(WSTOPPED) %d: %s, status %d\n", r, cld_name(si.si_code), si.si_status);
	memset(&si, 0, sizeof si);
	r = waitid(P_PID, pid, &si, WSTOPPED | WNOHANG);
	pr("SIGTSTP: again %d: pid %s\n", r, si.si_pid == 0 ? "0" : "set");
	proc_state("SIGTSTP: stopped child", pid);
	pr("SA_NOCLDSTOP: SIGCHLD %d\n", (int)chld_count);
	kill(pid, SIGCONT);
	memset(&si, 0, sizeof si);
	r = waitid(P_PID, pid, &si, WCONTINUED);
	pr("SIGCONT: waitid(WCONTINUED) %d: %s, status %d\n", r, cld_name(si.si_code), si.si_status);
	memset(&si, 0, sizeof si);
	r = waitid(P_PGID, pid, &si, WEXITED | WSTOPPED | WCONTINUED | WNOHANG);
	pr("running: waitid(P_PGID, all|WNOHANG) %d: pid %s\n", r, si.si_pid == 0 ? "0" : "set");
	pr("SA_NOCLDSTOP after SIGCONT: SIGCHLD %d\n", (int)chld_count);
	kill(pid, SIGSTOP);
	wait_show("SIGSTOP: wait4(WUNTRACED)", pid, WUNTRACED);
	/* A fatal signal other than SIGKILL waits for SIGCONT. */
	kill(pid, SIGTERM);
	msleep(100);
	wait_show("SIGTERM to a stopped child", pid, WUNTRACED | WNOHANG);
	proc_state("SIGTERM to a stopped child", pid);
	kill(pid, SIGCONT);
	wait_show("SIGCONT after SIGTERM", pid, 0);
	pr("SA_NOCLDSTOP after the exit: SIGCHLD %d, %s\n", (int)chld_count, cld_name(chld_code));
	close(ready[0]);
	close(ready[1]);
	reset_chld();
}

/* SIGCONT discards a pending (blocked) SIGTSTP; SIGTSTP discards a
 * pending (blocked) SIGCONT. The child reports what sigpending shows. */
static void discards(void)
{
	int up[2], down[2];
	if (pipe(up) < 0 || pipe(down) < 0)
		return;
	pid_t pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		sigset_t set, pend;
		sigemptyset(&set);
		sigaddset(&set, SIGTSTP);
		sigaddset(&set, SIGCONT);
		sigprocmask(SIG_BLOCK, &set, NULL);
		put_byte(up[1], 'r');
		/* The parent sent SIGTSTP, then SIGCONT. */
		get_byte(down[0], 10000);
		sigpending(&pend);
		put_byte(up[1], sigismember(&pend, SIGTSTP) ? 'T' : 't');
		put_byte(up[1], sigismember(&pend, SIGCONT) ? 'C' : 'c');
		/* The parent sent SIGCONT, then SIGTSTP. */
		get_byte(down[0], 10000);
		sigpending(&pend);
		put_byte(up[1], sigismember(&pend, SIGTSTP) ? 'T' : 't');
		put_byte(up[1], sigismember(&pend, SIGCONT) ? 'C' : 'c');
		/* Unblocked, the pending SIGTSTP stops it now. */
		sigprocmask(SIG_UNBLOCK, &set, NULL);
		put_byte(up[1], 'u');
		_exit(0);
	}
	setpgid(pid, pid);
	get_byte(up[0], 10000);
	kill(pid, SIGTSTP);
	kill(pid, SIGCONT);
	put_byte(down[1], 'g');
	int a = get_byte(up[0], 10000), b = get_byte(up[0], 10000);
	pr("blocked SIGTSTP then SIGCONT: pending %c%c\n", a, b);
	kill(pid, SIGCONT);
	kill(pid, SIGTSTP);
	put_byte(down[1], 'g');
	a = get_byte(up[0], 10000);
	b = get_byte(up[0], 10000);
	pr("blocked SIGCONT then SIGTSTP: pending %c%c\n", a, b);
	wait_show("unblocked SIGTSTP: wait4(WUNTRACED)", pid, WUNTRACED);
	pr("unblocked SIGTSTP: child wrote %s\n", get_byte(up[0], 100) < 0 ? "nothing yet" : "WRONG");
	kill(pid, SIGCONT);
	pr("after SIGCONT: child wrote %c\n", get_byte(up[0], 10000));
	wait_show("after SIGCONT: exit", pid, 0);
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
}

/* A child with a second thread that counts in shared memory: SIGSTOP
 * stops the counting, SIGCONT resumes it. */
static volatile unsigned long *counter;

static void *count(void *arg)
{
	(void)arg;
	for (;;)
		(*counter)++;
	return NULL;
}

static void threads_stop(void)
{
	counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (counter == MAP_FAILED)
		return;
	*counter = 0;
	int ready[2];
	if (pipe(ready) < 0)
		return;
	pid_t pid = fork();
	if (pid == 0) {
		pthread_t t;
		pthread_create(&t, NULL, count, NULL);
		put_byte(ready[1], 'r');
		for (;;)
			pause();
	}
	get_byte(ready[0], 10000);
	/* Counting has started. */
	unsigned long c0 = *counter;
	for (int i = 0; i < 400 && *counter == c0; i++)
		msleep(5);
	pr("threads: counting %s\n", *counter != c0 ? "yes" : "NO");
	kill(pid, SIGSTOP);
	wait_show("threads: wait4(WUNTRACED)", pid, WUNTRACED);
	unsigned long c1 = *counter;
	msleep(200);
	pr("threads: counter while stopped %s\n", *counter == c1 ? "still" : "MOVED");
	proc_state("threads: stopped child", pid);
	kill(pid, SIGCONT);
	wait_show("threads: wait4(WCONTINUED)", pid, WCONTINUED);
	for (int i = 0; i < 400 && *counter == c1; i++)
		msleep(5);
	pr("threads: counting after SIGCONT %s\n", *counter != c1 ? "yes" : "NO");
	kill(pid, SIGKILL);
	wait_show("threads: SIGKILL", pid, 0);
	close(ready[0]);
	close(ready[1]);
	munmap((void *)counter, 4096);
}

/* A child that leads a new session: its process group is orphaned, so
 * SIGTSTP is discarded; SIGSTOP still stops it. */
static void orphaned(void)
{
	int up[2], down[2];
	if (pipe(up) < 0 || pipe(down) < 0)
		return;
	pid_t pid = fork();
	if (pid == 0) {
		setsid();
		put_byte(up[1], 'r');
		for (;;) {
			int c = get_byte(down[0], 10000);
			if (c < 0)
				_exit(1);
			put_byte(up[1], (char)c);
		}
	}
	get_byte(up[0], 10000);
	kill(pid, SIGTSTP);
	put_byte(down[1], 'p');
	int c = get_byte(up[0], 3000);
	pr("orphaned group: SIGTSTP %s\n", c == 'p' ? "discarded" : "STOPPED IT");
	wait_show("orphaned group: wait4(WUNTRACED|WNOHANG)", pid, WUNTRACED | WNOHANG);
	kill(pid, SIGSTOP);
	wait_show("orphaned group: SIGSTOP", pid, WUNTRACED);
	kill(pid, SIGKILL);
	wait_show("orphaned group: SIGKILL", pid, 0);
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
}

/* Reports a signal to the pipe `report_fd` (async-signal-safe). */
static int report_fd = -1;

static volatile sig_atomic_t reported;

static void on_report(int sig)
{
	char c = sig == SIGHUP ? 'H' : sig == SIGCONT ? 'C' : '?';
	if (write(report_fd, &c, 1) != 1)
		_exit(98);
	reported = 1;
}

/* The session leader controlling a pty exits: its foreground group (a
 * grandchild's) gets SIGHUP. */
static void leader_exit(void)
{
	int mfd, sfd, rep[2];
	if (openpty(&mfd, &sfd, NULL, NULL, NULL) < 0 || pipe(rep) < 0) {
		pr("leader exit: openpty failed\n");
		return;
	}
	pid_t a = fork();
	if (a == 0) {
		close(rep[0]);
		setsid();
		if (ioctl(sfd, TIOCSCTTY, 0) < 0)
			_exit(2);
		int sync[2];
		if (pipe(sync) < 0)
			_exit(3);
		pid_t b = fork();
		if (b == 0) {
			report_fd = rep[1];
			signal(SIGHUP, on_report);
			setpgid(0, 0);
			put_byte(sync[1], 'r');
			for (int i = 0; i < 500 && !reported; i++)
				msleep(20);
			_exit(0);
		}
		setpgid(b, b);
		get_byte(sync[0], 10000);
		signal(SIGTTOU, SIG_IGN);
		if (tcsetpgrp(sfd, b) < 0)
			_exit(4);
		put_byte(rep[1], 'f');
		_exit(0);
	}
	close(rep[1]);
	int f = get_byte(rep[0], 10000);
	wait_show("leader exit: session leader", a, 0);
	int h = get_byte(rep[0], 5000);
	pr("leader exit: foreground set %c, foreground group got %c\n", f, h < 0 ? '-' : h);
	close(rep[0]);
	close(mfd);
	close(sfd);
}

/* The pty master closes: the session leader gets SIGHUP and SIGCONT, its
 * slave reads EOF and writes EIO. */
static void master_close(void)
{
	int mfd, sfd, rep[2];
	if (openpty(&mfd, &sfd, NULL, NULL, NULL) < 0 || pipe(rep) < 0) {
		pr("master close: openpty failed\n");
		return;
	}
	pid_t a = fork();
	if (a == 0) {
		close(rep[0]);
		close(mfd);
		report_fd = rep[1];
		setsid();
		if (ioctl(sfd, TIOCSCTTY, 0) < 0)
			_exit(2);
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_report;
		sigaction(SIGHUP, &sa, NULL);
		sigaction(SIGCONT, &sa, NULL);
		put_byte(rep[1], 'r');
		/* Blocks until the hang-up; the handlers cut it short (EINTR). */
		for (int i = 0; i < 100; i++) {
			char b;
			if (read(sfd, &b, 1) == 0) {
				put_byte(rep[1], 'E');
				break;
			}
		}
		put_byte(rep[1], write(sfd, "x", 1) < 0 && errno == EIO ? 'I' : 'w');
		_exit(0);
	}
	close(rep[1]);
	int r = get_byte(rep[0], 10000);
	close(sfd);
	close(mfd);
	char got[8] = {0};
	int n = 0;
	for (int c; n < 4 && (c = get_byte(rep[0], 5000)) >= 0;)
		got[n++] = (char)c;
	wait_show("master close: session leader", a, 0);
	/* Linux runs both handlers at one return (the later frame first):
	 * their order is not checked. */
	pr("master close: ready %c, SIGHUP %s, SIGCONT %s, then %s\n", r,
	   strchr(got, 'H') ? "yes" : "no", strchr(got, 'C') ? "yes" : "no", got + (n > 2 ? 2 : n));
	close(rep[0]);
}

/* A process group orphaned by an exit while one of its members is
 * stopped gets SIGHUP and SIGCONT: A leads a new session, its child B
 * starts a group of that session and stops itself; A exits, B's only
 * outside parent (the reaper is in another session). */
static void orphaned_by_exit(void)
{
	int rep[2];
	if (pipe(rep) < 0)
		return;
	pid_t a = fork();
	if (a == 0) {
		setsid();
		pid_t b = fork();
		if (b == 0) {
			report_fd = rep[1];
			struct sigaction sa;
			memset(&sa, 0, sizeof sa);
			sa.sa_handler = on_report;
			sigaction(SIGHUP, &sa, NULL);
			sigaction(SIGCONT, &sa, NULL);
			setpgid(0, 0);
			raise(SIGSTOP);
			/* Continued: both handlers have run. */
			put_byte(rep[1], 'x');
			_exit(0);
		}
		setpgid(b, b);
		int st = 0;
		waitpid(b, &st, WUNTRACED);
		put_byte(rep[1], WIFSTOPPED(st) ? 's' : '?');
		_exit(0);
	}
	close(rep[1]);
	wait_show("orphaned by exit: the parent", a, 0);
	char got[8] = {0};
	int n = 0;
	for (int c; n < 4 && (c = get_byte(rep[0], 5000)) >= 0;)
		got[n++] = (char)c;
	pr("orphaned by exit: stopped %s, SIGHUP %s, SIGCONT %s, then %s\n",
	   got[0] == 's' ? "yes" : "no", strchr(got, 'H') ? "yes" : "no",
	   strchr(got, 'C') ? "yes" : "no", n == 4 ? got + 3 : "-");
	close(rep[0]);
}

/* A background process group of a pty's session: a write with TOSTOP
 * and tcsetpgrp get SIGTTOU and stop; with SIGTTOU ignored the write
 * goes through. The session leader reports (its output comes while the
 * top process waits for it). */
static pid_t background(int sfd, int what)
{
	pid_t b = fork();
	if (b == 0) {
		setpgid(0, 0);
		if (what == 1)
			signal(SIGTTOU, SIG_IGN);
		if (what == 2)
			_exit(tcsetpgrp(sfd, getpgrp()) == 0 ? 0 : 3);
		_exit(write(sfd, "x", 1) == 1 ? 0 : 4);
	}
	setpgid(b, b);
	return b;
}

static void sigttou(void)
{
	int mfd, sfd;
	if (openpty(&mfd, &sfd, NULL, NULL, NULL) < 0) {
		pr("SIGTTOU: openpty failed\n");
		return;
	}
	pid_t a = fork();
	if (a == 0) {
		close(mfd);
		setsid();
		if (ioctl(sfd, TIOCSCTTY, 0) < 0)
			_exit(2);
		struct termios t;
		tcgetattr(sfd, &t);
		t.c_lflag |= TOSTOP;
		tcsetattr(sfd, TCSANOW, &t);
		const char *names[] = {"write with TOSTOP", "write, SIGTTOU ignored", "tcsetpgrp"};
		for (int what = 0; what < 3; what++) {
			pid_t b = background(sfd, what);
			char label[64];
			snprintf(label, sizeof label, "background %s", names[what]);
			wait_show(label, b, WUNTRACED);
			kill(b, SIGKILL);
			waitpid(b, NULL, 0);
		}
		_exit(0);
	}
	close(sfd);
	wait_show("SIGTTOU: session leader", a, 0);
	close(mfd);
}

/* `hold`: a child stopped while the sandbox hibernates. */
static int hold(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		raise(SIGSTOP);
		_exit(5);
	}
	int st = 0;
	waitpid(pid, &st, WUNTRACED);
	pr("ready\n");
	pr("hold: wait4(WUNTRACED): %s\n", show_status(st));
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		pr("hold: no line\n");
	proc_state("hold: after the line", pid);
	wait_show("hold: nothing reported meanwhile", pid, WUNTRACED | WCONTINUED | WNOHANG);
	kill(pid, SIGCONT);
	wait_show("hold: SIGCONT", pid, WCONTINUED);
	wait_show("hold: exit", pid, 0);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "hold") == 0)
		return hold();
	self_stop();
	tstp_and_waitid();
	discards();
	threads_stop();
	orphaned();
	orphaned_by_exit();
	leader_exit();
	master_close();
	sigttou();
	pr("done\n");
	return 0;
}
