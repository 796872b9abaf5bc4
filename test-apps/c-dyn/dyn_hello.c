/* A dynamically linked (glibc, PIE) program: argv, one environment
 * variable, malloc, stdio, and the auxiliary vector a dynamic loader sees.
 * Prints the same bytes on every run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        printf("argv[%d]=%s\n", i, argv[i]);
    const char *v = getenv("QTEST");
    printf("QTEST=%s\n", v ? v : "(unset)");

    size_t n = 1 << 20;
    unsigned char *big = malloc(n);
    char *small = strdup("malloc works");
    if (!big || !small) {
        printf("FAIL malloc\n");
        return 1;
    }
    memset(big, 0xab, n);
    unsigned long sum = 0;
    for (size_t i = 0; i < n; i += 4096)
        sum += big[i];
    printf("%s, sum=%lu\n", small, sum);
    free(big);
    free(small);

    unsigned long base = getauxval(AT_BASE);
    unsigned long entry = getauxval(AT_ENTRY);
    unsigned long phdr = getauxval(AT_PHDR);
    printf("AT_BASE %s\n", base != 0 ? "set" : "FAIL zero");
    printf("AT_ENTRY %s\n", entry != 0 ? "set" : "FAIL zero");
    printf("AT_PHDR %s\n", phdr != 0 && getauxval(AT_PHNUM) > 0 ? "set" : "FAIL zero");
    printf("AT_EXECFN %s\n", (const char *)getauxval(AT_EXECFN) ? "set" : "FAIL zero");

    fprintf(stderr, "to stderr\n");
    fflush(stdout);
    return argc > 1 && strcmp(argv[1], "exit3") == 0 ? 3 : 0;
}
