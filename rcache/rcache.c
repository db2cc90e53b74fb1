// SPDX-License-Identifier: BSD-3-Clause
/*
 * The registration cache.
 *
 * Hit path (no lock, no syscall, no atomic read-modify-write): the page
 * index (index.c) names a candidate region, its state word validates it
 * and a thread-local hold (refs.c) references it, then one load of its
 * validity word (kernel mode; hooks mode first applies pending hook
 * releases) confirms it. A local put is a plain store. Before any of it,
 * every get tests the fail-closed rule (guard.c).
 *
 * Everything else runs under the cache lock: misses, invalidation
 * processing, eviction (CLOCK, the usual LRU approximation that needs no
 * list update on a hit), deregistration. Invalidation callbacks (from the
 * event drain, possibly inside another API call) only flag the region and
 * push it on a lock-free stack; deregistration happens later at a safe
 * point: a bounded amount on every slow-path call, and the helper thread.
 *
 * Overlap policy: no merging. A miss registers exactly the page-aligned
 * requested range; overlapping regions coexist; a get inside a cached
 * region hits it (the index points each page at the region registered or
 * found last; the tree finds others). Merging would re-register the union
 * of neighbours on every growth, pin memory the application never asked
 * for, and make the whole union die when any part of it is unmapped. Pin
 * cost is linear in size: rcache-bench's uring_pin_* lines measured 1.1 us
 * for 16 KiB, 6.3 us for 256 KiB and 90 us for 4 MiB (io_uring fixed
 * buffers, host kernel 6.18), i.e. ~22 ns per page. So merging two 2 MiB
 * neighbours doubles the re-registration cost of every invalidation of
 * either (45 us -> 90 us) to save one 45 us miss on first use.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>

#include "rcache/internal.h"

#define MWR_MAGIC 0x6d77726361636865ULL
#define DRAIN_PER_CALL 32	/* bounded deferred work per slow call */

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

static inline uint64_t ld_state(struct mwr_region *r)
{
	return __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
}

