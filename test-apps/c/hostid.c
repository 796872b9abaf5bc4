/*
 * gethostid(): glibc reads it from /etc/hostid (four bytes, host order).
 * Run natively under chroot and in the sandbox with the same rootfs.
 */
#include <stdio.h>
#include <unistd.h>

int main(void)
{
	printf("hostid %08lx\n", (unsigned long)gethostid() & 0xffffffffUL);
	return 0;
}
