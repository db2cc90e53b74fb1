// SPDX-License-Identifier: BSD-3-Clause
/*
 * Batched reclaim and deferred deregistration (cache lock held). A region
 * taken out of the tree (invalidated, evicted, flushed) becomes a zombie:
 * never handed out again, still registered until nobody holds it. Counting
 * its holders needs one barrier (refs.c) for a whole batch; the zombie
 * list and the helper thread bound the life of the ones a barrier found
 * busy. The last reference of a region out of the tree also ends here.
 */
#include <time.h>

#include "rcache/internal.h"

/* Deregister and return to the pool when nobody can reach r any more.
 * The claim (one CAS to FREE) fails when r was queued meanwhile: then the
 * queue processing decides later. */
int mwr_try_release(struct mwr_rcache *rc, struct mwr_region *r)
{
	uint64_t st = mwr_ld_state(r);

	do {
		if (st & (MWR_FREE | MWR_QUEUED | MWR_INTREE))
			return 0;
	} while (!mwr_cas_state(r, &st, (((st >> MWR_GEN_SHIFT) + 1) << MWR_GEN_SHIFT) |
			    MWR_FREE));
	if (!(st & MWR_TRANSIENT) && r->watch.word) {
		pthread_mutex_lock(&mwu_core.lock);
		if (mwu_core.source == MW_SOURCE_KERNEL)
			mwu_kernel_unwatch((struct mw_watch *const[]){ &r->watch }, 1);
		else if (mwu_core.source == MW_SOURCE_HOOKS)
			mwu_soft_unwatch(&r->watch);
		pthread_mutex_unlock(&mwu_core.lock);
	}
	if (!rc->forked) {
		rc->ops.dereg(rc->ops.ctx, &r->pub);
		mwu_stat_add(MWU_ST_DEREGS, 1);
	}
	rc->bytes -= r->pub.len;
	mwu_stat_add(MWU_ST_BYTES, -(int64_t)r->pub.len);
	mwu_stat_add(MWU_ST_REGIONS, -1);
	if (st & MWR_TRANSIENT) {
		rc->transients--;
	} else {
		rc->zombies--;
		r->z_prev->z_next = r->z_next;
		r->z_next->z_prev = r->z_prev;
		r->z_next = r->z_prev = NULL;
	}
	r->debt = 0;
	mwr_pool_free(r);
	return 1;
}

uint64_t mwr_now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* One barrier for the whole batch; release what nobody holds. The others
 * stay zombies: their last put queues them again.
 * The barrier (membarrier) costs an IPI to every CPU running a thread of
 * the process; unless forced, a multi-threaded process defers small
 * batches: the regions wait on the zombie list (out of the tree, never
 * handed out) and are counted in bulk once MWR_ZOMBIE_BATCH wait or every
 * MWR_ZOMBIE_MS (helper thread). */
void mwr_batch_reclaim_f(struct mwr_rcache *rc, struct mwr_batch *b, int force)
{
	struct mwr_region *r, *next;

	if (!b->head)
		return;
	/* Deferred, or the barrier failed (references cannot be counted):
	 * they stay zombies, out of the tree, and are counted again later. */
	if ((!force && rc->zombies < MWR_ZOMBIE_BATCH && mwr_barrier_needed()) ||
	    mwr_barrier()) {
		for (r = b->head; r; r = next) {
			next = r->lru_next;
			r->lru_next = NULL;
		}
		b->head = NULL;
		return;
	}
	for (r = b->head; r; r = next) {
		uint64_t st = mwr_ld_state(r);

		next = r->lru_next;
		r->lru_next = NULL;
		if (st & (MWR_FREE | MWR_QUEUED | MWR_INTREE))
			continue;	/* queued again: processed later */
		if (mwr_busy(r) <= 0)
			mwr_try_release(rc, r);
	}
	b->head = NULL;
	rc->zcheck_ms = mwr_now_ms();
}

void mwr_batch_reclaim(struct mwr_rcache *rc, struct mwr_batch *b)
{
	mwr_batch_reclaim_f(rc, b, 0);
	if (rc->zombies >= MWR_ZOMBIE_BATCH)
		mwr_zombie_recheck(rc, rc->zombies);
}

