// SPDX-License-Identifier: GPL-2.0
/*
 * mmuwatch: the event ring. The kernel is the only producer and keeps its
 * own head, flags and lost count; the user-written tail is read, never
 * trusted: a tail that makes no sense means "full" to the producer.
 */
#include <linux/bitops.h>
#include <linux/poll.h>
#include <linux/sched/signal.h>
#include <linux/uaccess.h>
#include "mmuwatch.h"
#include "trace.h"

/*
 * Called with ctx->lock held; never sleeps, never allocates. Returns true
 * when readers may be asleep waiting for this: the reader had consumed
 * everything before this event, or the overflow flag was just set. Later
 * events of a non-empty ring need no wake-up (a reader woken by the first
 * one sees them), as with a pipe.
 */
bool mmuwatch_ring_push(struct mmuwatch_ctx *ctx,
			const struct mmuwatch_watch *w,
			unsigned long start, unsigned long end, u32 reason)
{
	struct mmuwatch_ring *ring = ctx->ring;
	struct mmuwatch_event *ev;
	/* Pairs with the consumer's release: it is done with older slots. */
	u32 tail = smp_load_acquire(&ring->tail);
	u32 prev = ctx->head;

	if (prev - tail >= ctx->ring_entries) {
		bool first = !(ctx->rflags & MMUWATCH_RING_F_OVERFLOW);

		ctx->lost++;
		ctx->nr_lost++;
		mmuwatch_stat_inc(MW_STAT_LOST);
		if (first) {
			ctx->rflags |= MMUWATCH_RING_F_OVERFLOW;
			mmuwatch_stat_inc(MW_STAT_OVERFLOWS);
			trace_mmuwatch_ring_overflow(ctx->ring_entries,
						     ctx->head, tail);
		}
		WRITE_ONCE(ring->lost, ctx->lost);
		WRITE_ONCE(ring->flags, ctx->rflags);
		return first;
	}
	ev = &ctx->events[ctx->head & (ctx->ring_entries - 1)];
	ev->cookie = w->cookie;
	ev->start = start;
	ev->end = end;
	ev->reason = reason;
	ev->slot = w->slot;
	/* Event contents before the index that publishes them. */
	smp_store_release(&ctx->head, prev + 1);
	/* Same ordering for consumers of the mapped ring. */
	smp_store_release(&ring->head, prev + 1);
	/*
	 * Was the ring empty? Decided on the tail read after publishing,
	 * never on the one above: a reader can catch up between the two,
	 * find no event (head not yet published) and go to sleep, and no
	 * wake-up would come (nor for any later event, the ring being
	 * non-empty from then on). Pairs with the full barrier a reader
	 * has between its tail store and its head check before sleeping
	 * (prepare_to_wait_event() in read(),
	    mmuwatch_poll() after poll_wait()):
	 * either the reader sees this event, or this sees its tail.
	 */
	smp_mb();
	return READ_ONCE(ring->tail) == prev;
}

/* One wake-up per callback; none when nobody sleeps in read() or poll(). */
void mmuwatch_ring_wake(struct mmuwatch_ctx *ctx)
{
	/* wq_has_sleeper() orders the ring update before the check. */
	if (wq_has_sleeper(&ctx->wq))
		wake_up_interruptible_poll(&ctx->wq, EPOLLIN | EPOLLRDNORM);
}

/* Pending events, or -EIO when the user tail is corrupt. */
static int mmuwatch_ring_pending(struct mmuwatch_ctx *ctx, u32 *tail)
{
	/* Pairs with the producer's release: events up to head are written. */
	u32 head = smp_load_acquire(&ctx->head);
	u32 n;

	*tail = READ_ONCE(ctx->ring->tail);
	n = head - *tail;
	return n > ctx->ring_entries ? -EIO : n;
}

/*
 * mmuwatch_ring_pending() for read() and poll(). A corrupt tail is written by
 * user space without the kernel noticing, so the first reader to find it
 * wakes every other reader sleeping in read() or poll(): they then get
 * EIO or EPOLLERR at once instead of at the next event. Once per episode;
 * a sane tail seen here (before sleeping) re-arms it. No lock is held, and
 * poll's own wait entry may be woken too, which is harmless.
 */
static int mmuwatch_ring_check(struct mmuwatch_ctx *ctx, u32 *tail)
{
	int n = mmuwatch_ring_pending(ctx, tail);

	if (n < 0) {
		if (!test_and_set_bit(MW_RING_TAIL_BAD, &ctx->ring_state))
			wake_up_interruptible_poll(&ctx->wq, EPOLLIN |
						   EPOLLRDNORM | EPOLLERR);
	} else if (test_bit(MW_RING_TAIL_BAD, &ctx->ring_state)) {
		clear_bit(MW_RING_TAIL_BAD, &ctx->ring_state);
	}
	return n;
}

