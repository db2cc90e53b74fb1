// SPDX-License-Identifier: BSD-3-Clause
/*
 * The hit path, mw_rcache_get and mw_rcache_put (no lock, no syscall, no
 * atomic read-modify-write): the page index (index.c) names a candidate
 * region, its state word validates it and a thread-local hold (refs.c)
 * references it, then one load of its validity word (kernel mode; hooks
 * mode first applies pending hook releases) confirms it. A local put is a
 * plain store. Before any of it, every get tests the fail-closed rule
 * (guard.c) with the library's state and the checkpoint gate: one word,
 * mwu_gate. Everything unusual leaves through a noinline slow path: the
 * seqlock-validated tree walk, then a miss under the lock (miss.c).
 */
#include "rcache/internal.h"

/* Drop a thread-local reference taken through rc: plain stores, then look
 * at the flags; a reclaimer that saw our hold expects us to queue the
 * region (for the hold's generation: a no-op once r was reused). */
static inline void local_put(struct mwr_rcache *rc, struct mwr_hold *h,
			     struct mwr_region *r)
{
	uint32_t n = h->refs - 1;

	__atomic_store_n(&h->refs, n, __ATOMIC_RELEASE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (mwu_unlikely(!n && (mwr_ld_state(r) & MWR_INVALID)))
		mwr_flag_queue(rc, r, h->gen, 0);
}

static __attribute__((noinline)) void hit_invalid(struct mwr_rcache *rc,
						  struct mwr_region *r,
						  struct mwr_hold *h)
{
	mwr_flag_queue(rc, r, mwr_ld_state(r) >> MWR_GEN_SHIFT, MWR_INVALID);
	local_put(rc, h, r);
}

static int get_slow(struct mwr_rcache *rc, uintptr_t s, uintptr_t e,
		    struct mw_region **out);

/*
 * The rare endings of a fast hit, out of line and entered by tail calls:
 * the fast path below then makes no call at all and no value of it has
 * to live across one (with calls, ~20 instructions of saves and restores
 * were measured; gcc still saves three registers, for their number).
 * Each ends the get itself.
 */
/* The state changed under the local reference: back off, go slow. */
static __attribute__((noinline)) int hit_back_off(struct mwr_rcache *rc,
						  struct mwr_region *r,
						  struct mwr_hold *h, uintptr_t s,
						  uintptr_t e,
						  struct mw_region **out)
{
	local_put(rc, h, r);
	return get_slow(rc, s, e, out);
}

/* Hooks releases to apply first, or an invalid word: the full check
 * (mwu_watch_valid drains), then finish. */
static __attribute__((noinline)) int hit_finish(struct mwr_rcache *rc,
						struct mwr_region *r,
						struct mwr_hold *h, uintptr_t s,
						uintptr_t e,
						struct mw_region **out)
{
	if (!MWR_TEST(rc, MW_RCACHE_F_TEST_NO_INVALIDATE) &&
	    !mwu_watch_valid(&r->watch)) {
		hit_invalid(rc, r, h);
		return get_slow(rc, s, e, out);
	}
	if (!__atomic_load_n(&r->referenced, __ATOMIC_RELAXED))
		__atomic_store_n(&r->referenced, 1, __ATOMIC_RELAXED);
	mwu_count_hit();
	*out = &r->pub;
	return 0;
}

/*
 * The common hit, kept small: the page index, a local reference (plain
 * stores), the state re-read, the validity word. Anything unusual leaves
 * by a tail call: get_slow() (try_hit() and the miss), or the rare endings
 * above. The slot is only a hint: the state word (flags, generation) read
 * before and after the range fields and the hold decides, as every field
 * is fixed while the generation stands. The validity test is
 * mwu_watch_valid() without its drain call (hit_finish() does that).
 */
static inline __attribute__((always_inline)) int
hit_fast(struct mwr_rcache *rc, uintptr_t s, uintptr_t e,
	 struct mw_region **out, int gated)
{
	struct mwr_thr *t = mwr_thr;
	struct mwr_region *r;
	struct mwr_hold *h;
	uint64_t st;
	uint32_t gen;

