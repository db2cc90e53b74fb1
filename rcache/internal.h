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
 * the pool range, so readable; at a region's pub offset. */
static inline int mwr_pool_contains(const void *p)
{
	uintptr_t a = (uintptr_t)p - offsetof(struct mwr_region, pub);
	uintptr_t base = (uintptr_t)__atomic_load_n(&mwr_pool_base, __ATOMIC_ACQUIRE);
	unsigned n = __atomic_load_n(&mwr_nchunks, __ATOMIC_ACQUIRE);

	/* Every aligned slot of a published chunk is a region (grow() makes
	 * the whole chunk before publishing it): nothing to read here, so a
	 * put touches no line of the region but its first. */
	a -= base;
	return a < (uintptr_t)n * MWR_CHUNK_REGIONS * MWR_REGION_SIZE &&
	       !(a & (MWR_REGION_SIZE - 1));
}

/* The fail-closed rule (guard.c): may the cache cache right now? */
static inline int mwr_guaranteed(void)
{
	return mwu_covers_caching(mwu_guaranteed());
}

/*
 * The cache object and what its files share. One job per file:
 * rcache.c  the API's lifecycle (create, flush, destroy, stats);
 * hit.c     the lock-free hit and put, and the slow get;
 * miss.c    registration on a miss, uncached (fail-closed) gets;
 * state.c   lock-free region state transitions and reference drops;
 * invalid.c invalidation processing and the core's sink (drain, fork);
 * reclaim.c batched reclaim, zombies and deferred deregistration;
 * lru.c     CLOCK eviction and the limits.
 * "Lock held" means the cache lock (rc->lock).
 */
#define MWR_MAGIC 0x6d77726361636865ULL
#define MWR_DRAIN_PER_CALL 32	/* bounded deferred work per slow call */

struct mwr_rcache {
	uint64_t magic;
	struct mwr_tree tree;
	pthread_mutex_t lock;
	struct mw_reg_ops ops;
	unsigned flags;
	int forked;		/* child of fork with non-fork-safe ops */
	size_t max_regions, max_bytes;
	/* Under lock. */
	size_t nregions, bytes, zombies, transients;
	struct mwr_region lru;	/* list head; clock hand below */
	struct mwr_region zlist;	/* zombies: out of the tree, not released */
	struct mwr_region *hand;
	struct mwr_region *pending;	/* popped from inv, being processed */
	uint64_t misses, invalidations, evictions;
	uint64_t zcheck_ms;	/* last bulk count of zombies */
	/* Lock-free stack of invalidated regions. */
	struct mwr_region *inv __attribute__((aligned(MWU_CACHELINE)));
	struct mwu_sink sink;
	struct mw_cr_client cr;	/* checkpoint/restart client (libuser/cr.c) */
	/* Page-number index, read by every hit (index.c). */
	struct mwr_index index __attribute__((aligned(MWU_CACHELINE)));
};

static inline uint64_t mwr_ld_state(struct mwr_region *r)
{
	return __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
}

