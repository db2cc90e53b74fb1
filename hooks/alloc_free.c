// SPDX-License-Identifier: BSD-3-Clause
/*
 * free: the slow path behind the inline fast path (alloc.h). A block of the
 * calling thread's heap goes back to its page under the heap's lock (the
 * page may change lists); another thread's block is pushed on that heap's
 * lock-free remote list, which its owner drains when it runs short; a large
 * block's span goes to the span cache (alloc_span.c); a pointer that is not
 * ours is glibc's.
 */
#include <stdatomic.h>

#include "hooks/alloc_int.h"
#include "hooks/raw.h"

/* glibc, for pointers that are not ours; weak so that a static link does not
 * pull glibc's malloc in next to ours. */
extern void __libc_free(void *) __attribute__((weak));

struct mw_page *mwh_large_span(struct mw_page *pg)
{
	if (pg->kind == MW_KIND_FWD)
		pg = pg->fwd;
	if (pg->kind != MW_KIND_LARGE || pg->state != MW_SPAN_INUSE) {
		mw_raw_write_str(
			2,
			"mmuwatch: free(): invalid pointer or double free\n");
		__builtin_trap();
	}
	return pg;
}

static void mwh_large_free(struct mw_page *pg, void *p)
{
	struct mw_page *s = mwh_large_span(pg);
	int release = mwh_g.release_on_free && mwh_g.release_on_free == p;

	if (release)
		mwh_g.release_on_free = NULL;
	mwh_span_put(mw_tls_heap, s, release);
}

/* Push the chain first..last (linked through the blocks) on h's list. */
static void mwh_remote_push(struct mw_heap *h, void *first, void *last)
{
	void *head = atomic_load_explicit(&h->remote, memory_order_relaxed);

	do
		*(void **)last = head;
	while (!atomic_compare_exchange_weak_explicit(&h->remote, &head, first,
						      memory_order_release,
						      memory_order_relaxed));
}

/*
 * Hand the batched blocks of other heaps back, one chain per owner. A page
 * keeps its owner while it has blocks in use, so the owner read from the
 * page of a block not yet handed back is stable. Owner-only state: a fork
 * child that sees fn before the last block's store loses that block, never
 * more (the blocks are taken off by lowering fn first).
 */
#define MW_FGROUPS 8
void mwh_foreign_flush(struct mw_heap *h)
{
	struct {
		struct mw_heap *heap;
		void *first, *last;
	} g[MW_FGROUPS];
	unsigned ng = 0, i, k;
	uint32_t n = h->fn;

	__atomic_store_n(&h->fn, 0, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	for (i = 0; i < n; i++) {
		void *b = h->fstk[i];
		struct mw_heap *o = mw_page_of(b)->heap;

		for (k = 0; k < ng && g[k].heap != o; k++)
			;
		if (k == ng && ng == MW_FGROUPS) {
			mwh_remote_push(o, b, b); /* too many owners */
			continue;
		}
		if (k == ng) {
			g[ng].heap = o;
			g[ng].first = g[ng].last = b;
			ng++;
			continue;
		}
		*(void **)b = g[k].first;
		g[k].first = b;
	}
	for (k = 0; k < ng; k++)
		mwh_remote_push(g[k].heap, g[k].first, g[k].last);
}

void mw_free_slow(void *p, struct mw_page *pg)
{
	struct mw_heap *h;

	if (!pg) { /* not ours: glibc's */
		if (__libc_free)
			__libc_free(p);
		return;
	}
	if (pg->kind != MW_KIND_SMALL) {
		mwh_large_free(pg, p);
		return;
	}
	if (pg->has_aligned)
		p = mwh_block_start(pg, p);
	h = mw_tls_heap;
	if (!h) { /* a thread that never allocated */
		mwh_remote_push(pg->heap, p, p);
		return;
	}
	mwh_heap_lock(h);
	/* the class's stack is full: half of it goes back to pages */
	if (!pg->has_aligned)
		mwh_stack_flush(h, pg->cls, h->stcap[pg->cls] / 2);
	if (pg->heap == h)
		mwh_small_free_local(h, pg, p);
	else
		mwh_foreign_add(h, p);
	mwh_heap_unlock_put(h);
}

/* Batch another heap's block for handing back. */
void mwh_foreign_add(struct mw_heap *h, void *p)
{
	if (h->fn == MW_FSTK)
		mwh_foreign_flush(h);
	h->fstk[h->fn] = p;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&h->fn, h->fn + 1, __ATOMIC_RELAXED);
}

void mw_free(void *p)
{
	mw_free_inline(p);
}