	/* mwr_local_ok is in the gate, tested by the caller unless gated. */
	if (mwu_unlikely(!t || (gated && !mwr_local_ok)))
		return get_slow(rc, s, e, out);
	r = mwr_index_find(&rc->index, s);
	if (mwu_unlikely(!r))
		return get_slow(rc, s, e, out);
	st = mwr_ld_state(r);
	if (mwu_unlikely((st & (MWR_INVALID | MWR_FREE | MWR_INTREE)) != MWR_INTREE))
		return get_slow(rc, s, e, out);
	if (mwu_unlikely(__atomic_load_n(&r->rc, __ATOMIC_RELAXED) != rc ||
			 __atomic_load_n(&r->start, __ATOMIC_RELAXED) > s ||
			 __atomic_load_n(&r->end, __ATOMIC_RELAXED) < e))
		return get_slow(rc, s, e, out);
	gen = (uint32_t)(st >> MWR_GEN_SHIFT);
	h = mwr_hold_of(t, r);
	/* An empty entry is claimed without looking at whose it was: with
	 * more regions than entries, a compare there mispredicts (10k
	 * regions: 17.5 -> 16.3 ns per get+put; 1: 8.75 -> 8.25). */
	if (mwu_likely(!h->refs)) {
		__atomic_store_n(&h->r, r, __ATOMIC_RELAXED);
		__atomic_store_n(&h->gen, gen, __ATOMIC_RELAXED);
		__atomic_store_n(&h->refs, 1, __ATOMIC_RELAXED);
	} else {
		if (h->r != r || h->gen != gen)
			return get_slow(rc, s, e, out);
		__atomic_store_n(&h->refs, h->refs + 1, __ATOMIC_RELAXED);
	}
	/* The barrier of a reclaimer stands in for a fence here (refs.c);
	 * the field loads above stay before the re-read (acquire). */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (mwu_unlikely((mwr_ld_state(r) ^ st) & ~(MWR_COUNT_MASK | MWR_QUEUED)))
		return hit_back_off(rc, r, h, s, e, out);
	if (!MWR_TEST(rc, MW_RCACHE_F_TEST_NO_INVALIDATE) &&
	    mwu_unlikely(__atomic_load_n(&mwu_fast.head, __ATOMIC_ACQUIRE) !=
			 __atomic_load_n(&mwu_fast.applied, __ATOMIC_RELAXED) ||
			 __atomic_load_n(__atomic_load_n(&r->watch.word,
							 __ATOMIC_ACQUIRE),
					 __ATOMIC_ACQUIRE) != r->watch.token))
		return hit_finish(rc, r, h, s, e, out);
	/* CLOCK bit: racy by design (a lost update costs an eviction
	 * choice), relaxed atomics say so. */
	if (!__atomic_load_n(&r->referenced, __ATOMIC_RELAXED))
		__atomic_store_n(&r->referenced, 1, __ATOMIC_RELAXED);
	/* Linked when this thread's hold table was made (refs.c). */
	__atomic_store_n(&mwu_tstat.hits, mwu_tstat.hits + 1, __ATOMIC_RELAXED);
	*out = &r->pub;
	return 0;
}

/*
 * Lock-free hit the slow way: the seqlock-validated tree walk with an
 * atomic reference (regions the index does not point at for s: overlaps,
 * huge regions). What it finds goes into the index when the cache lock is
 * held or free (writers of the index hold it).
 */
static __attribute__((noinline)) struct mwr_region *
try_hit(struct mwr_rcache *rc, uintptr_t s, uintptr_t e,
	struct mwr_rcache *locked)
{
	struct mwr_region *r;
	int tries, ok;

	for (tries = 0; tries < 4; tries++) {
		uint64_t st;

		r = mwr_tree_find(&rc->tree, s, e, &ok);
		if (!ok)
			continue;
		if (!r)
			return NULL;
		st = mwr_ld_state(r);
		do {
			if ((st & (MWR_INVALID | MWR_FREE)) || !(st & MWR_INTREE))
				goto again;
		} while (!mwr_cas_state(r, &st, st + 1));
		/* Held: its fields are stable now. Was it reused meanwhile? */
		if (r->rc != rc || r->start > s || r->end < e) {
			mwr_drop_known(r, rc, locked);
			continue;
		}
		if (locked == rc) {
			mwr_index_publish(&rc->index, r, s);
		} else if (!locked && !pthread_mutex_trylock(&rc->lock)) {
			if (mwr_ld_state(r) & MWR_INTREE)
				mwr_index_publish(&rc->index, r, s);
			pthread_mutex_unlock(&rc->lock);
		}
		goto validate;
again:
		;
	}
	return NULL;
validate:
	if (!MWR_TEST(rc, MW_RCACHE_F_TEST_NO_INVALIDATE) &&
	    mwu_unlikely(!mwu_watch_valid(&r->watch))) {
		mwr_flag_queue(rc, r, mwr_ld_state(r) >> MWR_GEN_SHIFT, MWR_INVALID);
		mwr_drop_known(r, rc, locked);
		return NULL;
	}
	/* CLOCK bit: racy by design (a lost update costs an eviction
	 * choice), relaxed atomics say so. */
	if (!__atomic_load_n(&r->referenced, __ATOMIC_RELAXED))
		__atomic_store_n(&r->referenced, 1, __ATOMIC_RELAXED);
	return r;
}

static __attribute__((noinline)) int get_slow(struct mwr_rcache *rc,
					      uintptr_t s, uintptr_t e,
					      struct mw_region **out)
{
	struct mwr_region *r;
	int ret = 0;

