// SPDX-License-Identifier: BSD-3-Clause
/*
 * libmmuwatch as libfabric's memory monitor, without the MPI glue. When the
 * user asks (MMUWATCH_FI_MONITOR=1) and the source can watch (kernel or
 * hooks), library init imports a monitor into libfabric's MR cache
 * (libfabric >= 1.13 import interface, rdma/fi_ext.h:
 * fi_open(FI_VERSION(1,13), "mr_cache") + fi_import_fid), loading
 * libfabric.so.1 first if the system has it, because libfabric takes an
 * import only before its first domain starts a monitor.
 *
 *   subscribe   -> a watch on the range (one per distinct range, counted)
 *   valid       -> that watch still valid and the run-time guarantee
 *                  covers every release path (else false: libfabric drops
 *                  the entry and registers again, i.e. fail closed)
 *   invalidated -> the watch's callback (under the core lock, maybe inside
 *                  the releasing call) only queues the range (rq.h); the
 *                  helper thread, with no lock of ours held, calls
 *                  libfabric's notify, which takes libfabric's mm_lock.
 *                  Never an API call's progress round: a thread inside
 *                  fi_mr_reg holds mm_lock and reaches our ibv_reg_mr
 *                  (leave-pinned), whose round would then deadlock on it.
 *                  Without the helper (MMUWATCH_HELPER=0) valid() alone
 *                  keeps the cache correct; entries go at their next hit.
 *   unsubscribe -> the watch removed when its last subscription goes
 *
 * With the MPI glue loaded (libmmuwatch-mpi, mpi/fi_monitor.c) this stays
 * off: the glue imports its own monitor over the same library. Sources
 * none and hooks-disabled import nothing: libfabric keeps its own monitor,
 * which works next to us (hooks/README.md, the libfabric matrix).
 */
#include "libuser/internal.h"

#if defined(__has_include)
#if __has_include(<rdma/fi_ext.h>)
#define MWU_HAVE_FI 1
#endif
#endif

#ifdef MWU_HAVE_FI
#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "libuser/fi_import.h"
#include "libuser/rq.h"

/* One watched range; libfabric may subscribe the same range twice. */
struct fim_sub {
	struct mw_watch w;
	uintptr_t start, end;
	unsigned refs;
	struct fim_sub *next;
};

#define FIM_BUCKETS 4096U
static struct fim_sub *tab[FIM_BUCKETS];
static pthread_mutex_t tlock = PTHREAD_MUTEX_INITIALIZER; /* tab */
static pthread_mutex_t dlock = PTHREAD_MUTEX_INITIALIZER; /* delivery */
static struct mwu_rq q;
static int started; /* libfabric started the imported monitor */
static int imported;

static struct fim_sub **slot(uintptr_t s, uintptr_t e)
{
	uint64_t h = (uint64_t)s * 0x9E3779B97F4A7C15ull ^ (uint64_t)e;

	return &tab[(h >> 32) % FIM_BUCKETS];
}

static struct fim_sub *find(uintptr_t s, uintptr_t e)
{
	struct fim_sub *f;

	for (f = *slot(s, e); f; f = f->next)
		if (f->start == s && f->end == e)
			return f;
	return NULL;
}

/* Under the core lock (kernel drain) or inside the releasing call
 * (hooks): queue only. */
static void on_invalid(struct mw_watch *w, void *arg)
{
	struct fim_sub *f = arg;

	(void)w;
	if (__atomic_load_n(&started, __ATOMIC_ACQUIRE))
		mwu_rq_push(&q, f->start, f->end);
}

static int mon_start(struct fid_mem_monitor *m)
{
	(void)m;
	__atomic_store_n(&started, 1, __ATOMIC_RELEASE);
	mwu_log(MWU_LOG_INFO, "libfabric started mmuwatch's memory monitor");
	return 0;
}

static void mon_stop(struct fid_mem_monitor *m)
{
	(void)m;
	__atomic_store_n(&started, 0, __ATOMIC_RELEASE);
}

static int mon_subscribe(struct fid_mem_monitor *m, const void *addr,
			 size_t len)
{
	uintptr_t s = (uintptr_t)addr, e = s + len;
	struct fim_sub *f;
	int ret = 0;

	(void)m;
	pthread_mutex_lock(&tlock);
	f = find(s, e);
	if (f) {
		f->refs++;
	} else if (!(f = calloc(1, sizeof(*f)))) {
		ret = -FI_ENOMEM;
	} else {
		f->start = s;
		f->end = e;
		f->refs = 1;
		/* A failed watch fails the subscription: libfabric then does
		 * not cache the region (correct, only slower). */
		if (mw_watch_add(&f->w, addr, len, on_invalid, f)) {
			free(f);
			ret = -FI_ENOSPC;
		} else {
			f->next = *slot(s, e);
			*slot(s, e) = f;
		}
	}
	pthread_mutex_unlock(&tlock);
	return ret;
}

