// SPDX-License-Identifier: BSD-3-Clause
/*
 * The limits of the cache (cache lock held): the in-tree list that the
 * CLOCK hand walks, eviction down to a region count and a byte bound, and
 * the byte bound itself (RLIMIT_MEMLOCK unless CAP_IPC_LOCK). CLOCK is the
 * usual LRU approximation that needs no list update on a hit: a hit only
 * sets the region's referenced bit.
 */
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/capability.h>

#include "rcache/internal.h"

void mwr_lru_add(struct mwr_rcache *rc, struct mwr_region *r)
{
	r->lru_prev = rc->lru.lru_prev;
	r->lru_next = &rc->lru;
	rc->lru.lru_prev->lru_next = r;
	rc->lru.lru_prev = r;
}

void mwr_lru_del(struct mwr_rcache *rc, struct mwr_region *r)
{
	if (rc->hand == r)
		rc->hand = r->lru_next;
	r->lru_prev->lru_next = r->lru_next;
	r->lru_next->lru_prev = r->lru_prev;
	r->lru_next = r->lru_prev = NULL;
}

/* Take idle r out of the cache into the batch; false if it is in use,
 * already invalid, or was taken meanwhile. */
static bool evict_one(struct mwr_rcache *rc, struct mwr_region *r,
		      struct mwr_batch *b)
{
	uint64_t st = mwr_ld_state(r);

	if ((st & (MWR_COUNT_MASK | MWR_INVALID)) ||
	    !mwr_cas_state(r, &st, st | MWR_INVALID))
		return false;
	rc->evictions++;
	mwu_stat_add(MWU_ST_EVICTIONS, 1);
	mwr_unlink_region(rc, r, b);
	return true;
}

/* Evict idle regions until nregions < max_r and bytes + need <= max_b.
 * CLOCK: a region used since the hand last passed gets a second chance. */
int mwr_evict(struct mwr_rcache *rc, size_t max_r, size_t need, size_t max_b)
{
	size_t budget = 2 * rc->nregions + 2, freed = 0;
	struct mwr_batch b = { NULL };

	while ((rc->nregions >= max_r || rc->bytes - freed + need > max_b) &&
	       budget--) {
		struct mwr_region *r = rc->hand;

		if (!r || r == &rc->lru) {
			rc->hand = rc->lru.lru_next;
			if (rc->hand == &rc->lru)
				break;
			continue;
		}
		rc->hand = r->lru_next;
		if (mwr_ld_state(r) & (MWR_COUNT_MASK | MWR_INVALID))
			continue;
		if (__atomic_load_n(&r->referenced, __ATOMIC_RELAXED)) {
			__atomic_store_n(&r->referenced, 0, __ATOMIC_RELAXED);
			continue;
		}
		if (evict_one(rc, r, &b))
			freed += r->pub.len;
	}
	mwr_batch_reclaim_f(rc, &b, 1);
	return (rc->nregions >= max_r || rc->bytes + need > max_b) ? -1 : 0;
}

/*
 * Evict the idle regions that overlap [s, e): the module refused one more
 * watch over them (max_watch_depth: that many of the context's watches
 * already cover a page of it). A walk of every region, on that rare path
 * only. Returns how many went; their watches are gone when it returns.
 */
size_t mwr_evict_overlap(struct mwr_rcache *rc, uintptr_t s, uintptr_t e)
{
	struct mwr_region *r, *next;
	struct mwr_batch b = { NULL };
	size_t n = 0;

	for (r = rc->lru.lru_next; r != &rc->lru; r = next) {
		next = r->lru_next;
		if (__atomic_load_n(&r->start, __ATOMIC_RELAXED) < e &&
		    __atomic_load_n(&r->end, __ATOMIC_RELAXED) > s)
			n += evict_one(rc, r, &b);
	}
	mwr_batch_reclaim_f(rc, &b, 1);
	return n;
}

size_t mwr_memlock_limit(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	struct rlimit rl;

	/* CAP_IPC_LOCK lifts the limit for pinning. */
	if (!syscall(SYS_capget, &h, d) && (d[0].effective & (1U << CAP_IPC_LOCK)))
		return SIZE_MAX;
	if (getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return SIZE_MAX;
	return rl.rlim_cur;
}

