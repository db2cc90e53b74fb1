// SPDX-License-Identifier: MIT
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
		mw_raw_write_str(2, "mmuwatch: free(): invalid pointer or double free\n");
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

static void mwh_remote_push(struct mw_heap *h, void *p)
{
	void *head = atomic_load_explicit(&h->remote, memory_order_relaxed);

	do
		*(void **)p = head;
	while (!atomic_compare_exchange_weak_explicit(&h->remote, &head, p,
						      memory_order_release,
						      memory_order_relaxed));
}

void mw_free_slow(void *p, struct mw_page *pg)
{
	struct mw_heap *h;

	if (!pg) {			/* not ours: glibc's */
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
	if (pg->heap == h && h) {
		mwh_heap_lock(h);
		mwh_small_free_local(h, pg, p);
		mwh_heap_unlock(h);
		return;
	}
	mwh_remote_push(pg->heap, p);	/* another thread's block */
}

void mw_free(void *p)
{
	mw_free_inline(p);
}
