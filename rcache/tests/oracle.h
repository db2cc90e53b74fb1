/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared by the rcache tests: pagemap reading, a PFN-recording backend
 * wrapper (oracle one), a tiny PRNG and TAP helpers. */
#ifndef MWR_TEST_ORACLE_H
#define MWR_TEST_ORACLE_H

#include <fcntl.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mmuwatch/mmuwatch.h"

#define PAGE 4096UL

static int pagemap_fd = -1;

/* PFN of the page at va, 0 when not present (or PFNs hidden: not root). */
static inline uint64_t pfn_of(uintptr_t va)
{
	uint64_t e = 0;

	if (pagemap_fd < 0)
		pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pread(pagemap_fd, &e, 8, (off_t)(va / PAGE * 8)) != 8)
		return 0;
	if (!(e >> 63))
		return 0;
	return e & ((1ULL << 55) - 1);
}

/* PFNs of the n pages from va (page aligned) into pf, one pread: 0 for
 * pages not present. */
static inline void pfns_of(uintptr_t va, size_t n, uint64_t *pf)
{
	ssize_t got;
	size_t i;

	if (pagemap_fd < 0)
		pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	got = pread(pagemap_fd, pf, n * 8, (off_t)(va / PAGE * 8));
	for (i = 0; i < n; i++) {
		if (got < 0 || (size_t)got < (i + 1) * 8 || !(pf[i] >> 63))
			pf[i] = 0;
		else
			pf[i] &= (1ULL << 55) - 1;
	}
}

/* Do we see real PFNs? (root and a kernel that shows them) */
static inline int pfns_visible(void)
{
	static volatile char probe[PAGE] __attribute__((aligned(4096)));

	probe[0] = 1;
	return pfn_of((uintptr_t)probe) != 0;
}

/* Oracle-one wrapper: records the PFNs of every registered page right after
 * the inner backend pinned them (user[0] = array, user[1] = count). */
struct rec_ctx {
	struct mw_reg_ops inner;
	unsigned long regs, deregs;
};

static inline int rec_reg(void *ctx, void *addr, size_t len, struct mw_region *r)
{
	struct rec_ctx *c = ctx;
	size_t n = len / PAGE;
	uint64_t *pf;
	int ret = c->inner.reg(c->inner.ctx, addr, len, r);

	if (ret)
		return ret;
	/* mmap, not malloc: keep the fuzzer's brk segment at the top. */
	pf = mmap(NULL, n * sizeof(*pf), PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pf == MAP_FAILED) {
		c->inner.dereg(c->inner.ctx, r);
		return MW_ENOMEM;
	}
	pfns_of((uintptr_t)addr, n, pf);
	r->user[0] = (uintptr_t)pf;
	r->user[1] = n;
	c->regs++;
	return 0;
}

static inline void rec_dereg(void *ctx, struct mw_region *r)
{
	struct rec_ctx *c = ctx;

	munmap((void *)(uintptr_t)r->user[0], r->user[1] * sizeof(uint64_t));
	c->inner.dereg(c->inner.ctx, r);
	c->deregs++;
}

/* No pinning at all: for tests that only exercise the cache logic. */
static inline int noop_reg(void *ctx, void *addr, size_t len, struct mw_region *r)
{
	(void)ctx; (void)addr; (void)len;
	r->lkey = 1;
	return 0;
}

static inline void noop_dereg(void *ctx, struct mw_region *r)
{
	(void)ctx; (void)r;
}

/* Pages of [va, va+len) whose frame differs from what r recorded. */
static inline unsigned long oracle_one(const struct mw_region *r, uintptr_t va,
				       size_t len)
{
	const uint64_t *pf = (const uint64_t *)(uintptr_t)r->user[0];
	uintptr_t p, base = (uintptr_t)r->addr, first = va & ~(PAGE - 1);
	unsigned long bad = 0;
	uint64_t now[64];

	/* The current frames, read in batches of 64 pages. */
	for (p = first; p < va + len; p += PAGE) {
		size_t i = (p - base) / PAGE, k = (p - first) / PAGE % 64;

		if (!k) {
			size_t left = (va + len - p + PAGE - 1) / PAGE;

			pfns_of(p, left < 64 ? left : 64, now);
		}
		if (i >= r->user[1] || pf[i] != now[k])
			bad++;
	}
	return bad;
}

/* xorshift64*: deterministic per seed. */
static inline uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

static int tap_n, tap_fail;
static inline void tap(int ok, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static inline void tap(int ok, const char *fmt, ...)
{
	va_list ap;

	printf("%sok %d - ", ok ? "" : "not ", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!ok)
		tap_fail = 1;
}

#endif
