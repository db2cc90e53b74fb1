// SPDX-License-Identifier: BSD-3-Clause
/*
 * Registration on a miss (cache lock held): watch the page-aligned range,
 * then pin it, then publish it in the tree and the index; or, when caching
 * is not possible (limits, no source, watch space exhausted, fail closed),
 * register a transient region that its last put deregisters.
 */
#include <string.h>
#include <unistd.h>

#include "rcache/internal.h"

static int reg_region(struct mwr_rcache *rc, struct mwr_region *r,
		      uintptr_t s, uintptr_t e)
{
	int ret;

	memset(&r->pub, 0, sizeof(r->pub));
	r->pub.addr = (void *)s;
	r->pub.len = e - s;
	r->pub.index = -1;
	ret = rc->ops.reg(rc->ops.ctx, (void *)s, e - s, &r->pub);
	if (ret) {
		mwu_stat_add(MWU_ST_REG_FAILED, 1);
		return ret < 0 && ret >= MW_ERR_MIN ? ret : MW_EREG;
	}
	mwu_stat_add(MWU_ST_REGS, 1);
	mwu_stat_add(MWU_ST_BYTES, (int64_t)(e - s));
	mwu_stat_add(MWU_ST_REGIONS, 1);
	rc->bytes += e - s;
	return 0;
}

static int get_transient(struct mwr_rcache *rc, uintptr_t s, uintptr_t e,
			 struct mwr_region **out)
{
	struct mwr_region *r = mwr_pool_alloc();
	uint64_t gen;
	int ret;

	if (!r)
		return MW_ENOMEM;
	gen = mwr_ld_state(r) >> MWR_GEN_SHIFT;
	/* As in mwr_miss(): readers of a stale index slot may look. */
	__atomic_store_n(&r->rc, rc, __ATOMIC_RELAXED);
	__atomic_store_n(&r->start, s, __ATOMIC_RELAXED);
	__atomic_store_n(&r->end, e, __ATOMIC_RELAXED);
	r->watch.word = NULL;
	ret = reg_region(rc, r, s, e);
	if (ret) {
		__atomic_store_n(&r->state, ((gen + 1) << MWR_GEN_SHIFT) | MWR_FREE,
				 __ATOMIC_RELEASE);
		mwr_pool_free(r);
		return ret;
	}
	rc->transients++;
	__atomic_store_n(&r->state, (gen << MWR_GEN_SHIFT) | MWR_TRANSIENT | 1,
			 __ATOMIC_RELEASE);
	*out = r;
	return 0;
}

/* Miss: lock held. Register, watch, publish ('cache' 0: register only,
 * the last put deregisters). */
