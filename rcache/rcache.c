// SPDX-License-Identifier: BSD-3-Clause
/*
 * The registration cache: its API's lifecycle (create, flush, destroy,
 * stats). The other files of rcache/ hold one job each (internal.h lists
 * them): the hit path (hit.c), registration on a miss (miss.c), the region
 * state machine (state.c), invalidation processing (invalid.c), batched
 * reclaim (reclaim.c) and the limits (lru.c).
 *
 * Hit path (no lock, no syscall, no atomic read-modify-write): the page
 * index (index.c) names a candidate region, its state word validates it
 * and a thread-local hold (refs.c) references it, then one load of its
 * validity word (kernel mode; hooks mode first applies pending hook
 * releases) confirms it. A local put is a plain store. Before any of it,
 * every get tests the fail-closed rule (guard.c).
 *
 * Everything else runs under the cache lock: misses, invalidation
 * processing, eviction (CLOCK, the usual LRU approximation that needs no
 * list update on a hit), deregistration. Invalidation callbacks (from the
 * event drain, possibly inside another API call) only flag the region and
 * push it on a lock-free stack; deregistration happens later at a safe
 * point: a bounded amount on every slow-path call, and the helper thread.
 *
 * Overlap policy: no merging. A miss registers exactly the page-aligned
 * requested range; overlapping regions coexist; a get inside a cached
 * region hits it (the index points each page at the region registered or
 * found last; the tree finds others). Merging would re-register the union
 * of neighbours on every growth, pin memory the application never asked
 * for, and make the whole union die when any part of it is unmapped. Pin
 * cost is linear in size: rcache-bench's uring_pin_* lines measured 1.1 us
 * for 16 KiB, 6.3 us for 256 KiB and 90 us for 4 MiB (io_uring fixed
 * buffers, host kernel 6.18), i.e. ~22 ns per page. So merging two 2 MiB
 * neighbours doubles the re-registration cost of every invalidation of
 * either (45 us -> 90 us) to save one 45 us miss on first use.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rcache/internal.h"

/*
 * Checkpoint: no registration of this cache may outlive it (the restored
 * process has new pages at the same addresses). Gets are gated already
 * (libuser/cr.c); a miss that took the lock before us finishes first, one
 * after us sees the gate under the lock. Deregister every idle region and
 * the deferred ones, then wait (bounded) until the busy ones are put:
 * their last put reclaims them. MW_EBUSY if one stays busy.
 */
static int cr_quiesce(struct mw_cr_client *c)
{
	struct mwr_rcache *rc = (void *)((char *)c - offsetof(struct mwr_rcache, cr));
	uint64_t deadline = mwr_now_ms() + mwu_cr_timeout_ms();

	pthread_mutex_lock(&rc->lock);
	for (;;) {
		mwr_unlink_all(rc);
		if (!rc->zombies && !rc->transients && !rc->nregions)
			break;
		if (mwr_now_ms() >= deadline) {
			mwu_log(MWU_LOG_WARN, "checkpoint: cache %p: %zu "
				"registrations still in use", (void *)rc,
				rc->zombies + rc->transients);
			pthread_mutex_unlock(&rc->lock);
			return MW_EBUSY;
		}
		pthread_mutex_unlock(&rc->lock);
		usleep(500);
		pthread_mutex_lock(&rc->lock);
	}
	pthread_mutex_unlock(&rc->lock);
	return 0;
}

/* Continue or restart: the cache is empty; it fills again from the new
 * source's watches. Nothing of the old life is left to drop but the
 * kernel state a restore does not bring back (membarrier, refs.c). */
static void cr_resume(struct mw_cr_client *c, enum mw_cr_phase how)
{
	(void)c;
	if (how == MW_CR_RESTART)
		mwr_refs_restarted();
}

MW_API int mw_rcache_create(const struct mw_rcache_params *p,
			    struct mw_rcache **out)
{
	struct mwr_rcache *rc;
	size_t lim;
	int ret = mwu_ready();

