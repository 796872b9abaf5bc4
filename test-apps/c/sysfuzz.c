/*
 * sysfuzz SEED [COUNT] [trace]: COUNT (default 20000) random system calls
 * with hostile arguments, from a seed, then one summary line on stdout:
 *   sysfuzz seed S: N calls, E errors, K signals, F faults
 * and exit 0. Used by runtime-shim/tests/security_fuzz.rs, which runs it
 * natively and sandboxed: the guest kernel must answer every call with a
 * result or an errno, never panic or hang.
 *
 * Arguments: random numbers, NULL, wild user pointers, kernel-half
 * addresses, pointers that run into a PROT_NONE guard page, unaligned
 * pointers, huge lengths, random fds, and valid small buffers.
 *
 * It also runs natively as root, so every call is on an allow list
 * (`calls[]`) with argument kinds that keep it from ending or blocking
 * this program, or reaching anything outside it:
 *   - never exit, exec, fork/clone, pause, rt_sigsuspend, rt_sigreturn,
 *     reboot, mount, module, clock-setting, swap, ptrace, seccomp, SysV
 *     IPC, mqueue, keyring, bpf, perf, io_uring, userfaultfd, fanotify,
 *     setuid-family, setsid/setpgid, sync, chroot, rseq, sigaltstack;
 *   - pids are this process's or one that does not exist; signals are
 *     never SIGKILL or SIGSTOP and all others are caught;
 *   - every timeout is a tiny crafted one or a bad pointer; every fd
 *     argument is made non-blocking first; flock/fcntl locks never wait;
 *   - paths are fresh names without '/' or '.' (inside the working
 *     directory, a scratch directory), mknod makes only regular files;
 *   - socket addresses are crafted: AF_UNIX names in the working
 *     directory, loopback port 0/1, or junk families; no raw, packet or
 *     netlink sockets; socket-configuration ioctls are left out;
 *   - munmap, mprotect, madvise, mremap, MAP_FIXED and friends only get a
 *     sacrificial region or bad addresses, never this program's memory;
 *   - data moved between fds and fallocate are capped at 256 KiB.
 * stdout and stderr are a pipe nobody reads (the summary goes to a saved
 * copy of stdout, fd 900), so written garbage goes nowhere.
 *
 * Signals: every catchable signal has a handler counting it. A fault
 * raised while no fuzzed call was in progress (a bad write by the kernel
 * into this program's memory) is counted in `faults` and the program
 * jumps back to its loop; the test expects 0.
 *
 * With "trace", each call is printed to fd 901 (saved stderr) before it
 * is made, to find the one that breaks a kernel.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/syscall.h>
#include <unistd.h>

#define OUT_FD 900
#define ERR_FD 901
#define POOL_SIZE (64 << 10)
#define SAC_SIZE (256 << 10)
#define CAP_LEN (256 << 10)
#define MAX_FD 40

static uint64_t rng;
static uint64_t rnd(void)
{
	/* splitmix64 */
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
static uint64_t below(uint64_t n) { return n ? rnd() % n : 0; }

static unsigned char *pool;   /* kernel reads and writes here */
static unsigned char *craft;  /* structures this program fills per call */
static unsigned char *sac;    /* sacrificial region for mm calls */
static long my_pid;

static volatile sig_atomic_t in_call;
static volatile long signals, faults, done, errors;
static sigjmp_buf back;

/* Argument kinds. */
enum {
	ANY, FD, PTR, BAD, LEN, CAPLEN, PATH, PID, SIG, TMO, MS, MMADDR, SADDR,
	MSGHDR, IOV, SMALL, ZERO, MODE, FLAGS, NBFD
};

struct call {
	long nr;
	unsigned char k[6];
};

