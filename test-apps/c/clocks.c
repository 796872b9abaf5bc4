/*
 * Clock sanity that holds both natively and in the sandbox. Prints one
 * "ok <check>" or "FAIL <check>" line per check, never a time value.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>

#define NSEC_PER_SEC 1000000000ll

static int failures;

static void report(int ok, const char *check)
{
	printf("%s %s\n", ok ? "ok" : "FAIL", check);
	if (!ok)
		failures++;
}

static int64_t ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * NSEC_PER_SEC + ts->tv_nsec;
}

static int64_t now(clockid_t clock)
{
	struct timespec ts;
	if (clock_gettime(clock, &ts) != 0)
		return -1;
	return ns(&ts);
}

static int64_t abs64(int64_t v)
{
	return v < 0 ? -v : v;
}

int main(void)
{
	report(now(CLOCK_MONOTONIC) >= 0, "clock_gettime monotonic");
	report(now(CLOCK_REALTIME) >= 0, "clock_gettime realtime");

	int monotonic = 1;
	int64_t prev = now(CLOCK_MONOTONIC);
	for (int i = 0; i < 1000; i++) {
		int64_t t = now(CLOCK_MONOTONIC);
		if (t < prev)
			monotonic = 0;
		prev = t;
	}
	report(monotonic, "monotonic never goes backwards");

	/* 2020-01-01T00:00:00Z: the guest must take wall time from the host. */
	int64_t real = now(CLOCK_REALTIME);
	report(real / NSEC_PER_SEC > 1577836800ll, "realtime after 2020");

	struct timeval tv;
	int tod_ok = gettimeofday(&tv, NULL) == 0;
	report(tod_ok, "gettimeofday");
	int64_t tod = (int64_t)tv.tv_sec * NSEC_PER_SEC + tv.tv_usec * 1000ll;
	report(tod_ok && abs64(tod - real) < 5 * NSEC_PER_SEC,
	       "realtime within 5 s of gettimeofday");

	time_t t = time(NULL);
	report(t != (time_t)-1 &&
		       abs64((int64_t)t * NSEC_PER_SEC - real) < 5 * NSEC_PER_SEC,
	       "realtime within 5 s of time()");

	int64_t before = now(CLOCK_MONOTONIC);
	struct timespec nap = { 0, 20 * 1000 * 1000 };
	int slept = nanosleep(&nap, NULL) == 0;
	int64_t elapsed = now(CLOCK_MONOTONIC) - before;
	report(slept, "nanosleep");
	report(elapsed >= 20 * 1000 * 1000, "nanosleep 20 ms advances monotonic >= 20 ms");
	report(elapsed < 2 * NSEC_PER_SEC, "nanosleep 20 ms returns within 2 s");

	/* Short sleeps, each to the nanosecond of the monotonic clock: the
	 * host's clock may run ahead of the sandbox's, and a sleep that ends
	 * when the host's clock reaches the deadline would end early here. */
	int early = 0;
	for (int i = 0; i < 50; i++) {
		struct timespec short_nap = { 0, 300 * 1000 + i * 7919 };
		int64_t t0 = now(CLOCK_MONOTONIC);
		nanosleep(&short_nap, NULL);
		if (now(CLOCK_MONOTONIC) - t0 < short_nap.tv_nsec)
			early++;
	}
	report(early == 0, "50 short nanosleeps none returns early");

	struct timespec res;
	report(clock_getres(CLOCK_MONOTONIC, &res) == 0 && ns(&res) > 0 &&
		       ns(&res) <= 1000 * 1000,
	       "clock_getres monotonic in (0, 1 ms]");
	report(clock_getres(CLOCK_REALTIME, &res) == 0 && ns(&res) > 0 &&
		       ns(&res) <= 1000 * 1000,
	       "clock_getres realtime in (0, 1 ms]");

	return failures == 0 ? 0 : 1;
}
