// SPDX-License-Identifier: BSD-3-Clause
/*
 * Linked after libc (libc's GOT points at our allocator): dlopen a library
 * whose constructor frees libc-made blocks with glibc's free(). Must not
 * abort. --bypass (negative control) calls libc's dlopen directly, past
 * the hooks' dlopen wrapper, and is expected to abort.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	void *(*open_fn)(const char *, int) = dlopen;
	const char *lib = argc > 1 ? argv[argc - 1] : NULL;
	int *lines;
	void *h;

	if (!lib) {
		fprintf(stderr, "usage: test_dlctor [--bypass] LIB\n");
		return 2;
	}
	if (argc > 2 && !strcmp(argv[1], "--bypass"))
		open_fn = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
	h = open_fn(lib, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "dlopen %s: %s\n", lib, dlerror());
		return 1;
	}
	lines = dlsym(h, "mwt_ctor_lines");
	if (!lines || *lines <= 0) {
		fprintf(stderr, "constructor did not run\n");
		return 1;
	}
	printf("constructor read %d lines\n", *lines);
	return 0;
}