/* The allow list. Kinds per argument; see the comment at the top. */
static const struct call calls[] = {
	{SYS_read, {FD, PTR, LEN}},
	{SYS_write, {FD, PTR, LEN}},
	{SYS_open, {PATH, FLAGS, MODE}},
	{SYS_close, {FD}},
	{SYS_stat, {PATH, PTR}},
	{SYS_fstat, {FD, PTR}},
	{SYS_lstat, {PATH, PTR}},
	{SYS_poll, {PTR, SMALL, MS}},
	{SYS_lseek, {FD, ANY, SMALL}},
	{SYS_mmap, {MMADDR, LEN, FLAGS, FLAGS, FD, ANY}},
	{SYS_mprotect, {MMADDR, LEN, FLAGS}},
	{SYS_munmap, {MMADDR, LEN}},
	{SYS_brk, {ANY}},
	{SYS_rt_sigaction, {SIG, BAD, PTR, SMALL}},
	{SYS_rt_sigprocmask, {SMALL, PTR, PTR, SMALL}},
	{SYS_ioctl, {FD, ANY, PTR}},
	{SYS_pread64, {FD, PTR, LEN, ANY}},
	{SYS_pwrite64, {FD, PTR, LEN, ANY}},
	{SYS_readv, {FD, IOV, SMALL}},
	{SYS_writev, {FD, IOV, SMALL}},
	{SYS_access, {PATH, SMALL}},
	{SYS_pipe, {PTR}},
	{SYS_select, {SMALL, PTR, PTR, PTR, TMO}},
	{SYS_sched_yield, {0}},
	{SYS_mremap, {MMADDR, LEN, LEN, FLAGS, MMADDR}},
	{SYS_msync, {MMADDR, LEN, FLAGS}},
	{SYS_mincore, {ANY, LEN, PTR}},
	{SYS_madvise, {MMADDR, LEN, SMALL}},
	{SYS_dup, {FD}},
	{SYS_dup2, {FD, FD}},
	{SYS_nanosleep, {TMO, PTR}},
	{SYS_getitimer, {SMALL, PTR}},
	{SYS_alarm, {ANY}},
	{SYS_setitimer, {SMALL, PTR, PTR}},
	{SYS_getpid, {0}},
	{SYS_sendfile, {FD, FD, PTR, CAPLEN}},
	{SYS_socket, {ANY, ANY, SMALL}},
	{SYS_connect, {FD, SADDR, LEN}},
	{SYS_accept, {FD, PTR, PTR}},
	{SYS_sendto, {FD, PTR, LEN, FLAGS, SADDR, LEN}},
	{SYS_recvfrom, {FD, PTR, LEN, FLAGS, PTR, PTR}},
	{SYS_sendmsg, {FD, MSGHDR, FLAGS}},
	{SYS_recvmsg, {FD, MSGHDR, FLAGS}},
	{SYS_shutdown, {FD, SMALL}},
	{SYS_bind, {FD, SADDR, LEN}},
	{SYS_listen, {FD, ANY}},
	{SYS_getsockname, {FD, PTR, PTR}},
	{SYS_getpeername, {FD, PTR, PTR}},
	{SYS_socketpair, {ANY, ANY, SMALL, PTR}},
	{SYS_setsockopt, {FD, SMALL, SMALL, PTR, LEN}},
	{SYS_getsockopt, {FD, SMALL, SMALL, PTR, PTR}},
	{SYS_wait4, {PID, PTR, FLAGS, PTR}},
	{SYS_kill, {PID, SIG}},
	{SYS_uname, {PTR}},
	{SYS_fcntl, {FD, SMALL, ANY}},
	{SYS_flock, {FD, SMALL}},
	{SYS_fsync, {FD}},
	{SYS_fdatasync, {FD}},
	{SYS_truncate, {PATH, CAPLEN}},
	{SYS_ftruncate, {FD, CAPLEN}},
	{SYS_getdents64, {FD, PTR, LEN}},
	{SYS_getcwd, {PTR, LEN}},
	{SYS_chdir, {PATH}},
	{SYS_fchdir, {FD}},
	{SYS_rename, {PATH, PATH}},
	{SYS_mkdir, {PATH, MODE}},
	{SYS_rmdir, {PATH}},
	{SYS_creat, {PATH, MODE}},
	{SYS_link, {PATH, PATH}},
	{SYS_unlink, {PATH}},
	{SYS_symlink, {PATH, PATH}},
	{SYS_readlink, {PATH, PTR, LEN}},
	{SYS_chmod, {PATH, MODE}},
	{SYS_fchmod, {FD, MODE}},
	{SYS_chown, {PATH, ANY, ANY}},
	{SYS_fchown, {FD, ANY, ANY}},
	{SYS_umask, {MODE}},
	{SYS_gettimeofday, {PTR, PTR}},
	{SYS_getrlimit, {SMALL, PTR}},
	{SYS_getrusage, {SMALL, PTR}},
	{SYS_sysinfo, {PTR}},
	{SYS_times, {PTR}},
	{SYS_getuid, {0}},
	{SYS_getgid, {0}},
	{SYS_geteuid, {0}},
	{SYS_getppid, {0}},
	{SYS_getpgrp, {0}},
	{SYS_getgroups, {SMALL, PTR}},
	{SYS_getpgid, {PID}},
	{SYS_getsid, {PID}},
	{SYS_capget, {PTR, PTR}},
	{SYS_rt_sigpending, {PTR, SMALL}},
	{SYS_rt_sigtimedwait, {PTR, PTR, TMO, SMALL}},
	{SYS_rt_sigqueueinfo, {PID, SIG, PTR}},
	{SYS_utime, {PATH, PTR}},
	{SYS_mknod, {PATH, MODE, ANY}},
	{SYS_personality, {SMALL}},
	{SYS_statfs, {PATH, PTR}},
	{SYS_fstatfs, {FD, PTR}},
	{SYS_getpriority, {SMALL, ZERO}},
	{SYS_sched_getparam, {PID, PTR}},
	{SYS_sched_getscheduler, {PID}},
	{SYS_sched_get_priority_max, {SMALL}},
	{SYS_sched_rr_get_interval, {PID, PTR}},
	{SYS_mlock, {ANY, LEN}},
	{SYS_munlock, {ANY, LEN}},
	{SYS_mlockall, {SMALL}},
	{SYS_munlockall, {0}},
	{SYS_modify_ldt, {SMALL, PTR, LEN}},
	{SYS_prctl, {SMALL, ANY, ANY, ANY, ANY}},
	{SYS_arch_prctl, {SMALL, PTR}},
	{SYS_gettid, {0}},
	{SYS_readahead, {FD, ANY, LEN}},
	{SYS_setxattr, {PATH, PATH, PTR, LEN, SMALL}},
	{SYS_getxattr, {PATH, PATH, PTR, LEN}},
	{SYS_listxattr, {PATH, PTR, LEN}},
	{SYS_removexattr, {PATH, PATH}},
	{SYS_fgetxattr, {FD, PATH, PTR, LEN}},
	{SYS_tkill, {PID, SIG}},
	{SYS_time, {PTR}},
	{SYS_futex, {PTR, ANY, ANY, TMO, PTR, ANY}},
	{SYS_sched_getaffinity, {PID, LEN, PTR}},
	{SYS_io_setup, {SMALL, PTR}},
	{SYS_io_destroy, {ANY}},
	{SYS_io_getevents, {ANY, SMALL, SMALL, PTR, TMO}},
	{SYS_io_submit, {ANY, SMALL, PTR}},
	{SYS_epoll_create, {ANY}},
	{SYS_getdents, {FD, PTR, LEN}},
	{SYS_set_tid_address, {PTR}},
	{SYS_fadvise64, {FD, ANY, LEN, SMALL}},
	{SYS_timer_create, {SMALL, PTR, PTR}},
	{SYS_timer_settime, {SMALL, FLAGS, PTR, PTR}},
	{SYS_timer_gettime, {SMALL, PTR}},
	{SYS_timer_getoverrun, {SMALL}},
	{SYS_timer_delete, {SMALL}},
	{SYS_clock_gettime, {SMALL, PTR}},
	{SYS_clock_getres, {SMALL, PTR}},
	{SYS_clock_nanosleep, {SMALL, SMALL, TMO, PTR}},
	{SYS_epoll_wait, {FD, PTR, SMALL, MS}},
	{SYS_epoll_ctl, {FD, SMALL, FD, PTR}},
	{SYS_tgkill, {PID, PID, SIG}},
	{SYS_utimes, {PATH, PTR}},
	{SYS_mbind, {MMADDR, LEN, SMALL, PTR, SMALL, FLAGS}},
	{SYS_get_mempolicy, {PTR, PTR, SMALL, ANY, FLAGS}},
	{SYS_waitid, {SMALL, PID, PTR, FLAGS, PTR}},
	{SYS_inotify_init, {0}},
	{SYS_inotify_add_watch, {FD, PATH, ANY}},
	{SYS_inotify_rm_watch, {FD, ANY}},
	{SYS_openat, {FD, PATH, FLAGS, MODE}},
	{SYS_mkdirat, {FD, PATH, MODE}},
	{SYS_mknodat, {FD, PATH, MODE, ANY}},
	{SYS_fchownat, {FD, PATH, ANY, ANY, FLAGS}},
	{SYS_futimesat, {FD, PATH, PTR}},
	{SYS_newfstatat, {FD, PATH, PTR, FLAGS}},
	{SYS_unlinkat, {FD, PATH, FLAGS}},
	{SYS_renameat, {FD, PATH, FD, PATH}},
	{SYS_linkat, {FD, PATH, FD, PATH, FLAGS}},
	{SYS_symlinkat, {PATH, FD, PATH}},
	{SYS_readlinkat, {FD, PATH, PTR, LEN}},
	{SYS_fchmodat, {FD, PATH, MODE}},
	{SYS_faccessat, {FD, PATH, SMALL}},
	{SYS_pselect6, {SMALL, PTR, PTR, PTR, TMO, PTR}},
	{SYS_ppoll, {PTR, SMALL, TMO, PTR, SMALL}},
	{SYS_set_robust_list, {PTR, LEN}},
	{SYS_get_robust_list, {PID, PTR, PTR}},
	{SYS_splice, {FD, PTR, FD, PTR, CAPLEN, FLAGS}},
	{SYS_tee, {FD, FD, CAPLEN, FLAGS}},
	{SYS_sync_file_range, {FD, ANY, LEN, FLAGS}},
	{SYS_vmsplice, {FD, IOV, SMALL, FLAGS}},
	{SYS_utimensat, {FD, PATH, PTR, FLAGS}},
	{SYS_epoll_pwait, {FD, PTR, SMALL, MS, PTR, SMALL}},
	{SYS_signalfd, {FD, PTR, SMALL}},
	{SYS_timerfd_create, {SMALL, FLAGS}},
	{SYS_eventfd, {ANY}},
	{SYS_fallocate, {FD, SMALL, CAPLEN, CAPLEN}},
	{SYS_timerfd_settime, {FD, FLAGS, PTR, PTR}},
	{SYS_timerfd_gettime, {FD, PTR}},
	{SYS_accept4, {FD, PTR, PTR, FLAGS}},
	{SYS_signalfd4, {FD, PTR, SMALL, FLAGS}},
	{SYS_eventfd2, {ANY, FLAGS}},
	{SYS_epoll_create1, {FLAGS}},
	{SYS_dup3, {FD, FD, FLAGS}},
	{SYS_pipe2, {PTR, FLAGS}},
	{SYS_inotify_init1, {FLAGS}},
	{SYS_preadv, {FD, IOV, SMALL, ANY, ANY}},
	{SYS_pwritev, {FD, IOV, SMALL, ANY, ANY}},
	{SYS_rt_tgsigqueueinfo, {PID, PID, SIG, PTR}},
	{SYS_recvmmsg, {FD, MSGHDR, SMALL, FLAGS, TMO}},
	{SYS_prlimit64, {PID, SMALL, ZERO, PTR}},
	{SYS_name_to_handle_at, {FD, PATH, PTR, PTR, FLAGS}},
	{SYS_syncfs, {FD}},
	{SYS_sendmmsg, {FD, MSGHDR, SMALL, FLAGS}},
	{SYS_getcpu, {PTR, PTR, PTR}},
	{SYS_kcmp, {PID, PID, SMALL, ANY, ANY}},
	{SYS_sched_getattr, {PID, PTR, LEN, FLAGS}},
	{SYS_renameat2, {FD, PATH, FD, PATH, FLAGS}},
	{SYS_getrandom, {PTR, LEN, FLAGS}},
	{SYS_memfd_create, {PATH, FLAGS}},
	{SYS_membarrier, {SMALL, FLAGS, ANY}},
	{SYS_mlock2, {ANY, LEN, FLAGS}},
	{SYS_copy_file_range, {FD, PTR, FD, PTR, CAPLEN, FLAGS}},
	{SYS_preadv2, {FD, IOV, SMALL, ANY, ANY, FLAGS}},
	{SYS_pwritev2, {FD, IOV, SMALL, ANY, ANY, FLAGS}},
	{SYS_statx, {FD, PATH, FLAGS, ANY, PTR}},
	{SYS_pidfd_open, {PID, FLAGS}},
	{SYS_close_range, {FD, FD, FLAGS}},
	{SYS_openat2, {FD, PATH, PTR, LEN}},
	{SYS_faccessat2, {FD, PATH, SMALL, FLAGS}},
	{SYS_epoll_pwait2, {FD, PTR, SMALL, TMO, PTR, SMALL}},
	/* Unknown numbers. */
	{-1, {ANY, ANY, ANY, ANY, ANY, ANY}},
};
#define NCALLS (sizeof calls / sizeof calls[0])

