/* SPDX-License-Identifier: BSD-3-Clause */
/* Internals of the registration cache (all hidden). */
#ifndef MWR_INTERNAL_H
#define MWR_INTERNAL_H

#include <stddef.h>

#include "libuser/internal.h"

/* Region state word: refcount, flags, generation (one CAS covers all). */
#define MWR_COUNT_MASK	0x00ffffffULL
#define MWR_INVALID	(1ULL << 24)	/* never handed out again */
#define MWR_INTREE	(1ULL << 25)	/* reachable by lookups */
#define MWR_TRANSIENT	(1ULL << 26)	/* not cached: dereg at last put */
#define MWR_FREE	(1ULL << 27)	/* in the pool's free list */
#define MWR_QUEUED	(1ULL << 28)	/* on the invalidated stack */
#define MWR_GEN_SHIFT	32

struct mwr_rcache;

/*
 * A cached registration. Type-stable pool memory (pool.c). The first cache
 * line holds what a hit reads (state, range, cache, validity word); a
 * region is 256 bytes so that pool membership is a mask test.
 */
struct mwr_region {
	uint64_t state;
	uintptr_t start, end;		/* fixed while not free */
	struct mwr_rcache *rc;
	uint32_t gen_cur;		/* generation while not free */
	uint8_t referenced;		/* CLOCK bit, set by get */
	struct mw_watch watch;		/* word, token first: same line */
	struct mw_region pub;		/* what get() hands out */
	const struct mwr_region *self;	/* == this: put() sanity check */
	struct mwr_region *left, *right;	/* treap, read under seqlock */
	uint32_t prio;
	int32_t debt;			/* puts of other threads' local refs */
	struct mwr_region *lru_prev, *lru_next;	/* in-tree regions */
	struct mwr_region *inv_next;	/* invalidated stack */
	struct mwr_region *z_prev, *z_next;	/* zombie list (out of tree) */
} __attribute__((aligned(256)));
#define MWR_REGION_SIZE 256U

static inline struct mwr_region *mwr_of_pub(struct mw_region *pub)
{
	return (struct mwr_region *)((char *)pub - offsetof(struct mwr_region, pub));
}

/* pool.c: type-stable region memory (never returned to the OS), so that
 * lock-free readers can dereference a region that was freed under them.
 * Chunks are carved, in order, from one reserved address range: pool
 * membership is a bounds and alignment test. */
MWU_HIDDEN struct mwr_region *mwr_pool_alloc(void);
MWU_HIDDEN void mwr_pool_free(struct mwr_region *r);
#define MWR_CHUNK_REGIONS 2048
#define MWR_MAX_CHUNKS 4096		/* 8M regions, 2 GiB reserved */
MWU_HIDDEN extern struct mwr_region *mwr_pool_base;
MWU_HIDDEN extern unsigned mwr_nchunks;
MWU_HIDDEN void mwr_pool_foreach(void (*fn)(struct mwr_region *r, void *arg),
				  void *arg);
MWU_HIDDEN void mwr_pool_atfork_prepare(void);
MWU_HIDDEN void mwr_pool_atfork_parent(void);
MWU_HIDDEN void mwr_pool_atfork_child(void);

/* index.c: page number -> region, a 3-level radix table (13+11+11 bits of
 * page number: the 47-bit user address space). Writers hold the cache
 * lock; readers take no lock and trust nothing they read: the slot is a
 * hint that the hit path validates against the region's state word. Nodes
 * are freed only with the cache. Regions above 2^47 or of more than
 * MWR_INDEX_MAX_PAGES pages are not indexed (the tree finds them). */
#define MWR_IDX_BITS 11
#define MWR_IDX_TOP_BITS 13
#define MWR_IDX_FAN (1U << MWR_IDX_BITS)
#define MWR_INDEX_MAX_PAGES (1UL << 18)	/* 1 GiB of 4 KiB pages */
struct mwr_index {
	struct mwr_region ***top[1U << MWR_IDX_TOP_BITS];
};
MWU_HIDDEN void mwr_index_insert(struct mwr_index *x, struct mwr_region *r);
MWU_HIDDEN void mwr_index_remove(struct mwr_index *x, struct mwr_region *r);
/* Point the slot of address a at r (r covers it; a lookup found r the
 * slow way). */
MWU_HIDDEN void mwr_index_publish(struct mwr_index *x, struct mwr_region *r,
				  uintptr_t a);
