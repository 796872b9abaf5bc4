/*
 * pty: pseudo-terminal semantics, one stable line per check (checks.h),
 * for a native run and a sandboxed run to be compared (docs/terminal.md):
 * /dev/ptmx and /dev/pts/N (TIOCGPTN, TIOCSPTLCK, ptsname, ttyname,
 * stat), the default termios, canonical editing (ERASE, KILL, EOF), echo,
 * ICRNL, ONLCR, ECHONL, raw mode, VMIN/VTIME, FIONREAD, poll, window
 * size, EIO after either side closes, and a forkpty child: its
 * controlling terminal (/dev/tty, TIOCGSID, tcgetpgrp), ^C as SIGINT to
 * the foreground group, SIGWINCH, SIGTTIN for a background read, setsid
 * dropping the terminal and a session leader acquiring one on open.
 * Pts numbers differ between runs and are never printed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"

static void msleep(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* `what: "escaped bytes"`. */
static void show_bytes(const char *what, const char *b, long n)
{
	char out[512];
	size_t o = 0;
	if (n < 0) {
		printf("%s: %s\n", what, rc_text(n));
		return;
	}
	for (long i = 0; i < n && o < sizeof out - 8; i++) {
		unsigned char c = (unsigned char)b[i];
		if (c == '\n')
			o += sprintf(out + o, "\\n");
		else if (c == '\r')
			o += sprintf(out + o, "\\r");
		else if (c == '\b')
			o += sprintf(out + o, "\\b");
		else if (c < 32 || c >= 127)
			o += sprintf(out + o, "\\x%02x", c);
		else
			out[o++] = (char)c;
	}
	out[o] = 0;
	printf("%s: \"%s\"\n", what, out);
}

/* Reads what is available on `fd` within ~100 ms of quiet. */
static long drain(int fd, char *buf, size_t cap)
{
	size_t got = 0;
	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, 100) <= 0 || !(p.revents & POLLIN))
			break;
		long n = read(fd, buf + got, cap - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got >= cap)
			break;
	}
	return (long)got;
}

static void put(int fd, const char *s)
{
	if (write(fd, s, strlen(s)) != (long)strlen(s))
		line("write %s: FAIL", s);
}

/* A fresh pair with the default termios. */
static void pair(int *m, int *s)
{
	if (openpty(m, s, NULL, NULL, NULL) < 0) {
		line("openpty: FAIL %s", rc_text(-1));
		exit(1);
	}
}

static void names(void)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY);
	ok_line("posix_openpt", m);
	unsigned n = 999;
	ok_line("TIOCGPTN", ioctl(m, TIOCGPTN, &n));
	char want[64];
	snprintf(want, sizeof want, "/dev/pts/%u", n);
	char *name = ptsname(m);
	expect_line("ptsname is /dev/pts/N", name && !strcmp(name, want), 1);
	/* Locked until unlockpt. */
	err_line("open locked slave", open(want, O_RDWR | O_NOCTTY), EIO);
	rc_line("grantpt", grantpt(m));
	rc_line("unlockpt", unlockpt(m));
	int s = open(want, O_RDWR | O_NOCTTY);
	ok_line("open slave", s);
	expect_line("isatty master", isatty(m), 1);
	expect_line("isatty slave", isatty(s), 1);
	int fd = open("/dev/null", O_RDONLY);
	expect_line("isatty /dev/null", isatty(fd), 0);
	close(fd);
	char *tn = ttyname(s);
	expect_line("ttyname slave", tn && !strcmp(tn, want), 1);
	struct stat st, fst, mst;
	rc_line("stat slave path", stat(want, &st));
	rc_line("fstat slave", fstat(s, &fst));
	expect_line("slave is chr", S_ISCHR(st.st_mode), 1);
	eq_line("slave major", major(st.st_rdev), 136);
	expect_line("slave minor is N", minor(st.st_rdev) == n, 1);
	expect_line("stat and fstat agree", st.st_ino == fst.st_ino && st.st_dev == fst.st_dev && st.st_rdev == fst.st_rdev, 1);
	line("slave mode: %o", st.st_mode & 07777);
	rc_line("fstat master", fstat(m, &mst));
	eq_line("master major", major(mst.st_rdev), 5);
	eq_line("master minor", minor(mst.st_rdev), 2);
	rc_line("stat /dev/ptmx", stat("/dev/ptmx", &mst));
	expect_line("/dev/ptmx chr 5:2", S_ISCHR(mst.st_mode) && major(mst.st_rdev) == 5 && minor(mst.st_rdev) == 2, 1);
	rc_line("stat /dev/tty", stat("/dev/tty", &mst));
	expect_line("/dev/tty chr 5:0", S_ISCHR(mst.st_mode) && major(mst.st_rdev) == 5 && minor(mst.st_rdev) == 0, 1);
	DIR *d = opendir("/dev/pts");
	int found = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (!strcmp(e->d_name, want + 9))
			found = 1;
	if (d)
		closedir(d);
	expect_line("/dev/pts lists N", found, 1);
	close(s);
	close(m);
	err_line("open closed pts", open(want, O_RDWR | O_NOCTTY), ENOENT);
}

