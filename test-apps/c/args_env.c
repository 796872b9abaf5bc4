/*
 * Prints argc, argv, the environment (in order) and the auxiliary-vector
 * facts that must be the same natively and in the sandbox. Nothing printed
 * depends on addresses, pids or time.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

extern char **environ;
extern char _start[];

static int failures;

static void check(int ok, const char *what)
{
	if (ok) {
		printf("%s ok\n", what);
	} else {
		printf("FAIL %s\n", what);
		failures++;
	}
}

/*
 * The ELF header sits in front of the program headers in the first PT_LOAD
 * (true for everything ld emits); check that it agrees with the auxv.
 */
static void check_ehdr(const Elf64_Phdr *phdr, unsigned long phnum)
{
	const Elf64_Phdr *first_load = NULL;
	for (unsigned long i = 0; i < phnum; i++) {
		if (phdr[i].p_type == PT_LOAD && phdr[i].p_offset == 0) {
			first_load = &phdr[i];
			break;
		}
	}
	if (first_load == NULL) {
		check(0, "ehdr (no PT_LOAD at offset 0)");
		return;
	}
	const Elf64_Ehdr *ehdr =
		(const Elf64_Ehdr *)((const char *)phdr - sizeof(Elf64_Ehdr));
	unsigned long bias = (unsigned long)ehdr - first_load->p_vaddr;
	check(memcmp(ehdr->e_ident, ELFMAG, SELFMAG) == 0 &&
		      ehdr->e_phoff == sizeof(Elf64_Ehdr) &&
		      ehdr->e_phnum == phnum &&
		      ehdr->e_phentsize == getauxval(AT_PHENT) &&
		      ehdr->e_entry + bias == getauxval(AT_ENTRY),
	      "ehdr");
}

int main(int argc, char **argv)
{
	printf("argc %d\n", argc);
	for (int i = 0; i < argc; i++)
		printf("argv[%d] %s\n", i, argv[i]);
	check(argv[argc] == NULL, "argv terminator");
	for (char **e = environ; *e != NULL; e++)
		printf("env %s\n", *e);

	printf("AT_PAGESZ %lu\n", getauxval(AT_PAGESZ));
	check(getauxval(AT_PAGESZ) == (unsigned long)sysconf(_SC_PAGESIZE),
	      "pagesize");
	printf("AT_PHENT %lu\n", getauxval(AT_PHENT));
	unsigned long phnum = getauxval(AT_PHNUM);
	printf("AT_PHNUM %lu\n", phnum);
	const Elf64_Phdr *phdr = (const Elf64_Phdr *)getauxval(AT_PHDR);
	check(phdr != NULL, "phdr present");
	if (phdr != NULL) {
		printf("phdr types");
		for (unsigned long i = 0; i < phnum; i++)
			printf(" %#x", phdr[i].p_type);
		printf("\n");
		check_ehdr(phdr, phnum);
	}

	check(getauxval(AT_UID) == getuid() && getauxval(AT_EUID) == geteuid() &&
		      getauxval(AT_GID) == getgid() &&
		      getauxval(AT_EGID) == getegid(),
	      "uid");
	printf("AT_SECURE %lu\n", getauxval(AT_SECURE));
	printf("AT_CLKTCK %lu\n", getauxval(AT_CLKTCK));
	check(getauxval(AT_RANDOM) != 0, "random present");
	check(getauxval(AT_ENTRY) == (unsigned long)_start, "entry");
	check(getauxval(AT_EXECFN) != 0, "execfn present");

	return failures == 0 ? 0 : 1;
}