static long raw6(long n, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

void fuzz_restorer(void);
__asm__(".text\n.globl fuzz_restorer\n.type fuzz_restorer,@function\nfuzz_restorer:\n"
	"\tmov $15, %eax\n\tsyscall\n\thlt\n");

struct ksigaction {
	void *handler;
	unsigned long flags;
	void (*restorer)(void);
	uint64_t mask;
};

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	int sync = sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE;
	if (sync && !in_call && si->si_code > 0) {
		faults++;
		siglongjmp(back, 1);
	}
	signals++;
}

static uint64_t hostile_ptr(void)
{
	static const uint64_t bad[] = {
		0, 1, 8, 0xfff, 0x1000, 0x800000000000ull, 0xffff800000000000ull, 0xffff880000000000ull,
		0xffffffff81000000ull, 0xffffffffff600000ull, (uint64_t)-4096,
		(uint64_t)-1, 0xdead0000beef0000ull,
	};
	switch (below(3)) {
	case 0:
		return bad[below(sizeof bad / sizeof bad[0])];
	case 1:
		return rnd() & 0x7fffffffffffull; /* wild user address */
	default:
		return rnd();
	}
}

static uint64_t pool_ptr(void)
{
	switch (below(4)) {
	case 0: /* runs into the guard page after the pool */
		return (uint64_t)(pool + POOL_SIZE - 1 - below(64));
	case 1: /* unaligned */
		return (uint64_t)(pool + 1 + 2 * below(POOL_SIZE / 2 - 1));
	default:
		return (uint64_t)(pool + 8 * below(POOL_SIZE / 8 - 64));
	}
}

