/* A pod sandbox's pause container, as Kubernetes' pause: sleeps in
 * pause() until SIGINT or SIGTERM, which end it with status 0. */
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void done(int sig)
{
	(void)sig;
	_exit(0);
}

int main(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = done;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	for (;;)
		pause();
}
