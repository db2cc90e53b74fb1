// SPDX-License-Identifier: GPL-2.0
/*
 * mmuwatch: watches. One mmu_interval_notifier per one-shot watch; the
 * invalidate callback flips the validity word and queues one event under
 * ctx->lock only, then hands the notifier to the context's own deferred
 * work for removal (or to the owner, when WATCH finds the table full).
 * Persistent watches share one notifier per context over the whole
 * address space (ctx->pmni): its callback queues one event per persistent
 * watch that intersects the range, and they stay active.
 * Wake-ups are batched: one per callback, and only when the ring was
 * empty (or overflowed) before it, like a pipe.
 */
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/poll.h>
#include <linux/nospec.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include "mmuwatch.h"
#include "trace.h"

struct kmem_cache *mw_watch_cache;

/*
 * Map a notifier event to an event reason, or 0 if it does not change what
 * a registration points at (mprotect, NUMA hinting, fork COW, soft dirty).
 * Unknown events invalidate: a spurious event costs a re-registration, a
 * missed one corrupts data.
 */
static u32 mw_classify(enum mmu_notifier_event event, enum mw_stat *stat)
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

/* The reaper may free a dead watch, but not while WATCH still uses it. */
static void mw_bury_locked(struct mw_ctx *ctx, struct mw_watch *w)
{
	list_move_tail(&w->node, &ctx->dead);
	/* Plain test first: no atomic per watch in a storm. */
	if (!delayed_work_pending(&ctx->reap_work))
		queue_delayed_work(mw_wq, &ctx->reap_work, MW_REAP_DELAY);
}

/*
 * Called with ctx->lock held on a NEW or ACTIVE one-shot watch. True if
 * the ring readers need a wake-up.
 */
static bool mw_kill_locked(struct mw_ctx *ctx, struct mw_watch *w,
			   unsigned long start, unsigned long end, u32 reason)
{
	bool wake;

	WRITE_ONCE(ctx->words[w->slot], w->token | MMUWATCH_WORD_INVALID);
	wake = mw_ring_push(ctx, w, start, end, reason);
	ctx->nr_events++;
	if (w->state == MW_W_ACTIVE)
		mw_bury_locked(ctx, w);
	w->state = MW_W_DEAD;
	return wake;
}

/*
 * Called with ctx->lock held on a persistent watch: one event, and the
 * watch (and its word) stay as they are.
 */
static bool mw_note_locked(struct mw_ctx *ctx, struct mw_watch *w,
			   unsigned long start, unsigned long end, u32 reason)
{
	ctx->nr_events++;
	return mw_ring_push(ctx, w, start, end, reason);
}

/*
 * A long callback chain (one munmap over a million watches, exit) must
 * not hog the CPU: yield where the notifier allows sleeping.
 */
static void mw_maybe_resched(const struct mmu_notifier_range *range)
{
	if (mmu_notifier_range_blockable(range))
		cond_resched();
}

/*
 * May run in any task (truncate by another process, the OOM reaper, exit),
 * possibly non-blockable: take only the spinlock, never sleep or allocate
 * unless the range is blockable, and always succeed.
 */
static bool mw_invalidate(struct mmu_interval_notifier *mni,
			  const struct mmu_notifier_range *range,
			  unsigned long cur_seq)
{
	struct mw_watch *w = container_of(mni, struct mw_watch, mni);
	struct mw_ctx *ctx = w->ctx;
	unsigned long start = max(range->start, w->start);
	unsigned long end = min(range->end, w->end);
	bool killed = false, wake = false;
	enum mw_stat stat;
	u32 reason;

	reason = mw_classify(range->event, &stat);
	if (!reason) {
		/* Not an invalidation: leave the sequence alone too. */
		mw_stat_inc(stat);
		atomic64_inc(&ctx->nr_filtered);
		trace_mmuwatch_invalidate(w->cookie, w->slot, start, end,
					  range->event, 0, false);
		return true;
	}

	spin_lock(&ctx->lock);
	mmu_interval_set_seq(mni, cur_seq);
	if (!ctx->closing &&
	    (w->state == MW_W_NEW || w->state == MW_W_ACTIVE)) {
		wake = mw_kill_locked(ctx, w, start, end, reason);
		killed = true;
	}
	spin_unlock(&ctx->lock);

	trace_mmuwatch_invalidate(w->cookie, w->slot, start, end,
				  range->event, reason, killed);
	if (killed) {
		mw_stat_inc(stat);
		if (wake)
			mw_ring_wake(ctx);
	} else {
		/*
		 * One-shot: a dead, unwatched or closing watch never fires
		 * again. Counted apart from the filtered (non-invalidating)
		 * notifications.
		 */
		mw_stat_inc(MW_STAT_REPEAT_IGNORED);
	}
	mw_maybe_resched(range);
	return true;
}

