/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Allocator-internal interface, shared by the allocator's files only (the
 * rest of hooks/ uses alloc.h). One job per file, as mimalloc splits its:
 *   alloc.c        malloc, calloc, the small and large allocation paths
 *   alloc_free.c   free: own blocks, other threads' (remote), large spans
 *   alloc_posix.c  realloc, the memalign family, usable size, trim, mallopt
 *   alloc_page.c   small pages: carving, page lists, draining remote frees
 *   alloc_span.c   the arena, spans, the span cache and bins, retention
 *   alloc_heap.c   per-thread heaps: creation, thread exit, fork
 *   alloc_share.c  the shareable span source (share.h): memfd spans, ids,
 *                  generations, waits for peers' copies
 *   alloc_outside.c the program's own anonymous mappings, counted for the
 *                  retention limit
 * Lock order: g.heap_lock, then a heap's lock, then g.lock. No system call
 * is ever made while g.lock or a heap's lock is held (memory is committed
 * and released outside them; g.lock_syscalls counts violations for the
 * tests).
 */
#ifndef MW_HOOKS_ALLOC_INT_H
#define MW_HOOKS_ALLOC_INT_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "hooks/alloc.h"

#define MW_PAGE	      4096
#define MW_RETAIN_MIN ((size_t)1 << 20) /* retained whatever the peak */
#define MW_RETAIN_CAP ((size_t)1 << 30)
#define MW_TC_BYTES   ((size_t)256 << 10) /* per-thread span cache */
#define MW_LO_NEVER   UINT32_MAX	  /* mw_page.lo: free never inline */

/* A small spinlock: it never allocates, and fork() can reset it. */
typedef atomic_int mwh_lock_t;

static inline void mwh_lock(mwh_lock_t *l)
{
	int spins = 0;

	while (atomic_exchange_explicit(l, 1, memory_order_acquire)) {
		while (atomic_load_explicit(l, memory_order_relaxed)) {
			if (++spins > 64) {
				sched_yield();
				spins = 0;
			}
		}
	}
}

static inline void mwh_unlock(mwh_lock_t *l)
{
	atomic_store_explicit(l, 0, memory_order_release);
}

/* Global state (alloc_span.c). */
struct mwh_global {
	mwh_lock_t lock;		     /* bins, LRU, retained */
	_Atomic uintptr_t bump;		     /* next unused byte of the arena */
	_Atomic uintptr_t committed;	     /* end of the read-write part */
	struct mw_page *hot[MW_NLARGE];	     /* retained, committed */
	struct mw_page *cold[MW_NLARGE];     /* released, address kept */
	struct mw_page *lru_head, *lru_tail; /* hot spans, newest first */
	size_t retained;		     /* bytes in hot bins */
	size_t retain_min;
	mwh_lock_t heap_lock;
	struct mw_heap *heaps; /* all heaps */
	struct mw_heap *abandoned;
	char *meta, *meta_end; /* carving space for heap structs */
	pthread_key_t key;
	atomic_int init; /* 0 no, 1 running, 2 done, 3 failed */
	void *release_on_free;
	atomic_ulong releases, released_bytes, lock_syscalls;
	atomic_long inuse, peak; /* bytes of spans handed out */
	/* the program's own anonymous mappings (alloc_outside.c), and the
	 * peak of inuse + outside: what the retention limit looks at */
	atomic_long outside, peak_all;
	atomic_int thp;	       /* huge pages for big spans: -1 not known yet */
	atomic_uint thp_spans; /* spans advised so far */
};
MWH_HIDDEN extern struct mwh_global mwh_g;
MWH_HIDDEN extern struct mw_page mwh_empty_page;

/* g.lock with the owner known, so a syscall under it can be counted. */
MWH_HIDDEN void mwh_glock(void);
MWH_HIDDEN void mwh_gunlock(void);
MWH_HIDDEN void mwh_syscall_check(void);

/* Doubly linked lists through mw_page.next/prev (bins, avail lists). */
static inline void mwh_bin_unlink(struct mw_page **bin, struct mw_page *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		*bin = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->next = s->prev = NULL;
}

