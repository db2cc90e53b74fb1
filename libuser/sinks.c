// SPDX-License-Identifier: BSD-3-Clause
/*
 * Sinks are the caches: the helper thread and API calls give each a bounded
 * amount of deferred work; fork handling walks them.
 * Lock order: sink_lock -> cache lock -> mwu_core.lock.
 */
#include "libuser/internal.h"

static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mwu_sink *sinks;

void mwu_sink_add(struct mwu_sink *s)
{
	pthread_mutex_lock(&sink_lock);
	s->next = sinks;
	sinks = s;
	pthread_mutex_unlock(&sink_lock);
	mwu_helper_start();
}

void mwu_sink_remove(struct mwu_sink *s)
{
	struct mwu_sink **pp;

	pthread_mutex_lock(&sink_lock);
	for (pp = &sinks; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	pthread_mutex_unlock(&sink_lock);
}

int mwu_progress_round(unsigned max_events, unsigned max_sink)
{
	struct mwu_sink *s;
	int n = 0, left = 0;

	mwu_guard_check();	/* the periodic bypass check */
	mwu_neighbours_check(0);	/* UCX loaded since? */
	pthread_mutex_lock(&mwu_core.lock);
	if (__atomic_load_n(&mwu_core.state, __ATOMIC_ACQUIRE) == MWU_READY) {
		if (mwu_core.source == MW_SOURCE_KERNEL)
			n = mwu_kernel_drain(max_events);
		else if (mwu_core.source == MW_SOURCE_HOOKS)
			n = mwu_soft_drain_locked(max_events);
	}
	pthread_mutex_unlock(&mwu_core.lock);
	mwu_neighbours_deliver();
	if (!max_sink)
		return n;
	pthread_mutex_lock(&sink_lock);
	for (s = sinks; s; s = s->next)
		left += s->drain(s, max_sink);
	pthread_mutex_unlock(&sink_lock);
	return n + left;
}

void mwu_sinks_atfork_prepare(void)
{
	struct mwu_sink *s;

	pthread_mutex_lock(&sink_lock);
	for (s = sinks; s; s = s->next)
		s->atfork_prepare(s);
}

void mwu_sinks_atfork_parent(void)
{
	struct mwu_sink *s;

	for (s = sinks; s; s = s->next)
		s->atfork_parent(s);
	pthread_mutex_unlock(&sink_lock);
}

void mwu_sinks_atfork_child(void)
{
	struct mwu_sink *s;

	pthread_mutex_init(&sink_lock, NULL);
	for (s = sinks; s; s = s->next)
		s->atfork_child(s);
}
