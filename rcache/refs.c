// SPDX-License-Identifier: MIT
/*
 * Per-thread state of the cache: the lookup cache and the hold table (see
 * internal.h for the protocol). Threads register their state once; at
 * thread exit their local references become ordinary atomic references.
 */
#include <linux/membarrier.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rcache/internal.h"

__thread struct mwr_thr *mwr_thr __attribute__((tls_model("initial-exec")));
int mwr_local_ok;
static pthread_mutex_t thr_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mwr_thr *thr_list;
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
	pthread_mutex_unlock(&thr_lock);
	mwr_thr = NULL;
	free(t);
}

static void init_once(void)
{
	pthread_key_create(&thr_key, thr_exit);
	/* Without expedited membarrier every reference is atomic. */
	if (!syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0))
		mwr_local_ok = 1;
	else
		mwu_log(MWU_LOG_INFO, "membarrier unavailable: atomic references only");
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
	pthread_mutex_unlock(&thr_lock);
	pthread_setspecific(thr_key, t);
	mwr_thr = t;
	return t;
}

int mwr_barrier_needed(void)
{
	struct mwr_thr *l = __atomic_load_n(&thr_list, __ATOMIC_ACQUIRE);

	return mwr_local_ok && l && (l->next || l != mwr_thr);
}

void mwr_barrier(void)
{
	struct mwr_thr *only;

	if (!mwr_local_ok)
		return;
	/* No other thread has a hold table: nothing to fence. */
	pthread_mutex_lock(&thr_lock);
	only = thr_list && !thr_list->next ? thr_list : NULL;
	pthread_mutex_unlock(&thr_lock);
	if (!thr_list || (only && only == mwr_thr))
		return;
	syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
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
			n += __atomic_load_n(&h->refs, __ATOMIC_RELAXED);
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
	/* membarrier registration does not survive fork: register again or
	 * turn this thread's local references into atomic ones. */
	if (mwr_local_ok &&
	    syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0)) {
		mwr_local_ok = 0;
		for (unsigned i = 0; keep && i < MWR_HOLD_SIZE; i++) {
			struct mwr_hold *h = &keep->hold[i];

			if (h->refs && (__atomic_load_n(&h->r->state, __ATOMIC_ACQUIRE) >>
					MWR_GEN_SHIFT) == h->gen)
				__atomic_fetch_add(&h->r->state, h->refs,
						   __ATOMIC_ACQ_REL);
			h->refs = 0;
		}
	}
}
