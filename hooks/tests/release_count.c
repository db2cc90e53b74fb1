// SPDX-License-Identifier: BSD-3-Clause
/*
 * Invalidation count on one workload: how many times memory goes back to
 * the OS (each one invalidates any registration on it). Run under the test
 * preload library twice: with our allocator, and with glibc's allocator
 * (MMUWATCH_HOOKS_ALLOCATOR=0), where glibc's own munmap/madvise/brk calls
 * are counted through the patched libc entries. Prints "releases <n>".
 * The workload: message buffers of 64 KiB .. 48 MiB allocated, written and
 * freed over and over, with small allocations in between.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hooks/tests/mwtest.h"

int main(void)
{
	static const size_t sizes[] = { 64 << 10, 256 << 10, 1 << 20, 3 << 20,
					8 << 20, 48 << 20 };
	struct mwtest_state *st = dlsym(RTLD_DEFAULT, "mwtest_state");
	unsigned long before;
	void *small[64] = { 0 };
	int it, i;

	if (!st || !st->active) {
		printf("hooks not active\n");
		return 1;
	}
	before = atomic_load(&st->n);
	for (it = 0; it < 100; it++) {
		char *buf[6];

		for (i = 0; i < 6; i++) {
			buf[i] = malloc(sizes[(i + it) % 6]);
			memset(buf[i], it, 4096);
			buf[i][sizes[(i + it) % 6] - 1] = 1;
		}
		for (i = 0; i < 64; i++) {
			free(small[i]);
			small[i] = malloc(16 + (size_t)(it * 97 + i * 13) % 4000);
		}
		for (i = 5; i >= 0; i--)
			free(buf[(i + it) % 6]);
	}
	for (i = 0; i < 64; i++)
		free(small[i]);
	printf("releases %lu\n", atomic_load(&st->n) - before);
	return 0;
}
