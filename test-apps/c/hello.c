/* The smallest static program: one line on stdout, exit 0. */
#include <stdio.h>

int main(void)
{
	puts("hello from a static binary");
	return 0;
}