/*
 * The context's persistent notifier: one event per persistent watch that
 * intersects the range. A watch still NEW (inside WATCH) only records the
 * race; WATCH then queues one CLEAR over the whole watch, so a race never
 * gives two events.
 */
static bool mw_invalidate_persist(struct mmu_interval_notifier *mni,
				  const struct mmu_notifier_range *range,
				  unsigned long cur_seq)
{
	struct mw_ctx *ctx = container_of(mni, struct mw_ctx, pmni);
	unsigned int fired = 0;
	struct mw_watch *w;
	enum mw_stat stat;
	bool wake = false;
	u32 reason;

	reason = mw_classify(range->event, &stat);
	if (!reason) {
		mw_stat_inc(stat);
		atomic64_inc(&ctx->nr_filtered);
		trace_mmuwatch_invalidate(0, U32_MAX, range->start, range->end,
					  range->event, 0, false);
		return true;
	}

	spin_lock(&ctx->lock);
	mmu_interval_set_seq(mni, cur_seq);
	if (ctx->closing)
		goto out;
	list_for_each_entry(w, &ctx->persist, node) {
		unsigned long start = max(range->start, w->start);
		unsigned long end = min(range->end, w->end);

		if (start >= end)
			continue;
		if (w->state == MW_W_NEW) {
			w->raced = true;
			continue;
		}
		wake |= mw_note_locked(ctx, w, start, end, reason);
		trace_mmuwatch_invalidate(w->cookie, w->slot, start, end,
					  range->event, reason, true);
		fired++;
	}
out:
	spin_unlock(&ctx->lock);
	if (fired)
		this_cpu_add(mw_stats.v[stat], fired);
	if (wake)
		mw_ring_wake(ctx);
	mw_maybe_resched(range);
	return true;
}

static const struct mmu_interval_notifier_ops mw_pmni_ops = {
	.invalidate = mw_invalidate_persist,
};

static const struct mmu_interval_notifier_ops mw_mni_ops = {
	.invalidate = mw_invalidate,
};

/* Give back what a watch holds in the user's budget. */
static void mw_uncharge_watch(struct mw_ctx *ctx, bool persistent)
{
	mw_user_uncharge(ctx, MW_U_WATCHES, 1);
	if (persistent)
		mw_user_uncharge(ctx, MW_U_PERSISTENT, 1);
}

/* The notifier is out of the tree: give the slot back and free. */
static void mw_free_watch(struct mw_ctx *ctx, struct mw_watch *w)
{
	bool persistent = w->persistent;

	spin_lock(&ctx->lock);
	ctx->slots[w->slot] = NULL;
	ctx->free_slots[ctx->nr_free++] = w->slot;
	if (persistent)
		ctx->nr_persistent--;
	spin_unlock(&ctx->lock);
	kmem_cache_free(mw_watch_cache, w);
	atomic_long_dec(&mw_nr_watches);
	mw_uncharge_watch(ctx, persistent);
}

/*
 * Remove the notifiers of dead watches, taking them off ctx->dead one at a
 * time, so that the context's work item and its owner (WATCH at a full
 * table) can reap side by side: the owner never waits for the work, and at
 * most the one watch the work is removing is out of its reach. Neither
 * waits for another context: mmu_interval_notifier_remove() only waits
 * for callbacks running on this context's mm. Returns the number reaped.
 */
static unsigned long mw_reap_dead(struct mw_ctx *ctx)
{
	unsigned long n = 0;
	struct mw_watch *w;

	for (;;) {
		spin_lock(&ctx->lock);
		w = list_first_entry_or_null(&ctx->dead, struct mw_watch, node);
		if (w)
			list_del_init(&w->node);
		spin_unlock(&ctx->lock);
		if (!w)
			return n;
		mmu_interval_notifier_remove(&w->mni);
		mw_free_watch(ctx, w);
		n++;
		/* One munmap can kill millions of watches. */
		cond_resched();
	}
}

void mw_reap_work(struct work_struct *work)
{
	mw_reap_dead(container_of(to_delayed_work(work), struct mw_ctx,
				  reap_work));
}