static uint64_t any_number(void)
{
	static const uint64_t special[] = {
		0, 1, 2, 3, 7, 8, 16, 64, 255, 256, 4095, 4096, 65536, 0x7fffffff,
		0x80000000ull, 0xffffffffull, 0x100000000ull, 0x7fffffffffffffffull,
		0x8000000000000000ull, (uint64_t)-1, (uint64_t)-2, (uint64_t)-4096,
		(uint64_t)-100,
	};
	switch (below(5)) {
	case 0:
		return special[below(sizeof special / sizeof special[0])];
	case 1:
		return below(64);
	case 2:
		return hostile_ptr();
	case 3:
		return pool_ptr();
	default:
		return rnd() >> below(64);
	}
}

static uint64_t fd_arg(void)
{
	switch (below(10)) {
	case 0:
		return (uint64_t)-1;
	case 1:
		return (uint64_t)(long)AT_FDCWD;
	case 2:
		return (uint64_t)(int)(rnd() | 0x10000000) ; /* bad, often negative */
	case 3:
		return 0x100000000ull + below(8); /* a small fd in a wide register */
	default:
		return below(MAX_FD);
	}
}

static uint64_t len_arg(void)
{
	static const uint64_t big[] = {
		0x7ffff000, 0x7fffffff, 0x80000000ull, 0xffffffffull, 1ull << 40,
		1ull << 62, 0x7fffffffffffffffull, (uint64_t)-1, (uint64_t)-4096,
	};
	switch (below(4)) {
	case 0:
		return big[below(sizeof big / sizeof big[0])];
	case 1:
		return below(POOL_SIZE + 2);
	default:
		return below(300);
	}
}

