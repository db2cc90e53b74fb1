// SPDX-License-Identifier: GPL-2.0
/*
 * mmuwatch: watches. One mmu_interval_notifier per watched range; the
 * invalidate callback flips the validity word and queues one event under
 * ctx->lock only, then hands the notifier to deferred work for removal.
 * A persistent watch only queues the event and stays active.
 */
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/poll.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include "mmuwatch.h"

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
	}
	*stat = MW_STAT_EV_OTHER;
	return MMUWATCH_REASON_CLEAR;
}

/* The reaper may free a dead watch, but not while WATCH still uses it. */
static void mw_bury_locked(struct mw_ctx *ctx, struct mw_watch *w)
{
	list_move_tail(&w->node, &ctx->dead);
	queue_work(mw_wq, &ctx->reap_work);
}

/* Called with ctx->lock held on a NEW or ACTIVE watch. */
static void mw_kill_locked(struct mw_ctx *ctx, struct mw_watch *w,
			   unsigned long start, unsigned long end, u32 reason)
{
	WRITE_ONCE(ctx->words[w->slot], w->token | MMUWATCH_WORD_INVALID);
	mw_ring_push(ctx, w, start, end, reason);
	ctx->nr_events++;
	if (w->state == MW_W_ACTIVE)
		mw_bury_locked(ctx, w);
	w->state = MW_W_DEAD;
}

/*
 * Called with ctx->lock held on a NEW or ACTIVE persistent watch: one event,
 * and the watch (and its word) stay as they are.
 */
static void mw_note_locked(struct mw_ctx *ctx, struct mw_watch *w,
			   unsigned long start, unsigned long end, u32 reason)
{
	mw_ring_push(ctx, w, start, end, reason);
	ctx->nr_events++;
}

/*
 * May run in any task (truncate by another process, the OOM reaper, exit),
 * possibly non-blockable: take only the spinlock, never sleep or allocate,
 * and always succeed.
 */
static bool mw_invalidate(struct mmu_interval_notifier *mni,
			  const struct mmu_notifier_range *range,
			  unsigned long cur_seq)
{
	struct mw_watch *w = container_of(mni, struct mw_watch, mni);
	struct mw_ctx *ctx = w->ctx;
	enum mw_stat stat;
	bool killed = false;
	u32 reason;

	reason = mw_classify(range->event, &stat);
	if (!reason) {
		/* Not an invalidation: leave the sequence alone too. */
		mw_stat_inc(stat);
		atomic64_inc(&ctx->nr_filtered);
		return true;
	}

	spin_lock(&ctx->lock);
	mmu_interval_set_seq(mni, cur_seq);
	if (!ctx->closing &&
	    (w->state == MW_W_NEW || w->state == MW_W_ACTIVE)) {
		if (w->persistent)
			mw_note_locked(ctx, w, max(range->start, w->start),
				       min(range->end, w->end), reason);
		else
			mw_kill_locked(ctx, w, max(range->start, w->start),
				       min(range->end, w->end), reason);
		killed = true;
	}
	spin_unlock(&ctx->lock);

	if (killed) {
		mw_stat_inc(stat);
		wake_up_interruptible_poll(&ctx->wq, EPOLLIN | EPOLLRDNORM);
	} else {
		/*
		 * One-shot: a dead, unwatched or closing watch never fires
		 * again. Counted apart from the filtered (non-invalidating)
		 * notifications.
		 */
		mw_stat_inc(MW_STAT_REPEAT_IGNORED);
	}
	return true;
}

static const struct mmu_interval_notifier_ops mw_mni_ops = {
	.invalidate = mw_invalidate,
};

/* The notifier is out of the tree: give the slot back and free. */
static void mw_free_watch(struct mw_ctx *ctx, struct mw_watch *w)
{
	spin_lock(&ctx->lock);
	ctx->slots[w->slot] = NULL;
	ctx->free_slots[ctx->nr_free++] = w->slot;
	if (w->persistent)
		ctx->nr_persistent--;
	spin_unlock(&ctx->lock);
	kmem_cache_free(mw_watch_cache, w);
	atomic_long_dec(&mw_nr_watches);
}

void mw_reap_work(struct work_struct *work)
{
	struct mw_ctx *ctx = container_of(work, struct mw_ctx, reap_work);
	struct mw_watch *w, *tmp;
	LIST_HEAD(list);

	spin_lock(&ctx->lock);
	list_splice_init(&ctx->dead, &list);
	spin_unlock(&ctx->lock);

	list_for_each_entry_safe(w, tmp, &list, node) {
		mmu_interval_notifier_remove(&w->mni);
		mw_free_watch(ctx, w);
		/* One munmap can kill millions of watches. */
		cond_resched();
	}
}

