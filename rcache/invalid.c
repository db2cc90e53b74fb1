// SPDX-License-Identifier: BSD-3-Clause
/*
 * Invalidation processing (cache lock held): the regions that watch
 * callbacks and puts queued on the lock-free stack (state.c) are taken out
 * of the tree, or counted again, a bounded number per call. The core
 * reaches it through the cache's sink: a drain round (also the helper
 * thread's zombie recheck) and the fork handlers.
 */
#include "rcache/internal.h"

/* Bounded processing of queued regions; returns work left. */
int mwr_process_invalid(struct mwr_rcache *rc, unsigned max)
{
	struct mwr_batch b = { NULL };
	unsigned n = 0;

	if (!rc->pending)
		rc->pending = __atomic_exchange_n(&rc->inv, NULL, __ATOMIC_ACQUIRE);
	while (rc->pending && n < max) {
		struct mwr_region *r = rc->pending;
		uint64_t st;

		rc->pending = r->inv_next;
		st = __atomic_and_fetch(&r->state, ~MWR_QUEUED, __ATOMIC_ACQ_REL);
		if (st & MWR_FREE)
			continue;
		if (st & MWR_INTREE) {
			if (st & MWR_INVALID)
				mwr_unlink_region(rc, r, &b);
		} else if (!(st & MWR_TRANSIENT)) {
			mwr_batch_add(&b, r);	/* a zombie's last put */
		}
		n++;
	}
	mwr_batch_reclaim(rc, &b);
	return rc->pending || __atomic_load_n(&rc->inv, __ATOMIC_RELAXED);
}

static int sink_drain(struct mwu_sink *s, unsigned max)
{
	struct mwr_rcache *rc = (void *)((char *)s - offsetof(struct mwr_rcache, sink));
	int left;

	pthread_mutex_lock(&rc->lock);
	left = mwr_process_invalid(rc, max);
	if (rc->zombies && mwr_now_ms() - rc->zcheck_ms >= MWR_ZOMBIE_MS)
		mwr_zombie_recheck(rc, max);
	pthread_mutex_unlock(&rc->lock);
	return left;
}

static void sink_prepare(struct mwu_sink *s)
{
	struct mwr_rcache *rc = (void *)((char *)s - offsetof(struct mwr_rcache, sink));

	pthread_mutex_lock(&rc->lock);
}

static void sink_parent(struct mwu_sink *s)
{
	struct mwr_rcache *rc = (void *)((char *)s - offsetof(struct mwr_rcache, sink));

	pthread_mutex_unlock(&rc->lock);
}

/* fork child: the registrations belong to the parent. Forget every cached
 * region (deregister nothing unless the ops are fork-safe); regions the
 * child still holds are released without deregistration at their put. */
static void sink_child(struct mwu_sink *s)
{
	struct mwr_rcache *rc = (void *)((char *)s - offsetof(struct mwr_rcache, sink));
	struct mwr_region *r, *next;
	struct mwr_batch b = { NULL };

	pthread_mutex_init(&rc->lock, NULL);
	if (!(rc->ops.flags & MW_OPS_F_FORK_SAFE))
		rc->forked = 1;
	/* Queued regions: forget the queue, keep them reachable below. */
	for (r = rc->pending; r; r = r->inv_next)
		__atomic_fetch_and(&r->state, ~MWR_QUEUED, __ATOMIC_RELAXED);
	for (r = rc->inv; r; r = r->inv_next)
		__atomic_fetch_and(&r->state, ~MWR_QUEUED, __ATOMIC_RELAXED);
	rc->inv = NULL;
	rc->pending = NULL;
	for (r = rc->lru.lru_next; r != &rc->lru; r = next) {
		next = r->lru_next;
		/* The watch died with the parent's context. */
		r->watch.word = &mwu_dead_word;
		__atomic_fetch_or(&r->state, MWR_INVALID, __ATOMIC_RELAXED);
		mwr_unlink_region(rc, r, &b);
	}
	mwr_batch_reclaim(rc, &b);
}


void mwr_sink_init(struct mwr_rcache *rc)
{
	rc->sink.drain = sink_drain;
	rc->sink.atfork_prepare = sink_prepare;
	rc->sink.atfork_parent = sink_parent;
	rc->sink.atfork_child = sink_child;
}
