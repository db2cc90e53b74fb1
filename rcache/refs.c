// SPDX-License-Identifier: BSD-3-Clause
/*
 * Per-thread state of the cache: the hold table of local references (see
 * internal.h for the protocol). Threads register their state once; at
 * thread exit their local references become ordinary atomic references.
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rcache/internal.h"

__thread struct mwr_thr *mwr_thr __attribute__((tls_model("initial-exec")));
int mwr_local_ok;
static pthread_mutex_t thr_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mwr_thr *thr_list;	/* under thr_lock only */
/*
 * Registered threads whose hold table may contain local references
 * (t->may_local). Read without the lock by mwr_barrier_needed(): the list
 * itself is never walked without thr_lock (an exiting thread frees its
 * table, ~180 KB, i.e. munmap).
 */
static unsigned long nr_local;
static pthread_key_t thr_key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void thr_exit(void *p)
{
	struct mwr_thr *t = p, **pp;
	unsigned i;

	pthread_mutex_lock(&thr_lock);
	/* Hand the local references over to the atomic counts. */
	for (i = 0; i < MWR_HOLD_SIZE; i++) {
		struct mwr_hold *h = &t->hold[i];
		uint64_t st;

		if (!h->refs)
			continue;
		/* Only onto the same incarnation (a put from another thread
		 * may have paid these references already). */
		st = __atomic_load_n(&h->r->state, __ATOMIC_ACQUIRE);
		do {
			if ((st >> MWR_GEN_SHIFT) != h->gen || (st & MWR_FREE))
				break;
		} while (!__atomic_compare_exchange_n(&h->r->state, &st, st + h->refs,
						      0, __ATOMIC_ACQ_REL,
						      __ATOMIC_ACQUIRE));
		if ((st >> MWR_GEN_SHIFT) == h->gen && !(st & MWR_FREE))
			mwr_requeue(h->r, h->gen);
	}
	for (pp = &thr_list; *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	/* Its references are atomic now: no barrier needed for it. */
	if (t->may_local)
		__atomic_fetch_sub(&nr_local, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&thr_lock);
	mwr_thr = NULL;
	free(t);
}

/* No new local references, for good: the gate's bit first (a get that
 * still read the gate open raced as one that read mwr_local_ok before),
 * then the word. Callers that race with registering threads hold thr_lock. */
static void local_off(void)
{
	__atomic_fetch_or(&mwu_gate, MWU_GATE_STICKY, __ATOMIC_SEQ_CST);
	__atomic_store_n(&mwr_local_ok, 0, __ATOMIC_SEQ_CST);
}

static void init_once(void)
{
	pthread_key_create(&thr_key, thr_exit);
	/* Without expedited membarrier every reference is atomic. */
	if (!syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
		     0, 0)) {
		mwr_local_ok = 1;
	} else {
		local_off();
		mwu_log(MWU_LOG_INFO,
			"membarrier unavailable: atomic references only");
	}
}

void mwr_refs_init(void)
{
	pthread_once(&once, init_once);
}

struct mwr_thr *mwr_thr_get_slow(void)
{
	struct mwr_thr *t;

	mwr_refs_init();
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	pthread_mutex_lock(&thr_lock);
	t->next = thr_list;
	thr_list = t;
	/* mwr_local_ok only ever goes 1 -> 0, under thr_lock: a thread that
	 * registers after the switch never takes a local reference. */
	t->may_local = __atomic_load_n(&mwr_local_ok, __ATOMIC_RELAXED);
	if (t->may_local)
		__atomic_fetch_add(&nr_local, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&thr_lock);
	/* Dekker with mwr_barrier_needed(): a reclaimer that read nr_local
	 * before our increment flagged its regions before that read, so our
	 * state re-reads (all after this fence) see the flags. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	pthread_setspecific(thr_key, t);
	/* A thread with a hold table counts its hits: the hit path counts
	 * without asking (mwu_count_hit() without its test). */
	if (!mwu_tstat.linked)
		mwu_tstat_link();
	mwr_thr = t;
	return t;
}