static uint64_t pid_arg(void)
{
	switch (below(4)) {
	case 0:
		return 0;
	case 1:
		return 0x3ffffff0; /* no such process */
	default:
		return (uint64_t)my_pid;
	}
}

static uint64_t sig_arg(void)
{
	for (;;) {
		uint64_t s = below(8) == 0 ? any_number() : below(66);
		if (s != SIGKILL && s != SIGSTOP)
			return s;
	}
}

/* A fresh name of [a-z0-9_-] in the craft area: never '/' or '.'. */
static uint64_t path_arg(size_t slot)
{
	if (below(8) == 0)
		return hostile_ptr();
	static const char alpha[] = "abcdefgh0123_-";
	char *p = (char *)craft + slot * 512;
	size_t n = below(6) == 0 ? below(500) : 1 + below(3);
	for (size_t i = 0; i < n; i++)
		p[i] = alpha[below(sizeof alpha - 1)];
	p[n] = 0;
	return (uint64_t)p;
}

static uint64_t timeout_arg(void)
{
	if (below(4) == 0)
		return hostile_ptr() | 1; /* never NULL: NULL means forever */
	uint64_t *t = (uint64_t *)(craft + 3 * 512);
	/* At most 1 ms read as a timespec or as a timeval (select); or
	 * invalid: negative seconds (an out-of-range tv_usec is not: select
	 * folds it into seconds). */
	t[0] = below(4) == 0 ? (uint64_t)-1 - below(3) : 0;
	t[1] = below(1000);
	return (uint64_t)t;
}

static uint64_t mm_addr(void)
{
	switch (below(3)) {
	case 0:
		return hostile_ptr();
	default:
		return (uint64_t)(sac + (below(4) ? 4096 * below(SAC_SIZE / 4096) : below(SAC_SIZE)));
	}
}

static uint64_t saddr_arg(void)
{
	if (below(5) == 0)
		return hostile_ptr();
	unsigned char *a = craft + 4 * 512;
	memset(a, 0, 128);
	switch (below(4)) {
	case 0: /* AF_UNIX: a name in the working directory, or abstract */
		a[0] = AF_UNIX;
		path_arg(5);
		memcpy(a + 2, craft + 5 * 512, 20);
		a[2 + below(20)] = 0;
		if (below(3) == 0)
			a[2] = 0;
		break;
	case 1: /* 127.0.0.1, port 0 or 1 */
		a[0] = AF_INET;
		a[3] = below(2);
		a[4] = 127;
		a[7] = 1;
		break;
	case 2: /* ::1 */
		a[0] = AF_INET6;
		a[3] = below(2);
		a[23] = 1;
		break;
	default: /* a family the kernel refuses */
		a[0] = 0x40 + below(100);
		for (int i = 2; i < 32; i++)
			a[i] = rnd();
		break;
	}
	return (uint64_t)a;
}

static uint64_t iov_arg(void)
{
	if (below(5) == 0)
		return hostile_ptr();
	uint64_t *v = (uint64_t *)(craft + 6 * 512);
	for (int i = 0; i < 16; i++) {
		v[2 * i] = below(4) ? pool_ptr() : hostile_ptr();
		v[2 * i + 1] = below(8) ? below(512) : len_arg();
	}
	return (uint64_t)v;
}

