// SPDX-License-Identifier: BSD-3-Clause
/*
 * libfabric memory monitor backed by libmmuwatch (libfabric >= 1.13 import
 * interface, rdma/fi_ext.h). Imported into libfabric's MR cache when this
 * library loads, before any domain opens: libfabric refuses to replace a
 * monitor that a cache already uses.
 *
 *   subscribe   -> mw_watch_add() of the range (subs.c)
 *   valid       -> mw_watch_valid() of its watch (one load in kernel mode)
 *   invalidated -> the watch's invalid callback queues the range; the glue
 *                  thread calls notify (never from the callback: notify
 *                  takes libfabric's mm_lock, which the draining thread may
 *                  hold, since valid and subscribe run under it)
 *   unsubscribe -> mw_watch_remove()
 *
 * MMUWATCH_FI_MONITOR=0 leaves libfabric's own monitor in place.
 *
 * A backend of the glue: the core reaches it only through fi_backend (its
 * ops, registered at load), subs.c only through fi_invalidated.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libuser/fi_import.h"
#include "mwmpi.h"

static const char *state = "not-installed";
static atomic_int started;

static int mon_start(struct fid_mem_monitor *m)
{
	(void)m;
	atomic_store(&started, 1);
	state = "active";
	mw_mpi_log("libfabric started the mmuwatch monitor (source %s)",
		   mw_mpi_source_name());
	return 0;
}

static void mon_stop(struct fid_mem_monitor *m)
{
	(void)m;
	atomic_store(&started, 0);
	state = "imported-stopped";
}

static int mon_subscribe(struct fid_mem_monitor *m, const void *addr,
			 size_t len)
{
	uintptr_t s = (uintptr_t)addr;
	int ret;

	(void)m;
	atomic_fetch_add(&mw_mpi_stats.fi_subscribe, 1);
	if (mw_mpi_source() == MW_SOURCE_NONE)
		return 0;	/* valid() answers false: no caching */
	ret = mw_subs_add(s, s + len, MW_SUB_FI);
	/* Failing the subscription makes libfabric skip caching this
	 * region: correct, only slower. */
	return ret ? -FI_ENOSPC : 0;
}

static void mon_unsubscribe(struct fid_mem_monitor *m, const void *addr,
			    size_t len)
{
	uintptr_t s = (uintptr_t)addr;

	(void)m;
	atomic_fetch_add(&mw_mpi_stats.fi_unsubscribe, 1);
	mw_subs_del(s, s + len, MW_SUB_FI);
}

static bool mon_valid(struct fid_mem_monitor *m, const void *addr, size_t len)
{
	uintptr_t s = (uintptr_t)addr;
	int ok;

	(void)m;
	atomic_fetch_add(&mw_mpi_stats.fi_valid, 1);
	ok = mw_subs_valid(s, s + len);
	if (!ok)
		atomic_fetch_add(&mw_mpi_stats.fi_invalid, 1);
	return ok;
}

static struct mwu_fi_monitor fim =
	MWU_FI_MONITOR_INIT(fim, mon_start, mon_stop, mon_subscribe,
			    mon_unsubscribe, mon_valid);
static atomic_int imported;

/* Ranges whose watches had libfabric references, waiting for notify. */
#define FIQ_CELLS 1024U
static struct mw_rq_cell fiq_cells[FIQ_CELLS];
static struct mw_rq fiq = { .cells = NULL };

static int notify_ready(void)
{
	return atomic_load(&imported) && atomic_load(&started) &&
	       mwu_fi_can_notify(&fim);
}

static void fi_invalidated(uintptr_t start, uintptr_t end)
{
	if (!fiq.cells || !notify_ready())
		return;
	if (mw_rq_push(&fiq, start, end))
		atomic_fetch_add(&mw_mpi_stats.fi_qfull, 1);
	mw_mpi_kick();
}

static void notify(uintptr_t start, uintptr_t end)
{
	atomic_fetch_add(&mw_mpi_stats.fi_notify, 1);
	mwu_fi_notify(&fim, start, end);
}