static inline int cas_state(struct mwr_region *r, uint64_t *old, uint64_t nw)
{
	return __atomic_compare_exchange_n(&r->state, old, nw, 0,
					   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

static void inv_push(struct mwr_rcache *rc, struct mwr_region *r)
{
	struct mwr_region *h = __atomic_load_n(&rc->inv, __ATOMIC_RELAXED);

	do
		r->inv_next = h;
	while (!__atomic_compare_exchange_n(&rc->inv, &h, r, 1,
					    __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

/*
 * Flag incarnation 'gen' of r (flags: MWR_INVALID or 0) and queue it for
 * processing under the lock, at most once at a time. Lock-free; a no-op
 * when that incarnation is already gone (freed or reused).
 */
static void flag_queue(struct mwr_rcache *rc, struct mwr_region *r,
		       uint64_t gen, uint64_t flags)
{
	uint64_t st = ld_state(r);

	do {
		if ((st >> MWR_GEN_SHIFT) != gen || (st & MWR_FREE))
			return;
		if ((st & MWR_QUEUED) && (st & flags) == flags)
			return;
	} while (!cas_state(r, &st, st | flags | MWR_QUEUED));
	if (!(st & MWR_QUEUED))
		inv_push(rc, r);
}

/* A zombie whose references changed hands outside the cache (thread exit):
 * let the queue processing count them again. */
void mwr_requeue(struct mwr_region *r, uint64_t gen)
{
	uint64_t st = ld_state(r);

	if ((st >> MWR_GEN_SHIFT) == gen && !(st & (MWR_INTREE | MWR_FREE)) &&
	    !(st & MWR_TRANSIENT))
		flag_queue(r->rc, r, gen, 0);
}

/* Watch callback: event drain context, core lock held. Flag and queue. */
static void on_invalid(struct mw_watch *w, void *arg)
{
	struct mwr_region *r = arg;

	(void)w;
	if (r->rc->flags & MW_RCACHE_F_TEST_NO_INVALIDATE)
		return;
	__atomic_fetch_add(&r->rc->invalidations, 1, __ATOMIC_RELAXED);
	flag_queue(r->rc, r, __atomic_load_n(&r->gen_cur, __ATOMIC_ACQUIRE),
		   MWR_INVALID);
}

/* ---- lock held below ---- */

static void lru_add(struct mwr_rcache *rc, struct mwr_region *r)
{
	r->lru_prev = rc->lru.lru_prev;
	r->lru_next = &rc->lru;
	rc->lru.lru_prev->lru_next = r;
	rc->lru.lru_prev = r;
}

static void lru_del(struct mwr_rcache *rc, struct mwr_region *r)
{
	if (rc->hand == r)
		rc->hand = r->lru_next;
	r->lru_prev->lru_next = r->lru_next;
	r->lru_next->lru_prev = r->lru_prev;
	r->lru_next = r->lru_prev = NULL;
}

/* Deregister and return to the pool when nobody can reach r any more.
 * The claim (one CAS to FREE) fails when r was queued meanwhile: then the
 * queue processing decides later. */
static int try_release(struct mwr_rcache *rc, struct mwr_region *r)
{
	uint64_t st = ld_state(r);

	do {
		if (st & (MWR_FREE | MWR_QUEUED | MWR_INTREE))
			return 0;
	} while (!cas_state(r, &st, (((st >> MWR_GEN_SHIFT) + 1) << MWR_GEN_SHIFT) |
			    MWR_FREE));
	if (!(st & MWR_TRANSIENT) && r->watch.word) {
		pthread_mutex_lock(&mwu_core.lock);
		if (mwu_core.source == MW_SOURCE_KERNEL)
			mwu_kernel_unwatch((struct mw_watch *const[]){ &r->watch }, 1);
		else if (mwu_core.source == MW_SOURCE_HOOKS)
			mwu_soft_unwatch(&r->watch);
		pthread_mutex_unlock(&mwu_core.lock);
	}
	if (!rc->forked) {
		rc->ops.dereg(rc->ops.ctx, &r->pub);
		mwu_stat_add(MWU_ST_DEREGS, 1);
	}
	rc->bytes -= r->pub.len;
	mwu_stat_add(MWU_ST_BYTES, -(int64_t)r->pub.len);
	mwu_stat_add(MWU_ST_REGIONS, -1);
	if (st & MWR_TRANSIENT) {
		rc->transients--;
	} else {
		rc->zombies--;
		r->z_prev->z_next = r->z_next;
		r->z_next->z_prev = r->z_prev;
		r->z_next = r->z_prev = NULL;
	}
	r->debt = 0;
	mwr_pool_free(r);
	return 1;
}

/* Regions out of the tree, chained through lru_next, waiting for one
 * barrier before their references are counted. */
struct batch {
	struct mwr_region *head;
};

static void batch_add(struct batch *b, struct mwr_region *r)
{
	r->lru_next = b->head;
	b->head = r;
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* One barrier for the whole batch; release what nobody holds. The others
 * stay zombies: their last put queues them again.
 * The barrier (membarrier) costs an IPI to every CPU running a thread of
 * the process; unless forced, a multi-threaded process defers small
 * batches: the regions wait on the zombie list (out of the tree, never
 * handed out) and are counted in bulk once ZOMBIE_BATCH wait or every
 * ZOMBIE_MS (helper thread). */
#define ZOMBIE_BATCH 64
#define ZOMBIE_MS 10
static void zombie_recheck(struct mwr_rcache *rc, size_t max);
static void batch_reclaim_f(struct mwr_rcache *rc, struct batch *b, int force)
{
	struct mwr_region *r, *next;

	if (!b->head)
		return;
	/* Deferred, or the barrier failed (references cannot be counted):
	 * they stay zombies, out of the tree, and are counted again later. */
	if ((!force && rc->zombies < ZOMBIE_BATCH && mwr_barrier_needed()) ||
	    mwr_barrier()) {
		for (r = b->head; r; r = next) {
			next = r->lru_next;
			r->lru_next = NULL;
		}
		b->head = NULL;
		return;
	}
	for (r = b->head; r; r = next) {
		uint64_t st = ld_state(r);

		next = r->lru_next;
		r->lru_next = NULL;
		if (st & (MWR_FREE | MWR_QUEUED | MWR_INTREE))
			continue;	/* queued again: processed later */
		if (mwr_busy(r) <= 0)
			try_release(rc, r);
	}
	b->head = NULL;
	rc->zcheck_ms = now_ms();
}

static void batch_reclaim(struct mwr_rcache *rc, struct batch *b)
{
	batch_reclaim_f(rc, b, 0);
	if (rc->zombies >= ZOMBIE_BATCH)
		zombie_recheck(rc, rc->zombies);
}

/* Take r (INVALID) out of the tree into the batch. */
static void unlink_region(struct mwr_rcache *rc, struct mwr_region *r,
			  struct batch *b)
{
	mwr_tree_remove(&rc->tree, r);
	mwr_index_remove(&rc->index, r);
	lru_del(rc, r);
	rc->nregions--;
	rc->zombies++;		/* until released */
	r->z_next = &rc->zlist;
	r->z_prev = rc->zlist.z_prev;
	rc->zlist.z_prev->z_next = r;
	rc->zlist.z_prev = r;
	__atomic_fetch_and(&r->state, ~MWR_INTREE, __ATOMIC_ACQ_REL);
	batch_add(b, r);
}

/* Bounded processing of queued regions; returns work left. */
static int process_invalid(struct mwr_rcache *rc, unsigned max)
{
	struct batch b = { NULL };
	unsigned n = 0;

	if (!rc->pending)
		rc->pending = __atomic_exchange_n(&rc->inv, NULL, __ATOMIC_ACQUIRE);
	while (rc->pending && n < max) {
		struct mwr_region *r = rc->pending;
		uint64_t st;

		rc->pending = r->inv_next;
		st = __atomic_and_fetch(&r->state, ~MWR_QUEUED, __ATOMIC_ACQ_REL);
		if (st & MWR_FREE)
			continue;
		if (st & MWR_INTREE) {
			if (st & MWR_INVALID)
				unlink_region(rc, r, &b);
		} else if (!(st & MWR_TRANSIENT)) {
			batch_add(&b, r);	/* a zombie's last put */
		}
		n++;
	}
	batch_reclaim(rc, &b);
	return rc->pending || __atomic_load_n(&rc->inv, __ATOMIC_RELAXED);
}

/*
 * Safety net: count the references of up to max zombies again (from the
 * front, rotating them to the back). References that changed hands between
 * threads can leave a zombie that no put queues; this bounds its life to a
 * few helper rounds.
 */
static void zombie_recheck(struct mwr_rcache *rc, size_t max)
{
	struct batch b = { NULL };
	struct mwr_region *r;

	if (max > rc->zombies)
		max = rc->zombies;	/* each zombie at most once */
	while (max-- && rc->zlist.z_next != &rc->zlist) {
		r = rc->zlist.z_next;
		/* rotate */
		r->z_prev->z_next = r->z_next;
		r->z_next->z_prev = r->z_prev;
		r->z_next = &rc->zlist;
		r->z_prev = rc->zlist.z_prev;
		rc->zlist.z_prev->z_next = r;
		rc->zlist.z_prev = r;
		if (!(ld_state(r) & (MWR_QUEUED | MWR_FREE | MWR_INTREE)) &&
		    !r->lru_next)
			batch_add(&b, r);
	}
	batch_reclaim_f(rc, &b, 1);
}

/* Evict idle regions until nregions < max_r and bytes + need <= max_b.
 * CLOCK: a region used since the hand last passed gets a second chance. */
static int evict(struct mwr_rcache *rc, size_t max_r, size_t need, size_t max_b)
{
	size_t budget = 2 * rc->nregions + 2, freed = 0;
	struct batch b = { NULL };

	while ((rc->nregions >= max_r || rc->bytes - freed + need > max_b) &&
	       budget--) {
		struct mwr_region *r = rc->hand;
		uint64_t st;

		if (!r || r == &rc->lru) {
			rc->hand = rc->lru.lru_next;
			if (rc->hand == &rc->lru)
				break;
			continue;
		}
		rc->hand = r->lru_next;
		st = ld_state(r);
		if ((st & (MWR_COUNT_MASK | MWR_INVALID)))
			continue;
		if (__atomic_load_n(&r->referenced, __ATOMIC_RELAXED)) {
			__atomic_store_n(&r->referenced, 0, __ATOMIC_RELAXED);
			continue;
		}
		if (!cas_state(r, &st, st | MWR_INVALID))
			continue;	/* taken meanwhile */
		rc->evictions++;
		mwu_stat_add(MWU_ST_EVICTIONS, 1);
		freed += r->pub.len;
		unlink_region(rc, r, &b);
	}
	batch_reclaim_f(rc, &b, 1);
	return (rc->nregions >= max_r || rc->bytes + need > max_b) ? -1 : 0;
}

static int sink_drain(struct mwu_sink *s, unsigned max)
{
	struct mwr_rcache *rc = (void *)((char *)s - offsetof(struct mwr_rcache, sink));
	int left;

	pthread_mutex_lock(&rc->lock);
	left = process_invalid(rc, max);
	if (rc->zombies && now_ms() - rc->zcheck_ms >= ZOMBIE_MS)
		zombie_recheck(rc, max);
	pthread_mutex_unlock(&rc->lock);
	return left;
}

static void sink_prepare(struct mwu_sink *s)
{
	struct mwr_rcache *rc = (void *)((char *)s - offsetof(struct mwr_rcache, sink));

	pthread_mutex_lock(&rc->lock);
}

static void sink_parent(struct mwu_sink *s)
{
	struct mwr_rcache *rc = (void *)((char *)s - offsetof(struct mwr_rcache, sink));

	pthread_mutex_unlock(&rc->lock);
}

/* fork child: the registrations belong to the parent. Forget every cached
 * region (deregister nothing unless the ops are fork-safe); regions the
 * child still holds are released without deregistration at their put. */
static void sink_child(struct mwu_sink *s)
{
	struct mwr_rcache *rc = (void *)((char *)s - offsetof(struct mwr_rcache, sink));
	struct mwr_region *r, *next;
	struct batch b = { NULL };

	pthread_mutex_init(&rc->lock, NULL);
	if (!(rc->ops.flags & MW_OPS_F_FORK_SAFE))
		rc->forked = 1;
	/* Queued regions: forget the queue, keep them reachable below. */
	for (r = rc->pending; r; r = r->inv_next)
		__atomic_fetch_and(&r->state, ~MWR_QUEUED, __ATOMIC_RELAXED);
	for (r = rc->inv; r; r = r->inv_next)
		__atomic_fetch_and(&r->state, ~MWR_QUEUED, __ATOMIC_RELAXED);
	rc->inv = NULL;
	rc->pending = NULL;
	for (r = rc->lru.lru_next; r != &rc->lru; r = next) {
		next = r->lru_next;
		/* The watch died with the parent's context. */
		r->watch.word = &mwu_dead_word;
		__atomic_fetch_or(&r->state, MWR_INVALID, __ATOMIC_RELAXED);
		unlink_region(rc, r, &b);
	}
	batch_reclaim(rc, &b);
}

/*
 * Checkpoint: no registration of this cache may outlive it (the restored
 * process has new pages at the same addresses). Gets are gated already
 * (libuser/cr.c); a miss that took the lock before us finishes first, one
 * after us sees the gate under the lock. Deregister every idle region and
 * the deferred ones, then wait (bounded) until the busy ones are put:
 * their last put reclaims them. MW_EBUSY if one stays busy.
 */
static void unlink_all(struct mwr_rcache *rc);

static int cr_quiesce(struct mw_cr_client *c)
{
	struct mwr_rcache *rc = (void *)((char *)c - offsetof(struct mwr_rcache, cr));
	uint64_t deadline = now_ms() + mwu_cr_timeout_ms();

	pthread_mutex_lock(&rc->lock);
	for (;;) {
		unlink_all(rc);
		if (!rc->zombies && !rc->transients && !rc->nregions)
			break;
		if (now_ms() >= deadline) {
			mwu_log(MWU_LOG_WARN, "checkpoint: cache %p: %zu "
				"registrations still in use", (void *)rc,
				rc->zombies + rc->transients);
			pthread_mutex_unlock(&rc->lock);
			return MW_EBUSY;
		}
		pthread_mutex_unlock(&rc->lock);
		usleep(500);
		pthread_mutex_lock(&rc->lock);
	}
	pthread_mutex_unlock(&rc->lock);
	return 0;
}

/* Continue or restart: the cache is empty; it fills again from the new
 * source's watches. Nothing of the old life is left to drop but the
 * kernel state a restore does not bring back (membarrier, refs.c). */
static void cr_resume(struct mw_cr_client *c, enum mw_cr_phase how)
{
	(void)c;
	if (how == MW_CR_RESTART)
		mwr_refs_restarted();
}

static size_t memlock_limit(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	struct rlimit rl;

	/* CAP_IPC_LOCK lifts the limit for pinning. */
	if (!syscall(SYS_capget, &h, d) && (d[0].effective & (1U << CAP_IPC_LOCK)))
		return SIZE_MAX;
	if (getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return SIZE_MAX;
	return rl.rlim_cur;
}

MW_API int mw_rcache_create(const struct mw_rcache_params *p,
			    struct mw_rcache **out)
{
	struct mwr_rcache *rc;
	size_t lim;
	int ret = mwu_ready();

	if (ret)
		return ret;
	if (!p || !out || !p->ops || !p->ops->reg || !p->ops->dereg)
		return MW_EINVAL;
	if (p->flags & ~MW_RCACHE_F_MASK)
		return MW_EFLAGS;
	mwr_refs_init();
	/* Cache-line aligned members (inv): calloc's alignment is not enough. */
	if (posix_memalign((void **)&rc, MWU_CACHELINE, sizeof(*rc)))
		return MW_ENOMEM;
	memset(rc, 0, sizeof(*rc));
	rc->magic = MWR_MAGIC;
	pthread_mutex_init(&rc->lock, NULL);
	rc->ops = *p->ops;
	rc->flags = p->flags;
	rc->max_regions = p->max_regions ? p->max_regions : 16384;
	lim = memlock_limit();
	rc->max_bytes = p->max_bytes && p->max_bytes < lim ? p->max_bytes : lim;
	rc->lru.lru_next = rc->lru.lru_prev = &rc->lru;
	rc->zlist.z_next = rc->zlist.z_prev = &rc->zlist;
	rc->hand = &rc->lru;
	rc->sink.drain = sink_drain;
	rc->sink.atfork_prepare = sink_prepare;
	rc->sink.atfork_parent = sink_parent;
	rc->sink.atfork_child = sink_child;
	mwu_sink_add(&rc->sink);	/* fork handling needs it in every mode */
	rc->cr.quiesce = cr_quiesce;
	rc->cr.resume = cr_resume;
	mw_cr_client_add(&rc->cr);
	*out = (struct mw_rcache *)rc;
	return 0;
}

static int check_rc(struct mwr_rcache *rc)
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

/* The last reference of a region out of the tree: reclaim it under its
 * cache's lock. 'locked' is the cache whose lock the caller holds (NULL:
 * none); another cache's region is queued instead, so that no two cache
 * locks ever nest. */
static void last_ref(struct mwr_region *r, uint64_t gen,
		     struct mwr_rcache *locked)
{
	struct mwr_rcache *rc = r->rc;
	uint64_t st;

	if (locked && locked != rc) {
		flag_queue(rc, r, gen, 0);
		return;
	}
	if (!locked)
		pthread_mutex_lock(&rc->lock);
	/* Under the lock: nobody can release or reuse r meanwhile. */
	st = ld_state(r);
	if ((st >> MWR_GEN_SHIFT) != gen || r->rc != rc) {
		/* released (and maybe reused) by someone else */
	} else if (st & MWR_TRANSIENT) {
		try_release(rc, r);
	} else {
		struct batch b = { NULL };

		if (!(st & (MWR_QUEUED | MWR_FREE | MWR_INTREE)))
			batch_add(&b, r);
		batch_reclaim(rc, &b);
	}
	if (!locked) {
		process_invalid(rc, DRAIN_PER_CALL);
		pthread_mutex_unlock(&rc->lock);
	}
}

/* Drop an atomic reference. 0, or -1 when the atomic count is zero (the
 * reference is some thread's local one): never underflow the count. */
static int drop_ref(struct mwr_region *r, struct mwr_rcache *locked)
{
	uint64_t st = ld_state(r);

	do {
		if (!(st & MWR_COUNT_MASK))
			return -1;
	} while (!cas_state(r, &st, st - 1));
	st--;
	if (mwu_likely(st & MWR_COUNT_MASK) ||
	    (!(st & MWR_TRANSIENT) && (st & MWR_INTREE)))
		return 0;
	last_ref(r, st >> MWR_GEN_SHIFT, locked);
	return 0;
}

/* Drop a reference we know we own (taken by CAS in try_hit). If a put of
 * another thread's local reference consumed the atomic count, book it as
 * debt instead, and let the queue processing count again. */
static void drop_known(struct mwr_region *r, struct mwr_rcache *locked)
{
	uint64_t st;

	if (mwu_likely(!drop_ref(r, locked)))
		return;
	__atomic_fetch_add(&r->debt, 1, __ATOMIC_ACQ_REL);
	st = ld_state(r);
	if (!(st & MWR_INTREE))
		flag_queue(r->rc, r, st >> MWR_GEN_SHIFT, 0);
}

/* Drop a thread-local reference: plain stores, then look at the flags;
 * a reclaimer that saw our hold expects us to queue the region. */
static inline void local_put(struct mwr_hold *h, struct mwr_region *r)
{
	uint32_t n = h->refs - 1;

	__atomic_store_n(&h->refs, n, __ATOMIC_RELEASE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (mwu_unlikely(!n && (ld_state(r) & MWR_INVALID)))
		flag_queue(r->rc, r, h->gen, 0);
}

static __attribute__((noinline)) void hit_invalid(struct mwr_rcache *rc,
						  struct mwr_region *r,
						  struct mwr_hold *h)
{
	flag_queue(rc, r, ld_state(r) >> MWR_GEN_SHIFT, MWR_INVALID);
	local_put(h, r);
}

/*
 * The common hit, kept small: the page index, a local reference (plain
 * stores), the state re-read, the validity word. Anything unusual returns
 * NULL and try_hit() below handles it. The slot is only a hint: the state
 * word (flags, generation) read before and after the range fields and the
 * hold decides, as every field is fixed while the generation stands.
 */
static inline __attribute__((always_inline)) struct mwr_region *
try_hit_fast(struct mwr_rcache *rc, uintptr_t s, uintptr_t e)
{
	struct mwr_thr *t = mwr_thr;
	struct mwr_region *r;
	struct mwr_hold *h;
	uint64_t st;
	uint32_t gen;

	if (mwu_unlikely(!t || !mwr_local_ok))
		return NULL;
	r = mwr_index_find(&rc->index, s);
	if (mwu_unlikely(!r))
		return NULL;
	st = ld_state(r);
	if (mwu_unlikely((st & (MWR_INVALID | MWR_FREE | MWR_INTREE)) != MWR_INTREE))
		return NULL;
	if (mwu_unlikely(__atomic_load_n(&r->rc, __ATOMIC_RELAXED) != rc ||
			 __atomic_load_n(&r->start, __ATOMIC_RELAXED) > s ||
			 __atomic_load_n(&r->end, __ATOMIC_RELAXED) < e))
		return NULL;
	gen = (uint32_t)(st >> MWR_GEN_SHIFT);
	h = mwr_hold_of(t, r);
	if (h->r != r || h->gen != gen) {
		if (h->refs)
			return NULL;
		__atomic_store_n(&h->r, r, __ATOMIC_RELAXED);
		__atomic_store_n(&h->gen, gen, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&h->refs, h->refs + 1, __ATOMIC_RELAXED);
	/* The barrier of a reclaimer stands in for a fence here (refs.c);
	 * the field loads above stay before the re-read (acquire). */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (mwu_unlikely((ld_state(r) ^ st) & ~(MWR_COUNT_MASK | MWR_QUEUED))) {
		local_put(h, r);
		return NULL;
	}
	if (!(rc->flags & MW_RCACHE_F_TEST_NO_INVALIDATE) &&
	    mwu_unlikely(!mwu_watch_valid(&r->watch))) {
		hit_invalid(rc, r, h);
		return NULL;
	}
	/* CLOCK bit: racy by design (a lost update costs an eviction
	 * choice), relaxed atomics say so. */
	if (!__atomic_load_n(&r->referenced, __ATOMIC_RELAXED))
		__atomic_store_n(&r->referenced, 1, __ATOMIC_RELAXED);
	return r;
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
		st = ld_state(r);
		do {
			if ((st & (MWR_INVALID | MWR_FREE)) || !(st & MWR_INTREE))
				goto again;
		} while (!cas_state(r, &st, st + 1));
		/* Held: its fields are stable now. Was it reused meanwhile? */
		if (r->rc != rc || r->start > s || r->end < e) {
			drop_known(r, locked);
			continue;
		}
		if (locked == rc) {
			mwr_index_publish(&rc->index, r, s);
		} else if (!locked && !pthread_mutex_trylock(&rc->lock)) {
			if (ld_state(r) & MWR_INTREE)
				mwr_index_publish(&rc->index, r, s);
			pthread_mutex_unlock(&rc->lock);
		}
		goto validate;
again:
		;
	}
	return NULL;
validate:
	if (!(rc->flags & MW_RCACHE_F_TEST_NO_INVALIDATE) &&
	    mwu_unlikely(!mwu_watch_valid(&r->watch))) {
		flag_queue(rc, r, ld_state(r) >> MWR_GEN_SHIFT, MWR_INVALID);
		drop_known(r, locked);
		return NULL;
	}
	/* CLOCK bit: racy by design (a lost update costs an eviction
	 * choice), relaxed atomics say so. */
	if (!__atomic_load_n(&r->referenced, __ATOMIC_RELAXED))
		__atomic_store_n(&r->referenced, 1, __ATOMIC_RELAXED);
	return r;
}

static int reg_region(struct mwr_rcache *rc, struct mwr_region *r,
		      uintptr_t s, uintptr_t e)
{
	int ret;

	memset(&r->pub, 0, sizeof(r->pub));
	r->pub.addr = (void *)s;
	r->pub.len = e - s;
	r->pub.index = -1;
	ret = rc->ops.reg(rc->ops.ctx, (void *)s, e - s, &r->pub);
	if (ret) {
		mwu_stat_add(MWU_ST_REG_FAILED, 1);
		return ret < 0 && ret >= MW_ERR_MIN ? ret : MW_EREG;
	}
	mwu_stat_add(MWU_ST_REGS, 1);
	mwu_stat_add(MWU_ST_BYTES, (int64_t)(e - s));
	mwu_stat_add(MWU_ST_REGIONS, 1);
	rc->bytes += e - s;
	return 0;
}

static int get_transient(struct mwr_rcache *rc, uintptr_t s, uintptr_t e,
			 struct mwr_region **out)
{
	struct mwr_region *r = mwr_pool_alloc();
	uint64_t gen;
	int ret;

	if (!r)
		return MW_ENOMEM;
	gen = ld_state(r) >> MWR_GEN_SHIFT;
	/* As in miss(): readers of a stale index slot may look. */
	__atomic_store_n(&r->rc, rc, __ATOMIC_RELAXED);
	__atomic_store_n(&r->start, s, __ATOMIC_RELAXED);
	__atomic_store_n(&r->end, e, __ATOMIC_RELAXED);
	r->watch.word = NULL;
	ret = reg_region(rc, r, s, e);
	if (ret) {
		__atomic_store_n(&r->state, ((gen + 1) << MWR_GEN_SHIFT) | MWR_FREE,
				 __ATOMIC_RELEASE);
		mwr_pool_free(r);
		return ret;
	}
	rc->transients++;
	__atomic_store_n(&r->state, (gen << MWR_GEN_SHIFT) | MWR_TRANSIENT | 1,
			 __ATOMIC_RELEASE);
	*out = r;
	return 0;
}

/* Miss: lock held. Register, watch, publish ('cache' 0: register only,
 * the last put deregisters). */
static int miss(struct mwr_rcache *rc, uintptr_t s, uintptr_t e,
		struct mwr_region **out, int cache)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t as = s & ~(uintptr_t)(pg - 1);
	uintptr_t ae = (e + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1);
	struct mwr_region *r;
	int ret, attempt;

	rc->misses++;
	mwu_stat_add(MWU_ST_MISSES, 1);
	if (rc->bytes + (ae - as) > rc->max_bytes &&
	    evict(rc, SIZE_MAX, ae - as, rc->max_bytes))
		return MW_ELIMIT;
	if (!cache || mwu_core.source == MW_SOURCE_NONE)
		return get_transient(rc, as, ae, out);
	/* Count bound: when every cached region is busy, do not cache. */
	if (evict(rc, rc->max_regions, 0, SIZE_MAX))
		return get_transient(rc, as, ae, out);

	for (attempt = 0; attempt < 3; attempt++) {
		uint64_t gen;

		r = mwr_pool_alloc();
		if (!r)
			return MW_ENOMEM;
		gen = ld_state(r) >> MWR_GEN_SHIFT;
		/* Lock-free readers may still look at r (index.c): their
		 * state re-read rejects these fields, atomics say so. */
		__atomic_store_n(&r->rc, rc, __ATOMIC_RELAXED);
		__atomic_store_n(&r->start, as, __ATOMIC_RELAXED);
		__atomic_store_n(&r->end, ae, __ATOMIC_RELAXED);
		__atomic_store_n(&r->referenced, 1, __ATOMIC_RELAXED);
		r->inv_next = NULL;
		/* Events before publication must not queue it: the watch
		 * callback ignores other generations. */
		r->gen_cur = (uint32_t)gen - 1;
		/* Not free, not in the tree, no references: the watch callback
		 * may flag it INVALID before we publish. */
		__atomic_store_n(&r->state, gen << MWR_GEN_SHIFT, __ATOMIC_RELEASE);
		/* Watch first, then pin: a change between the two shows in
		 * the word, never as a silently stale registration. */
		ret = mw_watch_add(&r->watch, (void *)as, ae - as, on_invalid, r);
		if (ret) {
			__atomic_store_n(&r->state, ((gen + 1) << MWR_GEN_SHIFT) |
					 MWR_FREE, __ATOMIC_RELEASE);
			mwr_pool_free(r);
			if (ret == MW_ENOSPC)
				return get_transient(rc, as, ae, out);
			return ret;
		}
		ret = reg_region(rc, r, as, ae);
		if (ret) {
release_unregistered:
			pthread_mutex_lock(&mwu_core.lock);
			if (mwu_core.source == MW_SOURCE_KERNEL)
				mwu_kernel_unwatch((struct mw_watch *const[]){ &r->watch }, 1);
			else
				mwu_soft_unwatch(&r->watch);
			pthread_mutex_unlock(&mwu_core.lock);
			__atomic_store_n(&r->state, ((gen + 1) << MWR_GEN_SHIFT) |
					 MWR_FREE, __ATOMIC_RELEASE);
			mwr_pool_free(r);
			if (ret)
				return ret;
			continue;
		}
		if (!(rc->flags & MW_RCACHE_F_TEST_NO_INVALIDATE) &&
		    !mwu_watch_valid(&r->watch)) {
			/* Changed while we pinned: the pages may be stale. */
			rc->ops.dereg(rc->ops.ctx, &r->pub);
			mwu_stat_add(MWU_ST_DEREGS, 1);
			rc->bytes -= r->pub.len;
			mwu_stat_add(MWU_ST_BYTES, -(int64_t)r->pub.len);
			mwu_stat_add(MWU_ST_REGIONS, -1);
			ret = 0;
			goto release_unregistered;
		}
		r->debt = 0;
		__atomic_fetch_add(&r->state, MWR_INTREE | 1, __ATOMIC_RELEASE);
		__atomic_store_n(&r->gen_cur, (uint32_t)gen, __ATOMIC_RELEASE);
		/* Invalidated after the check: queue it like any other. */
		if (!(rc->flags & MW_RCACHE_F_TEST_NO_INVALIDATE) &&
		    !mwu_watch_valid(&r->watch))
			flag_queue(rc, r, gen, MWR_INVALID);
		mwr_tree_insert(&rc->tree, r);
		mwr_index_insert(&rc->index, r);
		lru_add(rc, r);
		rc->nregions++;
		*out = r;
		return 0;
	}
	return MW_EREG;
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
	mwu_progress_round(DRAIN_PER_CALL, 0);
	pthread_mutex_lock(&rc->lock);
	if (mwu_cr_gated()) {
		/* A checkpoint began: its quiesce takes this lock next. */
		pthread_mutex_unlock(&rc->lock);
		ret = mwu_cr_wait();
		return ret ? ret : mw_rcache_get((struct mw_rcache *)rc,
						 (void *)s, e - s, 0, out);
	}
	process_invalid(rc, DRAIN_PER_CALL);
	r = mwu_core.source != MW_SOURCE_NONE ? try_hit(rc, s, e, rc) : NULL;
	if (r)
		mwu_count_hit();
	else
		ret = miss(rc, s, e, &r, 1);
	pthread_mutex_unlock(&rc->lock);
	if (!ret)
		*out = &r->pub;
	return ret;
}

/* Unlink every cached region (lock held); in-use ones go at their put. */
static void unlink_all(struct mwr_rcache *rc)
{
	struct mwr_region *r, *next;
	struct batch b = { NULL };

	while (process_invalid(rc, 1024))
		;
	for (r = rc->lru.lru_next; r != &rc->lru; r = next) {
		next = r->lru_next;
		__atomic_fetch_or(&r->state, MWR_INVALID, __ATOMIC_ACQ_REL);
		unlink_region(rc, r, &b);
	}
	batch_reclaim_f(rc, &b, 1);
	zombie_recheck(rc, rc->zombies);
}

/* Fail closed (guard.c): the source no longer guarantees what caching
 * needs. Drop what is cached, register afresh; the last put deregisters. */
static __attribute__((noinline)) int get_uncached(struct mwr_rcache *rc,
						  uintptr_t s, uintptr_t e,
						  struct mw_region **out)
{
	struct mwr_region *r;
	int ret;

	pthread_mutex_lock(&rc->lock);
	if (mwu_cr_gated()) {
		pthread_mutex_unlock(&rc->lock);
		ret = mwu_cr_wait();
		return ret ? ret : mw_rcache_get((struct mw_rcache *)rc,
						 (void *)s, e - s, 0, out);
	}
	if (rc->nregions)
		unlink_all(rc);
	ret = miss(rc, s, e, &r, 0);
	pthread_mutex_unlock(&rc->lock);
	if (!ret)
		*out = &r->pub;
	return ret;
}

MW_API int mw_rcache_get(struct mw_rcache *rc_, const void *addr, size_t len,
			 unsigned flags, struct mw_region **out)
{
	struct mwr_rcache *rc = (struct mwr_rcache *)rc_;
	uintptr_t s = (uintptr_t)addr;
	struct mwr_region *r;
	int ret = check_rc(rc);

	if (ret)
		return ret;
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
	/* Quiesced for a checkpoint: block or fail (one load). */
	if (mwu_cr_gated()) {
		ret = mwu_cr_wait();
		if (ret)
			return ret;
	}
	/* Every get: is caching still safe? (one load, guard.c) */
	if (mwu_unlikely(!mwr_guaranteed()) &&
	    !(rc->flags & MW_RCACHE_F_TEST_NO_GUARANTEE))
		return get_uncached(rc, s, s + len, out);
	if (mwu_likely(mwu_core.source != MW_SOURCE_NONE)) {
		r = try_hit_fast(rc, s, s + len);
		if (mwu_likely(r != NULL)) {
			mwu_count_hit();
			*out = &r->pub;
			return 0;
		}
	}
	return get_slow(rc, s, s + len, out);
}

static __attribute__((noinline)) int put_slow(struct mwr_rcache *rc,
					      struct mwr_region *r)
{
	uint64_t st = ld_state(r);

	if (st & MWR_FREE)
		return MW_EFOREIGN;
	if (mwu_likely(!drop_ref(r, NULL)))
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
	st = ld_state(r);
	if (!(st & (MWR_INTREE | MWR_QUEUED | MWR_FREE)))
		last_ref(r, st >> MWR_GEN_SHIFT, rc);
	pthread_mutex_unlock(&rc->lock);
	return 0;
}

MW_API int mw_rcache_put(struct mw_rcache *rc_, struct mw_region *pub)
{
	struct mwr_rcache *rc = (struct mwr_rcache *)rc_;
	struct mwr_thr *t = mwr_thr;
	struct mwr_region *r;
	int ret = check_rc(rc);

	if (ret)
		return ret;
	if (!pub)
		return MW_EINVAL;
	if (!mwr_pool_contains(pub))
		return MW_EFOREIGN;
	r = mwr_of_pub(pub);
	if (__atomic_load_n(&r->rc, __ATOMIC_RELAXED) != rc)
		return MW_EFOREIGN;
	/* This thread's local reference? */
	if (mwu_likely(t != NULL)) {
		struct mwr_hold *h = mwr_hold_of(t, r);

		if (h->r == r && h->refs &&
		    h->gen == (uint32_t)(ld_state(r) >> MWR_GEN_SHIFT)) {
			local_put(h, r);
			return 0;
		}
	}
	return put_slow(rc, r);
}

MW_API int mw_rcache_flush(struct mw_rcache *rc_)
{
	struct mwr_rcache *rc = (struct mwr_rcache *)rc_;
	int ret = check_rc(rc);

	if (ret)
		return ret;
	mwu_progress_round(0, 0);
	pthread_mutex_lock(&rc->lock);
	unlink_all(rc);
	pthread_mutex_unlock(&rc->lock);
	return 0;
}

static void dump_busy(struct mwr_region *r, void *arg)
{
	if (r->rc != arg)
		return;
	mwu_log(MWU_LOG_DEBUG, "busy region %p [%#lx, %#lx) state %#llx debt %d "
		"busy %ld", (void *)r, (unsigned long)r->start,
		(unsigned long)r->end, (unsigned long long)ld_state(r), r->debt,
		mwr_busy(r));
}

MW_API int mw_rcache_destroy(struct mw_rcache *rc_)
{
	struct mwr_rcache *rc = (struct mwr_rcache *)rc_;
	int ret = check_rc(rc);

	if (ret)
		return ret;
	ret = mw_rcache_flush(rc_);
	if (ret)
		return ret;
	pthread_mutex_lock(&rc->lock);
	if (rc->zombies || rc->transients) {
		if (mwu_core.log_level >= MWU_LOG_DEBUG) {
			(void)mwr_barrier();
			mwr_pool_foreach(dump_busy, rc);
		}
		pthread_mutex_unlock(&rc->lock);
		return MW_EBUSY;
	}
	rc->magic = 0;
	pthread_mutex_unlock(&rc->lock);
	mw_cr_client_remove(&rc->cr);
	mwu_sink_remove(&rc->sink);
	mwr_index_destroy(&rc->index);
	pthread_mutex_destroy(&rc->lock);
	free(rc);
	return 0;
}

MW_API int mw_rcache_stats(struct mw_rcache *rc_, struct mw_rcache_stats *st)
{
	struct mwr_rcache *rc = (struct mwr_rcache *)rc_;
	struct mw_stats g;
	int ret = check_rc(rc);

	if (ret)
		return ret;
	if (!st)
		return MW_EINVAL;
	memset(st, 0, sizeof(*st));
	mw_stats_get(&g);
	pthread_mutex_lock(&rc->lock);
	st->hits = g.hits;		/* process-wide: hits are per thread */
	st->misses = rc->misses;
	st->invalidations = rc->invalidations;
	st->evictions = rc->evictions;
	st->regions = rc->nregions;
	st->bytes = rc->bytes;
	st->zombies = rc->zombies;
	st->busy_regions = rc->zombies + rc->transients;
	st->max_bytes = rc->max_bytes;
	pthread_mutex_unlock(&rc->lock);
	return 0;
}
