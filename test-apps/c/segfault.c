/*
 * Prints a line, then writes through a NULL pointer. The shell reports the
 * result as status 139 (128 + SIGSEGV). RLIMIT_CORE is set to 0 first so a
 * native run leaves no core file behind.
 */
#include <stdio.h>
#include <sys/resource.h>

int main(void)
{
	struct rlimit no_core = { 0, 0 };
	setrlimit(RLIMIT_CORE, &no_core); /* best effort */

	puts("about to fault");
	fflush(stdout);

	/* Both the pointer and the store are volatile: GCC drops a plain store
	 * through a pointer it can prove is NULL. */
	volatile int *volatile target = NULL;
	*target = 42;

	puts("still alive?");
	return 0;
}