static uint64_t msghdr_arg(void)
{
	if (below(5) == 0)
		return hostile_ptr();
	/* Up to 4 headers (for sendmmsg/recvmmsg: 64 bytes apart). */
	for (int i = 0; i < 4; i++) {
		uint64_t *h = (uint64_t *)(craft + 8 * 512 + 64 * i);
		h[0] = below(2) ? saddr_arg() : 0;
		h[1] = below(4) ? below(130) : len_arg();
		h[2] = iov_arg();
		h[3] = below(4) ? below(17) : len_arg();
		h[4] = below(2) ? pool_ptr() : below(2) ? 0 : hostile_ptr();
		h[5] = below(4) ? below(256) : len_arg();
		h[6] = rnd();
		h[7] = 0;
	}
	return (uint64_t)(craft + 8 * 512);
}

static uint64_t flags_arg(void)
{
	switch (below(4)) {
	case 0:
		return rnd();
	case 1:
		return 1ull << below(32);
	default:
		return rnd() & rnd() & 0xffffffff;
	}
}

static uint64_t arg(int kind, size_t i)
{
	switch (kind) {
	case FD:
		return fd_arg();
	case PTR:
		return below(3) ? pool_ptr() : hostile_ptr();
	case BAD: /* never a user address: a sigaction read from one would
		   install a random handler */
		return below(4) ? hostile_ptr() | 0x8000000000000000ull : 0;
	case LEN:
		return len_arg();
	case CAPLEN:
		return below(CAP_LEN);
	case PATH:
		return path_arg(i);
	case PID:
		return pid_arg();
	case SIG:
		return sig_arg();
	case TMO:
		return timeout_arg();
	case MS:
		return below(6);
	case MMADDR:
		return mm_addr();
	case SADDR:
		return saddr_arg();
	case MSGHDR:
		return msghdr_arg();
	case IOV:
		return iov_arg();
	case SMALL:
		return below(8) ? below(16) : any_number();
	case ZERO:
		return 0;
	case MODE:
		return rnd() & 07777;
	case FLAGS:
		return flags_arg();
	default:
		return any_number();
	}
}

