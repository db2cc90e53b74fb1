/* SPDX-License-Identifier: BSD-3-Clause */
/* What the hooks' test programs share: the failure count, CHECK, and the
 * byte patterns the allocator's tests write and compare. */
#ifndef MW_HOOKS_TESTS_CHECK_H
#define MW_HOOKS_TESTS_CHECK_H

#include <stdio.h>
#include <stddef.h>

static int failures;
#define CHECK(c, ...)                                                          \
	do {                                                                   \
		if (!(c)) {                                                    \
			printf("not ok: " __VA_ARGS__);                        \
			printf("  (%s:%d)\n", __FILE__, __LINE__);             \
			failures++;                                            \
		}                                                              \
	} while (0)

static inline void fill(unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i += 61)
		p[i] = (unsigned char)(seed + i);
	if (n)
		p[n - 1] = (unsigned char)seed;
}

static inline int same(const unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i += 61)
		if (p[i] != (unsigned char)(seed + i) && i != n - 1)
			return 0;
	return !n || p[n - 1] == (unsigned char)seed;
}

static inline int zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}
#endif
