/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the hooks-source fail-closed tests (dlopen_window.c, alloc_slots.c)
 * share: a registration backend that only counts registrations (a stale
 * hit is a get that registers nothing), one get + put, and the path of a
 * test library built next to the test program.
 */
#ifndef MW_TEST_HOOKSTEST_H
#define MW_TEST_HOOKSTEST_H

#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "mmuwatch/mmuwatch.h"

static long regs; /* registrations so far */

static int c_reg(void *ctx, void *addr, size_t len, struct mw_region *r)
{
	(void)ctx;
	(void)addr;
	(void)len;
	(void)r;
	__atomic_fetch_add(&regs, 1, __ATOMIC_RELAXED);
	return 0;
}

static void c_dereg(void *ctx, struct mw_region *r)
{
	(void)ctx;
	(void)r;
}

static const struct mw_reg_ops c_ops = {.reg = c_reg, .dereg = c_dereg};

static inline int getput(struct mw_rcache *rc, const void *a, size_t len)
{
	struct mw_region *r;
	int ret = mw_rcache_get(rc, a, len, 0, &r);

	if (!ret)
		ret = mw_rcache_put(rc, r);
	return ret;
}

/* buf = the directory of this program + name; 0, or -1. */
static inline int sibling(char *buf, size_t size, const char *name)
{
	ssize_t n = readlink("/proc/self/exe", buf, size - 1);
	char *slash;

	if (n < 0)
		return -1;
	buf[n] = 0;
	slash = strrchr(buf, '/');
	if (!slash || (size_t)(slash + 1 - buf) + strlen(name) + 1 > size)
		return -1;
	strcpy(slash + 1, name);
	return 0;
}

#endif /* MW_TEST_HOOKSTEST_H */
