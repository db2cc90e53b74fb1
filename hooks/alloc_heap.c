// SPDX-License-Identifier: BSD-3-Clause
/*
 * Per-thread heaps: the allocator's one-time set-up, a heap for each thread
 * that allocates (made on its first malloc, carved from metadata units that
 * are never freed), its hand-over at thread exit (to the next new thread)
 * and fork().
 *
 * fork(). The owner changes its page lists only in its small-block slow
 * paths, and holds its heap's lock while it does. The prepare handler takes
 * every heap's lock and then the global ones, so the child inherits each
 * heap of the other threads between two slow paths. What owners change
 * without the lock is sound in whatever prefix of their stores the child
 * sees: a fast path in flight leaves at worst a block that nobody holds or
 * a page that is never given back; the span cache is ordered for it
 * (alloc_span.c), and spans being released outside g.lock at that moment
 * are simply never seen again by the child. The child's new threads adopt
 * those heaps.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "hooks/alloc_int.h"
#include "hooks/share.h"

#define g mwh_g

MWH_HIDDEN __thread struct mw_heap *mw_tls_heap
	__attribute__((tls_model("initial-exec")));

static void mwh_heap_destroy(void *arg);
static void mwh_atfork_prepare(void);
static void mwh_atfork_parent(void);
static void mwh_atfork_child(void);

/* Once, malloc-free; concurrent callers wait. */
int mwh_global_init(void)
{
	int s = atomic_load_explicit(&g.init, memory_order_acquire);
	int zero = 0;

	if (s == 2)
		return 0;
	if (s == 3)
		return -1;
	if (atomic_compare_exchange_strong(&g.init, &zero, 1)) {
		int ok = mwh_reserve() == 0;

		if (ok && pthread_key_create(&g.key, mwh_heap_destroy) != 0)
			ok = 0;
		if (ok)
			pthread_atfork(mwh_atfork_prepare, mwh_atfork_parent,
				       mwh_atfork_child);
		atomic_store_explicit(&g.init, ok ? 2 : 3,
				      memory_order_release);
		if (ok)
			mwh_share_env_init(); /* MMUWATCH_SHAREABLE_HEAP */
		return ok ? 0 : -1;
	}
	while ((s = atomic_load_explicit(&g.init, memory_order_acquire)) == 1)
		sched_yield();
	return s == 2 ? 0 : -1;
}

int mw_alloc_prepare(void)
{
	return mwh_global_init();
}

struct mw_heap *mwh_heap_get(void)
{
	struct mw_heap *h;
	unsigned c;

	if (mwh_global_init() != 0)
		return NULL;
	mwh_lock(&g.heap_lock);
	h = g.abandoned;
	if (h) {
		g.abandoned = h->free_next;
	} else {
		if (g.meta + sizeof(*h) > g.meta_end) {
			struct mw_page *s = mwh_span_get(NULL, 0);

			if (!s) {
				mwh_unlock(&g.heap_lock);
				return NULL;
			}
			s->kind = MW_KIND_META; /* never freed */
			g.meta = (char *)mw_page_addr(s);
			g.meta_end = g.meta + MW_UNIT;
		}
		h = (struct mw_heap *)g.meta;
		g.meta += (sizeof(*h) + 63) & ~(size_t)63;
		memset(h, 0, sizeof(*h));
		for (c = 0; c < MW_NSMALL; c++)
			h->cur[c] = &mwh_empty_page;
		mwh_stacks_init(h);
		h->all_next = g.heaps;
		g.heaps = h;
	}
	h->owned = 1;
	h->free_next = NULL;
	mwh_unlock(&g.heap_lock);
	/* TLS first: pthread_setspecific may allocate for high keys */
	mw_tls_heap = h;
	pthread_setspecific(g.key, h);
	return h;
}

/* Every stacked block back to its page's owner (pages may become free). */
void mwh_heap_flush(struct mw_heap *h)
{
	unsigned c;

	mwh_heap_lock(h);
	for (c = 0; c < MW_NSMALL; c++)
		mwh_stack_flush(h, c, 0);
	mwh_heap_unlock_put(h);
	mwh_foreign_flush(h);
}

/* Thread exit: the heap (with its pages) waits for the next new thread. */
static void mwh_heap_destroy(void *arg)
{
	struct mw_heap *h = arg;

	mwh_heap_flush(h);
	mwh_tcache_flush(h);
	mw_tls_heap = NULL;
	mwh_lock(&g.heap_lock);
	h->owned = 0;
	h->free_next = g.abandoned;
	g.abandoned = h;
	mwh_unlock(&g.heap_lock);
}

static void mwh_atfork_prepare(void)
{
	struct mw_heap *h;

	mwh_share_atfork_prepare();
	mwh_lock(&g.heap_lock);
	for (h = g.heaps; h; h = h->all_next)
		mwh_lock(&h->lock);
	mwh_lock(&g.lock);
}

static void mwh_atfork_parent(void)
{
	struct mw_heap *h;

	mwh_unlock(&g.lock);
	for (h = g.heaps; h; h = h->all_next)
		mwh_unlock(&h->lock);
	mwh_unlock(&g.heap_lock);
	mwh_share_atfork_parent();
}

/* Child: only this thread survives; the other heaps become adoptable. */
static void mwh_atfork_child(void)
{
	struct mw_heap *h;

	mwh_share_atfork_child(); /* first: the heap must be ours alone */
	atomic_store(&g.lock, 0);
	atomic_store(&g.heap_lock, 0);
	g.abandoned = NULL;
	for (h = g.heaps; h; h = h->all_next) {
		unsigned c, k;

		atomic_store(&h->lock, 0);
		h->tbytes = 0; /* exact again (see mwh_tc_pop) */
		for (c = 0; c < MW_NTCACHE; c++)
			for (k = 0; k < h->tcount[c]; k++)
				h->tbytes += h->tcache[c][k]->units * MW_UNIT;
		if (h == mw_tls_heap)
			continue;
		h->owned = 0;
		h->free_next = g.abandoned;
		g.abandoned = h;
	}
}
