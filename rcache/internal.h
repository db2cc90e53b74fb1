/* SPDX-License-Identifier: BSD-3-Clause */
/* Internals of the registration cache (all hidden). */
#ifndef MWR_INTERNAL_H
#define MWR_INTERNAL_H

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

struct mwr_region {
	struct mw_region pub;		/* first: put() gets &pub */
	uint64_t state;
	uintptr_t start, end;		/* fixed while not free */
	struct mwr_region *left, *right;	/* treap, read under seqlock */
	struct mwr_rcache *rc;
	uint32_t prio;
	uint8_t referenced;		/* CLOCK bit, set by get */
	int32_t debt;			/* puts of other threads' local refs */
	uint32_t gen_cur;		/* generation while not free */
	const struct mwr_region *self;	/* == this: put() sanity check */
	struct mwr_region *lru_prev, *lru_next;	/* in-tree regions */
	struct mwr_region *inv_next;	/* invalidated stack */
	struct mwr_region *z_prev, *z_next;	/* zombie list (out of tree) */
	struct mw_watch watch;
};

/* pool.c: type-stable region memory (never returned to the OS), so that
 * lock-free readers can dereference a region that was freed under them. */
MWU_HIDDEN struct mwr_region *mwr_pool_alloc(void);
MWU_HIDDEN void mwr_pool_free(struct mwr_region *r);
#define MWR_CHUNK_REGIONS 2048
#define MWR_MAX_CHUNKS 4096
MWU_HIDDEN extern struct mwr_region *mwr_chunks[MWR_MAX_CHUNKS];
MWU_HIDDEN extern unsigned mwr_nchunks;
MWU_HIDDEN void mwr_pool_foreach(void (*fn)(struct mwr_region *r, void *arg),
				  void *arg);
MWU_HIDDEN void mwr_pool_atfork_prepare(void);
MWU_HIDDEN void mwr_pool_atfork_parent(void);
MWU_HIDDEN void mwr_pool_atfork_child(void);

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
#define MWR_TLC_SIZE 4096U
struct mwr_hold {
	struct mwr_region *r;
	uint32_t gen;		/* incarnation of r the references are on */
	uint32_t refs;
};
struct mwr_tlc {
	struct mwr_rcache *rc;
	struct mwr_region *r;
	uintptr_t start, end;
	uint64_t gen;
};
struct mwr_thr {
	struct mwr_tlc tlc[MWR_TLC_SIZE];
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
	return &t->hold[((uintptr_t)r >> 6) & (MWR_HOLD_SIZE - 1)];
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

/* Is p a region (without trusting it)? In a chunk, so readable; a
 * misaligned pointer fails the self check. */
static inline int mwr_pool_contains(const void *p)
{
	unsigned i, n = __atomic_load_n(&mwr_nchunks, __ATOMIC_ACQUIRE);
	uintptr_t a = (uintptr_t)p;
	const size_t span = MWR_CHUNK_REGIONS * sizeof(struct mwr_region);

	for (i = 0; i < n; i++) {
		uintptr_t lo = (uintptr_t)mwr_chunks[i];

		if (a >= lo && a < lo + span)
			return a + sizeof(struct mwr_region) <= lo + span &&
			       ((const struct mwr_region *)p)->self == p;
	}
	return 0;
}

#endif /* MWR_INTERNAL_H */
