/*
 * The vDSO (docs/vdso.md): AT_SYSINFO_EHDR, its symbols found the way Go
 * and musl find them (DT_HASH, DT_GNU_HASH, version LINUX_2.6), its
 * clocks mixed with the system call's, its fallbacks, and that the C
 * library's clock_gettime/gettimeofday/time use it (they cost no system
 * time).
 * Prints the same lines natively and in the sandbox; no time values.
 * Built static (musl, glibc as vdso_glibc) and dynamic (c-dyn/vdso_dyn.c).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef int (*gettime_fn)(clockid_t, struct timespec *);
typedef int (*gtod_fn)(struct timeval *, void *);
typedef time_t (*time_fn)(time_t *);
typedef int (*getcpu_fn)(unsigned *, unsigned *, void *);

static uintptr_t base;
static const Elf64_Sym *symtab;
static const char *strtab;
static const Elf64_Word *hash;
static const uint32_t *gnu_hash;
static const Elf64_Half *versym;
static const Elf64_Verdef *verdef;
static uintptr_t load_offset;

static int init_elf(void)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
		return 0;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(base + eh->e_phoff);
	const Elf64_Dyn *dyn = NULL;
	int have_load = 0;
	for (int i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD && !have_load) {
			have_load = 1;
			load_offset = base + ph[i].p_offset - ph[i].p_vaddr;
		} else if (ph[i].p_type == PT_DYNAMIC) {
			dyn = (const Elf64_Dyn *)(base + ph[i].p_offset);
		}
	}
	if (!have_load || !dyn)
		return 0;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		uintptr_t p = load_offset + dyn->d_un.d_ptr;
		switch (dyn->d_tag) {
		case DT_SYMTAB: symtab = (const Elf64_Sym *)p; break;
		case DT_STRTAB: strtab = (const char *)p; break;
		case DT_HASH: hash = (const Elf64_Word *)p; break;
		case DT_GNU_HASH: gnu_hash = (const uint32_t *)p; break;
		case DT_VERSYM: versym = (const Elf64_Half *)p; break;
		case DT_VERDEF: verdef = (const Elf64_Verdef *)p; break;
		}
	}
	return symtab && strtab && hash && gnu_hash && versym && verdef;
}

static uint32_t elf_hash(const char *s)
{
	uint32_t h = 0, g;
	while (*s) {
		h = (h << 4) + (unsigned char)*s++;
		g = h & 0xf0000000;
		if (g)
			h ^= g >> 24;
		h &= ~g;
	}
	return h;
}

static uint32_t gnu_hash_of(const char *s)
{
	uint32_t h = 5381;
	while (*s)
		h = h * 33 + (unsigned char)*s++;
	return h;
}

/* The version index of LINUX_2.6 in the verdef chain, or -1. */
static int version_index(void)
{
	const Elf64_Verdef *d = verdef;
	for (;;) {
		const Elf64_Verdaux *a = (const Elf64_Verdaux *)((const char *)d + d->vd_aux);
		if (!(d->vd_flags & VER_FLG_BASE) && d->vd_hash == elf_hash("LINUX_2.6") &&
		    strcmp(strtab + a->vda_name, "LINUX_2.6") == 0)
			return d->vd_ndx & 0x7fff;
		if (!d->vd_next)
			return -1;
		d = (const Elf64_Verdef *)((const char *)d + d->vd_next);
	}
}

static int sym_ok(uint32_t i, const char *name, int ver)
{
	const Elf64_Sym *s = &symtab[i];
	int type = ELF64_ST_TYPE(s->st_info), bind = ELF64_ST_BIND(s->st_info);
	return type == STT_FUNC && (bind == STB_GLOBAL || bind == STB_WEAK) &&
	       s->st_shndx != SHN_UNDEF && strcmp(strtab + s->st_name, name) == 0 &&
	       (versym[i] & 0x7fff) == ver;
}

/* Looks `name` up through DT_HASH (as musl and Go do). */
static void *by_hash(const char *name, int ver)
{
	uint32_t nbucket = hash[0];
	const Elf64_Word *bucket = &hash[2], *chain = &hash[2 + nbucket];
	for (uint32_t i = bucket[elf_hash(name) % nbucket]; i; i = chain[i])
		if (sym_ok(i, name, ver))
			return (void *)(load_offset + symtab[i].st_value);
	return NULL;
}

/* Looks `name` up through DT_GNU_HASH (as glibc and Go do). */
static void *by_gnu_hash(const char *name, int ver)
{
	uint32_t nbuckets = gnu_hash[0], symoffset = gnu_hash[1], bloom_size = gnu_hash[2];
	const uint64_t *bloom = (const uint64_t *)&gnu_hash[4];
	const uint32_t *buckets = (const uint32_t *)&bloom[bloom_size];
	const uint32_t *chain = &buckets[nbuckets];
	uint32_t h = gnu_hash_of(name);
	uint32_t i = buckets[h % nbuckets];
	if (i < symoffset)
		return NULL;
	for (;; i++) {
		uint32_t h2 = chain[i - symoffset];
		if ((h | 1) == (h2 | 1) && sym_ok(i, name, ver))
			return (void *)(load_offset + symtab[i].st_value);
		if (h2 & 1)
			return NULL;
	}
}

