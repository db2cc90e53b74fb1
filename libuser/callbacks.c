// SPDX-License-Identifier: MIT
/*
 * Consumer release callbacks. Delivery may run inside a hook (inside
 * free()/munmap() of any thread), so the table is a fixed array read
 * without locks; add/remove serialise on a mutex.
 */
#include "libuser/internal.h"

#define MWU_MAX_CB 8

static struct {
	mw_release_cb fn;	/* published last, cleared first */
	void *arg;
} cbs[MWU_MAX_CB];
static pthread_mutex_t cb_lock = PTHREAD_MUTEX_INITIALIZER;

void mwu_release_deliver(uintptr_t start, uintptr_t end, enum mw_source src)
{
	unsigned i;

	for (i = 0; i < MWU_MAX_CB; i++) {
		mw_release_cb fn = __atomic_load_n(&cbs[i].fn, __ATOMIC_ACQUIRE);

		if (fn)
			fn(__atomic_load_n(&cbs[i].arg, __ATOMIC_RELAXED),
			   start, end, src);
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
		if (!cbs[i].fn) {
			__atomic_store_n(&cbs[i].arg, arg, __ATOMIC_RELAXED);
			__atomic_store_n(&cbs[i].fn, cb, __ATOMIC_RELEASE);
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
	ret = MW_EINVAL;
	for (i = 0; i < MWU_MAX_CB; i++)
		if (cbs[i].fn == cb && cbs[i].arg == arg) {
			__atomic_store_n(&cbs[i].fn, NULL, __ATOMIC_RELEASE);
			ret = 0;
			break;
		}
	pthread_mutex_unlock(&cb_lock);
	return ret;
}