static void defaults(void)
{
	int m, s;
	pair(&m, &s);
	struct termios t;
	rc_line("tcgetattr", tcgetattr(s, &t));
	line("iflag %#o oflag %#o cflag %#o lflag %#o", t.c_iflag, t.c_oflag, t.c_cflag, t.c_lflag);
	line("cc intr %d quit %d erase %d kill %d eof %d min %d time %d susp %d", t.c_cc[VINTR], t.c_cc[VQUIT], t.c_cc[VERASE], t.c_cc[VKILL], t.c_cc[VEOF], t.c_cc[VMIN], t.c_cc[VTIME], t.c_cc[VSUSP]);
	line("speed %d", (int)cfgetospeed(&t));
	struct termios mt;
	rc_line("tcgetattr master", tcgetattr(m, &mt));
	expect_line("master shares termios", mt.c_lflag == t.c_lflag, 1);
	struct winsize ws = {0};
	rc_line("TIOCGWINSZ", ioctl(s, TIOCGWINSZ, &ws));
	line("winsize %d %d", ws.ws_row, ws.ws_col);
	close(s);
	close(m);
}

static void canonical(void)
{
	int m, s;
	pair(&m, &s);
	char buf[256];
	int avail = -1;
	put(m, "ab\x7f" "c");
	rc_line("FIONREAD partial line", ioctl(s, FIONREAD, &avail) < 0 ? -1 : avail);
	struct pollfd p = {s, POLLIN, 0};
	rc_line("poll partial line", poll(&p, 1, 0));
	fcntl(s, F_SETFL, O_NONBLOCK);
	err_line("read partial line", read(s, buf, sizeof buf), EAGAIN);
	fcntl(s, F_SETFL, 0);
	put(m, "\n");
	rc_line("poll full line", poll(&p, 1, 0));
	rc_line("FIONREAD line", ioctl(s, FIONREAD, &avail) < 0 ? -1 : avail);
	show_bytes("erase read", buf, read(s, buf, sizeof buf));
	show_bytes("erase echo", buf, drain(m, buf, sizeof buf));
	put(m, "xyz\x15hello\n");
	show_bytes("kill read", buf, read(s, buf, sizeof buf));
	show_bytes("kill echo", buf, drain(m, buf, sizeof buf));
	put(m, "one\ntwo\n");
	show_bytes("line 1", buf, read(s, buf, sizeof buf));
	show_bytes("line 2 part", buf, read(s, buf, 2));
	show_bytes("line 2 rest", buf, read(s, buf, sizeof buf));
	drain(m, buf, sizeof buf);
	put(m, "foo\x04");
	show_bytes("eof mid-line", buf, read(s, buf, sizeof buf));
	put(m, "\x04");
	show_bytes("eof at start", buf, read(s, buf, sizeof buf));
	show_bytes("eof echo", buf, drain(m, buf, sizeof buf));
	put(m, "cr\r");
	show_bytes("icrnl read", buf, read(s, buf, sizeof buf));
	show_bytes("icrnl echo", buf, drain(m, buf, sizeof buf));
	put(m, "\x01\x1b[A\n");
	show_bytes("ctl read", buf, read(s, buf, sizeof buf));
	show_bytes("ctl echo", buf, drain(m, buf, sizeof buf));
	put(s, "l1\nl2\n");
	show_bytes("onlcr", buf, drain(m, buf, sizeof buf));
	struct termios t;
	tcgetattr(s, &t);
	t.c_lflag &= ~(tcflag_t)ECHO;
	t.c_lflag |= ECHONL;
	rc_line("tcsetattr echonl", tcsetattr(s, TCSANOW, &t));
	put(m, "secret\n");
	show_bytes("echonl read", buf, read(s, buf, sizeof buf));
	show_bytes("echonl echo", buf, drain(m, buf, sizeof buf));
	t.c_oflag &= ~(tcflag_t)OPOST;
	rc_line("tcsetattr -opost", tcsetattr(s, TCSADRAIN, &t));
	put(s, "a\nb");
	show_bytes("no opost", buf, drain(m, buf, sizeof buf));
	close(s);
	close(m);
}

