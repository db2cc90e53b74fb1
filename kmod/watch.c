// SPDX-License-Identifier: GPL-2.0
/*
 * mmuwatch: watches. Each context has one mmu_interval_notifier over the
 * whole user address space (ctx->mni). Its callback, under ctx->lock only,
 * walks the context's interval tree of one-shot watches for those the
 * range hits: each gets its validity word flipped and one event, and is
 * taken out of the tree and freed, its slot free again, right there. It
 * queues one event per persistent watch (ctx->persist) the range hits;
 * those stay. Nothing is left for later removal, so nobody (the owner,
 * another task's truncate, kswapd) ever waits for a notifier of ours to
 * go, and one user's many watches cost others one callback per context
 * plus the watches actually hit, which max_watch_depth and
 * max_mm_contexts bound per page.
 * Wake-ups are batched: one per callback, and only when the ring was
 * empty (or overflowed) before it, like a pipe.
 */
#include <linux/interval_tree_generic.h>
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/poll.h>
#include <linux/nospec.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include "mmuwatch.h"
#include "trace.h"

struct kmem_cache *mmuwatch_watch_cache;

/* The tree's intervals are closed: [start, end - 1]. */
#define MW_START(w) ((w)->start)
#define MW_LAST(w) ((w)->end - 1)
INTERVAL_TREE_DEFINE(struct mmuwatch_watch, rb, unsigned long, subtree_last,
		     MW_START, MW_LAST, static, mmuwatch_it)

/*
 * Map a notifier event to an event reason, or 0 if it does not change what
 * a registration points at (mprotect, NUMA hinting, fork COW, soft dirty).
 * Unknown events invalidate: a spurious event costs a re-registration, a
 * missed one corrupts data.
 */
static u32 mmuwatch_classify(enum mmu_notifier_event event,
			     enum mmuwatch_stat *stat)
{
	switch (event) {
	case MMU_NOTIFY_UNMAP:
		*stat = MW_STAT_EV_UNMAP;
		return MMUWATCH_REASON_UNMAP;
	case MMU_NOTIFY_CLEAR:
		*stat = MW_STAT_EV_CLEAR;
		return MMUWATCH_REASON_CLEAR;
	case MMU_NOTIFY_RELEASE:
		*stat = MW_STAT_EV_RELEASE;
		return MMUWATCH_REASON_RELEASE;
	case MMU_NOTIFY_MIGRATE:
		*stat = MW_STAT_EV_MIGRATE;
		return MMUWATCH_REASON_MIGRATE;
	case MMU_NOTIFY_EXCLUSIVE:
		*stat = MW_STAT_EV_EXCLUSIVE;
		return MMUWATCH_REASON_EXCLUSIVE;
	case MMU_NOTIFY_PROTECTION_VMA:
		*stat = MW_STAT_F_PROT_VMA;
		return 0;
	case MMU_NOTIFY_PROTECTION_PAGE:
		*stat = MW_STAT_F_PROT_PAGE;
		return 0;
	case MMU_NOTIFY_SOFT_DIRTY:
		*stat = MW_STAT_F_SOFT_DIRTY;
		return 0;
	default:
		*stat = MW_STAT_EV_OTHER;
		return MMUWATCH_REASON_CLEAR;
	}
}

/* Give back what a watch holds in the user's budget. */
static void mmuwatch_uncharge_watch(struct mmuwatch_ctx *ctx, bool persistent)
{
	mmuwatch_user_uncharge(ctx, MW_U_WATCHES, 1);
	if (persistent)
		mmuwatch_user_uncharge(ctx, MW_U_PERSISTENT, 1);
}

/*
 * With ctx->lock held: take the watch out of its tree or list and give
 * its slot back. Its word must already say INVALID (or never have been
 * valid): the slot's next token differs.
 */
static void mmuwatch_unlink_locked(struct mmuwatch_ctx *ctx,
				   struct mmuwatch_watch *w)
{
	if (w->persistent) {
		list_del(&w->node);
		ctx->nr_persistent--;
	} else {
		mmuwatch_it_remove(w, &ctx->tree);
	}
	ctx->slots[w->slot] = NULL;
	ctx->free_slots[ctx->nr_free++] = w->slot;
}

/* An unlinked watch: free it (any context, the lock held or not). */
static void mmuwatch_free_watch(struct mmuwatch_ctx *ctx,
				struct mmuwatch_watch *w)
{
	bool persistent = w->persistent;

