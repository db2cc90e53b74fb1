// SPDX-License-Identifier: BSD-3-Clause
/*
 * Small pages: one 64 KiB unit of blocks of one size class, owned by one
 * thread's heap. The owner's fast paths (alloc.h) pop and push the page's
 * free list; everything that changes which list a page is on happens here,
 * with the heap's lock held (see fork in alloc_heap.c).
 *
 * A page whose blocks are all handed out is "full": it leaves the heap's
 * lists and comes back to the avail list only once an eighth of it is free
 * again. Putting it back at its first freed block would make the next
 * allocations of its class take it, get one block and come back here, once
 * per block (larson-like churn). The threshold is folded into the page's
 * `lo` so the owner's inline free notices the crossing with the same
 * compare it already makes.
 */
#include <stdatomic.h>

#include "hooks/alloc_int.h"

MWH_HIDDEN struct mw_page mwh_empty_page = {.lo = MW_LO_NEVER};

/* The `used` count at which a full page is worth allocating from again. */
static uint32_t mwh_full_lo(const struct mw_page *pg)
{
	uint32_t thresh = pg->capacity / 8 ? pg->capacity / 8 : 1;

	return pg->capacity - thresh + 1;
}

static void mwh_page_set_lo(struct mw_page *pg)
{
	if (pg->has_aligned)
		pg->lo = MW_LO_NEVER;
	else
		pg->lo = pg->full ? mwh_full_lo(pg) : 1;
}

void mwh_page_set_aligned(struct mw_page *pg)
{
	pg->has_aligned = 1;
	pg->lo = MW_LO_NEVER;
}

/*
 * Thread the next blocks of a page onto its (empty) free list, about a
 * memory page's worth at a time: a page's blocks are touched only as they
 * are needed, so a size class used for a few blocks costs a few KiB of
 * RSS, not 64. clean_from counts the blocks threaded so far.
 */
static int mwh_page_extend(struct mw_page *pg)
{
	size_t bs = pg->block, n = MW_PAGE / bs ? MW_PAGE / bs : 1;
	char *b, *end;
	void **link = &pg->free;

	if (pg->clean_from >= pg->capacity)
		return 0;
	if (n > pg->capacity - pg->clean_from)
		n = pg->capacity - pg->clean_from;
	b = (char *)mw_page_addr(pg) + (size_t)pg->clean_from * bs;
	end = b + n * bs;
	for (; b < end; b += bs) {
		*link = b;
		link = (void **)b;
	}
	*link = NULL;
	pg->clean_from += (uint32_t)n;
	return 1;
}

static struct mw_page *mwh_small_page_init(struct mw_heap *h, unsigned c,
					   struct mw_page *pg)
{
	size_t bs = mw_small_size(c);

	pg->kind = MW_KIND_SMALL;
	pg->cls = (uint8_t)c;
	pg->block = (uint32_t)bs;
	pg->used = 0;
	pg->full = 0;
	pg->has_aligned = 0;
	pg->capacity = (uint32_t)(MW_UNIT / bs);
	pg->clean_from = 0; /* blocks threaded so far (mwh_page_extend) */
	pg->free = NULL;
	mwh_page_extend(pg);
	mwh_page_set_lo(pg);
	pg->heap = h; /* last: from now on the owner's */
	return pg;
}

void *mwh_block_start(struct mw_page *pg, void *p)
{
	uintptr_t data = mw_page_addr(pg);

	return (void *)(data + ((uintptr_t)p - data) / pg->block * pg->block);
}

/* Free by the owner: p is a block start. */
void mwh_small_free_local(struct mw_heap *h, struct mw_page *pg, void *p)
{
	*(void **)p = pg->free;
	pg->free = p;
	pg->used--;
	if (pg->full && pg->used < mwh_full_lo(pg)) {
		pg->full = 0;
		mwh_page_set_lo(pg);
		mwh_bin_push(&h->avail[pg->cls], pg);
	}
	if (pg->used == 0 && h->cur[pg->cls] != pg) {
		mwh_bin_unlink(&h->avail[pg->cls], pg);
		pg->cls = 0; /* now a one-unit span (large class 0) */
		/* given back by mwh_heap_unlock_put(), after the lock */
		pg->next = h->pending;
		h->pending = pg;
	}
}

/* Drop the heap's lock, then give back the pages that became empty under
 * it (giving back may release memory: no system call under the lock). A
 * fork child that sees a page on the list but not yet given back never
 * gives it back: memory lost to the child, nothing handed out twice. */
void mwh_heap_unlock_put(struct mw_heap *h)
{
	struct mw_page *pg;

	mwh_heap_unlock(h);
	while ((pg = h->pending) != NULL) {
		h->pending = pg->next;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		mwh_span_put(h, pg, 0);
	}
}