static int fi_deliver(void)
{
	uintptr_t s, e;
	int n = 0;

	if (!fiq.cells || !mw_rq_pending(&fiq))
		return 0;
	if (!notify_ready()) {
		while (mw_rq_pop(&fiq, &s, &e))
			;
		mw_rq_take_all(&fiq);
		return 0;
	}
	/* The queue overflowed: libfabric drops every overlapping entry. */
	if (mw_rq_take_all(&fiq)) {
		while (mw_rq_pop(&fiq, &s, &e))
			;
		notify(MW_ALL_START, MW_ALL_END);
		return 1;
	}
	while (mw_rq_pop(&fiq, &s, &e)) {
		notify(s, e);
		n++;
	}
	return n;
}

static void fi_atfork_child(void)
{
	/* A push may have been half done by a thread that is gone; the
	 * child's libfabric cache entries are the parent's: drop them all. */
	if (!fiq.cells)
		return;
	memset(fiq_cells, 0, sizeof(fiq_cells));
	mw_rq_init(&fiq, fiq_cells, FIQ_CELLS);
	if (notify_ready())
		atomic_store(&fiq.all, 1);
}

static const char *fi_state(void)
{
	return state;
}

static void fi_install(void)
{
	const char *other = getenv("FI_MR_CACHE_MONITOR");
	int ret;

	mw_rq_init(&fiq, fiq_cells, FIQ_CELLS);
	if (!mw_mpi_env_bool("MMUWATCH_FI_MONITOR", 1)) {
		state = "off (MMUWATCH_FI_MONITOR=0)";
		return;
	}
	/* The import must happen before the MPI library dlopens its OFI
	 * component and opens a domain. */
	switch (mwu_fi_import(&fim, &ret)) {
	case MWU_FI_IMPORTED:
		break;
	case MWU_FI_NO_LIBFABRIC:
		state = "no-libfabric";
		return;
	case MWU_FI_NO_FI_OPEN:
		state = "libfabric-without-fi_open";
		return;
	case MWU_FI_NO_MR_CACHE:
		state = "libfabric-without-import";
		fprintf(stderr, "mmuwatch: libfabric has no importable MR cache "
			"monitor (fi_open mr_cache: %d); libfabric keeps its "
			"own monitor\n", ret);
		return;
	case MWU_FI_BUSY:
		state = "refused-other-monitor-active";
		fprintf(stderr, "mmuwatch: libfabric already has an active "
			"memory monitor (a domain was opened before mmuwatch "
			"loaded, or another monitor was imported); libfabric "
			"keeps that monitor. Preload or link libmmuwatch so it "
			"loads first.\n");
		return;
	case MWU_FI_IMPORT_FAILED:
		state = "import-failed";
		fprintf(stderr, "mmuwatch: importing the memory monitor into "
			"libfabric failed: %d\n", ret);
		return;
	}
	atomic_store(&imported, 1);
	state = "imported";
	if (other && *other) {
		/* libfabric applies FI_MR_CACHE_MONITOR after the import. */
		state = "overridden-by-FI_MR_CACHE_MONITOR";
		fprintf(stderr, "mmuwatch: FI_MR_CACHE_MONITOR=%s is set; "
			"libfabric will use that monitor instead of "
			"mmuwatch's\n", other);
	}
	mw_mpi_log("libfabric monitor: %s", state);
}

static const struct mw_mpi_backend_ops fi_backend = {
	.name = "libfabric",
	.install = fi_install,
	.deliver = fi_deliver,
	.atfork_child = fi_atfork_child,
	.state = fi_state,
};

/* First backend: installed, delivered and shown before UCX. */
__attribute__((constructor(MW_MPI_BACKEND_PRIO))) static void fi_register(void)
{
	mw_subs_on_fi_invalid(fi_invalidated);
	mw_mpi_backend_register(&fi_backend);
}