	kmem_cache_free(mmuwatch_watch_cache, w);
	atomic_long_dec(&mmuwatch_nr_watches);
	mmuwatch_uncharge_watch(ctx, persistent);
}

/*
 * With ctx->lock held, on an ACTIVE (or raced NEW) one-shot watch: flip
 * its word, queue its event, unlink it. The caller frees it. True if the
 * ring readers need a wake-up.
 */
static bool mmuwatch_kill_locked(struct mmuwatch_ctx *ctx,
				 struct mmuwatch_watch *w,
				 unsigned long start, unsigned long end, u32 reason)
{
	bool wake;

	WRITE_ONCE(ctx->words[w->slot], w->token | MMUWATCH_WORD_INVALID);
	wake = mmuwatch_ring_push(ctx, w, start, end, reason);
	ctx->nr_events++;
	mmuwatch_unlink_locked(ctx, w);
	return wake;
}

/*
 * Called with ctx->lock held on a persistent watch: one event, and the
 * watch (and its word) stay as they are.
 */
static bool mmuwatch_note_locked(struct mmuwatch_ctx *ctx,
				 struct mmuwatch_watch *w,
				 unsigned long start, unsigned long end, u32 reason)
{
	ctx->nr_events++;
	return mmuwatch_ring_push(ctx, w, start, end, reason);
}

/* Events for the persistent watches the range hits. Returns the count. */
static unsigned int mmuwatch_fire_persistent(struct mmuwatch_ctx *ctx,
					     const struct mmu_notifier_range *range,
					     u32 reason, bool *wake)
{
	unsigned int fired = 0;
	struct mmuwatch_watch *w;

	list_for_each_entry(w, &ctx->persist, node) {
		unsigned long start = max(range->start, w->start);
		unsigned long end = min(range->end, w->end);

		if (start >= end)
			continue;
		if (w->state == MW_W_NEW) {
			/* WATCH queues one CLEAR over it: never two events */
			w->raced = true;
			continue;
		}
		*wake |= mmuwatch_note_locked(ctx, w, start, end, reason);
		trace_mmuwatch_invalidate(w->cookie, w->slot, start, end,
					  range->event, reason, true);
		fired++;
	}
	return fired;
}

/*
 * Kill the one-shot watches the range hits, at most MW_KILL_BATCH of them
 * when the caller may drop the lock and come back (*more is then set).
 * Returns the count killed.
 */
static unsigned int mmuwatch_fire_oneshot(struct mmuwatch_ctx *ctx,
					  const struct mmu_notifier_range *range,
					  u32 reason, bool batch, bool *wake,
					  bool *more)
{
	unsigned long last = range->end - 1;
	struct mmuwatch_watch *w, *next;
	unsigned int killed = 0;

	*more = false;
	for (w = mmuwatch_it_iter_first(&ctx->tree, range->start, last); w;
	     w = next) {
		unsigned long start = max(range->start, w->start);
		unsigned long end = min(range->end, w->end);

		next = mmuwatch_it_iter_next(w, range->start, last);
		if (w->state == MW_W_NEW) {
			/* WATCH sees it and kills it: one event */
			w->raced = true;
			continue;
		}
		if (batch && killed == MW_KILL_BATCH) {
			*more = true;
			break;
		}
		*wake |= mmuwatch_kill_locked(ctx, w, start, end, reason);
		trace_mmuwatch_invalidate(w->cookie, w->slot, start, end,
					  range->event, reason, true);
		mmuwatch_free_watch(ctx, w);
		killed++;
	}
	return killed;
}

/*
 * A notification that changes nothing a registration points at (mprotect,
 * NUMA hinting, fork's write protection): counted as filtered, and traced
 * per watch, only where it meets a watch of the context.
 */
static void mmuwatch_filtered(struct mmuwatch_ctx *ctx,
			      const struct mmu_notifier_range *range,
			      enum mmuwatch_stat stat)
{
	unsigned long last = range->end - 1;
	struct mmuwatch_watch *w;
	bool hit = false;