/* Take r (INVALID) out of the tree into the batch. */
void mwr_unlink_region(struct mwr_rcache *rc, struct mwr_region *r,
			  struct mwr_batch *b)
{
	mwr_tree_remove(&rc->tree, r);
	mwr_index_remove(&rc->index, r);
	mwr_lru_del(rc, r);
	rc->nregions--;
	rc->zombies++;		/* until released */
	r->z_next = &rc->zlist;
	r->z_prev = rc->zlist.z_prev;
	rc->zlist.z_prev->z_next = r;
	rc->zlist.z_prev = r;
	__atomic_fetch_and(&r->state, ~MWR_INTREE, __ATOMIC_ACQ_REL);
	mwr_batch_add(b, r);
}

/*
 * Safety net: count the references of up to max zombies again (from the
 * front, rotating them to the back). References that changed hands between
 * threads can leave a zombie that no put queues; this bounds its life to a
 * few helper rounds.
 */
void mwr_zombie_recheck(struct mwr_rcache *rc, size_t max)
{
	struct mwr_batch b = { NULL };
	struct mwr_region *r;

	if (max > rc->zombies)
		max = rc->zombies;	/* each zombie at most once */
	while (max-- && rc->zlist.z_next != &rc->zlist) {
		r = rc->zlist.z_next;
		/* rotate */
		r->z_prev->z_next = r->z_next;
		r->z_next->z_prev = r->z_prev;
		r->z_next = &rc->zlist;
		r->z_prev = rc->zlist.z_prev;
		rc->zlist.z_prev->z_next = r;
		rc->zlist.z_prev = r;
		if (!(mwr_ld_state(r) & (MWR_QUEUED | MWR_FREE | MWR_INTREE)) &&
		    !r->lru_next)
			mwr_batch_add(&b, r);
	}
	mwr_batch_reclaim_f(rc, &b, 1);
}

/* The last reference of a region out of the tree: reclaim it under its
 * cache's lock. 'rc' is the cache it had at generation 'gen', read while
 * the reference held it, and the cache the caller works on (another
 * cache's region is never reclaimed from here: state.c); 'locked' is rc
 * when the caller holds its lock, else NULL. */
void mwr_last_ref(struct mwr_region *r, struct mwr_rcache *rc, uint64_t gen,
		  struct mwr_rcache *locked)
{
	uint64_t st;

	if (!locked)
		pthread_mutex_lock(&rc->lock);
	/* Under the lock: nobody can release or reuse r meanwhile. */
	st = mwr_ld_state(r);
	if ((st >> MWR_GEN_SHIFT) != gen ||
	    __atomic_load_n(&r->rc, __ATOMIC_RELAXED) != rc) {
		/* released (and maybe reused) by someone else */
	} else if (st & MWR_TRANSIENT) {
		mwr_try_release(rc, r);
	} else {
		struct mwr_batch b = { NULL };

		if (!(st & (MWR_QUEUED | MWR_FREE | MWR_INTREE)))
			mwr_batch_add(&b, r);
		mwr_batch_reclaim(rc, &b);
	}
	if (!locked) {
		mwr_process_invalid(rc, MWR_DRAIN_PER_CALL);
		pthread_mutex_unlock(&rc->lock);
	}
}

/* Unlink every cached region (lock held); in-use ones go at their put. */
void mwr_unlink_all(struct mwr_rcache *rc)
{
	struct mwr_region *r, *next;
	struct mwr_batch b = { NULL };

	while (mwr_process_invalid(rc, 1024))
		;
	for (r = rc->lru.lru_next; r != &rc->lru; r = next) {
		next = r->lru_next;
		__atomic_fetch_or(&r->state, MWR_INVALID, __ATOMIC_ACQ_REL);
		mwr_unlink_region(rc, r, &b);
	}
	mwr_batch_reclaim_f(rc, &b, 1);
	mwr_zombie_recheck(rc, rc->zombies);
}

