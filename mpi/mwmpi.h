/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal interface of the MPI glue (libfabric memory monitor, UCX event
 * forwarding). Everything here is hidden. The glue is a client of
 * libmmuwatch's public API (include/mmuwatch/mmuwatch.h): one library
 * context per process, whatever the event source.
 *
 * Lock order (outermost first): libfabric's mm_lock -> fwd lock (ucx_fwd.c)
 * -> subs lock (subs.c) -> libmmuwatch's locks. The glue's callbacks from
 * libmmuwatch (per-watch invalid callback, release callback) take none of
 * the glue's locks: they only push to lock-free queues (rangeq.c) and wake
 * the glue thread. Whatever must run outside the library's and libfabric's
 * locks (libfabric notify, ucm_vm_munmap) is delivered from those queues
 * by the glue thread or at UCX's entry points.
 */
#ifndef MW_MPI_H
#define MW_MPI_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <mmuwatch/mmuwatch.h>

#define MWMPI_HIDDEN __attribute__((visibility("hidden")))
#define MWMPI_EXPORT __attribute__((visibility("default")))

/* ---- rangeq.c: bounded lock-free MPMC queue of [start, end) ranges.
 * Push never blocks, never allocates: callable from a hook inside the
 * allocator or from a library callback. A failed push (queue full) sets
 * the sticky "everything" flag, so nothing is dropped silently. ---- */
struct mw_rq_cell {
	_Atomic uint64_t seq;
	uintptr_t start, end;
};
struct mw_rq {
	struct mw_rq_cell *cells;
	uint64_t mask;
	_Alignas(64) _Atomic uint64_t head;	/* next push position */
	_Alignas(64) _Atomic uint64_t tail;	/* next pop position */
	_Alignas(64) atomic_int all;		/* overflowed: treat all as released */
	atomic_ulong full;			/* failed pushes */
};
/* cells: ncells (power of two) zeroed cells, kept by the caller. */
MWMPI_HIDDEN void mw_rq_init(struct mw_rq *q, struct mw_rq_cell *cells,
			     size_t ncells);
/* 0 queued, -1 full (the "all" flag is set and q->full counted). */
MWMPI_HIDDEN int mw_rq_push(struct mw_rq *q, uintptr_t start, uintptr_t end);
/* 1 and the oldest range, or 0 when empty. */
MWMPI_HIDDEN int mw_rq_pop(struct mw_rq *q, uintptr_t *start, uintptr_t *end);
/* 1 once per overflow (clears the flag). */
MWMPI_HIDDEN int mw_rq_take_all(struct mw_rq *q);
/* Cheap check (a few loads): something to pop or the flag set. */
MWMPI_HIDDEN int mw_rq_pending(struct mw_rq *q);

/* The conservative "everything changed" range for a consumer that cannot
 * tell which ranges it missed (x86-64 4-level user address space). */
#define MW_ALL_START ((uintptr_t)0)
#define MW_ALL_END ((uintptr_t)0x7ffffffff000ULL)

/* ---- subs.c: the table of watched ranges (libfabric subscriptions and
 * UCX registrations), keyed by the exact range. Each entry embeds its
 * struct mw_watch; entries live in a fixed array and never move (the
 * library keeps a pointer to the watch). One mutex; libmmuwatch's watch
 * calls are made under it. ---- */
#define MW_SUB_FI  1U	/* subscribed by the libfabric monitor */
#define MW_SUB_UCX 2U	/* registration watched for UCX forwarding */
MWMPI_HIDDEN int mw_subs_init(size_t capacity);
/* Add a reference for [start,end) owner, watching it (again, when the
 * entry's watch was invalidated). 0 or -errno (ENOSPC when full). */
MWMPI_HIDDEN int mw_subs_add(uintptr_t start, uintptr_t end, unsigned owner);
MWMPI_HIDDEN void mw_subs_del(uintptr_t start, uintptr_t end, unsigned owner);
/* 1 valid (mw_watch_valid() of the entry's watch), 0 invalid/unknown. */
MWMPI_HIDDEN int mw_subs_valid(uintptr_t start, uintptr_t end);
MWMPI_HIDDEN size_t mw_subs_count(void);
/* The consumer of invalidated ranges that libfabric references (the
 * libfabric backend registers it; lock-free, any context). Set before the
 * first MW_SUB_FI add; NULL: nobody is told. */
