// SPDX-License-Identifier: BSD-3-Clause
/*
 * Lock-free transitions of a region's state word (refcount, flags and
 * generation, internal.h), from any thread and from the event drain:
 * flagging an incarnation and queueing it for processing under the cache
 * lock (invalid.c), the watch callback, and dropping atomic references
 * (the last one of a region out of the tree hands it to reclaim.c). A
 * region's incarnation is named by its generation: a transition of an
 * incarnation that is already gone (freed or reused) is a no-op.
 */
#include "rcache/internal.h"

static void inv_push(struct mwr_rcache *rc, struct mwr_region *r)
{
	struct mwr_region *h = __atomic_load_n(&rc->inv, __ATOMIC_RELAXED);

	do
		r->inv_next = h;
	while (!__atomic_compare_exchange_n(&rc->inv, &h, r, 1,
					    __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

/*
 * Flag incarnation 'gen' of r (flags: MWR_INVALID or 0) and queue it for
 * processing under the lock, at most once at a time. Lock-free; a no-op
 * when that incarnation is already gone (freed or reused).
 */
void mwr_flag_queue(struct mwr_rcache *rc, struct mwr_region *r,
		       uint64_t gen, uint64_t flags)
{
	uint64_t st = mwr_ld_state(r);

	do {
		if ((st >> MWR_GEN_SHIFT) != gen || (st & MWR_FREE))
			return;
		if ((st & MWR_QUEUED) && (st & flags) == flags)
			return;
	} while (!mwr_cas_state(r, &st, st | flags | MWR_QUEUED));
	if (!(st & MWR_QUEUED))
		inv_push(rc, r);
}

/* A zombie whose references changed hands outside the cache (thread exit):
 * let the queue processing count them again. */
void mwr_requeue(struct mwr_region *r, uint64_t gen)
{
	uint64_t st = mwr_ld_state(r);

	if ((st >> MWR_GEN_SHIFT) == gen && !(st & (MWR_INTREE | MWR_FREE)) &&
	    !(st & MWR_TRANSIENT))
		mwr_flag_queue(__atomic_load_n(&r->rc, __ATOMIC_RELAXED), r,
			       gen, 0);
}

/* Watch callback: event drain context, core lock held. Flag and queue. */
void mwr_on_invalid(struct mw_watch *w, void *arg)
{
	struct mwr_region *r = arg;

	(void)w;
	if (MWR_TEST(r->rc, MW_RCACHE_F_TEST_NO_INVALIDATE))
		return;
	__atomic_fetch_add(&r->rc->invalidations, 1, __ATOMIC_RELAXED);
	mwr_flag_queue(r->rc, r, __atomic_load_n(&r->gen_cur, __ATOMIC_ACQUIRE),
		   MWR_INVALID);
}

/*
 * Drop an atomic reference taken through cache 'mine' (alive: the caller
 * works on it). 0, or -1 when the atomic count is zero (the reference is
 * some thread's local one): never underflow the count. The region's cache
 * is read while the reference holds it: once the count is down, r may be
 * reclaimed and reused by any cache at once. A region that another cache
 * reused under a lock-free reader (try_hit) is not touched after the drop,
 * nor is that cache, which may be destroyed meanwhile: out of its tree, r
 * is one of its zombies, counted again by its periodic recheck (the helper
 * thread's drain) and by its flush; without the helper
 * (MMUWATCH_HELPER=0) it stays pinned until that cache's next flush,
 * destroy, or a batch of 64 zombies.
 */
int mwr_drop_ref(struct mwr_region *r, struct mwr_rcache *mine,
		 struct mwr_rcache *locked)
{
	struct mwr_rcache *rc = __atomic_load_n(&r->rc, __ATOMIC_RELAXED);
	uint64_t st = mwr_ld_state(r);

	do {
		if (!(st & MWR_COUNT_MASK))
			return -1;
	} while (!mwr_cas_state(r, &st, st - 1));
	st--;
	if (mwu_likely(st & MWR_COUNT_MASK) ||
	    (!(st & MWR_TRANSIENT) && (st & MWR_INTREE)) || rc != mine)
		return 0;
	mwr_last_ref(r, rc, st >> MWR_GEN_SHIFT, locked);
	return 0;
}

/* Drop a reference we know we own (taken by CAS in try_hit). If a put of
 * another thread's local reference consumed the atomic count, book it as
 * debt instead, and let the queue processing count again (another cache's
 * region: its zombie recheck, as above). */
void mwr_drop_known(struct mwr_region *r, struct mwr_rcache *mine,
		    struct mwr_rcache *locked)
{
	/* Both read while held: after the debt, r may be released and
	 * reused, and only its old generation makes the queueing a no-op
	 * then (a new one would queue another cache's region on ours). */
	struct mwr_rcache *rc = __atomic_load_n(&r->rc, __ATOMIC_RELAXED);
	uint64_t gen = mwr_ld_state(r) >> MWR_GEN_SHIFT;

	if (mwu_likely(!mwr_drop_ref(r, mine, locked)))
		return;
	__atomic_fetch_add(&r->debt, 1, __ATOMIC_ACQ_REL);
	if (!(mwr_ld_state(r) & MWR_INTREE) && rc == mine)
		mwr_flag_queue(rc, r, gen, 0);
}

