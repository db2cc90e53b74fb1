// SPDX-License-Identifier: GPL-2.0
/* Helpers of the invalidation-source selftests (see sources.h). */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "sources.h"

bool mws_selected(const char *name)
{
	const char *l = getenv("MWT_FIXTURES");
	size_t n = strlen(name);

	while (l && *l) {
		l += strspn(l, " ");
		if (!strncmp(l, name, n) && (l[n] == ' ' || !l[n]))
			return true;
		l += strcspn(l, " ");
	}
	return !l;
}

int mws_write_long(const char *path, long v)
{
	char b[32];

	snprintf(b, sizeof(b), "%ld", v);
	return mwt_write_str(path, b);
}

double mws_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

uint64_t mws_pagemap(const void *addr)
{
	uint64_t e = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	if (pread(fd, &e, sizeof(e), (off_t)((uintptr_t)addr / P * 8)) !=
	    sizeof(e))
		e = 0;
	close(fd);
	return e;
}

static unsigned int pattern(unsigned int seed, size_t off)
{
	return seed * 2654435761U + (unsigned int)off;
}

bool mws_has_pattern(const char *page, unsigned int seed, size_t i)
{
	size_t j;

	for (j = 0; j < P; j += sizeof(unsigned int))
		if (*(const unsigned int *)(page + j) !=
		    pattern(seed, i * P + j))
			return false;
	return true;
}

char *mws_distinct_pages(size_t pages, unsigned int seed)
{
	char *p = mmap(NULL, pages * P, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	size_t i, j;

	if (p == MAP_FAILED)
		return NULL;
	for (i = 0; i < pages; i++)
		for (j = 0; j < P; j += sizeof(unsigned int))
			*(unsigned int *)(p + i * P + j) =
				pattern(seed, i * P + j);
	return p;
}
