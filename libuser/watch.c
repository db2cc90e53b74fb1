// SPDX-License-Identifier: BSD-3-Clause
/* Public watch API: dispatch to the active source under the core lock. */
#include "libuser/internal.h"

static int watch_prepare(struct mw_watch *w, const void *start, size_t len,
			 mw_invalid_cb cb, void *arg)
{
	int ret;

	if (!w)
		return MW_EINVAL;
	ret = mwu_check_range(start, len);
	if (ret)
		return ret;
	w->word = &mwu_dead_word;
	w->token = 0;
	w->start = (uintptr_t)start;
	w->end = (uintptr_t)start + len;
	w->cb = cb;
	w->arg = arg;
	w->slot = UINT32_MAX;
	w->flags = 0;
	return 0;
}

MW_API int mw_watch_add_batch(struct mw_watch *const *w,
			      const void *const *starts, const size_t *lens,
			      unsigned n, mw_invalid_cb cb, void *arg)
{
	unsigned i;
	int ret = mwu_ready();

	if (ret)
		return ret;
	if (!w || !starts || !lens || !n)
		return MW_EINVAL;
	mwu_neighbours_check(0);
	for (i = 0; i < n; i++) {
		ret = watch_prepare(w[i], starts[i], lens[i], cb, arg);
		if (ret)
			return ret;
	}
	if (mwu_core.source == MW_SOURCE_NONE)
		return MW_ENOSYS;
	pthread_mutex_lock(&mwu_core.lock);
	if (mwu_core.source == MW_SOURCE_KERNEL) {
		ret = mwu_kernel_watch(w, n);
	} else {
		for (i = 0; i < n && !ret; i++)
			ret = mwu_soft_watch(w[i]);
	}
	pthread_mutex_unlock(&mwu_core.lock);
	return ret;
}

MW_API int mw_watch_add(struct mw_watch *w, const void *start, size_t len,
			mw_invalid_cb cb, void *arg)
{
	return mw_watch_add_batch(&w, &start, &len, 1, cb, arg);
}

MW_API int mw_watch_remove(struct mw_watch *w)
{
	int ret = mwu_ready();

	if (ret)
		return ret;
	if (!w)
		return MW_EINVAL;
	pthread_mutex_lock(&mwu_core.lock);
	if (mwu_core.source == MW_SOURCE_KERNEL)
		ret = mwu_kernel_unwatch(&w, 1);
	else if (mwu_core.source == MW_SOURCE_HOOKS)
		ret = mwu_soft_unwatch(w);
	pthread_mutex_unlock(&mwu_core.lock);
	return ret;
}

MW_API int mw_watch_valid(const struct mw_watch *w)
{
	if (!w || !__atomic_load_n(&w->word, __ATOMIC_ACQUIRE))
		return 0;
	return mwu_watch_valid(w);
}

MW_API int mw_events_progress(unsigned max)
{
	int ret = mwu_ready();

	if (ret)
		return ret;
	return mwu_progress_round(max, max ? max : 1024);
}

MW_API int mw_event_fd(void)
{
	int ret = mwu_ready();

	if (ret)
		return ret;
	if (mwu_core.source != MW_SOURCE_KERNEL)
		return MW_ENOSYS;
	return mwu_kernel_fd();
}

MW_API int mw_release_cb_all(int on)
{
	int ret = mwu_ready();

	if (ret)
		return ret;
	if (mwu_core.source != MW_SOURCE_KERNEL)
		return MW_ENOSYS;
	pthread_mutex_lock(&mwu_core.lock);
	ret = mwu_kernel_watch_all(on);
	pthread_mutex_unlock(&mwu_core.lock);
	return ret;
}