static void mon_unsubscribe(struct fid_mem_monitor *m, const void *addr,
			    size_t len)
{
	uintptr_t s = (uintptr_t)addr, e = s + len;
	struct fim_sub **pp, *f;

	(void)m;
	pthread_mutex_lock(&tlock);
	for (pp = slot(s, e); (f = *pp); pp = &f->next)
		if (f->start == s && f->end == e)
			break;
	if (f && !--f->refs) {
		*pp = f->next;
		mw_watch_remove(&f->w);
		free(f);
	}
	pthread_mutex_unlock(&tlock);
}

static bool mon_valid(struct fid_mem_monitor *m, const void *addr, size_t len)
{
	uintptr_t s = (uintptr_t)addr;
	struct fim_sub *f;
	bool ok;

	(void)m;
	if (!mwu_covers_caching(mwu_guaranteed()))
		return false;
	pthread_mutex_lock(&tlock);
	f = find(s, s + len);
	ok = f && mw_watch_valid(&f->w);
	pthread_mutex_unlock(&tlock);
	return ok;
}

static struct mwu_fi_monitor fim = MWU_FI_MONITOR_INIT(
	fim, mon_start, mon_stop, mon_subscribe, mon_unsubscribe, mon_valid);

void mwu_fi_monitor_deliver(void)
{
	uintptr_t s, e;

	if (!__atomic_load_n(&imported, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&dlock);
	if (!__atomic_load_n(&started, __ATOMIC_ACQUIRE) ||
	    !mwu_fi_can_notify(&fim)) {
		while (mwu_rq_pop(&q, &s, &e))
			;
		mwu_rq_take_full(&q);
	} else {
		if (mwu_rq_take_full(&q))
			mwu_fi_notify(&fim, 0, MWU_RQ_VA_END);
		while (mwu_rq_pop(&q, &s, &e))
			mwu_fi_notify(&fim, s, e);
	}
	pthread_mutex_unlock(&dlock);
}

void mwu_fi_monitor_install(void)
{
	const char *env = getenv("MMUWATCH_FI_MONITOR");
	int ret;

	if (!env || strcmp(env, "1") || imported)
		return;
	if (mwu_core.source != MW_SOURCE_KERNEL &&
	    mwu_core.source != MW_SOURCE_HOOKS) {
		mwu_log(MWU_LOG_INFO,
			"libfabric monitor not imported: source "
			"%s (libfabric keeps its own)",
			mw_source_name(mwu_core.source));
		return;
	}
	if (dlsym(RTLD_DEFAULT, "mw_mpi_status"))
		return; /* the MPI glue imports its own */
	switch (mwu_fi_import(&fim, &ret)) {
	case MWU_FI_IMPORTED:
		break;
	case MWU_FI_NO_LIBFABRIC:
	case MWU_FI_NO_FI_OPEN:
		mwu_log(MWU_LOG_WARN, "MMUWATCH_FI_MONITOR=1 but no libfabric "
				      "with fi_open");
		return;
	case MWU_FI_NO_MR_CACHE:
		mwu_log(MWU_LOG_WARN,
			"libfabric has no importable MR cache "
			"monitor (%d): it keeps its own",
			ret);
		return;
	case MWU_FI_BUSY: /* a domain already started another monitor */
	case MWU_FI_IMPORT_FAILED:
		mwu_log(MWU_LOG_WARN,
			"libfabric refused mmuwatch's memory "
			"monitor (%d): it keeps its own",
			ret);
		return;
	}
	__atomic_store_n(&imported, 1, __ATOMIC_RELEASE);
	if (getenv("FI_MR_CACHE_MONITOR"))
		mwu_log(MWU_LOG_WARN, "FI_MR_CACHE_MONITOR is set: libfabric "
				      "uses that monitor, not mmuwatch's");
	mwu_log(MWU_LOG_INFO, "memory monitor imported into libfabric");
	mwu_helper_start();
}

#else /* no libfabric headers at build time */

void mwu_fi_monitor_deliver(void)
{
}

void mwu_fi_monitor_install(void)
{
	if (getenv("MMUWATCH_FI_MONITOR"))
		mwu_log(MWU_LOG_WARN, "MMUWATCH_FI_MONITOR: this libmmuwatch "
				      "was built without libfabric headers");
}

#endif