/* Give all but `keep` blocks of a class's stack back to their pages: ours
 * directly, other heaps' through the batched remote lists. */
void mwh_stack_flush(struct mw_heap *h, unsigned c, uint32_t keep)
{
	while (h->stn[c] > keep) {
		uint32_t k = h->stn[c] - 1;
		void *b = h->stk[c][k];
		struct mw_page *pg = mw_page_of(b);

		__atomic_store_n(&h->stn[c], k, __ATOMIC_RELAXED);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		if (pg->heap == h)
			mwh_small_free_local(h, pg, b);
		else
			mwh_foreign_add(h, b);
	}
}

void mwh_stacks_init(struct mw_heap *h)
{
	unsigned c;

	for (c = 0; c < MW_NSMALL; c++) {
		size_t n = MW_STK_BYTES / mw_small_size(c);

		h->stcap[c] = (uint32_t)(n > MW_STK ? MW_STK : n < 2 ? 2 : n);
	}
}

static void mwh_remote_drain(struct mw_heap *h)
{
	void *b = atomic_exchange_explicit(&h->remote, NULL,
					   memory_order_acquire);

	while (b) {
		void *next = *(void **)b;

		mwh_small_free_local(h, mw_page_of(b), b);
		b = next;
	}
}

/*
 * Lending (heap's lock held). A class of blocks over MW_LEND_MIN bytes
 * whose current page has no free block takes a free block of a bigger
 * class, at most MW_LEND_PCT % bigger, before it touches fresh memory:
 * from this thread's stack of that class, else from its current or first
 * available page. Each such class holds few blocks per page, and without
 * lending each kept its own high-water mark of touched memory: glibc
 * reuses a freed chunk for any smaller size, we did not (git log -p on
 * this repository: peak RSS 14.8 MB, 13.9 with lending, glibc 11.8).
 * A lent block stays its page's block: freeing it needs nothing new.
 */
#ifndef MW_LEND_PCT
#define MW_LEND_PCT 50
#endif
#define MW_LEND_MIN 1024

static void *mwh_small_lend(struct mw_heap *h, unsigned c)
{
	size_t most = mw_small_size(c) * (100 + MW_LEND_PCT) / 100;
	unsigned k, end;
	struct mw_page *pg;
	void *b;

	for (end = c + 1; end < MW_NSMALL && mw_small_size(end) <= most; end++)
		;
	for (k = c + 1; k < end; k++) {
		uint32_t n = h->stn[k];

		if (n)
			return mw_stk_take(h, k, n);
	}
	for (k = c + 1; k < end; k++) {
		pg = h->cur[k]->free ? h->cur[k] : h->avail[k];
		if (!pg || !pg->free)
			continue;
		b = mw_page_take(pg);
		/* an available page with nothing left to hand out is full */
		if (!pg->free && pg != h->cur[k] &&
		    pg->clean_from >= pg->capacity) {
			mwh_bin_unlink(&h->avail[k], pg);
			pg->full = 1;
			mwh_page_set_lo(pg);
		}
		return b;
	}
	return NULL;
}

/*
 * With the heap's lock held. A new page, when one is needed, is *spare
 * (taken over, *spare set to NULL); without one, NULL is returned with the
 * class left on the empty page, and the caller gets a span outside the lock
 * (getting one may commit memory: no system call under the lock) and calls
 * again.
 */
void *mwh_small_alloc_slow(struct mw_heap *h, unsigned c,
			   struct mw_page **spare)
{
	struct mw_page *pg;
	void *b;

	if (atomic_load_explicit(&h->remote, memory_order_relaxed))
		mwh_remote_drain(h);
	pg = h->cur[c];
	if (!pg->free && mw_small_size(c) > MW_LEND_MIN &&
	    (b = mwh_small_lend(h, c)) != NULL)
		return b;
	if (!pg->free && (pg == &mwh_empty_page || !mwh_page_extend(pg))) {
		if (pg != &mwh_empty_page) { /* every block handed out */
			pg->full = 1;
			mwh_page_set_lo(pg);
		}
		pg = h->avail[c];
		if (pg) {
			mwh_bin_unlink(&h->avail[c], pg);
		} else if (*spare) {
			pg = mwh_small_page_init(h, c, *spare);
			*spare = NULL;
		}
		if (!pg) {
			h->cur[c] = &mwh_empty_page;
			return NULL;
		}
		h->cur[c] = pg;
		if (!pg->free)
			mwh_page_extend(pg);
	}
	return mw_page_take(pg);
}