/* Take a free slot; a slot frees only after its notifier is removed. */
static int mw_take_slot(struct mw_ctx *ctx, struct mw_watch *w)
{
	bool flushed = false;

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
		if (flushed)
			return -ENOSPC;
		/* Invalidated watches may still hold slots: reap them now. */
		flush_work(&ctx->reap_work);
		flushed = true;
	}
	w->slot = ctx->free_slots[--ctx->nr_free];
	/* Next generation of this slot; old tokens never match again. */
	w->token = ((READ_ONCE(ctx->words[w->slot]) >> 1) + 1) << 1;
	w->state = MW_W_NEW;
	if (w->persistent)
		ctx->nr_persistent++;
	ctx->slots[w->slot] = w;
	list_add_tail(&w->node, &ctx->live);
	spin_unlock(&ctx->lock);
	return 0;
}

int mw_watch_one(struct mw_ctx *ctx, struct mmuwatch_range *r)
{
	unsigned long start, end, seq;
	struct mw_watch *w;
	bool killed = false;
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

	ret = mw_ctx_ensure_ready(ctx);
	if (ret)
		return ret;
	w = kmem_cache_zalloc(mw_watch_cache, MW_GFP);
	if (!w)
		return -ENOMEM;
	w->ctx = ctx;
	w->start = start;
	w->end = end;
	w->cookie = r->cookie;
	w->persistent = !!(r->flags & MMUWATCH_WATCH_F_PERSISTENT);
	ret = mw_take_slot(ctx, w);
	if (ret) {
		kmem_cache_free(mw_watch_cache, w);
		return ret;
	}
	atomic_long_inc(&mw_nr_watches);

	ret = mmu_interval_notifier_insert(&w->mni, ctx->mm, start,
					   end - start, &mw_mni_ops);
	if (ret) {
		spin_lock(&ctx->lock);
		list_del(&w->node);
		spin_unlock(&ctx->lock);
		mw_free_watch(ctx, w);
		return ret;
	}

	/*
	 * Close the race with an invalidation that began before the insert:
	 * read_begin() waits for it to end, and the word only becomes valid
	 * if no invalidation was recorded since.
	 */
	seq = mmu_interval_read_begin(&w->mni);
	spin_lock(&ctx->lock);
	if (w->state == MW_W_NEW && mmu_interval_read_retry(&w->mni, seq)) {
		if (w->persistent)
			mw_note_locked(ctx, w, start, end,
				       MMUWATCH_REASON_CLEAR);
		else
			mw_kill_locked(ctx, w, start, end,
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

	mw_stat_inc(MW_STAT_WATCHES_TOTAL);
	if (killed) {
		mw_stat_inc(MW_STAT_EV_CLEAR);
		wake_up_interruptible_poll(&ctx->wq, EPOLLIN | EPOLLRDNORM);
	}
	return 0;
}

int mw_unwatch_one(struct mw_ctx *ctx, const struct mmuwatch_unwatch *u)
{
	struct mw_watch *w;

	if (u->reserved)
		return -EINVAL;
	if (!mw_ctx_ready(ctx))
		return -ENOENT;

	spin_lock(&ctx->lock);
	w = u->slot < ctx->nr_words ? ctx->slots[u->slot] : NULL;
	if (!w || w->token != u->token || w->state != MW_W_ACTIVE) {
		spin_unlock(&ctx->lock);
		return -ENOENT;
	}
	/* Stale readers must see "changed" from now on. */
	WRITE_ONCE(ctx->words[w->slot], w->token | MMUWATCH_WORD_INVALID);
	w->state = MW_W_DYING;
	list_del_init(&w->node);
	spin_unlock(&ctx->lock);

	mmu_interval_notifier_remove(&w->mni);
	mw_free_watch(ctx, w);
	mw_stat_inc(MW_STAT_UNWATCHES);
	return 0;
}

/* Context teardown: no ioctl can run any more (the file is being released). */
void mw_watches_release(struct mw_ctx *ctx)
{
	struct mw_watch *w, *tmp;
	LIST_HEAD(list);

	/*
	 * From here on the callback leaves every watch of this context alone
	 * (no word, no event, no list move), so the watches can be taken off
	 * the lists in O(1) under the lock and removed without it.
	 */
	spin_lock(&ctx->lock);
	ctx->closing = true;
	list_splice_init(&ctx->live, &list);
	list_splice_init(&ctx->dead, &list);
	spin_unlock(&ctx->lock);

	/* Finishes whatever the work already took off ctx->dead. */
	cancel_work_sync(&ctx->reap_work);

	list_for_each_entry_safe(w, tmp, &list, node) {
		mmu_interval_notifier_remove(&w->mni);
		kmem_cache_free(mw_watch_cache, w);
		atomic_long_dec(&mw_nr_watches);
		/* A context can hold millions of watches. */
		cond_resched();
	}
}