/* Reap this context's dead watches in the caller. True if any were. */
static bool mw_reap_own(struct mw_ctx *ctx)
{
	return mw_reap_dead(ctx) > 0;
}

/*
 * Take a free slot; a slot frees only after its notifier is removed. A full
 * table first reaps this context's dead watches here, in the caller; what
 * the context's work item is removing at that moment is not waited for
 * (ENOSPC: a full table is an errno, not a wait).
 */
static int mw_take_slot(struct mw_ctx *ctx, struct mw_watch *w)
{
	bool reaped = false;

	for (;;) {
		spin_lock(&ctx->lock);
		if (w->persistent &&
		    ctx->nr_persistent >= READ_ONCE(mw_max_persistent)) {
			spin_unlock(&ctx->lock);
			return -ENOSPC;
		}
		if (ctx->nr_free)
			break;
		spin_unlock(&ctx->lock);
		if (reaped || !mw_reap_own(ctx))
			return -ENOSPC;
		reaped = true;
	}
	w->slot = ctx->free_slots[--ctx->nr_free];
	/* Next generation of this slot; old tokens never match again. */
	w->token = ((READ_ONCE(ctx->words[w->slot]) >> 1) + 1) << 1;
	w->state = MW_W_NEW;
	if (w->persistent)
		ctx->nr_persistent++;
	ctx->slots[w->slot] = w;
	list_add_tail(&w->node, w->persistent ? &ctx->persist : &ctx->live);
	spin_unlock(&ctx->lock);
	return 0;
}

/* Charge the watch to the user: ENOSPC past max_user_watches/_persistent. */
static int mw_charge_watch(struct mw_ctx *ctx, bool persistent, bool count)
{
	int ret = mw_user_charge(ctx, MW_U_WATCHES, 1, count);

	if (ret || !persistent)
		return ret;
	ret = mw_user_charge(ctx, MW_U_PERSISTENT, 1, count);
	if (ret)
		mw_user_uncharge(ctx, MW_U_WATCHES, 1);
	return ret;
}

/* The context's persistent notifier, inserted once by the first one. */
static int mw_pmni_ensure(struct mw_ctx *ctx)
{
	int ret = 0;

	mutex_lock(&ctx->setup_lock);
	if (!ctx->pmni_on) {
		ret = mmu_interval_notifier_insert(&ctx->pmni, ctx->mm, 0,
						   ctx->mm->task_size,
						   &mw_pmni_ops);
		if (!ret)
			ctx->pmni_on = true;
	}
	mutex_unlock(&ctx->setup_lock);
	return ret;
}

/* WATCH of a persistent range: no notifier of its own. */
static int mw_watch_persist(struct mw_ctx *ctx, struct mw_watch *w,
			    struct mmuwatch_range *r)
{
	bool wake = false;

	/*
	 * Wait for invalidations in flight that already called back: once
	 * this returns, any invalidation that saw the watch NEW set raced.
	 */
	mmu_interval_read_begin(&ctx->pmni);
	spin_lock(&ctx->lock);
	if (w->raced)
		wake = mw_note_locked(ctx, w, w->start, w->end,
				      MMUWATCH_REASON_CLEAR);
	WRITE_ONCE(ctx->words[w->slot], w->token);
	w->state = MW_W_ACTIVE;
	ctx->nr_watched++;
	r->slot = w->slot;
	r->token = w->token;
	spin_unlock(&ctx->lock);
	if (w->raced)
		mw_stat_inc(MW_STAT_EV_CLEAR);
	if (wake)
		mw_ring_wake(ctx);
	return 0;
}

