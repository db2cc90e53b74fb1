// SPDX-License-Identifier: BSD-3-Clause
/*
 * Consumer release callbacks. Delivery may run inside a hook (inside
 * free()/munmap() of any thread), so the table is a fixed array read
 * without locks or allocation; add/remove serialise on a mutex.
 *
 * Each slot has a state (FREE -> LIVE -> DYING -> FREE) and a count of
 * deliveries in flight. A deliverer sees LIVE, announces itself (active++),
 * and checks LIVE again before it reads fn and arg; remove marks the slot
 * DYING and waits for active to drain before it clears fn and arg. So a
 * delivery always calls a (fn, arg) pair as it was added, and once
 * mw_release_cb_remove() returns no delivery of that pair is running or
 * will start (the consumer may free arg).
 *
 * A callback must not add or remove callbacks other than itself; removing
 * its own slot from inside its delivery does not wait for itself.
 */
#include <sched.h>

#include "libuser/internal.h"

#define MWU_MAX_CB 8

enum { CB_FREE = 0, CB_LIVE, CB_DYING };

static struct {
	int state;		/* CB_*, seq_cst */
	unsigned active;	/* deliveries in flight */
	mw_release_cb fn;	/* written only while FREE or DYING, active == 0 */
	void *arg;
} cbs[MWU_MAX_CB];
static pthread_mutex_t cb_lock = PTHREAD_MUTEX_INITIALIZER;
/* Deliveries this thread is inside, per slot (nested hooks possible). */
static __thread unsigned char cb_depth[MWU_MAX_CB]
	__attribute__((tls_model("initial-exec")));

void mwu_release_deliver(uintptr_t start, uintptr_t end, enum mw_source src)
{
	unsigned i;

	for (i = 0; i < MWU_MAX_CB; i++) {
		if (__atomic_load_n(&cbs[i].state, __ATOMIC_ACQUIRE) != CB_LIVE)
			continue;
		__atomic_fetch_add(&cbs[i].active, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&cbs[i].state, __ATOMIC_SEQ_CST) == CB_LIVE) {
			mw_release_cb fn = __atomic_load_n(&cbs[i].fn, __ATOMIC_ACQUIRE);
			void *arg = __atomic_load_n(&cbs[i].arg, __ATOMIC_ACQUIRE);

			cb_depth[i]++;
			fn(arg, start, end, src);
			cb_depth[i]--;
		}
		__atomic_fetch_sub(&cbs[i].active, 1, __ATOMIC_RELEASE);
	}
}

MW_API int mw_release_cb_add(mw_release_cb cb, void *arg)
{
	int ret = mwu_ready();
	unsigned i;

	if (ret)
		return ret;
	if (!cb)
		return MW_EINVAL;
	pthread_mutex_lock(&cb_lock);
	ret = MW_ECALLBACKS;
	for (i = 0; i < MWU_MAX_CB; i++)
		if (__atomic_load_n(&cbs[i].state, __ATOMIC_RELAXED) == CB_FREE) {
			__atomic_store_n(&cbs[i].fn, cb, __ATOMIC_RELAXED);
			__atomic_store_n(&cbs[i].arg, arg, __ATOMIC_RELAXED);
			/* Publishes fn and arg together. */
			__atomic_store_n(&cbs[i].state, CB_LIVE, __ATOMIC_SEQ_CST);
			ret = 0;
			break;
		}
	pthread_mutex_unlock(&cb_lock);
	return ret;
}

MW_API int mw_release_cb_remove(mw_release_cb cb, void *arg)
{
	int ret = mwu_ready();
	unsigned i;

	if (ret)
		return ret;
	if (!cb)
		return MW_EINVAL;
	pthread_mutex_lock(&cb_lock);
	for (i = 0; i < MWU_MAX_CB; i++)
		if (__atomic_load_n(&cbs[i].state, __ATOMIC_RELAXED) == CB_LIVE &&
		    cbs[i].fn == cb && cbs[i].arg == arg)
			break;
	if (i == MWU_MAX_CB) {
		pthread_mutex_unlock(&cb_lock);
		return MW_EINVAL;
	}
	/* No new delivery of this slot starts from here on. */
	__atomic_store_n(&cbs[i].state, CB_DYING, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&cb_lock);
	/* Wait for the ones in flight (not holding cb_lock, so that a running
	 * callback may still take it), except our own if we are one. */
	while (__atomic_load_n(&cbs[i].active, __ATOMIC_SEQ_CST) > cb_depth[i])
		sched_yield();
	pthread_mutex_lock(&cb_lock);
	__atomic_store_n(&cbs[i].fn, NULL, __ATOMIC_RELAXED);
	__atomic_store_n(&cbs[i].arg, NULL, __ATOMIC_RELAXED);
	__atomic_store_n(&cbs[i].state, CB_FREE, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&cb_lock);
	return 0;
}

/* fork child: only the forking thread survives. Deliveries and removals
 * that other threads had in flight died with them. */
void mwu_callbacks_atfork_child(void)
{
	unsigned i;

	pthread_mutex_init(&cb_lock, NULL);
	for (i = 0; i < MWU_MAX_CB; i++) {
		cbs[i].active = cb_depth[i];
		if (cbs[i].state == CB_DYING) {
			cbs[i].fn = NULL;
			cbs[i].arg = NULL;
			cbs[i].state = CB_FREE;
		}
	}
}
