// SPDX-License-Identifier: BSD-3-Clause
/*
 * Statistics: global atomic counters for the slow paths, per-thread hit
 * counters (a shared counter would bounce a cache line on every hit), and
 * a report at exit when MMUWATCH_STATS=1.
 */
#include <stdlib.h>
#include <string.h>

#include "libuser/internal.h"

uint64_t mwu_stat[MWU_ST_NR];
__thread struct mwu_tstat mwu_tstat __attribute__((tls_model("initial-exec")));

static pthread_mutex_t tlock = PTHREAD_MUTEX_INITIALIZER;
static struct mwu_tstat *tlist;
static uint64_t hits_exited;	/* hits of threads that are gone */
static pthread_key_t tkey;
static pthread_once_t tkey_once = PTHREAD_ONCE_INIT;

static void tstat_unlink(void *p)
{
	struct mwu_tstat *t = p, **pp;

	pthread_mutex_lock(&tlock);
	for (pp = &tlist; *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	hits_exited += t->hits;
	t->hits = 0;
	pthread_mutex_unlock(&tlock);
}

static void tkey_make(void)
{
	pthread_key_create(&tkey, tstat_unlink);
}

void mwu_tstat_link(void)
{
	struct mwu_tstat *t = &mwu_tstat;

	pthread_once(&tkey_once, tkey_make);
	pthread_mutex_lock(&tlock);
	t->next = tlist;
	tlist = t;
	t->linked = 1;
	pthread_mutex_unlock(&tlock);
	pthread_setspecific(tkey, t);
}

void mwu_stats_atfork_child(void)
{
	/* Only the forking thread survives. */
	pthread_mutex_init(&tlock, NULL);
	tlist = NULL;
	if (mwu_tstat.linked) {
		mwu_tstat.next = NULL;
		tlist = &mwu_tstat;
	}
}

static uint64_t hits_total(void)
{
	uint64_t h;
	struct mwu_tstat *t;

	pthread_mutex_lock(&tlock);
	h = hits_exited;
	for (t = tlist; t; t = t->next)
		h += __atomic_load_n(&t->hits, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&tlock);
	return h;
}

#define LD(s) __atomic_load_n(&mwu_stat[s], __ATOMIC_RELAXED)

MW_API int mw_stats_get(struct mw_stats *st)
{
	if (!st)
		return MW_EINVAL;
	memset(st, 0, sizeof(*st));
	st->hits = hits_total();
	st->misses = LD(MWU_ST_MISSES);
	st->inval_kernel = LD(MWU_ST_INVAL_KERNEL);
	st->inval_hooks = LD(MWU_ST_INVAL_HOOKS);
	st->inval_scan = LD(MWU_ST_INVAL_SCAN);
	st->overflows = LD(MWU_ST_OVERFLOWS);
	st->evictions = LD(MWU_ST_EVICTIONS);
	st->regs = LD(MWU_ST_REGS);
	st->deregs = LD(MWU_ST_DEREGS);
	st->reg_failed = LD(MWU_ST_REG_FAILED);
	st->bytes_pinned = LD(MWU_ST_BYTES);
	st->regions = LD(MWU_ST_REGIONS);
	st->hooks_lost = LD(MWU_ST_HOOKS_LOST);
	return 0;
}

MW_API void mw_stats_print(void *file)
{
	FILE *f = file ? file : stderr;
	struct mw_stats s;

	mw_stats_get(&s);
	fprintf(f, "mmuwatch stats: source=%s hits=%llu misses=%llu "
		"inval_kernel=%llu inval_hooks=%llu inval_scan=%llu overflows=%llu "
		"evictions=%llu regs=%llu deregs=%llu reg_failed=%llu "
		"bytes_pinned=%llu regions=%llu hooks_lost=%llu\n",
		mw_source_name(mwu_core.source),
		(unsigned long long)s.hits, (unsigned long long)s.misses,
		(unsigned long long)s.inval_kernel, (unsigned long long)s.inval_hooks,
		(unsigned long long)s.inval_scan, (unsigned long long)s.overflows,
		(unsigned long long)s.evictions, (unsigned long long)s.regs,
		(unsigned long long)s.deregs, (unsigned long long)s.reg_failed,
		(unsigned long long)s.bytes_pinned, (unsigned long long)s.regions,
		(unsigned long long)s.hooks_lost);
}

__attribute__((destructor)) static void stats_at_exit(void)
{
	const char *v = getenv("MMUWATCH_STATS");

	if (v && !strcmp(v, "1") &&
	    __atomic_load_n(&mwu_core.state, __ATOMIC_ACQUIRE) != MWU_UNINIT)
		mw_stats_print(NULL);
}