	spin_lock(&ctx->lock);
	if (ctx->closing)
		goto out;
	list_for_each_entry(w, &ctx->persist, node) {
		if (w->start > last || w->end <= range->start)
			continue;
		hit = true;
		trace_mmuwatch_invalidate(w->cookie, w->slot,
					  max(range->start, w->start),
					  min(range->end, w->end),
					  range->event, 0, false);
	}
	for (w = mmuwatch_it_iter_first(&ctx->tree, range->start, last); w;
	     w = mmuwatch_it_iter_next(w, range->start, last)) {
		hit = true;
		if (!trace_mmuwatch_invalidate_enabled())
			break;
		trace_mmuwatch_invalidate(w->cookie, w->slot,
					  max(range->start, w->start),
					  min(range->end, w->end),
					  range->event, 0, false);
	}
out:
	spin_unlock(&ctx->lock);
	if (hit) {
		mmuwatch_stat_inc(stat);
		atomic64_inc(&ctx->nr_filtered);
	}
}

/*
 * The context's notifier. May run in any task (truncate by another
 * process, the OOM reaper, exit, kswapd), possibly non-blockable: take
 * only the spinlock, never sleep or allocate unless the range is
 * blockable, and always succeed. A blockable callback over very many
 * watches (one munmap of a million) lets go of the lock and the CPU every
 * MW_KILL_BATCH kills: whatever it has killed is gone, so it resumes
 * where it left off.
 */
static bool mmuwatch_invalidate(struct mmu_interval_notifier *mni,
				const struct mmu_notifier_range *range,
				unsigned long cur_seq)
{
	struct mmuwatch_ctx *ctx = container_of(mni, struct mmuwatch_ctx, mni);
	bool blockable = mmu_notifier_range_blockable(range);
	unsigned long fired = 0;
	bool wake = false, more;
	enum mmuwatch_stat stat;
	u32 reason;

	reason = mmuwatch_classify(range->event, &stat);
	if (!reason) {
		/* Not an invalidation: leave the sequence alone too. */
		mmuwatch_filtered(ctx, range, stat);
		return true;
	}

	spin_lock(&ctx->lock);
	mmu_interval_set_seq(mni, cur_seq);
	if (ctx->closing) {
		spin_unlock(&ctx->lock);
		return true;
	}
	fired += mmuwatch_fire_persistent(ctx, range, reason, &wake);
	for (;;) {
		fired += mmuwatch_fire_oneshot(ctx, range, reason, blockable,
					       &wake, &more);
		if (!more)
			break;
		spin_unlock(&ctx->lock);
		if (wake)
			mmuwatch_ring_wake(ctx);
		wake = false;
		cond_resched();
		spin_lock(&ctx->lock);
		if (ctx->closing)
			break;
	}
	spin_unlock(&ctx->lock);
	if (fired)
		this_cpu_add(mmuwatch_pcpu_stats.v[stat], fired);
	if (wake)
		mmuwatch_ring_wake(ctx);
	if (blockable)
		cond_resched();
	return true;
}

static const struct mmu_interval_notifier_ops mmuwatch_mni_ops = {
	.invalidate = mmuwatch_invalidate,
};

/*
 * True if one more one-shot watch over [start, last] leaves no page
 * covered by more than 'limit' of the context's one-shot watches. The
 * tree yields the overlapping watches by ascending start; the depth can
 * only peak where one of them (or the new one) starts, and 'ends' holds
 * the ends of those covering the current point (at most limit - 1 of
 * them, or we have already said no). Called with ctx->lock held.
 */
static bool mmuwatch_depth_ok(struct mmuwatch_ctx *ctx, unsigned long start,
			      unsigned long last, unsigned int limit)
{
	unsigned long ends[MW_DEPTH_CEIL];
	unsigned int n = 0, scanned = 0, i;
	struct mmuwatch_watch *o;

	for (o = mmuwatch_it_iter_first(&ctx->tree, start, last); o;
	     o = mmuwatch_it_iter_next(o, start, last)) {
		unsigned long p = max(o->start, start);

		if (++scanned > MW_DEPTH_SCAN)
			return false;
		for (i = 0; i < n;) {
			if (ends[i] <= p)
				ends[i] = ends[--n];
			else
				i++;
		}
		/* o and the new watch both cover p */
		if (n + 2 > limit)
			return false;
		ends[n++] = o->end;
	}
	return true;
}

/*
 * Take a free slot and link the watch (NEW) into its tree or list. A
 * slot is free again as soon as its watch is killed or unwatched: a full
 * table is ENOSPC at once, and so is a range already covered
 * max_watch_depth deep.
 */
