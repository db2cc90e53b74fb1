/* SPDX-License-Identifier: MIT */
/*
 * Internal interface of the MPI glue (libfabric memory monitor, UCX event
 * forwarding). Everything here is hidden. Until libmmuwatch's public API
 * exists, the glue talks to /dev/mmuwatch through the UAPI itself
 * (kwatch.c) and takes releases from the hooks through hooks/hooks.h.
 */
#ifndef MW_MPI_H
#define MW_MPI_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define MW_HIDDEN __attribute__((visibility("hidden")))
#define MW_EXPORT __attribute__((visibility("default")))

enum mw_mpi_source { MW_SRC_NONE, MW_SRC_KERNEL, MW_SRC_HOOKS };

/* ---- kwatch.c: one /dev/mmuwatch context per process ---- */
MW_HIDDEN int mw_kw_open(void);		/* 0 or -errno */
MW_HIDDEN int mw_kw_ready(void);
MW_HIDDEN int mw_kw_fd(void);
/* Watch [start, start+len) (page-rounded). 0 or -errno. */
MW_HIDDEN int mw_kw_watch(uintptr_t start, size_t len, uint64_t cookie,
			  uint32_t *slot, uint64_t *token);
MW_HIDDEN int mw_kw_unwatch(uint32_t slot, uint64_t token);
/* One load: 1 while words[slot] == token. */
MW_HIDDEN int mw_kw_valid(uint32_t slot, uint64_t token);
/* Ring consumer: calls fn for every event; on overflow calls
 * overflow_fn once (then resets the flag). Blocks up to timeout_ms.
 * Returns events seen or -errno. */
typedef void (*mw_kw_event_fn)(uint64_t cookie, uintptr_t start,
			       uintptr_t end, uint32_t reason);
MW_HIDDEN int mw_kw_drain(mw_kw_event_fn fn, void (*overflow_fn)(void),
			  int timeout_ms, int wake_fd);
MW_HIDDEN void mw_kw_forget_after_fork(void);
/* One load: events or an overflow are waiting in the ring. */
MW_HIDDEN int mw_kw_pending(void);

/* ---- subs.c: the table of watched ranges (libfabric subscriptions and
 * UCX registrations). Lock-protected, fixed capacity, malloc-free after
 * init so the hooks callback may use it. ---- */
#define MW_SUB_FI  1U	/* subscribed by the libfabric monitor */
#define MW_SUB_UCX 2U	/* registration watched for UCX forwarding */
MW_HIDDEN int mw_subs_init(size_t capacity);
/* Add a reference for [start,end) owner. 0 or -errno (ENOSPC when full). */
MW_HIDDEN int mw_subs_add(uintptr_t start, uintptr_t end, unsigned owner);
MW_HIDDEN void mw_subs_del(uintptr_t start, uintptr_t end, unsigned owner);
/* 1 valid, 0 invalid or unknown. */
MW_HIDDEN int mw_subs_valid(uintptr_t start, uintptr_t end);
/* Mark every entry overlapping [start,end) invalid; returns the owners
 * bits of the entries hit (malloc-free, callable from hooks). */
MW_HIDDEN unsigned mw_subs_invalidate(uintptr_t start, uintptr_t end);
/* Kernel recovery after a ring overflow: re-check every word, invalidate
 * the changed ones and report them through fn. */
MW_HIDDEN void mw_subs_rescan(void (*fn)(uintptr_t start, uintptr_t end,
					 unsigned owners));
MW_HIDDEN size_t mw_subs_count(void);

/* ---- core.c ---- */
MW_HIDDEN enum mw_mpi_source mw_mpi_source(void);
MW_HIDDEN const char *mw_mpi_source_name(void);
/* A release seen by the glue (kernel ring or hooks): forwards to libfabric
 * and UCX. sync: called from inside the releasing thread (hooks). */
MW_HIDDEN void mw_mpi_released(uintptr_t start, uintptr_t end,
			       unsigned owners, int sync);
MW_HIDDEN void mw_mpi_log(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
MW_HIDDEN int mw_mpi_env_bool(const char *name, int def);
/* Kernel mode: deliver the ring's pending events now, in the calling
 * thread (called at UCX communication entry points). */
MW_HIDDEN void mw_mpi_sync(void);

/* ---- fi_monitor.c ---- */
MW_HIDDEN void mw_fi_install(void);
MW_HIDDEN void mw_fi_notify(uintptr_t start, uintptr_t end);
MW_HIDDEN const char *mw_fi_state(void);

/* ---- ucx_fwd.c ---- */
MW_HIDDEN void mw_ucx_install(void);
MW_HIDDEN void mw_ucx_forward(uintptr_t start, uintptr_t end);
MW_HIDDEN const char *mw_ucx_state(void);
MW_HIDDEN int mw_ucx_wants_watch(void);

/* Counters shown by mw_mpi_status(). */
struct mw_mpi_stats {
	atomic_ulong fi_subscribe, fi_unsubscribe, fi_valid, fi_invalid,
		fi_notify, ucx_watch, ucx_forward, ucx_sync, ring_events, overflows,
		hook_releases, watch_fail;
};
MW_HIDDEN extern struct mw_mpi_stats mw_mpi_stats;

#endif /* MW_MPI_H */