int mw_watch_one(struct mw_ctx *ctx, struct mmuwatch_range *r)
{
	unsigned long start, end, seq;
	bool killed = false, wake = false;
	struct mw_watch *w;
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

	ret = mw_ctx_ensure_ready(ctx);
	if (ret)
		return ret;
	if (persistent) {
		if (!READ_ONCE(mw_max_persistent))
			return -ENOSPC;
		ret = mw_pmni_ensure(ctx);
		if (ret)
			return ret;
	}
	/* The user's dead watches count until reaped: reap ours first. */
	ret = mw_charge_watch(ctx, persistent, false);
	if (ret) {
		mw_reap_own(ctx);
		ret = mw_charge_watch(ctx, persistent, true);
	}
	if (ret)
		goto out_trace;
	ret = -ENOMEM;
	w = kmem_cache_zalloc(mw_watch_cache, MW_GFP);
	if (!w)
		goto out_uncharge;
	w->ctx = ctx;
	w->start = start;
	w->end = end;
	w->cookie = r->cookie;
	w->persistent = persistent;
	ret = mw_take_slot(ctx, w);
	if (ret) {
		kmem_cache_free(mw_watch_cache, w);
		goto out_uncharge;
	}
	atomic_long_inc(&mw_nr_watches);
	mw_stat_inc(MW_STAT_WATCHES_TOTAL);
	if (persistent) {
		ret = mw_watch_persist(ctx, w, r);
		goto out_trace;
	}

	ret = mmu_interval_notifier_insert(&w->mni, ctx->mm, start,
					   end - start, &mw_mni_ops);
	if (ret) {
		spin_lock(&ctx->lock);
		list_del(&w->node);
		spin_unlock(&ctx->lock);
		mw_free_watch(ctx, w);
		goto out_trace;
	}

	/*
	 * Close the race with an invalidation that began before the insert:
	 * read_begin() waits for it to end, and the word only becomes valid
	 * if no invalidation was recorded since.
	 */
	seq = mmu_interval_read_begin(&w->mni);
	spin_lock(&ctx->lock);
	if (w->state == MW_W_NEW && mmu_interval_read_retry(&w->mni, seq)) {
		wake = mw_kill_locked(ctx, w, start, end,
				      MMUWATCH_REASON_CLEAR);
		killed = true;
	}
	if (w->state == MW_W_NEW) {
		WRITE_ONCE(ctx->words[w->slot], w->token);
		w->state = MW_W_ACTIVE;
	} else {
		/* Killed while being inserted: hand it to the reaper now. */
		mw_bury_locked(ctx, w);
	}
	ctx->nr_watched++;
	r->slot = w->slot;
	r->token = w->token;
	spin_unlock(&ctx->lock);

	if (killed)
		mw_stat_inc(MW_STAT_EV_CLEAR);
	if (wake)
		mw_ring_wake(ctx);
	ret = 0;
	goto out_trace;

out_uncharge:
	mw_uncharge_watch(ctx, persistent);
out_trace:
	trace_mmuwatch_watch(r->cookie, ret ? U32_MAX : r->slot,
			     ret ? 0 : r->token, start, end, persistent, ret);
	return ret;
}

int mw_unwatch_one(struct mw_ctx *ctx, const struct mmuwatch_unwatch *u)
{
	struct mw_watch *w = NULL;
	u32 slot = u->slot;

	if (u->reserved)
		return -EINVAL;
	if (!mw_ctx_ready(ctx))
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
	w->state = MW_W_DYING;
	list_del_init(&w->node);
	spin_unlock(&ctx->lock);

	/* A persistent watch has no notifier of its own. */
	if (!w->persistent)
		mmu_interval_notifier_remove(&w->mni);
	trace_mmuwatch_unwatch(w->cookie, slot, u->token, w->start, w->end,
			       w->persistent, 0);
	mw_free_watch(ctx, w);
	mw_stat_inc(MW_STAT_UNWATCHES);
	return 0;
}

/* Context teardown: no ioctl can run any more (the file is being released). */
void mw_watches_release(struct mw_ctx *ctx)
{
	unsigned long n = 0, np = 0;
	struct mw_watch *w, *tmp;
	LIST_HEAD(list);

	/*
	 * From here on the callbacks leave every watch of this context alone
	 * (no word, no event, no list move), so the watches can be taken off
	 * the lists in O(1) under the lock and removed without it.
	 */
	spin_lock(&ctx->lock);
	ctx->closing = true;
	list_splice_init(&ctx->live, &list);
	list_splice_init(&ctx->dead, &list);
	list_splice_init(&ctx->persist, &list);
	spin_unlock(&ctx->lock);

	/* Finishes whatever the work already took off ctx->dead. */
	cancel_delayed_work_sync(&ctx->reap_work);
	if (ctx->pmni_on)
		mmu_interval_notifier_remove(&ctx->pmni);

	list_for_each_entry_safe(w, tmp, &list, node) {
		if (w->persistent)
			np++;
		else
			mmu_interval_notifier_remove(&w->mni);
		kmem_cache_free(mw_watch_cache, w);
		n++;
		/* A context can hold millions of watches. */
		cond_resched();
	}
	atomic_long_sub(n, &mw_nr_watches);
	mw_user_uncharge(ctx, MW_U_WATCHES, n);
	mw_user_uncharge(ctx, MW_U_PERSISTENT, np);
}