	if (ret)
		return ret;
	if (!p || !out || !p->ops || !p->ops->reg || !p->ops->dereg)
		return MW_EINVAL;
	if (p->flags & ~MWR_FLAGS_OK)
		return mwr_bad_flags(p->flags);
	mwr_refs_init();
	/* Cache-line aligned members (inv): calloc's alignment is not enough. */
	if (posix_memalign((void **)&rc, MWU_CACHELINE, sizeof(*rc)))
		return MW_ENOMEM;
	memset(rc, 0, sizeof(*rc));
	rc->magic = MWR_MAGIC;
	pthread_mutex_init(&rc->lock, NULL);
	rc->ops = *p->ops;
	rc->flags = p->flags;
	rc->max_regions = p->max_regions ? p->max_regions : 16384;
	lim = mwr_memlock_limit();
	rc->max_bytes = p->max_bytes && p->max_bytes < lim ? p->max_bytes : lim;
	rc->lru.lru_next = rc->lru.lru_prev = &rc->lru;
	rc->zlist.z_next = rc->zlist.z_prev = &rc->zlist;
	rc->hand = &rc->lru;
	mwr_sink_init(rc);
	mwu_sink_add(&rc->sink);	/* fork handling needs it in every mode */
	rc->cr.quiesce = cr_quiesce;
	rc->cr.resume = cr_resume;
	mw_cr_client_add(&rc->cr);
	*out = (struct mw_rcache *)rc;
	return 0;
}

MW_API int mw_rcache_flush(struct mw_rcache *rc_)
{
	struct mwr_rcache *rc = (struct mwr_rcache *)rc_;
	int ret = mwr_check_rc(rc);

	if (ret)
		return ret;
	mwu_progress_round(0, 0);
	pthread_mutex_lock(&rc->lock);
	mwr_unlink_all(rc);
	pthread_mutex_unlock(&rc->lock);
	return 0;
}

static void dump_busy(struct mwr_region *r, void *arg)
{
	if (r->rc != arg)
		return;
	mwu_log(MWU_LOG_DEBUG, "busy region %p [%#lx, %#lx) state %#llx debt %d "
		"busy %ld", (void *)r, (unsigned long)r->start,
		(unsigned long)r->end, (unsigned long long)mwr_ld_state(r), r->debt,
		mwr_busy(r));
}

MW_API int mw_rcache_destroy(struct mw_rcache *rc_)
{
	struct mwr_rcache *rc = (struct mwr_rcache *)rc_;
	int ret = mwr_check_rc(rc);

	if (ret)
		return ret;
	ret = mw_rcache_flush(rc_);
	if (ret)
		return ret;
	pthread_mutex_lock(&rc->lock);
	if (rc->zombies || rc->transients) {
		if (mwu_core.log_level >= MWU_LOG_DEBUG) {
			(void)mwr_barrier();
			mwr_pool_foreach(dump_busy, rc);
		}
		pthread_mutex_unlock(&rc->lock);
		return MW_EBUSY;
	}
	rc->magic = 0;
	pthread_mutex_unlock(&rc->lock);
	mw_cr_client_remove(&rc->cr);
	mwu_sink_remove(&rc->sink);
	mwr_index_destroy(&rc->index);
	pthread_mutex_destroy(&rc->lock);
	free(rc);
	return 0;
}

MW_API int mw_rcache_stats(struct mw_rcache *rc_, struct mw_rcache_stats *st)
{
	struct mwr_rcache *rc = (struct mwr_rcache *)rc_;
	struct mw_stats g;
	int ret = mwr_check_rc(rc);

	if (ret)
		return ret;
	if (!st)
		return MW_EINVAL;
	memset(st, 0, sizeof(*st));
	mw_stats_get(&g);
	pthread_mutex_lock(&rc->lock);
	st->hits = g.hits;		/* process-wide: hits are per thread */
	st->misses = rc->misses;
	st->invalidations = rc->invalidations;
	st->evictions = rc->evictions;
	st->regions = rc->nregions;
	st->bytes = rc->bytes;
	st->zombies = rc->zombies;
	st->busy_regions = rc->zombies + rc->transients;
	st->max_bytes = rc->max_bytes;
	pthread_mutex_unlock(&rc->lock);
	return 0;
}