	/* This thread's hold table, for the next hits' local references. */
	(void)mwr_thr_get();
	if (mwu_likely(mwu_core.source != MW_SOURCE_NONE)) {
		r = try_hit(rc, s, e, NULL);
		if (r) {
			mwu_count_hit();
			*out = &r->pub;
			return 0;
		}
		mwu_helper_start();
	}
	/* Miss: bounded deferred work first, then look again under the lock. */
	mwu_progress_round(MWR_DRAIN_PER_CALL, 0);
	pthread_mutex_lock(&rc->lock);
	if (mwu_cr_gated())
		return mwr_get_after_checkpoint(rc, s, e, out);
	mwr_process_invalid(rc, MWR_DRAIN_PER_CALL);
	r = mwu_core.source != MW_SOURCE_NONE ? try_hit(rc, s, e, rc) : NULL;
	if (r)
		mwu_count_hit();
	else
		ret = mwr_miss(rc, s, e, &r, 1);
	pthread_mutex_unlock(&rc->lock);
	if (!ret)
		*out = &r->pub;
	return ret;
}

/* Not initialised yet (or finalised): initialise, then the get proper. A
 * tail call, as the ones above: mw_rcache_get itself calls nothing. */
static __attribute__((noinline)) int get_not_ready(struct mw_rcache *rc,
						   const void *addr, size_t len,
						   unsigned flags,
						   struct mw_region **out)
{
	int ret = mwu_ready_slow();

	return ret ? ret : mw_rcache_get(rc, addr, len, flags, out);
}

/* Quiesced for a checkpoint: block or fail, then the get proper (again
 * from the top: the gate may close once more). Out of line and entered by
 * a tail call, so that mw_rcache_get needs no stack frame. */
static __attribute__((noinline)) int get_gated(struct mw_rcache *rc,
					       const void *addr, size_t len,
					       unsigned flags,
					       struct mw_region **out)
{
	int ret = mwu_cr_wait();

	return ret ? ret : mw_rcache_get(rc, addr, len, flags, out);
}

/* Validates what mw_rcache_get() was given; 0 when all is well. */
static inline __attribute__((always_inline)) int
get_args(struct mwr_rcache *rc, const void *addr, size_t len, unsigned flags,
	 struct mw_region **out)
{
	int ret;

	if (!rc)	/* mwr_check_rc() without its mwu_ready() call */
		return MW_EINVAL;
	if (rc->magic != MWR_MAGIC)
		return MW_EFOREIGN;
	if (!out)
		return MW_EINVAL;
	*out = NULL;
	ret = mwu_check_range(addr, len);
	if (ret)
		return ret;
	if (flags & ~MW_GET_F_MASK)
		return MW_EFLAGS;
	if (rc->forked)
		return MW_EFORKED;
	return 0;
}

/* The gate word is not 0: test each word it sums, in order. Out of line
 * and entered by a tail call, as the ones above. */
static __attribute__((noinline)) int get_gate_shut(struct mw_rcache *rc_,
						   const void *addr, size_t len,
						   unsigned flags,
						   struct mw_region **out)
{
	struct mwr_rcache *rc = (struct mwr_rcache *)rc_;
	uintptr_t s = (uintptr_t)addr;
	int ret;