static int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

static int64_t sys_ns(clockid_t c)
{
	struct timespec t;
	syscall(SYS_clock_gettime, c, &t);
	return ts_ns(&t);
}

/* System time used so far, ns. */
static int64_t sys_time_ns(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (int64_t)ru.ru_stime.tv_sec * 1000000000 + (int64_t)ru.ru_stime.tv_usec * 1000;
}

/* `vdso hib`: prints "waiting", reads a line from stdin (the sandbox is
 * hibernated meanwhile), then checks the vDSO's clocks against the
 * system call's and that they advanced by the wait. */
static int across_hibernation(gettime_fn vgettime)
{
	struct timespec t;
	int64_t m0 = sys_ns(CLOCK_MONOTONIC), r0 = sys_ns(CLOCK_REALTIME);
	printf("waiting\n");
	char buf[64];
	int64_t w0 = sys_ns(CLOCK_MONOTONIC);
	if (!fgets(buf, sizeof buf, stdin))
		return 1;
	int64_t waited = sys_ns(CLOCK_MONOTONIC) - w0;
	vgettime(CLOCK_MONOTONIC, &t);
	int64_t m1 = ts_ns(&t), m2 = sys_ns(CLOCK_MONOTONIC);
	vgettime(CLOCK_REALTIME, &t);
	int64_t r1 = ts_ns(&t), r2 = sys_ns(CLOCK_REALTIME);
	int64_t want = atoll(buf) * 1000000;
	printf("monotonic: vDSO advanced by the wait (%s ms): %s\n", want ? "the test's" : "0",
	       m1 - m0 >= waited && waited >= want ? "yes" : "no");
	printf("monotonic: vDSO <= next syscall: %s\n", m1 <= m2 ? "yes" : "no");
	printf("realtime: vDSO advanced as monotonic within 50 ms: %s\n",
	       (r1 - r0) - (m1 - m0) < 50000000 && (m1 - m0) - (r1 - r0) < 50000000 ? "yes" : "no");
	printf("realtime: vDSO <= next syscall: %s\n", r1 <= r2 ? "yes" : "no");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	base = getauxval(AT_SYSINFO_EHDR);
	printf("AT_SYSINFO_EHDR set: %s\n", base ? "yes" : "no");
	if (!base)
		return 1;
	printf("ELF tables (DT_HASH, DT_GNU_HASH, DT_VERSYM, DT_VERDEF): %s\n",
	       init_elf() ? "yes" : "no");
	int ver = version_index();
	printf("version LINUX_2.6 defined: %s\n", ver > 0 ? "yes" : "no");
	const char *names[] = {"__vdso_clock_gettime", "__vdso_gettimeofday", "__vdso_time",
			       "__vdso_getcpu", "__vdso_clock_getres", "clock_gettime",
			       "gettimeofday", "time", "getcpu"};
	int same = 1, found = 0;
	for (unsigned i = 0; i < sizeof names / sizeof *names; i++) {
		void *a = by_hash(names[i], ver), *b = by_gnu_hash(names[i], ver);
		found += a != NULL;
		same &= a == b;
	}
	printf("symbols found: %d of 9, DT_HASH and DT_GNU_HASH agree: %s\n", found,
	       same ? "yes" : "no");

	gettime_fn vgettime = (gettime_fn)by_hash("__vdso_clock_gettime", ver);
	gtod_fn vgtod = (gtod_fn)by_hash("__vdso_gettimeofday", ver);
	time_fn vtime = (time_fn)by_hash("__vdso_time", ver);
	getcpu_fn vgetcpu = (getcpu_fn)by_hash("__vdso_getcpu", ver);
	gettime_fn vgetres = (gettime_fn)by_hash("__vdso_clock_getres", ver);
	if (!vgettime || !vgtod || !vtime || !vgetcpu || !vgetres)
		return 1;
	if (argc > 1 && strcmp(argv[1], "hib") == 0)
		return across_hibernation(vgettime);

	/* Mixed monotonic: vDSO, libc, syscall, in turn. */
	const clockid_t mono[] = {CLOCK_MONOTONIC, CLOCK_BOOTTIME, CLOCK_MONOTONIC_RAW};
	for (unsigned c = 0; c < 3; c++) {
		int backwards = 0;
		struct timespec t;
		int64_t prev = 0;
		for (int i = 0; i < 3000; i++) {
			int64_t now;
			switch (i % 3) {
			case 0: vgettime(mono[c], &t); now = ts_ns(&t); break;
			case 1: clock_gettime(mono[c], &t); now = ts_ns(&t); break;
			default: now = sys_ns(mono[c]); break;
			}
			backwards |= now < prev;
			prev = now;
		}
		printf("clock %d: vDSO, libc and syscall mixed never go backwards: %s\n",
		       (int)mono[c], backwards ? "no" : "yes");
	}
	/* The realtime family agrees with the syscall. */
	struct timespec t;
	int64_t a = sys_ns(CLOCK_REALTIME);
	vgettime(CLOCK_REALTIME, &t);
	int64_t b = ts_ns(&t);
	int64_t c = sys_ns(CLOCK_REALTIME);
	printf("vDSO realtime between two syscall readings: %s\n", a <= b && b <= c ? "yes" : "no");
	struct timeval tv, stv;
	vgtod(&tv, NULL);
	syscall(SYS_gettimeofday, &stv, NULL);
	int64_t d = (stv.tv_sec - tv.tv_sec) * 1000000 + (stv.tv_usec - tv.tv_usec);
	printf("gettimeofday vDSO vs syscall within 50 ms: %s\n", d >= 0 && d < 50000 ? "yes" : "no");
	time_t vt = vtime(NULL), st = syscall(SYS_time, NULL);
	printf("time vDSO vs syscall within 1 s: %s\n", st - vt >= 0 && st - vt <= 1 ? "yes" : "no");
	struct timespec co, pr;
	vgettime(CLOCK_MONOTONIC_COARSE, &co);
	vgettime(CLOCK_MONOTONIC, &pr);
	printf("monotonic coarse <= precise: %s\n", ts_ns(&co) <= ts_ns(&pr) ? "yes" : "no");
	vgettime(CLOCK_REALTIME_COARSE, &co);
	vgettime(CLOCK_REALTIME, &pr);
	printf("realtime coarse <= precise: %s\n", ts_ns(&co) <= ts_ns(&pr) ? "yes" : "no");
	printf("CLOCK_TAI: %d\n", vgettime(CLOCK_TAI, &t));

	/* Fallbacks: bad ids, CPU clocks. */
	printf("vDSO bad clock 12345: %s\n", vgettime(12345, &t) == -EINVAL ? "-EINVAL" : "other");
	errno = 0;
	int rc = clock_gettime(12345, &t);
	printf("libc bad clock 12345: %d %s\n", rc, errno == EINVAL ? "EINVAL" : "other");
	printf("vDSO getres bad clock: %s\n", vgetres(12345, &t) == -EINVAL ? "-EINVAL" : "other");
	rc = vgetres(CLOCK_MONOTONIC, &t);
	printf("vDSO getres monotonic: %d %ld.%09ld\n", rc, (long)t.tv_sec, t.tv_nsec);
	for (volatile int i = 0; i < 3000000; i++)
		;
	rc = vgettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	printf("vDSO process CPU clock: %d, > 0: %s\n", rc, ts_ns(&t) > 0 ? "yes" : "no");
	rc = vgettime(CLOCK_THREAD_CPUTIME_ID, &t);
	printf("vDSO thread CPU clock: %d, > 0: %s\n", rc, ts_ns(&t) > 0 ? "yes" : "no");
	unsigned cpu = 99, node = 99;
	rc = vgetcpu(&cpu, &node, NULL);
	printf("vDSO getcpu: %d, cpu allowed: %s, node %u\n", rc,
	       cpu < (unsigned)sysconf(_SC_NPROCESSORS_CONF) ? "yes" : "no", node);

	/* /proc/self/maps names both. */
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int has_vdso = 0, has_vvar = 0;
	unsigned long vdso_end = base + 4096;
	while (f && fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		sscanf(line, "%lx-%lx", &lo, &hi);
		if (strstr(line, "[vdso]") != NULL && lo == base) {
			has_vdso = 1;
			vdso_end = hi;
		}
		has_vvar |= strstr(line, "[vvar]") != NULL;
	}
	if (f)
		fclose(f);
	printf("maps: [vdso] at AT_SYSINFO_EHDR: %s, [vvar]: %s\n", has_vdso ? "yes" : "no",
	       has_vvar ? "yes" : "no");

	/* A forked child has it too; a child that unmaps it leaves the
	 * parent's alone. */
	pid_t pid = fork();
	if (pid == 0) {
		struct timespec ct;
		if (vgettime(CLOCK_MONOTONIC, &ct) != 0)
			_exit(2);
		if (munmap((void *)base, vdso_end - base) != 0)
			_exit(3);
		_exit(0);
	}
	int status;
	waitpid(pid, &status, 0);
	printf("forked child used then unmapped the vDSO: %s\n",
	       WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "yes" : "no");
	printf("parent's vDSO after that: %d\n", vgettime(CLOCK_MONOTONIC, &t));
	printf("vDSO write refused: %s\n",
	       mprotect((void *)base, 4096, PROT_READ | PROT_WRITE) != 0 ? "yes" : "no");

	/* The C library goes through the vDSO: 600,000 calls take (almost)
	 * no system time. As system calls they would take seconds of it
	 * here, and at least 60 ms natively (0.1 us each). */
	int64_t s0 = sys_time_ns();
	for (int i = 0; i < 200000; i++) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		gettimeofday(&tv, NULL);
		(void)time(NULL);
	}
	int64_t spent = sys_time_ns() - s0;
	printf("libc clock_gettime, gettimeofday, time x 200000: system time < 20 ms: %s\n",
	       spent < 20000000 ? "yes" : "no");
	printf("done\n");
	return 0;
}
