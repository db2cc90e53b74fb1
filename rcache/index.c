// SPDX-License-Identifier: BSD-3-Clause
/*
 * Page-number index of a cache (layout in internal.h): what makes a hit
 * cost the same with 1 or 1M regions. Every page of an indexed region
 * points at it; with overlapping regions a page points at the one inserted
 * (or found) last, and a lookup that finds a region not covering its range
 * falls back to the tree, which then publishes what it found. The index is
 * a hint: the hit path validates the region (state, generation, range)
 * after reading the slot, so a stale slot costs a slow lookup, never a
 * wrong hit. Inserting costs one store per page, far below the ~22 ns per
 * page of the pinning it accompanies (rcache.c).
 */
#include <stdlib.h>

#include "rcache/internal.h"

#define FAN	   MWR_IDX_FAN
#define LEVEL_MASK (FAN - 1)
#define NPAGE_MAX  (1ULL << (MWR_IDX_TOP_BITS + 2 * MWR_IDX_BITS))

/* The slot of page p, allocating the path when 'make'; NULL on failure. */
static struct mwr_region **slot(struct mwr_index *x, uintptr_t p, int make)
{
	struct mwr_region ***mid = x->top[p >> (2 * MWR_IDX_BITS)], **leaf;

	if (!mid) {
		if (!make || !(mid = calloc(FAN, sizeof(*mid))))
			return NULL;
		__atomic_store_n(&x->top[p >> (2 * MWR_IDX_BITS)], mid,
				 __ATOMIC_RELEASE);
	}
	leaf = mid[(p >> MWR_IDX_BITS) & LEVEL_MASK];
	if (!leaf) {
		if (!make || !(leaf = calloc(FAN, sizeof(*leaf))))
			return NULL;
		__atomic_store_n(&mid[(p >> MWR_IDX_BITS) & LEVEL_MASK], leaf,
				 __ATOMIC_RELEASE);
	}
	return &leaf[p & LEVEL_MASK];
}

static int indexed(const struct mwr_region *r)
{
	uintptr_t ps = r->start >> 12, pe = (r->end + 4095) >> 12;

	return pe <= NPAGE_MAX && pe - ps <= MWR_INDEX_MAX_PAGES;
}

void mwr_index_insert(struct mwr_index *x, struct mwr_region *r)
{
	uintptr_t p, pe = (r->end + 4095) >> 12;

	if (!indexed(r))
		return;
	for (p = r->start >> 12; p < pe; p++) {
		struct mwr_region **s = slot(x, p, 1);

		if (!s)
			return; /* out of memory: the tree still finds it */
		__atomic_store_n(s, r, __ATOMIC_RELEASE);
	}
}

void mwr_index_remove(struct mwr_index *x, struct mwr_region *r)
{
	uintptr_t p, pe = (r->end + 4095) >> 12;

	if (!indexed(r))
		return;
	for (p = r->start >> 12; p < pe; p++) {
		struct mwr_region **s = slot(x, p, 0);

		if (s && *s == r)
			__atomic_store_n(s, NULL, __ATOMIC_RELEASE);
	}
}

void mwr_index_publish(struct mwr_index *x, struct mwr_region *r, uintptr_t a)
{
	struct mwr_region **s;

	if (!indexed(r) || (a >> 12) >= NPAGE_MAX)
		return;
	s = slot(x, a >> 12, 1);
	if (s)
		__atomic_store_n(s, r, __ATOMIC_RELEASE);
}

void mwr_index_destroy(struct mwr_index *x)
{
	for (unsigned i = 0; i < (1U << MWR_IDX_TOP_BITS); i++) {
		struct mwr_region ***mid = x->top[i];

		if (!mid)
			continue;
		for (unsigned j = 0; j < FAN; j++)
			free(mid[j]);
		free(mid);
		x->top[i] = NULL;
	}
}