static inline void mwh_bin_push(struct mw_page **bin, struct mw_page *s)
{
	s->prev = NULL;
	s->next = *bin;
	if (*bin)
		(*bin)->prev = s;
	*bin = s;
}

/* alloc_span.c */
MWH_HIDDEN int mwh_reserve(void);
MWH_HIDDEN struct mw_page *mwh_span_get_retained(unsigned c, unsigned last);
MWH_HIDDEN void mwh_trim_to_limit(void);
MWH_HIDDEN unsigned mwh_large_class(size_t units);
MWH_HIDDEN size_t mwh_large_units(unsigned c);
MWH_HIDDEN struct mw_page *mwh_span_get(struct mw_heap *h, unsigned c);
MWH_HIDDEN void mwh_span_put(struct mw_heap *h, struct mw_page *s, int release);
MWH_HIDDEN void mwh_span_put_moved(struct mw_page *s);
MWH_HIDDEN int mwh_span_grow(struct mw_page *s, unsigned c);
/* mw_page.thp: never advised, advised, advised before but its range
 * changed since */
enum { MW_THP_NONE, MW_THP_ON, MW_THP_STALE };
MWH_HIDDEN int mwh_map_fresh(uintptr_t a, size_t len);
MWH_HIDDEN void mwh_span_thp(struct mw_page *s);
MWH_HIDDEN void mwh_span_thp_stale(struct mw_page *s);
MWH_HIDDEN void mwh_tcache_flush(struct mw_heap *h);
MWH_HIDDEN size_t mwh_retain_limit(void);
MWH_HIDDEN void mwh_peak_update(void);
MWH_HIDDEN int mwh_trim_all(void);

/* alloc_page.c (callers hold the heap's lock) */
MWH_HIDDEN void *mwh_small_alloc_slow(struct mw_heap *h, unsigned c,
				      struct mw_page **spare);
MWH_HIDDEN void mwh_heap_unlock_put(struct mw_heap *h);
MWH_HIDDEN void mwh_small_free_local(struct mw_heap *h, struct mw_page *pg,
				     void *p);
MWH_HIDDEN void *mwh_block_start(struct mw_page *pg, void *p);
MWH_HIDDEN void mwh_stack_flush(struct mw_heap *h, unsigned c, uint32_t keep);
MWH_HIDDEN void mwh_stacks_init(struct mw_heap *h);
MWH_HIDDEN void mwh_heap_flush(struct mw_heap *h);
MWH_HIDDEN void mwh_page_set_aligned(struct mw_page *pg);

/* alloc_heap.c */
MWH_HIDDEN int mwh_global_init(void);
MWH_HIDDEN struct mw_heap *mwh_heap_get(void);

/* Allocator locks the calling thread holds (g.lock, its heap's lock):
 * mwh_syscall_check() counts a system call made while any is held. */
MWH_HIDDEN extern __thread int mwh_locks_held
	__attribute__((tls_model("initial-exec")));

static inline void mwh_heap_lock(struct mw_heap *h)
{
	mwh_lock(&h->lock);
	mwh_locks_held++;
}

static inline void mwh_heap_unlock(struct mw_heap *h)
{
	mwh_locks_held--;
	mwh_unlock(&h->lock);
}

/* The calling thread's heap, made on first use; NULL when out of memory. */
static inline struct mw_heap *mwh_heap(void)
{
	struct mw_heap *h = mw_tls_heap;

	return h ? h : mwh_heap_get();
}

/* alloc.c */
MWH_HIDDEN void *mwh_large_alloc(struct mw_heap *h, size_t n, size_t align,
				 int zero);
/* alloc_free.c */
MWH_HIDDEN struct mw_page *mwh_large_span(struct mw_page *pg);
MWH_HIDDEN void mwh_foreign_flush(struct mw_heap *h);
MWH_HIDDEN void mwh_foreign_add(struct mw_heap *h, void *p);

#endif /* MW_HOOKS_ALLOC_INT_H */