static void raw(void)
{
	int m, s;
	pair(&m, &s);
	char buf[256];
	struct termios t;
	tcgetattr(s, &t);
	cfmakeraw(&t);
	rc_line("tcsetattr raw", tcsetattr(s, TCSAFLUSH, &t));
	tcgetattr(s, &t);
	line("raw iflag %#o oflag %#o lflag %#o min %d time %d", t.c_iflag, t.c_oflag, t.c_lflag, t.c_cc[VMIN], t.c_cc[VTIME]);
	put(m, "\x03x\x7f\r");
	msleep(20);
	int avail = -1;
	rc_line("raw FIONREAD", ioctl(s, FIONREAD, &avail) < 0 ? -1 : avail);
	show_bytes("raw read", buf, read(s, buf, sizeof buf));
	show_bytes("raw no echo", buf, drain(m, buf, sizeof buf));
	put(s, "a\nb");
	show_bytes("raw output", buf, drain(m, buf, sizeof buf));
	t.c_cc[VMIN] = 0;
	t.c_cc[VTIME] = 1;
	tcsetattr(s, TCSANOW, &t);
	show_bytes("vmin 0 vtime 1 nothing", buf, read(s, buf, sizeof buf));
	put(m, "q");
	msleep(20);
	show_bytes("vmin 0 vtime 1 data", buf, read(s, buf, sizeof buf));
	t.c_cc[VMIN] = 3;
	t.c_cc[VTIME] = 0;
	tcsetattr(s, TCSANOW, &t);
	put(m, "12");
	struct pollfd p = {s, POLLIN, 0};
	rc_line("vmin 3 poll with 2", poll(&p, 1, 0));
	put(m, "345");
	msleep(20);
	show_bytes("vmin 3 read", buf, read(s, buf, sizeof buf));
	close(s);
	close(m);
}

static void winsize(void)
{
	int m, s;
	pair(&m, &s);
	struct winsize w = {.ws_row = 40, .ws_col = 132, .ws_xpixel = 1, .ws_ypixel = 2}, r = {0};
	rc_line("TIOCSWINSZ master", ioctl(m, TIOCSWINSZ, &w));
	rc_line("TIOCGWINSZ slave", ioctl(s, TIOCGWINSZ, &r));
	line("winsize %d %d %d %d", r.ws_row, r.ws_col, r.ws_xpixel, r.ws_ypixel);
	close(s);
	close(m);
}

static void eio(void)
{
	int m, s;
	char buf[64];
	pair(&m, &s);
	put(s, "bye\n");
	close(s);
	show_bytes("master read after slave close", buf, read(m, buf, sizeof buf));
	show_bytes("master read again", buf, read(m, buf, sizeof buf));
	struct pollfd p = {m, POLLIN, 0};
	poll(&p, 1, 0);
	line("master poll after slave close: %#x", p.revents);
	show_line("master write after slave close", write(m, "x\n", 2));
	close(m);
	pair(&m, &s);
	put(m, "pending\n");
	close(m);
	show_bytes("slave read after master close", buf, read(s, buf, sizeof buf));
	show_bytes("slave read again", buf, read(s, buf, sizeof buf));
	show_line("slave write after master close", write(s, "x", 1));
	p.fd = s;
	poll(&p, 1, 0);
	line("slave poll after master close: %#x", p.revents);
	close(s);
	int s2;
	pair(&m, &s2);
	close(s2);
	fcntl(m, F_SETFL, O_NONBLOCK);
	show_line("master read, slave never reopened", read(m, buf, sizeof buf));
	close(m);
}

static volatile sig_atomic_t got_int, got_winch, got_ttin;
static void on_int(int sig) { (void)sig; got_int++; }
static void on_winch(int sig) { (void)sig; got_winch++; }
static void on_ttin(int sig) { (void)sig; got_ttin++; }