int mwr_miss(struct mwr_rcache *rc, uintptr_t s, uintptr_t e,
		struct mwr_region **out, int cache)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t as = s & ~(uintptr_t)(pg - 1);
	uintptr_t ae = (e + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1);
	struct mwr_region *r;
	int ret, attempt, made_room = 0;

	rc->misses++;
	mwu_stat_add(MWU_ST_MISSES, 1);
	if (rc->bytes + (ae - as) > rc->max_bytes &&
	    mwr_evict(rc, SIZE_MAX, ae - as, rc->max_bytes))
		return MW_ELIMIT;
	if (!cache || mwu_core.source == MW_SOURCE_NONE)
		return get_transient(rc, as, ae, out);
	/* Count bound: when every cached region is busy, do not cache. */
	if (mwr_evict(rc, rc->max_regions, 0, SIZE_MAX))
		return get_transient(rc, as, ae, out);

	for (attempt = 0; attempt < 3; attempt++) {
		uint64_t gen;

		r = mwr_pool_alloc();
		if (!r)
			return MW_ENOMEM;
		gen = mwr_ld_state(r) >> MWR_GEN_SHIFT;
		/* Lock-free readers may still look at r (index.c): their
		 * state re-read rejects these fields, atomics say so. */
		__atomic_store_n(&r->rc, rc, __ATOMIC_RELAXED);
		__atomic_store_n(&r->start, as, __ATOMIC_RELAXED);
		__atomic_store_n(&r->end, ae, __ATOMIC_RELAXED);
		__atomic_store_n(&r->referenced, 1, __ATOMIC_RELAXED);
		r->inv_next = NULL;
		/* Events before publication must not queue it: the watch
		 * callback ignores other generations. */
		r->gen_cur = (uint32_t)gen - 1;
		/* Not free, not in the tree, no references: the watch callback
		 * may flag it INVALID before we publish. */
		__atomic_store_n(&r->state, gen << MWR_GEN_SHIFT, __ATOMIC_RELEASE);
		/* Watch first, then pin: a change between the two shows in
		 * the word, never as a silently stale registration. */
		ret = mw_watch_add(&r->watch, (void *)as, ae - as, mwr_on_invalid, r);
		if (ret) {
			__atomic_store_n(&r->state, ((gen + 1) << MWR_GEN_SHIFT) |
					 MWR_FREE, __ATOMIC_RELEASE);
			mwr_pool_free(r);
			/* Refused for depth (or a full table): make room once
			 * among the idle regions over the range, else register
			 * uncached. */
			if (ret == MW_ENOSPC && !made_room &&
			    mwr_evict_overlap(rc, as, ae)) {
				made_room = 1;
				continue;
			}
			if (ret == MW_ENOSPC)
				return get_transient(rc, as, ae, out);
			return ret;
		}
		ret = reg_region(rc, r, as, ae);
		if (ret) {
release_unregistered:
			pthread_mutex_lock(&mwu_core.lock);
			if (mwu_core.source == MW_SOURCE_KERNEL)
				mwu_kernel_unwatch((struct mw_watch *const[]){ &r->watch }, 1);
			else
				mwu_soft_unwatch(&r->watch);
			pthread_mutex_unlock(&mwu_core.lock);
			__atomic_store_n(&r->state, ((gen + 1) << MWR_GEN_SHIFT) |
					 MWR_FREE, __ATOMIC_RELEASE);
			mwr_pool_free(r);
			if (ret)
				return ret;
			continue;
		}
		if (!MWR_TEST(rc, MW_RCACHE_F_TEST_NO_INVALIDATE) &&
		    !mwu_watch_valid(&r->watch)) {
			/* Changed while we pinned: the pages may be stale. */
			rc->ops.dereg(rc->ops.ctx, &r->pub);
			mwu_stat_add(MWU_ST_DEREGS, 1);
			rc->bytes -= r->pub.len;
			mwu_stat_add(MWU_ST_BYTES, -(int64_t)r->pub.len);
			mwu_stat_add(MWU_ST_REGIONS, -1);
			ret = 0;
			goto release_unregistered;
		}
		r->debt = 0;
		__atomic_fetch_add(&r->state, MWR_INTREE | 1, __ATOMIC_RELEASE);
		__atomic_store_n(&r->gen_cur, (uint32_t)gen, __ATOMIC_RELEASE);
		/* Invalidated after the check: queue it like any other. */
		if (!MWR_TEST(rc, MW_RCACHE_F_TEST_NO_INVALIDATE) &&
		    !mwu_watch_valid(&r->watch))
			mwr_flag_queue(rc, r, gen, MWR_INVALID);
		mwr_tree_insert(&rc->tree, r);
		mwr_index_insert(&rc->index, r);
		mwr_lru_add(rc, r);
		rc->nregions++;
		*out = r;
		return 0;
	}
	return MW_EREG;
}

/* A checkpoint began while this get waited for the cache lock (held):
 * its quiesce takes the lock next. Let go, wait until the process
 * continues or restarts (or fail, MW_CR_F_FAIL), then get afresh. */
int mwr_get_after_checkpoint(struct mwr_rcache *rc, uintptr_t s,
			     uintptr_t e, struct mw_region **out)
{
	int ret;

	pthread_mutex_unlock(&rc->lock);
	ret = mwu_cr_wait();
	return ret ? ret : mw_rcache_get((struct mw_rcache *)rc, (void *)s,
					 e - s, 0, out);
}

/* Fail closed (guard.c): the source no longer guarantees what caching
 * needs. Drop what is cached, register afresh; the last put deregisters. */
int mwr_get_uncached(struct mwr_rcache *rc,
						  uintptr_t s, uintptr_t e,
						  struct mw_region **out)
{
	struct mwr_region *r;
	int ret;

	pthread_mutex_lock(&rc->lock);
	if (mwu_cr_gated())
		return mwr_get_after_checkpoint(rc, s, e, out);
	/* A library load holds the guarantee down only for its window: what
	 * is cached stays (the check after the load flushes if a hook was
	 * lost); any other drop means releases may have gone unseen. */
	if (rc->nregions && !mwu_guard_loading())
		mwr_unlink_all(rc);
	ret = mwr_miss(rc, s, e, &r, 0);
	pthread_mutex_unlock(&rc->lock);
	if (!ret)
		*out = &r->pub;
	return ret;
}

