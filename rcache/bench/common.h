/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the cache benchmark's processes share: the arena layout (one region
 * per two pages, so regions never touch) and the random access sequence,
 * so that ours and each UCX walk the same addresses in the same order.
 */
#ifndef MWB_COMMON_H
#define MWB_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define MWB_PAGE   4096UL
#define MWB_STRIDE (2 * MWB_PAGE)
#define MWB_NIDX   (1U << 20) /* random indices per thread (4 MiB) */
#define MWB_OFF	   64	      /* gets start inside the first page */
#define MWB_LEN	   256
/* Finite cache limits (ours, and UCX's "lru" helpers): above the 1M
 * regions the bench caches, so timed gets stay hits. */
#define MWB_LRU_REGIONS 2100000UL
#define MWB_LRU_BYTES	(64UL << 30)

static inline double mwb_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* Indices in [0, n) for threads 0 and 1 (xorshift, fixed seed). */
static inline void mwb_make_idx(unsigned *idx[2], size_t n)
{
	uint64_t s = 88172645463325252ULL;

	for (int t = 0; t < 2; t++)
		for (unsigned i = 0; i < MWB_NIDX; i++) {
			s ^= s << 13;
			s ^= s >> 7;
			s ^= s << 17;
			idx[t][i] = (unsigned)(s % n);
		}
}

/* Iterations per timed run: ~10-50 ms each at the expected speeds. */
static inline long mwb_iters(size_t n)
{
	return n <= 1000     ? 2000000
	       : n <= 10000  ? 1000000
	       : n <= 100000 ? 300000
			     : 150000;
}

#endif /* MWB_COMMON_H */
