/* SPDX-License-Identifier: BSD-3-Clause */
/* Internals of libmmuwatch shared by libuser/ and rcache/ (all hidden). */
#ifndef MWU_INTERNAL_H
#define MWU_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "mmuwatch/mmuwatch.h"

#define MWU_HIDDEN __attribute__((visibility("hidden")))
#define mwu_likely(x) __builtin_expect(!!(x), 1)
#define mwu_unlikely(x) __builtin_expect(!!(x), 0)
#define MWU_CACHELINE 64

/* ---- core state (core.c) ---- */
/* UNINIT -> INITING -> READY -> FINALIZING -> FINALIZED -> INITING (an
 * explicit mw_init() reopens; a failed init also ends in FINALIZED). */
enum mwu_state { MWU_UNINIT = 0, MWU_INITING, MWU_READY, MWU_FINALIZED,
		 MWU_FINALIZING };
struct mwu_core {
	int state;			/* enum mwu_state, atomic */
	enum mw_source source;
	unsigned support;
	const char *reason;
	pthread_mutex_t lock;		/* watch table, ring, log consumer */
	int log_level;
	int helper_enabled;
};
MWU_HIDDEN extern struct mwu_core mwu_core;

/*
 * What the active source guarantees right now: mwu_core.support at init,
 * lowered at run time when a guarantee is lost (e.g. hooks bypassed by
 * another library). Caches test it on every get and stop caching what it
 * no longer covers; it only drops while the library is ready.
 */
MWU_HIDDEN extern unsigned mwu_guarantee;
static inline unsigned mwu_guaranteed(void)
{
	return __atomic_load_n(&mwu_guarantee, __ATOMIC_ACQUIRE);
}
/* The fail-closed rule of every cache: does guarantee g cover what leaving
 * registrations pinned between uses needs (MW_RCACHE_NEEDS)? */
static inline int mwu_covers_caching(unsigned g)
{
	return (g & MW_RCACHE_NEEDS) == MW_RCACHE_NEEDS;
}

/*
 * The cache's hit path tests this one word instead of the state, the
 * checkpoint gate and the guarantee (and the cache's own sticky bit): 0
 * means all are as a hit needs them; anything else sends the get down the
 * path that tests each of them. It is a summary of those words, never the
 * authority: a writer changes its word first, then calls mwu_gate_sync(),
 * then acts on the change (flush, wait for busy regions, close the
 * source), so a get that still read 0 raced exactly as one that read the
 * word itself just before the change. A fork child syncs first thing: a
 * writer's thread that was between its change and its sync is not there.
 */
#define MWU_GATE_NOT_READY 1U /* mwu_core.state != MWU_READY */
#define MWU_GATE_CR	   2U /* a checkpoint quiesced the library */
#define MWU_GATE_SHORT	   4U /* mwu_guarantee lacks MW_RCACHE_NEEDS */
#define MWU_GATE_STICKY	   8U /* rcache: no local references, for good */
MWU_HIDDEN extern unsigned mwu_gate;
MWU_HIDDEN void mwu_gate_sync(void);

/* Hooks-mode log positions, read on every hit (kernel mode: both stay 0). */
struct mwu_fast {
	uint64_t head __attribute__((aligned(MWU_CACHELINE)));
	uint64_t applied __attribute__((aligned(MWU_CACHELINE)));
};
MWU_HIDDEN extern struct mwu_fast mwu_fast;

/* 0 when ready; else MW_EFINALIZED or an init error. */
MWU_HIDDEN int mwu_ready_slow(void);
static inline int mwu_ready(void)
{
	if (mwu_likely(__atomic_load_n(&mwu_core.state, __ATOMIC_ACQUIRE) == MWU_READY))
		return 0;
	return mwu_ready_slow();
}

/* ---- log (log.c) ---- */
enum { MWU_LOG_ERR = 0, MWU_LOG_WARN, MWU_LOG_INFO, MWU_LOG_DEBUG };
MWU_HIDDEN void mwu_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
MWU_HIDDEN int mwu_log_level_from_env(void);

/* ---- watches (watch.c, kernel.c, soft.c) ---- */
/* Apply pending hook releases (hooks mode). Cheap when nothing is pending. */
MWU_HIDDEN void mwu_soft_drain(void);
static inline int mwu_watch_valid(const struct mw_watch *w)
{
	if (mwu_unlikely(__atomic_load_n(&mwu_fast.head, __ATOMIC_ACQUIRE) !=
			 __atomic_load_n(&mwu_fast.applied, __ATOMIC_RELAXED)))
		mwu_soft_drain();
	/* the pointer too: finalize and remove swap it on other threads */
	return __atomic_load_n(__atomic_load_n(&w->word, __ATOMIC_ACQUIRE),
			       __ATOMIC_ACQUIRE) == w->token;
}
/* Always-invalid word: watches of a dead context point here. */
MWU_HIDDEN extern const uint64_t mwu_dead_word;