/* Fix-ups for calls whose arguments need a closer look. */
static void sanitize(long nr, uint64_t *a)
{
	switch (nr) {
	case SYS_fcntl: {
		static const int cmds[] = {
			F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_GETLK, F_SETLK,
			F_SETOWN, F_GETOWN, F_SETSIG, F_GETSIG, F_OFD_GETLK, F_OFD_SETLK,
			F_DUPFD_CLOEXEC, F_SETPIPE_SZ, F_GETPIPE_SZ, F_ADD_SEALS,
			F_GET_SEALS, F_GETLEASE, F_NOTIFY, 12345,
		};
		a[1] = cmds[below(sizeof cmds / sizeof cmds[0])];
		if (a[1] == F_SETOWN)
			a[2] = pid_arg();
		else if (a[1] == F_SETSIG && (a[2] == SIGSEGV || a[2] == SIGBUS ||
					      a[2] == SIGILL || a[2] == SIGFPE))
			a[2] = SIGIO;
		else if (a[1] == F_DUPFD || a[1] == F_DUPFD_CLOEXEC)
			a[2] = below(MAX_FD + 8);
		else if (a[1] == F_GETLK || a[1] == F_SETLK || a[1] == F_OFD_GETLK ||
			 a[1] == F_OFD_SETLK)
			a[2] = below(3) ? pool_ptr() : hostile_ptr();
		break;
	}
	case SYS_flock:
		a[1] |= LOCK_NB;
		break;
	case SYS_socket:
	case SYS_socketpair: {
		static const int dom[] = {AF_UNIX, AF_INET, AF_INET6, 0, 77, -1};
		static const int ty[] = {SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET, 0, 99};
		a[0] = dom[below(6)];
		a[1] = ty[below(5)] | (below(2) ? SOCK_NONBLOCK : 0) | (below(2) ? SOCK_CLOEXEC : 0);
		a[2] = below(4) ? 0 : below(300);
		break;
	}
	case SYS_ioctl: {
		/* Socket configuration (0x89), filesystem freeze and flags
		 * ('X', 'f'), btrfs, block devices, and terminal input
		 * injection stay out: natively they would reach the host. */
		uint64_t type = (a[1] >> 8) & 0xff;
		if (type == 0x89 || type == 0x58 || type == 0x66 || type == 0x94 ||
		    type == 0x12 || (a[1] & 0xffff) == 0x5412 || (a[1] & 0xffff) == 0x541c)
			a[1] = 0x541b; /* FIONREAD */
		break;
	}
	case SYS_getrandom:
		a[2] |= 1; /* GRND_NONBLOCK */
		break;
	case SYS_mlockall:
		a[0] &= ~2ull; /* no MCL_FUTURE: every later mmap populated */
		break;
	case SYS_prctl:
		/* PR_SET_SECCOMP, PR_SET_TSC, PR_SET_MM, PR_SET_SYSCALL_USER_DISPATCH,
		 * PR_SET_SPECULATION_CTRL, PR_SET_PDEATHSIG stay out. */
		if (a[0] == 22 || a[0] == 26 || a[0] == 35 || a[0] == 59 || a[0] == 53 ||
		    a[0] == 1)
			a[0] = 16; /* PR_GET_NAME */
		if (a[0] == 15 || a[0] == 16)
			a[1] = pool_ptr();
		break;
	case SYS_arch_prctl: {
		static const int codes[] = {0x1003, 0x1004, 0x1011, 0x1021, 0x1022, 0x9999};
		a[0] = codes[below(6)];
		break;
	}
	case SYS_mknod:
	case SYS_mknodat:
		a[nr == SYS_mknod ? 1 : 2] &= 07777; /* regular files only */
		break;
	case SYS_mmap:
		/* MAP_FIXED-like flags only over the sacrificial region. */
		a[3] &= ~(uint64_t)0xffffffff00000000ull;
		if ((a[3] & (MAP_FIXED | MAP_FIXED_NOREPLACE)) && a[0] >= (uint64_t)sac &&
		    a[0] < (uint64_t)sac + SAC_SIZE && a[1] > (uint64_t)sac + SAC_SIZE - a[0])
			a[1] = (uint64_t)sac + SAC_SIZE - a[0];
		if ((a[3] & (MAP_FIXED | MAP_FIXED_NOREPLACE)) &&
		    (a[0] < (uint64_t)sac || a[0] >= (uint64_t)sac + SAC_SIZE) && a[0] < (1ull << 47))
			a[0] = (uint64_t)sac;
		break;
	case SYS_mprotect:
	case SYS_munmap:
	case SYS_madvise:
	case SYS_msync:
	case SYS_mbind:
	case SYS_mremap:
		/* Stay inside the sacrificial region when starting in it; a
		 * user address outside it moves to an unused area and spans
		 * at most 64 KiB (munmap(0, 2 GiB) would take this program's
		 * code). */
		if (a[0] >= (uint64_t)sac && a[0] < (uint64_t)sac + SAC_SIZE) {
			if (a[1] > (uint64_t)sac + SAC_SIZE - a[0])
				a[1] = (uint64_t)sac + SAC_SIZE - a[0];
		} else if (a[0] < (1ull << 47)) {
			a[0] = 0x5a5a00000000ull + (a[0] & 0x3fffffff);
			a[1] &= 0xffff;
		}
		if (nr == SYS_madvise && (a[2] == 100 || a[2] == 101))
			a[2] = 0; /* no MADV_HWPOISON / MADV_SOFT_OFFLINE */
		if (nr == SYS_mremap) {
			a[3] &= 7;
			if (a[3] & 2 /* MREMAP_FIXED */) {
				a[4] = (uint64_t)sac + 4096 * below(SAC_SIZE / 4096);
				if (a[2] > (uint64_t)sac + SAC_SIZE - a[4])
					a[2] = (uint64_t)sac + SAC_SIZE - a[4];
			}
		}
		break;
	case SYS_close_range:
		a[0] = 3 + below(MAX_FD);
		a[1] = a[0] + below(MAX_FD);
		break;
	case SYS_dup2:
	case SYS_dup3:
		if (a[1] > MAX_FD + 8 && a[1] < 4096)
			a[1] = below(MAX_FD);
		break;
	case SYS_rt_sigprocmask:
		/* Blocking SIGSEGV/SIGBUS would make a real fault fatal. */
		break;
	case SYS_io_setup:
		a[0] = below(64);
		break;
	case SYS_timer_create:
		/* sigevent: a signal to this process (never SIGEV_THREAD). */
		if (a[1] && a[1] >= (uint64_t)pool && a[1] < (uint64_t)pool + POOL_SIZE) {
			uint32_t *ev = (uint32_t *)(craft + 7 * 512);
			memset(ev, 0, 64);
			ev[2] = sig_arg();
			ev[3] = below(3) ? 0 /* SIGEV_SIGNAL */ : 1 /* SIGEV_NONE */;
			a[1] = (uint64_t)ev;
		}
		break;
	case SYS_clock_nanosleep:
		/* Sleeping on this process's own CPU clock never ends (it does
		 * not run while it sleeps). */
		if (a[0] == 2 || a[0] == 3 || (int)a[0] < 0)
			a[0] = 1;
		break;
	case SYS_getpriority:
		a[0] = below(3);
		break;
	case SYS_kcmp:
		a[0] = a[1] = (uint64_t)my_pid;
		break;
	case -1: {
		/* Unassigned syscall numbers (also unassigned in their low 32
		 * bits, which is all Linux looks at), any high bits. */
		uint64_t lo = below(2) ? 335 + below(424 - 335) : 470 + below(2000);
		a[6] = (below(2) ? 0 : rnd() << 32) | lo;
		break;
	}
	}
}