static int mmuwatch_link_new(struct mmuwatch_ctx *ctx, struct mmuwatch_watch *w)
{
	unsigned int depth = min_t(unsigned int,
				   READ_ONCE(mmuwatch_max_watch_depth),
				   MW_DEPTH_CEIL);
	int ret = -ENOSPC;

	spin_lock(&ctx->lock);
	if (!ctx->nr_free)
		goto out;
	if (w->persistent) {
		if (ctx->nr_persistent >= READ_ONCE(mmuwatch_max_persistent))
			goto out;
	} else if (!ctx->exempt &&
		   !mmuwatch_depth_ok(ctx, w->start, w->end - 1, depth)) {
		mmuwatch_stat_inc(MW_STAT_LIMIT_DEPTH);
		goto out;
	}
	w->slot = ctx->free_slots[--ctx->nr_free];
	/* Next generation of this slot; old tokens never match again. */
	w->token = ((READ_ONCE(ctx->words[w->slot]) >> 1) + 1) << 1;
	w->state = MW_W_NEW;
	ctx->slots[w->slot] = w;
	if (w->persistent) {
		ctx->nr_persistent++;
		list_add_tail(&w->node, &ctx->persist);
	} else {
		mmuwatch_it_insert(w, &ctx->tree);
	}
	ret = 0;
out:
	spin_unlock(&ctx->lock);
	return ret;
}

/* Charge the watch to the user: ENOSPC past max_user_watches/_persistent. */
static int mmuwatch_charge_watch(struct mmuwatch_ctx *ctx, bool persistent)
{
	int ret = mmuwatch_user_charge(ctx, MW_U_WATCHES, 1, true);

	if (ret || !persistent)
		return ret;
	ret = mmuwatch_user_charge(ctx, MW_U_PERSISTENT, 1, true);
	if (ret)
		mmuwatch_user_uncharge(ctx, MW_U_WATCHES, 1);
	return ret;
}

/* The context's notifier, inserted once by the first WATCH. */
static int mmuwatch_mni_ensure(struct mmuwatch_ctx *ctx)
{
	int ret = 0;

	/* Pairs with the release below: set means inserted, no mutex. */
	if (smp_load_acquire(&ctx->mni_on))
		return 0;
	mutex_lock(&ctx->setup_lock);
	if (!ctx->mni_on) {
		ret = mmu_interval_notifier_insert(&ctx->mni, ctx->mm, 0,
						   ctx->mm->task_size,
						   &mmuwatch_mni_ops);
		if (!ret) /* inserted before anyone skips the mutex */
			smp_store_release(&ctx->mni_on, true);
	}
	mutex_unlock(&ctx->setup_lock);
	return ret;
}

/*
 * Publish a NEW watch. First wait for the invalidations in flight that
 * already called back: once mmu_interval_read_begin() returns, any
 * invalidation that found the watch NEW has set 'raced', and any later
 * one finds it linked. A raced one-shot watch dies here with one CLEAR
 * over its whole range (its token is still returned: the word says
 * INVALID); a raced persistent one stays with one CLEAR.
 */
static void mmuwatch_publish(struct mmuwatch_ctx *ctx, struct mmuwatch_watch *w,
			     struct mmuwatch_range *r)
{
	bool wake = false, raced, dead = false;

	mmu_interval_read_begin(&ctx->mni);
	spin_lock(&ctx->lock);
	raced = w->raced;
	r->slot = w->slot;
	r->token = w->token;
	ctx->nr_watched++;
	if (raced && !w->persistent) {
		wake = mmuwatch_kill_locked(ctx, w, w->start, w->end,
					    MMUWATCH_REASON_CLEAR);
		dead = true;
	} else {
		if (raced)
			wake = mmuwatch_note_locked(ctx, w, w->start, w->end,
						    MMUWATCH_REASON_CLEAR);
		WRITE_ONCE(ctx->words[w->slot], w->token);
		w->state = MW_W_ACTIVE;
	}
	spin_unlock(&ctx->lock);
	if (dead)
		mmuwatch_free_watch(ctx, w);
	if (raced)
		mmuwatch_stat_inc(MW_STAT_EV_CLEAR);
	if (wake)
		mmuwatch_ring_wake(ctx);
}