static bool mmuwatch_ring_readable(struct mmuwatch_ctx *ctx)
{
	u32 tail;

	if (!mmuwatch_ctx_ready(ctx))
		return false;
	return mmuwatch_ring_pending(ctx, &tail) ||
	       (READ_ONCE(ctx->rflags) & MMUWATCH_RING_F_OVERFLOW);
}

__poll_t mmuwatch_ring_poll(struct mmuwatch_ctx *ctx)
{
	u32 tail;
	int n;

	if (!mmuwatch_ctx_ready(ctx))
		return 0;
	n = mmuwatch_ring_check(ctx, &tail);
	if (n < 0)
		return EPOLLIN | EPOLLRDNORM | EPOLLERR;
	if (n || (READ_ONCE(ctx->rflags) & MMUWATCH_RING_F_OVERFLOW))
		return EPOLLIN | EPOLLRDNORM;
	return 0;
}

/* Copy n events starting at tail; the ring may wrap once. */
static int mmuwatch_ring_copy(struct mmuwatch_ctx *ctx, char __user *buf,
			      u32 tail, u32 n)
{
	u32 idx = tail & (ctx->ring_entries - 1);
	u32 first = min(n, ctx->ring_entries - idx);
	size_t esz = sizeof(struct mmuwatch_event);

	if (copy_to_user(buf, &ctx->events[idx], first * esz))
		return -EFAULT;
	if (n > first &&
	    copy_to_user(buf + first * esz, ctx->events, (n - first) * esz))
		return -EFAULT;
	return 0;
}

/*
 * read(): whole events only. Pending events first; with none pending and
 * the overflow flag set, -EOVERFLOW (scan the words, then RESET_OVERFLOW).
 * Events in [tail, head) are never overwritten by the producer, so they
 * are copied without the spinlock.
 */
ssize_t mmuwatch_ring_read(struct mmuwatch_ctx *ctx, char __user *buf,
			   size_t count,
			   bool nonblock)
{
	size_t max = count / sizeof(struct mmuwatch_event);
	u32 tail;
	int n, ret;

	if (!max)
		return -EINVAL;
	if (mutex_lock_interruptible(&ctx->read_lock))
		return -ERESTARTSYS;
	for (;;) {
		n = 0;
		if (mmuwatch_ctx_ready(ctx)) {
			n = mmuwatch_ring_check(ctx, &tail);
			if (n)
				break;
			if (READ_ONCE(ctx->rflags) & MMUWATCH_RING_F_OVERFLOW) {
				n = -EOVERFLOW;
				break;
			}
		}
		if (nonblock) {
			n = -EAGAIN;
			break;
		}
		mutex_unlock(&ctx->read_lock);
		ret = wait_event_interruptible(ctx->wq,
					       mmuwatch_ring_readable(ctx));
		if (ret)
			return ret;
		if (mutex_lock_interruptible(&ctx->read_lock))
			return -ERESTARTSYS;
	}
	if (n > 0) {
		n = min_t(size_t, n, max);
		ret = mmuwatch_ring_copy(ctx, buf, tail, n);
		if (ret)
			n = ret;
		else
			/* Slots are reusable only after the copy. */
			smp_store_release(&ctx->ring->tail, tail + n);
	}
	mutex_unlock(&ctx->read_lock);
	return n > 0 ? (ssize_t)n * sizeof(struct mmuwatch_event) : n;
}

/* Clear the sticky flag, return and zero the lost count, repair the tail. */
u64 mmuwatch_ring_reset_overflow(struct mmuwatch_ctx *ctx)
{
	u64 lost;
	u32 tail;

	if (!mmuwatch_ctx_ready(ctx))
		return 0;
	spin_lock(&ctx->lock);
	lost = ctx->lost;
	ctx->lost = 0;
	ctx->rflags &= ~MMUWATCH_RING_F_OVERFLOW;
	WRITE_ONCE(ctx->ring->lost, 0);
	WRITE_ONCE(ctx->ring->flags, ctx->rflags);
	if (mmuwatch_ring_pending(ctx, &tail) < 0)
		WRITE_ONCE(ctx->ring->tail, ctx->head);
	clear_bit(MW_RING_TAIL_BAD, &ctx->ring_state);
	spin_unlock(&ctx->lock);
	return lost;
}
