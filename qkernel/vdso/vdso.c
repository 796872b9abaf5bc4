/* linux-vdso.so.1 for qkernel: clock_gettime, gettimeofday, time, getcpu
 * and clock_getres without a system call, computed from the TSC and the
 * kernel's vvar page (qlib/src/vvar.rs documents the layout and the
 * formula; docs/vdso.md the design). Anything it does not answer itself
 * goes to the real system call, so its answers are the kernel's. Built by
 * qkernel/build.rs with vdso.lds and vdso.map; no libc, no relocations. */

typedef unsigned int u32;
typedef unsigned long u64;
typedef long i64;

struct vvar {
	u32 seq;
	u32 getcpu_sys;
	u64 tsc_base;
	u64 mult;
	u32 shift;
	u32 pad;
	u64 mono_base;
	u64 real_base;
};

_Static_assert(sizeof(struct vvar) == 0x30, "qlib::vvar::Vvar layout");
_Static_assert(__builtin_offsetof(struct vvar, mult) == 0x10, "layout");
_Static_assert(__builtin_offsetof(struct vvar, mono_base) == 0x20, "layout");
_Static_assert(__builtin_offsetof(struct vvar, real_base) == 0x28, "layout");

/* The page below the vDSO's first page (vdso.lds). Hidden: reached
 * RIP-relative, never through a relocation. */
extern const volatile struct vvar vvar_page __attribute__((visibility("hidden")));

struct timespec_k { i64 tv_sec; i64 tv_nsec; };
struct timeval_k { i64 tv_sec; i64 tv_usec; };
struct timezone_k { int tz_minuteswest; int tz_dsttime; };

#define NSEC_PER_SEC 1000000000UL
#define SYS_gettimeofday 96
#define SYS_time 201
#define SYS_clock_gettime 228
#define SYS_clock_getres 229
#define SYS_getcpu 309

enum {
	CLOCK_REALTIME = 0,
	CLOCK_MONOTONIC = 1,
	CLOCK_MONOTONIC_RAW = 4,
	CLOCK_REALTIME_COARSE = 5,
	CLOCK_MONOTONIC_COARSE = 6,
	CLOCK_BOOTTIME = 7,
	CLOCK_TAI = 11,
};

static inline long sys3(long nr, long a, long b, long c)
{
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return ret;
}

static inline u64 rdtsc_ordered(void)
{
	u32 lo, hi;
	__asm__ volatile("lfence; rdtsc" : "=a"(lo), "=d"(hi) : : "memory");
	return ((u64)hi << 32) | lo;
}

/* 0: the realtime base, 1: the monotonic one. */
static inline u64 clock_ns(int mono)
{
	const volatile struct vvar *v = &vvar_page;
	u32 seq;
	u64 ns;
	for (;;) {
		seq = v->seq;
		if (seq & 1) {
			__asm__ volatile("pause");
			continue;
		}
		__asm__ volatile("" : : : "memory");
		u64 base = mono ? v->mono_base : v->real_base;
		u64 ticks = rdtsc_ordered() - v->tsc_base;
		ns = base + (u64)(((unsigned __int128)ticks * v->mult) >> v->shift);
		__asm__ volatile("" : : : "memory");
		if (v->seq == seq)
			return ns;
	}
}

/* Which base a clock reads: 0 realtime, 1 monotonic, -1 not ours. The
 * coarse clocks are the precise ones (the kernel's syscall answers them
 * so too, and mixing both never goes backwards). */
static inline int base_of(u32 clock)
{
	switch (clock) {
	case CLOCK_REALTIME:
	case CLOCK_REALTIME_COARSE:
	case CLOCK_TAI:
		return 0;
	case CLOCK_MONOTONIC:
	case CLOCK_MONOTONIC_RAW:
	case CLOCK_MONOTONIC_COARSE:
	case CLOCK_BOOTTIME:
		return 1;
	default:
		return -1;
	}
}

int __vdso_clock_gettime(int clock, struct timespec_k *ts)
{
	int b = base_of((u32)clock);
	if (b < 0)
		return (int)sys3(SYS_clock_gettime, clock, (long)ts, 0);
	u64 ns = clock_ns(b);
	ts->tv_sec = (i64)(ns / NSEC_PER_SEC);
	ts->tv_nsec = (i64)(ns % NSEC_PER_SEC);
	return 0;
}

int __vdso_gettimeofday(struct timeval_k *tv, struct timezone_k *tz)
{
	if (tv) {
		u64 ns = clock_ns(0);
		tv->tv_sec = (i64)(ns / NSEC_PER_SEC);
		tv->tv_usec = (i64)(ns % NSEC_PER_SEC / 1000);
	}
	if (tz) {
		tz->tz_minuteswest = 0;
		tz->tz_dsttime = 0;
	}
	return 0;
}

i64 __vdso_time(i64 *t)
{
	i64 s = (i64)(clock_ns(0) / NSEC_PER_SEC);
	if (t)
		*t = s;
	return s;
}

int __vdso_clock_getres(int clock, struct timespec_k *res)
{
	if (base_of((u32)clock) < 0)
		return (int)sys3(SYS_clock_getres, clock, (long)res, 0);
	if (res) {
		res->tv_sec = 0;
		res->tv_nsec = 1;
	}
	return 0;
}

int __vdso_getcpu(u32 *cpu, u32 *node, void *cache)
{
	if (vvar_page.getcpu_sys)
		return (int)sys3(SYS_getcpu, (long)cpu, (long)node, (long)cache);
	if (cpu)
		*cpu = 0;
	if (node)
		*node = 0;
	return 0;
}

int clock_gettime(int, struct timespec_k *) __attribute__((weak, alias("__vdso_clock_gettime")));
int gettimeofday(struct timeval_k *, struct timezone_k *) __attribute__((weak, alias("__vdso_gettimeofday")));
i64 time(i64 *) __attribute__((weak, alias("__vdso_time")));
int clock_getres(int, struct timespec_k *) __attribute__((weak, alias("__vdso_clock_getres")));
int getcpu(u32 *, u32 *, void *) __attribute__((weak, alias("__vdso_getcpu")));
