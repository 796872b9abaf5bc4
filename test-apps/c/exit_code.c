/*
 * exit_code STATUS [exit|_exit|return]
 *
 * Ends with STATUS through exit() (default), _exit() or by returning from
 * main. An atexit handler shows which paths run it: exit and return do,
 * _exit does not. stdout is a pipe, so the line printed first is still in
 * the stdio buffer when we exit: exit/return must flush it; for _exit we
 * flush by hand so all three variants print it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void at_exit(void)
{
	puts("atexit ran");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs("usage: exit_code STATUS [exit|_exit|return]\n", stderr);
		return 2;
	}
	int status = atoi(argv[1]);
	const char *how = argc > 2 ? argv[2] : "exit";
	atexit(at_exit);
	printf("exiting with %d via %s\n", status, how);

	if (strcmp(how, "_exit") == 0) {
		fflush(stdout);
		_exit(status);
	}
	if (strcmp(how, "return") == 0)
		return status;
	if (strcmp(how, "exit") == 0)
		exit(status);
	fprintf(stderr, "unknown exit method %s\n", how);
	return 2;
}