MWU_HIDDEN void mwr_index_destroy(struct mwr_index *x);
static inline struct mwr_region *mwr_index_find(const struct mwr_index *x,
						uintptr_t a)
{
	uintptr_t p = a >> 12;
	struct mwr_region ***mid, **leaf;

	if (mwu_unlikely(p >> (MWR_IDX_TOP_BITS + 2 * MWR_IDX_BITS)))
		return NULL;
	mid = __atomic_load_n(&x->top[p >> (2 * MWR_IDX_BITS)], __ATOMIC_ACQUIRE);
	if (mwu_unlikely(!mid))
		return NULL;
	leaf = __atomic_load_n(&mid[(p >> MWR_IDX_BITS) & (MWR_IDX_FAN - 1)],
			       __ATOMIC_ACQUIRE);
	if (mwu_unlikely(!leaf))
		return NULL;
	return __atomic_load_n(&leaf[p & (MWR_IDX_FAN - 1)], __ATOMIC_ACQUIRE);
}

/* tree.c: treap by (start, end, address); writers hold the cache lock and
 * bump seq around changes; readers validate with seq. */
struct mwr_tree {
	struct mwr_region *root;
	uint64_t seq;
};
MWU_HIDDEN void mwr_tree_insert(struct mwr_tree *t, struct mwr_region *r);
MWU_HIDDEN void mwr_tree_remove(struct mwr_tree *t, struct mwr_region *r);
/* A region on the search path covering [s, e), or NULL. Lock-free: *ok is
 * 0 when a writer interfered (retry). */
MWU_HIDDEN struct mwr_region *mwr_tree_find(const struct mwr_tree *t,
					    uintptr_t s, uintptr_t e, int *ok);

/*
 * refs.c: per-thread references. A hit takes no atomic instruction: the
 * thread counts its reference in its own hold table (plain stores), then
 * re-reads the region state; a reclaimer flags the region, runs
 * membarrier(PRIVATE_EXPEDITED) (a full fence on every thread of the
 * process) and then sums the hold tables. Either the reclaimer sees the
 * hold, or the thread sees the flag and backs off (asymmetric Dekker).
 */
#define MWR_HOLD_SIZE 1024U
struct mwr_hold {
	struct mwr_region *r;
	uint32_t gen;		/* incarnation of r the references are on */
	uint32_t refs;
};
struct mwr_thr {
	struct mwr_hold hold[MWR_HOLD_SIZE];
	struct mwr_thr *next;		/* under the thread-list lock */
	int may_local;			/* local references possible */
};
MWU_HIDDEN extern __thread struct mwr_thr *mwr_thr
	__attribute__((tls_model("initial-exec")));
MWU_HIDDEN extern int mwr_local_ok;	/* membarrier available */
MWU_HIDDEN struct mwr_thr *mwr_thr_get_slow(void);
static inline struct mwr_thr *mwr_thr_get(void)
{
	struct mwr_thr *t = mwr_thr;

	return mwu_likely(t) ? t : mwr_thr_get_slow();
}
static inline struct mwr_hold *mwr_hold_of(struct mwr_thr *t,
					   const struct mwr_region *r)
{
	return &t->hold[((uintptr_t)r / MWR_REGION_SIZE) & (MWR_HOLD_SIZE - 1)];
}
/* Make every thread's holds visible (and flags seen by later re-reads).
 * 0 when done (or not needed); -1 when membarrier failed: the other
 * threads' hold tables cannot be trusted, treat the regions as busy. */
MWU_HIDDEN int mwr_barrier(void);
/* Would mwr_barrier() need the syscall (another thread may hold local
 * references)? Lock-free: a count, never the thread list. */
MWU_HIDDEN int mwr_barrier_needed(void);
/* References on r: atomic + every thread's local ones - debt. Call after
 * mwr_barrier(), with the cache lock held. */
MWU_HIDDEN long mwr_busy(const struct mwr_region *r);
MWU_HIDDEN void mwr_refs_init(void);
MWU_HIDDEN void mwr_requeue(struct mwr_region *r, uint64_t gen);
MWU_HIDDEN void mwr_refs_atfork_child(void);
/* C/R restart: register membarrier again (a restored mm lost it). */
MWU_HIDDEN void mwr_refs_restarted(void);

/* Is p the pub of a region (without trusting it)? In the carved part of
 * the pool range, so readable; at a region's pub offset; self-check. */
static inline int mwr_pool_contains(const void *p)
{
	uintptr_t a = (uintptr_t)p - offsetof(struct mwr_region, pub);
	uintptr_t base = (uintptr_t)__atomic_load_n(&mwr_pool_base, __ATOMIC_ACQUIRE);
	unsigned n = __atomic_load_n(&mwr_nchunks, __ATOMIC_ACQUIRE);

	a -= base;
	if (a >= (uintptr_t)n * MWR_CHUNK_REGIONS * MWR_REGION_SIZE ||
	    (a & (MWR_REGION_SIZE - 1)))
		return 0;
	return ((const struct mwr_region *)(base + a))->self ==
	       (const struct mwr_region *)(base + a);
}

/* The fail-closed rule (guard.c): may the cache cache right now? */
static inline int mwr_guaranteed(void)
{
	return (mwu_guaranteed() & MW_RCACHE_NEEDS) == MW_RCACHE_NEEDS;
}

#endif /* MWR_INTERNAL_H */
