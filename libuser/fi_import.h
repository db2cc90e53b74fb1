/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A memory monitor for libfabric's MR cache and its import (libfabric >=
 * 1.13, rdma/fi_ext.h): the monitor object with its ops table, the import
 * (load libfabric.so.1 if the system has it, fi_open "mr_cache",
 * fi_import_fid) and the notify call. Two monitors use it: libmmuwatch's
 * own (libuser/fi_monitor.c) and the MPI glue's (mpi/fi_monitor.c), which
 * differ in what subscribe/valid do and in how they report, not in how
 * they reach libfabric. Header-only (static inline), so each library
 * carries its own copy of the code and neither calls into the other: the
 * glue (mpi/) includes it from below, libmmuwatch exports nothing more.
 * Include only where <rdma/fi_ext.h> exists.
 */
#ifndef MWU_FI_IMPORT_H
#define MWU_FI_IMPORT_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_ext.h>

/* The monitor libfabric gets and its ops; export_ops points at ops. */
struct mwu_fi_monitor {
	struct fid_mem_monitor monitor;
	struct fi_ops_mem_monitor ops;
};

/* Static initialiser of the object `self` (its own name). */
#define MWU_FI_MONITOR_INIT(self, start_, stop_, subscribe_, unsubscribe_,     \
			    valid_)                                            \
	{                                                                      \
		.monitor = {.fid.fclass = FI_CLASS_MEM_MONITOR,                \
			    .export_ops = &(self).ops},                        \
		.ops = {.size = sizeof(struct fi_ops_mem_monitor),             \
			.start = (start_),                                     \
			.stop = (stop_),                                       \
			.subscribe = (subscribe_),                             \
			.unsubscribe = (unsubscribe_),                         \
			.valid = (valid_)},                                    \
	}

/* How an import ended; *err holds libfabric's code where there is one. */
enum mwu_fi_import_res {
	MWU_FI_IMPORTED,
	MWU_FI_NO_LIBFABRIC,  /* no libfabric.so.1 on the system */
	MWU_FI_NO_FI_OPEN,    /* a libfabric without fi_open */
	MWU_FI_NO_MR_CACHE,   /* no importable MR cache monitor (< 1.13) */
	MWU_FI_BUSY,	      /* -FI_EBUSY: another monitor already active */
	MWU_FI_IMPORT_FAILED, /* fi_import_fid failed otherwise */
};

typedef int (*mwu_fi_open_fn)(uint32_t, const char *, void *, size_t, uint64_t,
			      struct fid **, void *);

/*
 * Import m into libfabric's MR cache. libfabric is loaded now if the
 * system has it (same soname, so the MPI library later gets this
 * instance), because libfabric takes an import only before its first
 * domain starts a monitor.
 */
static inline enum mwu_fi_import_res mwu_fi_import(struct mwu_fi_monitor *m,
						   int *err)
{
	struct fid *cache;
	mwu_fi_open_fn op;
	void *h;
	int ret;

	*err = 0;
	h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
	if (!h)
		h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!h)
		return MWU_FI_NO_LIBFABRIC;
	op = (mwu_fi_open_fn)dlsym(h, "fi_open");
	if (!op)
		return MWU_FI_NO_FI_OPEN;
	ret = op(FI_VERSION(1, 13), "mr_cache", NULL, 0, 0, &cache, NULL);
	if (ret) {
		*err = ret;
		return MWU_FI_NO_MR_CACHE;
	}
	ret = fi_import_fid(cache, &m->monitor.fid, 0);
	fi_close(cache);
	*err = ret;
	if (ret == -FI_EBUSY)
		return MWU_FI_BUSY;
	return ret ? MWU_FI_IMPORT_FAILED : MWU_FI_IMPORTED;
}

/* libfabric started the monitor and gave it a notify call. */
static inline bool mwu_fi_can_notify(const struct mwu_fi_monitor *m)
{
	return m->monitor.import_ops && m->monitor.import_ops->notify;
}

/*
 * Tell libfabric [start, end) changed (takes its mm_list_rwlock, then
 * mm_lock: no lock of ours held). Only after mwu_fi_can_notify.
 *
 * A delivery that saw the monitor started may call this after libfabric
 * stopped it (the last domain closed). That is harmless: the monitor's
 * list of caches is empty by then and the notify walks nothing, and a
 * later start only sees an extra invalidation. Making stop wait for the
 * delivery would deadlock: libfabric calls stop under mm_state_lock, and
 * a domain opening elsewhere holds mm_list_rwlock for writing while it
 * takes mm_state_lock, which this call's read lock would wait for.
 * libfabric is never unloaded under us: the import took a reference.
 */
static inline void mwu_fi_notify(struct mwu_fi_monitor *m, uintptr_t start,
				 uintptr_t end)
{
	m->monitor.import_ops->notify(&m->monitor, (const void *)start,
				      end - start);
}

#endif /* MWU_FI_IMPORT_H */