static inline int mwr_cas_state(struct mwr_region *r, uint64_t *old, uint64_t nw)
{
	return __atomic_compare_exchange_n(&r->state, old, nw, 0,
					   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

static inline int mwr_check_rc(struct mwr_rcache *rc)
{
	int ret = mwu_ready();

	if (ret)
		return ret;
	if (!rc)
		return MW_EINVAL;
	if (rc->magic != MWR_MAGIC)
		return MW_EFOREIGN;
	return 0;
}

/* state.c */
MWU_HIDDEN void mwr_flag_queue(struct mwr_rcache *rc, struct mwr_region *r,
			       uint64_t gen, uint64_t flags);
MWU_HIDDEN void mwr_on_invalid(struct mw_watch *w, void *arg);
MWU_HIDDEN int mwr_drop_ref(struct mwr_region *r, struct mwr_rcache *mine,
			    struct mwr_rcache *locked);
MWU_HIDDEN void mwr_drop_known(struct mwr_region *r, struct mwr_rcache *mine,
			       struct mwr_rcache *locked);

/* reclaim.c (lock held) */
/* Regions out of the tree, chained through lru_next, waiting for one
 * barrier before their references are counted. */
struct mwr_batch {
	struct mwr_region *head;
};

static inline void mwr_batch_add(struct mwr_batch *b, struct mwr_region *r)
{
	r->lru_next = b->head;
	b->head = r;
}

/* Deferral of small batches in a multi-threaded process (reclaim.c). */
#define MWR_ZOMBIE_BATCH 64
#define MWR_ZOMBIE_MS 10
MWU_HIDDEN uint64_t mwr_now_ms(void);
MWU_HIDDEN int mwr_try_release(struct mwr_rcache *rc, struct mwr_region *r);
MWU_HIDDEN void mwr_batch_reclaim_f(struct mwr_rcache *rc, struct mwr_batch *b,
				    int force);
MWU_HIDDEN void mwr_batch_reclaim(struct mwr_rcache *rc, struct mwr_batch *b);
MWU_HIDDEN void mwr_zombie_recheck(struct mwr_rcache *rc, size_t max);
MWU_HIDDEN void mwr_unlink_region(struct mwr_rcache *rc, struct mwr_region *r,
				  struct mwr_batch *b);
MWU_HIDDEN void mwr_unlink_all(struct mwr_rcache *rc);
MWU_HIDDEN void mwr_last_ref(struct mwr_region *r, struct mwr_rcache *rc,
			     uint64_t gen, struct mwr_rcache *locked);

/* lru.c (lock held) */
MWU_HIDDEN void mwr_lru_add(struct mwr_rcache *rc, struct mwr_region *r);
MWU_HIDDEN void mwr_lru_del(struct mwr_rcache *rc, struct mwr_region *r);
MWU_HIDDEN int mwr_evict(struct mwr_rcache *rc, size_t max_r, size_t need,
			 size_t max_b);
MWU_HIDDEN size_t mwr_evict_overlap(struct mwr_rcache *rc, uintptr_t s,
					 uintptr_t e);
MWU_HIDDEN size_t mwr_memlock_limit(void);

/* invalid.c */
MWU_HIDDEN int mwr_process_invalid(struct mwr_rcache *rc, unsigned max);
MWU_HIDDEN void mwr_sink_init(struct mwr_rcache *rc);

/* miss.c */
MWU_HIDDEN int mwr_miss(struct mwr_rcache *rc, uintptr_t s, uintptr_t e,
			struct mwr_region **out, int cache);
MWU_HIDDEN int mwr_get_uncached(struct mwr_rcache *rc, uintptr_t s,
				uintptr_t e, struct mw_region **out);
MWU_HIDDEN int mwr_get_after_checkpoint(struct mwr_rcache *rc, uintptr_t s,
					uintptr_t e, struct mw_region **out);

/*
 * Test knobs (include/testing/mmuwatch_test.h) exist only in the test
 * variant of the library (-DMW_TESTING, build/lib/test/). In the shipped
 * one MWR_TEST() is 0, so no test branch is compiled, and create refuses
 * the test flags with MW_EFLAGS and says why (guard.c).
 */
#ifdef MW_TESTING
#include "testing/mmuwatch_test.h"
#define MWR_TEST(rc, flag) ((rc)->flags & (flag))
#define MWR_FLAGS_OK	   (MW_RCACHE_F_MASK | MW_RCACHE_F_TEST_MASK)
#else
#define MWR_TEST(rc, flag) 0
#define MWR_FLAGS_OK	   MW_RCACHE_F_MASK
#endif
MWU_HIDDEN int mwr_bad_flags(unsigned flags);

/* bind.c: a backend's library, bound when the backend is made. */
struct mwr_sym {
	const char *name, *version;
	void **fn;    /* filled in */
	int optional; /* may be missing (an older library) */
};
/* 0, or -ELIBACC with the reason logged. test_env: in the test variant,
 * an environment variable naming another soname (to show the failure). */
MWU_HIDDEN int mwr_bind(const char *soname, const char *test_env,
			const struct mwr_sym *syms, size_t n);

#endif /* MWR_INTERNAL_H */
