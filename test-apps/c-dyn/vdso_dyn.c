/* test-apps/c/vdso.c, dynamically linked (glibc's and musl's loaders set
 * the vDSO up themselves). */
#include "../c/vdso.c"