int mwr_barrier_needed(void)
{
	const struct mwr_thr *self = mwr_thr;
	unsigned long mine = self && self->may_local ? 1 : 0;

	/* Orders the caller's flag updates (state RMWs) before the count. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return __atomic_load_n(&nr_local, __ATOMIC_SEQ_CST) > mine;
}

/* Stop taking local references (membarrier broke). Threads registered
 * so far keep may_local: their tables may still hold references, so a
 * reclaim keeps needing a barrier until they exit. */
static void disable_local(void)
{
	pthread_mutex_lock(&thr_lock);
	local_off();
	pthread_mutex_unlock(&thr_lock);
}

int mwr_barrier(void)
{
	static int warned;
	int tries, err = 0;

	if (!mwr_barrier_needed())
		return 0;
	for (tries = 0; tries < 3; tries++) {
		if (!syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0))
			return 0;
		err = errno;
		if (err != EINTR && err != ENOMEM && err != EAGAIN)
			break;
		sched_yield();
	}
	/*
	 * No fence on the other threads: their hold tables cannot be trusted
	 * (a reference may not be visible yet). The caller must treat the
	 * regions as busy (they stay pinned zombies and are counted again
	 * later). A permanent failure also stops new local references, so
	 * that once the threads that had them exit, reclaims work again.
	 */
	if (err != EINTR && err != ENOMEM && err != EAGAIN)
		disable_local();
	if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		mwu_log(MWU_LOG_WARN, "membarrier failed (%s): regions kept pinned "
			"until references can be counted", strerror(err));
	return -1;
}

/*
 * C/R restart (rcache.c's client): a restored process is a new mm to the
 * kernel, and the membarrier registration is not restored (CRIU does not
 * save it): without this every barrier fails with EPERM and no region is
 * ever reclaimed again. Register again; if that fails, no thread may take
 * local references any more: safe to clear now, as the checkpoint left no
 * region and no reference.
 */
void mwr_refs_restarted(void)
{
	struct mwr_thr *t;

	if (!__atomic_load_n(&mwr_local_ok, __ATOMIC_ACQUIRE) ||
	    !syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0))
		return;
	mwu_log(MWU_LOG_WARN, "restart: membarrier registration failed (%s): "
		"atomic references only", strerror(errno));
	pthread_mutex_lock(&thr_lock);
	local_off();
	for (t = thr_list; t; t = t->next)
		t->may_local = 0;
	__atomic_store_n(&nr_local, 0, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&thr_lock);
}

long mwr_busy(const struct mwr_region *r)
{
	struct mwr_thr *t;
	long n;

	/* Under thr_lock: an exiting thread moves its local references to
	 * the atomic count under the same lock, so none is missed. */
	pthread_mutex_lock(&thr_lock);
	uint64_t st = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
	uint32_t gen = (uint32_t)(st >> MWR_GEN_SHIFT);

	n = (long)(st & MWR_COUNT_MASK) - __atomic_load_n(&r->debt, __ATOMIC_ACQUIRE);
	for (t = thr_list; t; t = t->next) {
		const struct mwr_hold *h = mwr_hold_of(t, r);

		if (__atomic_load_n(&h->r, __ATOMIC_RELAXED) == r &&
		    __atomic_load_n(&h->gen, __ATOMIC_RELAXED) == gen)
			/* acquire: pairs with local_put()'s release, so what
			 * the holder read of r comes before our reuse of it */
			n += __atomic_load_n(&h->refs, __ATOMIC_ACQUIRE);
	}
	pthread_mutex_unlock(&thr_lock);
	return n;
}

void mwr_refs_atfork_child(void)
{
	struct mwr_thr *keep = mwr_thr;

	/* Only this thread survives; the others' holds died with them. */
	pthread_mutex_init(&thr_lock, NULL);
	thr_list = keep;
	if (keep)
		keep->next = NULL;
	nr_local = keep && keep->may_local ? 1 : 0;
	/* membarrier registration does not survive fork: register again or
	 * turn this thread's local references into atomic ones. */
	if (mwr_local_ok &&
	    syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0)) {
		local_off();
		for (unsigned i = 0; keep && i < MWR_HOLD_SIZE; i++) {
			struct mwr_hold *h = &keep->hold[i];

			if (h->refs && (__atomic_load_n(&h->r->state, __ATOMIC_ACQUIRE) >>
					MWR_GEN_SHIFT) == h->gen)
				__atomic_fetch_add(&h->r->state, h->refs,
						   __ATOMIC_ACQ_REL);
			h->refs = 0;
		}
		if (keep)
			keep->may_local = 0;
		nr_local = 0;
	}
}