/* The forkpty child: its stdio is the slave, its controlling terminal. */
static void child(void)
{
	char buf[128];
	struct sigaction sa = {0};
	sa.sa_handler = on_int;
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = on_winch;
	sigaction(SIGWINCH, &sa, NULL);
	printf("leader %s\n", getsid(0) == getpid() ? "yes" : "no");
	printf("fg is me %s\n", tcgetpgrp(0) == getpgrp() ? "yes" : "no");
	printf("tcgetsid %s\n", tcgetsid(0) == getpid() ? "yes" : "no");
	int t = open("/dev/tty", O_RDWR);
	printf("open /dev/tty %s\n", t >= 0 ? "ok" : rc_text(-1));
	if (t >= 0) {
		printf("/dev/tty isatty %s\n", isatty(t) ? "yes" : "no");
		close(t);
	}
	char *n = ttyname(0);
	printf("ttyname(0) %s\n", n && !strncmp(n, "/dev/pts/", 9) ? "/dev/pts/N" : "other");
	printf("ready\n");
	fflush(stdout);
	/* ^C arrives while reading: the handler runs, the read ends EINTR. */
	long r = read(0, buf, sizeof buf);
	printf("read after ^C: %s, SIGINT %d\n", rc_text(r), got_int);
	printf("winch\n");
	fflush(stdout);
	while (!got_winch)
		pause();
	struct winsize w;
	ioctl(0, TIOCGWINSZ, &w);
	printf("SIGWINCH %d rows %d\n", got_winch, w.ws_row);
	fflush(stdout);
	/* A background group reading its terminal gets SIGTTIN. */
	pid_t bg = fork();
	if (bg == 0) {
		setpgid(0, 0);
		sa.sa_handler = on_ttin;
		sigaction(SIGTTIN, &sa, NULL);
		long r1 = read(0, buf, sizeof buf);
		printf("bg read: %s, SIGTTIN %d\n", rc_text(r1), got_ttin);
		signal(SIGTTIN, SIG_IGN);
		r1 = read(0, buf, sizeof buf);
		printf("bg read ignoring SIGTTIN: %s\n", rc_text(r1));
		printf("bg tcgetpgrp is parent's %s\n", tcgetpgrp(0) == getppid() ? "yes" : "no");
		fflush(stdout);
		_exit(0);
	}
	waitpid(bg, NULL, 0);
	/* setsid drops the terminal; a new session leader opening a slave
	 * without O_NOCTTY acquires it. */
	pid_t ns = fork();
	if (ns == 0) {
		setsid();
		int tt = open("/dev/tty", O_RDWR);
		printf("after setsid /dev/tty: %s\n", tt >= 0 ? "ok" : rc_text(-1));
		printf("after setsid tcgetpgrp(0): %s\n", rc_text(tcgetpgrp(0)));
		int m2 = posix_openpt(O_RDWR | O_NOCTTY);
		grantpt(m2);
		unlockpt(m2);
		int s2 = open(ptsname(m2), O_RDWR);
		printf("new leader tcgetsid %s\n", tcgetsid(s2) == getpid() ? "yes" : "no");
		tt = open("/dev/tty", O_RDWR);
		printf("new /dev/tty: %s\n", tt >= 0 ? "ok" : rc_text(-1));
		printf("TIOCNOTTY: %s\n", rc_text(ioctl(s2, TIOCNOTTY)));
		printf("after TIOCNOTTY tcgetsid: %s\n", rc_text(tcgetsid(s2)));
		fflush(stdout);
		_exit(0);
	}
	waitpid(ns, NULL, 0);
	printf("done\n");
	fflush(stdout);
	_exit(0);
}

/* Reads from the master until `mark` has been seen; prints what came. */
static void expect_from(int m, const char *what, const char *mark)
{
	char buf[2048];
	size_t got = 0;
	for (int i = 0; i < 100 && got < sizeof buf - 1; i++) {
		struct pollfd p = {m, POLLIN, 0};
		if (poll(&p, 1, 100) > 0) {
			long n = read(m, buf + got, sizeof buf - 1 - got);
			if (n <= 0)
				break;
			got += (size_t)n;
			buf[got] = 0;
			if (strstr(buf, mark))
				break;
		}
	}
	show_bytes(what, buf, (long)got);
}

static void job(void)
{
	int m;
	fflush(stdout);
	pid_t pid = forkpty(&m, NULL, NULL, NULL);
	if (pid == 0)
		child();
	ok_line("forkpty", pid);
	expect_from(m, "child start", "ready\r\n");
	msleep(50);
	put(m, "abc\x03");
	expect_from(m, "after ^C", "winch\r\n");
	msleep(50);
	struct winsize w = {.ws_row = 50, .ws_col = 100};
	ioctl(m, TIOCSWINSZ, &w);
	expect_from(m, "after resize", "done\r\n");
	int st;
	waitpid(pid, &st, 0);
	line("child status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
	close(m);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGHUP, SIG_IGN);
	names();
	defaults();
	canonical();
	raw();
	winsize();
	eio();
	pid_t p = fork();
	if (p == 0) {
		setsid();
		int t = open("/dev/tty", O_RDWR);
		err_line("no ctty /dev/tty", t, ENXIO);
		_exit(0);
	}
	waitpid(p, NULL, 0);
	job();
	return 0;
}