/* Kernel source. */
MWU_HIDDEN int mwu_kernel_open(void);		/* 0 or MW_E* */
MWU_HIDDEN void mwu_kernel_close(void);
/* fork child: re-open; MW_EDEVICE when the device cannot be re-opened. */
MWU_HIDDEN int mwu_kernel_atfork_child(void);
MWU_HIDDEN int mwu_kernel_watch(struct mw_watch *const *w, unsigned n);
MWU_HIDDEN int mwu_kernel_unwatch(struct mw_watch *const *w, unsigned n);
MWU_HIDDEN int mwu_kernel_drain(unsigned max);	/* core lock held */
MWU_HIDDEN int mwu_kernel_fd(void);
/* For peers of this process (peer/kwatch.c): the device fd, the context's
 * id (fdinfo) and the size of its words mapping. 0, or -ENODEV when the
 * kernel source is not active (or the module has no context ids). Takes
 * the core lock. */
struct mwu_kernel_share {
	int fd;
	uint64_t ctx_id;
	size_t words_size;
};
MWU_HIDDEN int mwu_kernel_share_info(struct mwu_kernel_share *ks);
/* The number on the "key:" line of /proc/self/fdinfo/<fd>, or -1. */
MWU_HIDDEN long long mwu_fdinfo_ll(int fd, const char *key);
/* mw_release_cb_all(): counted; 0 or MW_E* (core lock held). */
MWU_HIDDEN int mwu_kernel_watch_all(int on);

/* Hooks source. */
MWU_HIDDEN int mwu_soft_open(void);
MWU_HIDDEN void mwu_soft_close(void);
MWU_HIDDEN void mwu_soft_atfork_child(void);
MWU_HIDDEN int mwu_soft_watch(struct mw_watch *w);
MWU_HIDDEN int mwu_soft_unwatch(struct mw_watch *w);
MWU_HIDDEN int mwu_soft_drain_locked(unsigned max);	/* core lock held */
MWU_HIDDEN void mwu_soft_release(uintptr_t start, uintptr_t end);

/* Release callbacks (callbacks.c). */
MWU_HIDDEN void mwu_release_deliver(uintptr_t start, uintptr_t end,
				    enum mw_source src);
MWU_HIDDEN void mwu_callbacks_atfork_child(void);

/* ---- sinks: caches the helper thread and fork handling walk (sinks.c) ---- */
struct mwu_sink {
	struct mwu_sink *next;
	/* Bounded deferred work (deregistrations); returns work left > 0. */
	int (*drain)(struct mwu_sink *s, unsigned max);
	void (*atfork_prepare)(struct mwu_sink *s);
	void (*atfork_parent)(struct mwu_sink *s);
	void (*atfork_child)(struct mwu_sink *s);
};
MWU_HIDDEN void mwu_sink_add(struct mwu_sink *s);
MWU_HIDDEN void mwu_sink_remove(struct mwu_sink *s);
MWU_HIDDEN void mwu_sinks_atfork_prepare(void);
MWU_HIDDEN void mwu_sinks_atfork_parent(void);
MWU_HIDDEN void mwu_sinks_atfork_child(void);
/* Process-wide fork handlers of an upper layer (rcache's region pool and
 * reference table), registered by that layer at load time so the core
 * never calls upward. Run under the core lock: prepare after taking it,
 * parent before dropping it, child before anything else is re-initialised.
 * At most MWU_FORK_LAYERS; registration is from constructors (no lock). */
struct mwu_fork_layer {
	void (*prepare)(void);
	void (*parent)(void);
	void (*child)(void);
};
#define MWU_FORK_LAYERS 4
MWU_HIDDEN void mwu_fork_layer_add(const struct mwu_fork_layer *l);
/* Helper thread (helper.c): started lazily when the first sink appears. */
MWU_HIDDEN void mwu_helper_start(void);
MWU_HIDDEN void mwu_helper_stop(void);
MWU_HIDDEN void mwu_helper_atfork_child(void);
/* One bounded round of event and deferred work (helper and API calls). */
MWU_HIDDEN int mwu_progress_round(unsigned max_events, unsigned max_sink);