int mmuwatch_watch_one(struct mmuwatch_ctx *ctx, struct mmuwatch_range *r)
{
	unsigned long start, end;
	struct mmuwatch_watch *w;
	bool persistent;
	u64 last;
	int ret;

	if (r->flags & ~MMUWATCH_WATCH_F_MASK || !r->len)
		return -EINVAL;
	if (check_add_overflow(r->start, r->len, &last))
		return -EOVERFLOW;
	if (last > ctx->mm->task_size)
		return -ERANGE;
	start = r->start & PAGE_MASK;
	end = PAGE_ALIGN(last);
	persistent = !!(r->flags & MMUWATCH_WATCH_F_PERSISTENT);

	ret = mmuwatch_ctx_ensure_ready(ctx);
	if (ret)
		return ret;
	if (persistent && !READ_ONCE(mmuwatch_max_persistent))
		return -ENOSPC;
	ret = mmuwatch_mni_ensure(ctx);
	if (ret)
		return ret;
	ret = mmuwatch_charge_watch(ctx, persistent);
	if (ret)
		goto out_trace;
	ret = -ENOMEM;
	w = kmem_cache_zalloc(mmuwatch_watch_cache, MW_GFP);
	if (!w)
		goto out_uncharge;
	w->start = start;
	w->end = end;
	w->cookie = r->cookie;
	w->persistent = persistent;
	ret = mmuwatch_link_new(ctx, w);
	if (ret) {
		kmem_cache_free(mmuwatch_watch_cache, w);
		goto out_uncharge;
	}
	atomic_long_inc(&mmuwatch_nr_watches);
	mmuwatch_stat_inc(MW_STAT_WATCHES_TOTAL);
	mmuwatch_publish(ctx, w, r);
	ret = 0;
	goto out_trace;

out_uncharge:
	mmuwatch_uncharge_watch(ctx, persistent);
out_trace:
	trace_mmuwatch_watch(r->cookie, ret ? U32_MAX : r->slot,
			     ret ? 0 : r->token, start, end, persistent, ret);
	return ret;
}

int mmuwatch_unwatch_one(struct mmuwatch_ctx *ctx,
			 const struct mmuwatch_unwatch *u)
{
	struct mmuwatch_watch *w = NULL;
	u32 slot = u->slot;

	if (u->reserved)
		return -EINVAL;
	if (!mmuwatch_ctx_ready(ctx))
		return -ENOENT;

	spin_lock(&ctx->lock);
	if (slot < ctx->nr_words)
		w = ctx->slots[array_index_nospec(slot, ctx->nr_words)];
	if (!w || w->token != u->token || w->state != MW_W_ACTIVE) {
		spin_unlock(&ctx->lock);
		trace_mmuwatch_unwatch(0, slot, u->token, 0, 0, false, -ENOENT);
		return -ENOENT;
	}
	/* Stale readers must see "changed" from now on. */
	WRITE_ONCE(ctx->words[w->slot], w->token | MMUWATCH_WORD_INVALID);
	mmuwatch_unlink_locked(ctx, w);
	spin_unlock(&ctx->lock);

	trace_mmuwatch_unwatch(w->cookie, slot, u->token, w->start, w->end,
			       w->persistent, 0);
	mmuwatch_free_watch(ctx, w);
	mmuwatch_stat_inc(MW_STAT_UNWATCHES);
	return 0;
}

/* Context teardown: no ioctl can run any more (the file is being released). */
void mmuwatch_watches_release(struct mmuwatch_ctx *ctx)
{
	unsigned long n = 0, np = 0;
	struct mmuwatch_watch *w, *tmp;

	/* From here on the callback leaves every watch of this context alone. */
	spin_lock(&ctx->lock);
	ctx->closing = true;
	spin_unlock(&ctx->lock);
	/* Waits for callbacks still running; after it, none can start. */
	if (ctx->mni_on)
		mmu_interval_notifier_remove(&ctx->mni);

	rbtree_postorder_for_each_entry_safe(w, tmp, &ctx->tree.rb_root, rb) {
		kmem_cache_free(mmuwatch_watch_cache, w);
		n++;
		/* A context can hold millions of watches. */
		cond_resched();
	}
	ctx->tree = RB_ROOT_CACHED;
	list_for_each_entry_safe(w, tmp, &ctx->persist, node) {
		kmem_cache_free(mmuwatch_watch_cache, w);
		np++;
	}
	INIT_LIST_HEAD(&ctx->persist);
	atomic_long_sub(n + np, &mmuwatch_nr_watches);
	mmuwatch_user_uncharge(ctx, MW_U_WATCHES, n + np);
	mmuwatch_user_uncharge(ctx, MW_U_PERSISTENT, np);
}