	if (__atomic_load_n(&mwu_core.state, __ATOMIC_ACQUIRE) != MWU_READY)
		return get_not_ready(rc_, addr, len, flags, out);
	ret = get_args(rc, addr, len, flags, out);
	if (ret)
		return ret;
	/* Quiesced for a checkpoint: block or fail. */
	if (mwu_cr_gated())
		return get_gated(rc_, addr, len, flags, out);
	/* Is caching still safe? (guard.c) */
	if (!mwr_guaranteed() && !MWR_TEST(rc, MW_RCACHE_F_TEST_NO_GUARANTEE))
		return mwr_get_uncached(rc, s, s + len, out);
	/* Source none: nothing is ever indexed (mwr_miss() registers
	 * transient regions only), so the fast path finds nothing and goes
	 * slow by itself; no test of the source here. */
	return hit_fast(rc, s, s + len, out, 1);
}

MW_API int mw_rcache_get(struct mw_rcache *rc_, const void *addr, size_t len,
			 unsigned flags, struct mw_region **out)
{
	struct mwr_rcache *rc = (struct mwr_rcache *)rc_;
	uintptr_t s = (uintptr_t)addr;
	int ret;

	/* Ready, not quiesced, guaranteed, local references on: one load
	 * (mwu_gate, libuser/internal.h). */
	if (mwu_unlikely(__atomic_load_n(&mwu_gate, __ATOMIC_ACQUIRE)))
		return get_gate_shut(rc_, addr, len, flags, out);
	ret = get_args(rc, addr, len, flags, out);
	if (ret)
		return ret;
	return hit_fast(rc, s, s + len, out, 0);
}

static __attribute__((noinline)) int put_slow(struct mwr_rcache *rc,
					      struct mwr_region *r)
{
	uint64_t st = mwr_ld_state(r);

	if (st & MWR_FREE)
		return MW_EFOREIGN;
	if (mwu_likely(!mwr_drop_ref(r, rc, NULL)))
		return 0;
	/* No atomic reference: another thread's local one (a put from a
	 * different thread than the get), or a double put. Count all. No
	 * barrier: a legitimate put of another thread's reference happens
	 * after that thread's get (the application handed the region over),
	 * so the hold is visible to us; a reclaimer fences for itself. */
	pthread_mutex_lock(&rc->lock);
	if (mwr_busy(r) <= 0) {
		pthread_mutex_unlock(&rc->lock);
		return MW_EFOREIGN;
	}
	__atomic_fetch_add(&r->debt, 1, __ATOMIC_ACQ_REL);
	st = mwr_ld_state(r);
	if (!(st & (MWR_INTREE | MWR_QUEUED | MWR_FREE)))
		mwr_last_ref(r, rc, st >> MWR_GEN_SHIFT, rc);
	pthread_mutex_unlock(&rc->lock);
	return 0;
}

/* As get_not_ready(), for put. */
static __attribute__((noinline)) int put_not_ready(struct mw_rcache *rc,
						   struct mw_region *pub)
{
	int ret = mwu_ready_slow();

	return ret ? ret : mw_rcache_put(rc, pub);
}

/* local_put()'s rare ending, by a tail call (mw_rcache_put calls nothing). */
static __attribute__((noinline)) int
put_queue(struct mwr_rcache *rc, struct mwr_region *r, struct mwr_hold *h)
{
	mwr_flag_queue(rc, r, h->gen, 0);
	return 0;
}

MW_API int mw_rcache_put(struct mw_rcache *rc_, struct mw_region *pub)
{
	struct mwr_rcache *rc = (struct mwr_rcache *)rc_;
	struct mwr_thr *t = mwr_thr;
	struct mwr_region *r;

	if (mwu_unlikely(__atomic_load_n(&mwu_core.state, __ATOMIC_ACQUIRE) !=
			 MWU_READY))
		return put_not_ready(rc_, pub);
	if (!rc)	/* mwr_check_rc() without its mwu_ready() call */
		return MW_EINVAL;
	if (rc->magic != MWR_MAGIC)
		return MW_EFOREIGN;
	if (!pub)
		return MW_EINVAL;
	if (!mwr_pool_contains(pub))
		return MW_EFOREIGN;
	r = mwr_of_pub(pub);
	if (__atomic_load_n(&r->rc, __ATOMIC_RELAXED) != rc)
		return MW_EFOREIGN;
	/* This thread's local reference? local_put(), inline. */
	if (mwu_likely(t != NULL)) {
		struct mwr_hold *h = mwr_hold_of(t, r);

		if (h->r == r && h->refs &&
		    h->gen == (uint32_t)(mwr_ld_state(r) >> MWR_GEN_SHIFT)) {
			uint32_t n = h->refs - 1;

			__atomic_store_n(&h->refs, n, __ATOMIC_RELEASE);
			__atomic_signal_fence(__ATOMIC_SEQ_CST);
			if (mwu_unlikely(!n && (mwr_ld_state(r) & MWR_INVALID)))
				return put_queue(rc, r, h);
			return 0;
		}
	}
	return put_slow(rc, r);
}