/* ---- statistics (stats.c) ---- */
enum mwu_stat {
	MWU_ST_MISSES, MWU_ST_INVAL_KERNEL, MWU_ST_INVAL_HOOKS,
	MWU_ST_INVAL_SCAN, MWU_ST_OVERFLOWS, MWU_ST_EVICTIONS, MWU_ST_REGS,
	MWU_ST_DEREGS, MWU_ST_REG_FAILED, MWU_ST_BYTES, MWU_ST_REGIONS,
	MWU_ST_HOOKS_LOST,
	MWU_ST_NR
};
MWU_HIDDEN extern uint64_t mwu_stat[MWU_ST_NR];
static inline void mwu_stat_add(enum mwu_stat s, int64_t v)
{
	__atomic_fetch_add(&mwu_stat[s], (uint64_t)v, __ATOMIC_RELAXED);
}
/* Hits are per thread: a shared counter would bounce on every hit. */
struct mwu_tstat {
	uint64_t hits;
	struct mwu_tstat *next;
	int linked;
};
MWU_HIDDEN extern __thread struct mwu_tstat mwu_tstat
	__attribute__((tls_model("initial-exec")));
MWU_HIDDEN void mwu_tstat_link(void);
static inline void mwu_count_hit(void)
{
	if (mwu_unlikely(!mwu_tstat.linked))
		mwu_tstat_link();
	__atomic_store_n(&mwu_tstat.hits, mwu_tstat.hits + 1, __ATOMIC_RELAXED);
}
MWU_HIDDEN void mwu_stats_atfork_child(void);

/* ---- fail closed at run time (guard.c) ---- */
/* Hooks source: drop the guarantee of any release path whose hook another
 * library took away (once, said on stderr, counted, caches flushed). */
MWU_HIDDEN void mwu_guard_check(void);
/* Hooks source: bracket library loads (hooks/ calls back around each
 * dlopen): attach at init, detach at finalize. */
MWU_HIDDEN void mwu_guard_attach(int on);
/* fork child: a load another thread was inside ends at the next check. */
MWU_HIDDEN void mwu_guard_atfork_child(void);
/* A library load is in progress (the guarantee is held down for it). */
MWU_HIDDEN int mwu_guard_loading(void);

/* ---- other libraries (neighbours.c) ---- */
/* Kernel source: find UCX at load time and forward releases to it. Both
 * outside the core lock; force = 0 on hot paths (rate-limited). */
MWU_HIDDEN void mwu_neighbours_check(int force);
MWU_HIDDEN void mwu_neighbours_deliver(void);
/* MMUWATCH_FI_MONITOR=1: libmmuwatch as libfabric's imported memory
 * monitor (fi_monitor.c); install at init; deliver from the helper thread
 * only (libfabric's notify takes a lock API callers may hold). */
MWU_HIDDEN void mwu_fi_monitor_install(void);
MWU_HIDDEN void mwu_fi_monitor_deliver(void);

/* Range validation shared by the API: MW_OK or an error. User space ends
 * below 2^47 (4-level paging) or 2^56 (5-level); wrapping or larger
 * ranges are refused. */
static inline int mwu_check_range(const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;

	if (!addr || !len)
		return MW_EINVAL;
	if (a + len < a || a + len > (1ULL << 56))
		return MW_ERANGE;
	return 0;
}

/* ---- close and reopen (core.c), checkpoint/restart (cr.c) ---- */
/* Core lock held: close the active source (source none afterwards);
 * choose and open one afresh (0 or the error of a forced source). */
MWU_HIDDEN void mwu_source_close(void);
MWU_HIDDEN int mwu_source_reopen(void);
/* Is any cache registered (sinks.c)? The helper restarts on reopen. */
MWU_HIDDEN int mwu_sinks_any(void);
/* 1 while a checkpoint is in effect: gets call mwu_cr_wait(), which
 * blocks until continue/restart (0, or MW_EFINALIZED when the library
 * closed meanwhile) or, with MW_CR_F_FAIL, returns MW_EQUIESCED. A cache
 * tests the gate again under its own lock before it registers: the
 * quiesce takes that lock after setting the gate. */
MWU_HIDDEN extern int mwu_cr_gate;
static inline int mwu_cr_gated(void)
{
	return mwu_unlikely(__atomic_load_n(&mwu_cr_gate, __ATOMIC_ACQUIRE));
}
MWU_HIDDEN int mwu_cr_wait(void);
/* How long a client's quiesce waits for busy registrations. */
MWU_HIDDEN unsigned mwu_cr_timeout_ms(void);
MWU_HIDDEN void mwu_cr_opened(void);
MWU_HIDDEN void mwu_cr_closing(void);
MWU_HIDDEN void mwu_cr_signal_stop(void);
MWU_HIDDEN void mwu_cr_signal_atfork_child(void);
MWU_HIDDEN void mwu_cr_atfork_child(void);

#endif /* MWU_INTERNAL_H */