typedef void (*mw_subs_invalid_fn)(uintptr_t start, uintptr_t end);
MWMPI_HIDDEN void mw_subs_on_fi_invalid(mw_subs_invalid_fn fn);
/* fork: lock in prepare, unlock in the parent; in the child the lock is
 * re-initialised and every inherited entry reads invalid. */
MWMPI_HIDDEN void mw_subs_atfork_prepare(void);
MWMPI_HIDDEN void mw_subs_atfork_parent(void);
MWMPI_HIDDEN void mw_subs_atfork_child(void);

/* ---- core.c ---- */
/* The library's source, or NONE when the glue is off. */
MWMPI_HIDDEN enum mw_source mw_mpi_source(void);
MWMPI_HIDDEN const char *mw_mpi_source_name(void);
MWMPI_HIDDEN void mw_mpi_log(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
MWMPI_HIDDEN int mw_mpi_env_bool(const char *name, int def);
/* Wake the glue thread (lock-free, malloc-free, keeps errno). */
MWMPI_HIDDEN void mw_mpi_kick(void);
/* Start the glue thread if it should run and does not (lazy; again in a
 * forked child). */
MWMPI_HIDDEN void mw_mpi_ensure_thread(void);

/*
 * A backend of the glue (fi_monitor.c: libfabric; ucx_fwd.c: UCX), as the
 * core sees it. The core calls backends only through these tables, as the
 * kernel calls an interval notifier through its mmu_interval_notifier_ops;
 * a backend reaches the core only through the functions above. Each
 * backend registers its table from a constructor of priority
 * MW_MPI_BACKEND_PRIO + n (before the core's constructor, which installs
 * them): n orders the backends (install, deliver and status in that order;
 * the fork-child handlers in reverse). Tables are static and never freed.
 */
#define MW_MPI_BACKEND_PRIO 101
struct mw_mpi_backend_ops {
	const char *name;	/* the status key: "libfabric", "ucx" */
	/* Once, from the core's constructor, libmmuwatch initialised. */
	void (*install)(void);
	/* Every release the library reports (any context, maybe inside the
	 * allocator or under the library's lock): queue only. NULL: none. */
	void (*released)(uintptr_t start, uintptr_t end);
	/* Glue thread, no lock held: hand the queued ranges on. How many. */
	int (*deliver)(void);
	/* Forked child, after the subs table was reset. */
	void (*atfork_child)(void);
	const char *(*state)(void);	/* for the status line */
	/* A mode shown as <name>_kmode in the status line. NULL: none. */
	const char *(*kmode)(void);
};
MWMPI_HIDDEN void mw_mpi_backend_register(const struct mw_mpi_backend_ops *ops);

/* ---- fi_monitor.c: only its ops, and its consumer of invalidated
 * ranges registered with subs.c (mw_subs_on_fi_invalid). ---- */

/* ---- ucx_fwd.c (its ops: mw_mpi_backend_register) ---- */
/* At UCX communication entry points (ucx_entry.c): kernel mode delivers
 * the library's pending events (mw_events_progress), then every queued
 * release goes to UCX, in the calling thread, before UCX looks at its
 * cache. */
MWMPI_HIDDEN void mw_ucx_sync(void);
MWMPI_HIDDEN const char *mw_ucx_state(void);
/* Kernel mode, UCX found, no whole-address-space stream: the ibv_reg_mr
 * interposer watches what UCX registers. */
MWMPI_HIDDEN int mw_ucx_wants_watch(void);

/* Counters shown by mw_mpi_status(). */
struct mw_mpi_stats {
	atomic_ulong fi_subscribe, fi_unsubscribe, fi_valid, fi_invalid,
		fi_notify, fi_qfull, ucx_watch, ucx_forward, ucx_sync,
		ucx_qfull, ucx_flush_all, ring_events, hook_releases,
		watch_fail, forks;
};
MWMPI_HIDDEN extern struct mw_mpi_stats mw_mpi_stats;

#endif /* MW_MPI_H */