/* Makes an fd argument non-blocking (no fuzzed call may block). */
static void nonblock(uint64_t fd)
{
	/* Linux (and the sandbox) read an fd from its low 32 bits. */
	long n = (long)(uint32_t)fd;
	if (n > 0x7fffffff)
		return;
	long fl = raw6(SYS_fcntl, n, F_GETFL, 0, 0, 0, 0);
	if (fl >= 0 && !(fl & O_NONBLOCK))
		raw6(SYS_fcntl, n, F_SETFL, fl | O_NONBLOCK, 0, 0, 0);
}

static void put(const char *s)
{
	write(ERR_FD, s, strlen(s));
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: sysfuzz SEED [COUNT] [trace]\n");
		return 2;
	}
	uint64_t seed = strtoull(argv[1], 0, 0);
	long count = argc > 2 ? atol(argv[2]) : 20000;
	int trace = argc > 3 && strcmp(argv[3], "trace") == 0;
	rng = seed * 0x2545f4914f6cdd1dull + 1;
	my_pid = getpid();
	/* Our own process group, so kill(0, sig) reaches nobody else. */
	setpgid(0, 0);

	/* stdout/stderr: saved; 1 and 2 become a pipe nobody reads. */
	if (dup2(1, OUT_FD) < 0 || dup2(2, ERR_FD) < 0)
		return 3;
	int p[2];
	if (pipe2(p, O_NONBLOCK) < 0)
		return 4;
	dup2(p[0], 0);
	dup2(p[1], 1);
	dup2(p[1], 2);
	dup2(p[0], 902);
	close(p[0]);
	close(p[1]);

	/* Natively: no file over 16 MiB, no more than 256 MiB of memory. */
	struct rlimit fsize = {16 << 20, 16 << 20}, as = {256 << 20, 256 << 20};
	setrlimit(RLIMIT_FSIZE, &fsize);
	setrlimit(RLIMIT_AS, &as);

	/* pool and craft each followed by a guard page; sac apart. */
	unsigned char *m = mmap(0, POOL_SIZE + 4096 + 16 * 512 + 4096, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	sac = mmap(0, SAC_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED || sac == MAP_FAILED)
		return 5;
	pool = m;
	craft = m + POOL_SIZE + 4096;
	mprotect(m + POOL_SIZE, 4096, PROT_NONE);
	mprotect(craft + 16 * 512, 4096, PROT_NONE);
	for (size_t i = 0; i < POOL_SIZE; i++)
		pool[i] = rnd();

	struct ksigaction sa = {(void *)on_signal, SA_SIGINFO | 0x04000000 /* SA_RESTORER */,
				fuzz_restorer, 0};
	for (int s = 1; s <= 64; s++)
		if (s != SIGKILL && s != SIGSTOP)
			raw6(SYS_rt_sigaction, s, (long)&sa, 0, 8, 0, 0);

	sigsetjmp(back, 1);
	while (done < count) {
		long i = done++;
		const struct call *c = &calls[below(NCALLS)];
		uint64_t a[7];
		for (size_t j = 0; j < 6; j++)
			a[j] = arg(c->k[j], j);
		a[6] = c->nr;
		sanitize(c->nr, a);
		for (size_t j = 0; j < 6; j++)
			if (c->k[j] == FD)
				nonblock(a[j]);
		if (trace) {
			char line[200];
			snprintf(line, sizeof line, "%ld: %lld(%llx, %llx, %llx, %llx, %llx, %llx)\n", i,
				 (long long)a[6], (unsigned long long)a[0], (unsigned long long)a[1],
				 (unsigned long long)a[2], (unsigned long long)a[3],
				 (unsigned long long)a[4], (unsigned long long)a[5]);
			put(line);
		}
		in_call = 1;
		long r = raw6((long)a[6], a[0], a[1], a[2], a[3], a[4], a[5]);
		in_call = 0;
		if (r < 0 && r > -4096)
			errors++;
		/* Every so often, fresh random bytes in the pool. */
		if (below(512) == 0)
			for (size_t k = 0; k < POOL_SIZE; k += 8)
				*(uint64_t *)(pool + k) = rnd();
	}

	/* Quiet: timers off, signals ignored, then the summary. */
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, 0);
	for (int s = 1; s <= 64; s++) {
		struct ksigaction ign = {SIG_IGN, 0x04000000, fuzz_restorer, 0};
		if (s != SIGKILL && s != SIGSTOP && s != SIGSEGV && s != SIGBUS)
			raw6(SYS_rt_sigaction, s, (long)&ign, 0, 8, 0, 0);
	}
	char line[160];
	int n = snprintf(line, sizeof line, "sysfuzz seed %llu: %ld calls, %ld errors, %ld signals, %ld faults\n",
			 (unsigned long long)seed, done, errors, (long)signals, (long)faults);
	for (int off_ = 0; off_ < n;) {
		long w = raw6(SYS_write, OUT_FD, (long)line + off_, n - off_, 0, 0, 0);
		if (w == -EINTR || w == -EAGAIN)
			continue;
		if (w <= 0)
			return 6;
		off_ += w;
	}
	return 0;
}
