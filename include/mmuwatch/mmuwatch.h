/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libmmuwatch: memory-registration caching that stays correct when the
 * application unmaps or replaces memory.
 *
 * Three layers, each usable on its own:
 *   core    mw_init(), the event source (kernel / hooks / none), release
 *           callbacks, statistics, error codes.
 *   watch   mw_watch_*(): watch one address range and ask "still valid?"
 *           with one load (kernel mode) on every use.
 *   rcache  mw_rcache_*(): a registration cache (lookup by range, refcount,
 *           leave-pinned LRU) over a registration backend (verbs, io_uring
 *           fixed buffers, or caller-supplied ops).
 *
 * Errors: every function returning int returns MW_OK (0) or a negative
 * errno value (see below); mw_strerror() names any of them. All functions
 * are thread-safe unless noted.
 */
#ifndef MMUWATCH_MMUWATCH_H
#define MMUWATCH_MMUWATCH_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MW_API __attribute__((visibility("default")))

/* Compile-time version of this header (the library's run-time version is
 * mw_version()); kmod/VERSION is the one source, `make check` compares. */
#define MW_VERSION_MAJOR 1
#define MW_VERSION_MINOR 2
#define MW_VERSION_PATCH 0
#define MW_VERSION_CODE(major, minor, patch) \
	(((major) << 16) | ((minor) << 8) | (patch))
#define MW_VERSION MW_VERSION_CODE(MW_VERSION_MAJOR, MW_VERSION_MINOR, \
				   MW_VERSION_PATCH)

/*
 * Run-time version of the loaded library, as MW_VERSION_CODE(); a program
 * built against this header may require mw_version() >= MW_VERSION. With
 * str != NULL, *str is set to "MAJOR.MINOR.PATCH" (static).
 */
MW_API unsigned mw_version(const char **str);

/* ---- errors ---------------------------------------------------------- */
/*
 * One convention: 0 or a negative errno value, so results of libmmuwatch,
 * system calls and libibverbs never collide. Where a failure comes from a
 * system call (open/ioctl/mmap of /dev/mmuwatch), libibverbs or liburing,
 * that call's errno is returned as is (e.g. -EACCES when /dev/mmuwatch
 * may not be opened, -ENOMEM or -EFAULT from ibv_reg_mr); the names below
 * are the library's own conditions. mw_strerror() names every code.
 */
enum mw_error {
	MW_OK = 0,
	MW_EINVAL = -EINVAL,		/* NULL pointer or zero length */
	MW_ERANGE = -ERANGE,		/* range wraps or leaves user space */
	MW_EFLAGS = -EOPNOTSUPP,	/* unknown flag bits */
	MW_ENOMEM = -ENOMEM,		/* out of memory */
	MW_EFOREIGN = -EXDEV,		/* region not handed out by this cache */
	MW_EFINALIZED = -ESHUTDOWN,	/* library already finalized */
	MW_ENOSYS = -ENOSYS,		/* not supported by the event source */
	MW_EREG = -EREMOTEIO,		/* backend refused, no errno known */
	MW_ELIMIT = -EDQUOT,		/* pinned-memory limit reached
					 * (RLIMIT_MEMLOCK or max_bytes) */
	MW_EFORKED = -ECHILD,		/* backend not usable in a fork child */
	MW_EBUSY = -EBUSY,		/* object still in use */
	MW_EDEVICE = -EIO,		/* /dev/mmuwatch failed, no errno known */
	MW_ENOSPC = -ENOSPC,		/* no free watch slot */
	MW_ECALLBACKS = -ETOOMANYREFS,	/* too many release callbacks */
	MW_ESTATE = -EBADFD,		/* call out of order: mw_finalize()
					 * without mw_init(), a C/R phase out
					 * of sequence */
	MW_EQUIESCED = -EAGAIN,		/* quiesced for a checkpoint and
					 * MW_CR_F_FAIL set: retry later */
	MW_ERR_MIN = -4095		/* every error is in [MW_ERR_MIN, -1] */
};
MW_API const char *mw_strerror(int err);

/* ---- core -------------------------------------------------------------- */
enum mw_source {
	MW_SOURCE_NONE = 0,	/* no events: no leave-pinned caching */
	MW_SOURCE_HOOKS = 1,	/* user-space interception (hooks/) */
	MW_SOURCE_KERNEL = 2,	/* mmu notifiers via /dev/mmuwatch */
};

/* Support level: which kinds of release are caught by the active source. */
/* (Each bit covers exactly the paths listed for it in hooks/README.md's
 * release-path table; a source never claims a bit one of them misses.) */
#define MW_SUPPORT_MUNMAP	(1U << 0)	/* munmap() through libc */
#define MW_SUPPORT_FREE		(1U << 1)	/* free()/realloc() returning memory */
#define MW_SUPPORT_MREMAP	(1U << 2)	/* mremap() through libc */
#define MW_SUPPORT_MADVISE	(1U << 3)	/* madvise()/posix_madvise() via libc */
#define MW_SUPPORT_MAP_FIXED	(1U << 4)
#define MW_SUPPORT_BRK		(1U << 5)
#define MW_SUPPORT_SHMDT	(1U << 6)
#define MW_SUPPORT_RAW_SYSCALL	(1U << 7)	/* syscalls bypassing libc */
#define MW_SUPPORT_FOREIGN	(1U << 8)	/* truncate etc. by other processes */
#define MW_SUPPORT_MIGRATE	(1U << 9)	/* page migration, compaction */
#define MW_SUPPORT_HIT_CHECK	(1U << 10)	/* per-hit validity check */
#define MW_SUPPORT_ASYNC	(1U << 11)	/* io_uring ops (IORING_OP_MADVISE) */
#define MW_SUPPORT_FILE_HOLE	(1U << 12)	/* own ftruncate/fallocate punch
						 * hole of a file mapped shared */

/*
 * Initialise (idempotent while open; safe from a constructor and from any
 * thread; other entry points call it implicitly, but only before the
 * first mw_finalize()). The source is chosen here:
 * MMUWATCH_SOURCE=kernel|hooks|none forces one; otherwise kernel when
 * /dev/mmuwatch opens, hooks when the hook source is active, else none.
 * After mw_finalize() (or a failed init), mw_init() opens the library
 * again, any number of times, from any thread: the source is chosen
 * afresh, nothing of the previous life leaks (fds, mappings, threads).
 */
MW_API int mw_init(void);
/*
 * Close: the device and the source's state go (the hooks stay installed,
 * silent); afterwards every call but mw_init() returns MW_EFINALIZED.
 * Destroy caches first (a cache cannot be destroyed while closed).
 * MW_EFINALIZED when closed already, MW_ESTATE when never opened or
 * another thread is closing right now.
 */
MW_API int mw_finalize(void);
MW_API enum mw_source mw_source(void);
MW_API const char *mw_source_name(enum mw_source src);
MW_API unsigned mw_support(void);		/* MW_SUPPORT_* */
/* Why this source was chosen (static string). */
MW_API const char *mw_source_reason(void);

/*
 * Release callback: receives every invalidated range the library sees:
 * kernel ring events (from whatever thread drains the ring) and hook
 * releases (synchronously, inside the intercepted call, before the memory
 * goes away: it must not allocate, lock, or call into libmmuwatch).
 */
typedef void (*mw_release_cb)(void *arg, uintptr_t start, uintptr_t end,
			      enum mw_source src);
MW_API int mw_release_cb_add(mw_release_cb cb, void *arg);
MW_API int mw_release_cb_remove(mw_release_cb cb, void *arg);
/*
 * Every kernel-invalidated range of the process, not only watched ones.
 * Kernel source: on != 0 makes the context keep one persistent watch over
 * the whole user address space (module feature MMUWATCH_FEAT_PERSISTENT);
 * each of its ring events (munmap, madvise, mremap, MAP_FIXED, brk,
 * truncate, ... anywhere; mprotect filtered) reaches the release
 * callbacks, clipped to the address space, from whatever thread drains the
 * ring (mw_events_progress(), the helper thread of a cache). A ring
 * overflow reaches them as [0, 2^47) (or the whole address space if
 * larger): flush everything. A range may arrive more than once (also from
 * a watch's own event). Counted: each call with on != 0 needs one with
 * on == 0; the last one removes the watch. Re-created in a fork child.
 * Returns 0, MW_ENOSYS (source not kernel, or the module lacks the
 * feature), MW_ENOSPC (module parameter max_persistent reached), MW_EINVAL
 * (on == 0 without a matching on != 0) or another MW_E*.
 */
MW_API int mw_release_cb_all(int on);

/* Deliver pending events now (bounded by max, 0 = all). Returns how many
 * events were processed, or an error. */
MW_API int mw_events_progress(unsigned max);
/* A pollable fd signalling pending kernel events, or MW_ENOSYS. */
MW_API int mw_event_fd(void);

struct mw_stats {
	uint64_t hits;
	uint64_t misses;
	uint64_t inval_kernel;		/* invalidations from kernel events */
	uint64_t inval_hooks;		/* invalidations from hook releases */
	uint64_t inval_scan;		/* found by a word scan after overflow */
	uint64_t overflows;		/* ring/log overflows recovered */
	uint64_t evictions;		/* idle regions dropped by the LRU */
	uint64_t regs;			/* registrations done */
	uint64_t deregs;
	uint64_t reg_failed;		/* registrations the backend refused */
	uint64_t bytes_pinned;		/* currently registered bytes */
	uint64_t regions;		/* currently registered regions */
	uint64_t hooks_lost;		/* hooks found bypassed (fail closed) */
	uint64_t reserved[3];
};
MW_API int mw_stats_get(struct mw_stats *st);
MW_API void mw_stats_print(void *file /* FILE *, NULL = stderr */);

/* ---- watch --------------------------------------------------------------- */
struct mw_watch;
/* Called at most once when the watch is found invalid, with library locks
 * held: it must not call mw_watch_*(). It runs in whichever thread drains
 * events: the helper thread, a caller of mw_events_progress() or of the
 * cache, and also inside mw_watch_add*() of another watch (a fired watch
 * whose event was not read yet is told before its slot is reused), and in
 * a fork child's handler with the hooks source. In a fork child with the
 * kernel source, inherited watches simply read invalid (no callback). */
typedef void (*mw_invalid_cb)(struct mw_watch *w, void *arg);

/* Caller-owned; treat as opaque. Valid while words[slot] == token. */
struct mw_watch {
	const volatile uint64_t *word;
	uint64_t token;
	uintptr_t start, end;
	mw_invalid_cb cb;
	void *arg;
	uint64_t id;
	uint32_t slot;
	uint32_t flags;
};

/* Watch [start, start+len). MW_ENOSYS with the none source. */
MW_API int mw_watch_add(struct mw_watch *w, const void *start, size_t len,
			mw_invalid_cb cb, void *arg);
/* Watch n ranges (w[i] with starts[i], lens[i]); stops at the first error. */
MW_API int mw_watch_add_batch(struct mw_watch *const *w,
			      const void *const *starts, const size_t *lens,
			      unsigned n, mw_invalid_cb cb, void *arg);
MW_API int mw_watch_remove(struct mw_watch *w);
/* 1 while nothing invalidated the range, 0 after. No syscall, no lock in
 * kernel mode (one load); hooks mode first applies pending hook releases. */
MW_API int mw_watch_valid(const struct mw_watch *w);

/* ---- registration backends ---------------------------------------------- */
/* What the cache hands out. Read-only for the caller. */
struct mw_region {
	void *addr;		/* registered range, page aligned */
	size_t len;
	uint32_t lkey, rkey;	/* verbs */
	int32_t index;		/* io_uring fixed buffer index, else -1 */
	void *handle;		/* backend object (struct ibv_mr *, ...) */
	uint64_t user[4];	/* free for caller-supplied ops */
};

#define MW_OPS_F_FORK_SAFE 0x1U	/* registrations usable in a fork child */
struct mw_reg_ops {
	/* Register [addr, addr+len): fill r->lkey/rkey/index/handle/user. */
	int (*reg)(void *ctx, void *addr, size_t len, struct mw_region *r);
	void (*dereg)(void *ctx, struct mw_region *r);
	void (*destroy)(void *ctx);	/* optional, mw_reg_ops_destroy() */
	void *ctx;
	unsigned flags;			/* MW_OPS_F_* */
};
struct ibv_pd;
struct io_uring;
/* ibv_reg_mr(pd, addr, len, access) per region. libmmuwatch does not link
 * libibverbs: this call binds the one the process has (-ELIBACC, with the
 * reason logged, when none can be loaded). */
MW_API int mw_verbs_ops(struct ibv_pd *pd, int access, struct mw_reg_ops *ops);
/* Fixed buffers of ring: registers a sparse table of nr_bufs slots now
 * (io_uring_register_buffers_sparse) and fills one slot per region.
 * liburing is bound as libibverbs is above (-ELIBACC). */
MW_API int mw_uring_ops(struct io_uring *ring, unsigned nr_bufs,
			struct mw_reg_ops *ops);
MW_API void mw_reg_ops_destroy(struct mw_reg_ops *ops);

/* ---- rcache ------------------------------------------------------------- */
struct mw_rcache;

/* mw_rcache_params.flags: none defined yet (other bits: MW_EFLAGS; the
 * test variant's flags are in the test-only header, not installed). */
#define MW_RCACHE_F_MASK 0U

/*
 * Fail closed: the cache leaves registrations pinned between uses only
 * while mw_support() has all of these (checked on every get); otherwise a
 * get registers afresh and the last put deregisters.
 */
#define MW_RCACHE_NEEDS (MW_SUPPORT_MUNMAP | MW_SUPPORT_FREE | \
	MW_SUPPORT_MREMAP | MW_SUPPORT_MADVISE | MW_SUPPORT_MAP_FIXED | \
	MW_SUPPORT_BRK | MW_SUPPORT_SHMDT | MW_SUPPORT_HIT_CHECK)

struct mw_rcache_params {
	const struct mw_reg_ops *ops;	/* copied */
	size_t max_regions;	/* idle+busy regions kept; 0 = 16384 */
	size_t max_bytes;	/* registered bytes kept; 0 = no limit but
				 * RLIMIT_MEMLOCK (always applied) */
	unsigned flags;		/* MW_RCACHE_F_* */
};
MW_API int mw_rcache_create(const struct mw_rcache_params *p,
			    struct mw_rcache **out);
/* Destroy; MW_EBUSY while regions are in use. */
MW_API int mw_rcache_destroy(struct mw_rcache *rc);

#define MW_GET_F_MASK 0U
/* A region covering [addr, addr+len), with one reference. */
MW_API int mw_rcache_get(struct mw_rcache *rc, const void *addr, size_t len,
			 unsigned flags, struct mw_region **out);
MW_API int mw_rcache_put(struct mw_rcache *rc, struct mw_region *r);
/* Deregister every idle region; in-use ones go at their last put. */
MW_API int mw_rcache_flush(struct mw_rcache *rc);

struct mw_rcache_stats {
	uint64_t hits, misses, invalidations, evictions;
	uint64_t regions, bytes, busy_regions, zombies;
	uint64_t max_bytes;	/* effective byte limit in force */
	uint64_t reserved[3];
};
MW_API int mw_rcache_stats(struct mw_rcache *rc, struct mw_rcache_stats *st);

/* ---- checkpoint/restart ------------------------------------------------ */
/*
 * A checkpointer tells the process through the notification, a registered
 * function: mw_cr_notify(phase) calls it. The default handler
 * (mw_cr_default_notify) runs the library's phases; a runtime replaces it
 * with mw_cr_set_notify() and calls the phases from its own handler.
 *   MW_CR_CHECKPOINT  mw_cr_checkpoint(): new gets block (or fail with
 *                     MW_EQUIESCED under MW_CR_F_FAIL); every client
 *                     quiesces, newest first (caches wait up to the
 *                     timeout for registrations in flight and busy ones
 *                     to be put, then deregister everything: MW_EBUSY and
 *                     nothing changed if one stays busy); the event
 *                     source closes (/dev/mmuwatch fd, mappings).
 *   MW_CR_CONTINUE    mw_cr_continue(): same process goes on; the source
 *                     is chosen afresh, clients resume oldest first.
 *   MW_CR_RESTART     mw_cr_restart(): the same in a restored process;
 *                     clients drop everything of the old life.
 * A phase out of sequence returns MW_ESTATE. A get never returns a
 * registration made before a checkpoint after it.
 */
enum mw_cr_phase {
	MW_CR_CHECKPOINT = 1,
	MW_CR_CONTINUE = 2,
	MW_CR_RESTART = 3,
};
typedef int (*mw_cr_notify_fn)(enum mw_cr_phase phase, void *arg);
MW_API int mw_cr_notify(enum mw_cr_phase phase);
/* Replace the handler (fn NULL: the default); the previous one is
 * returned in *prev, *prev_arg (either may be NULL) to chain to it. */
MW_API int mw_cr_set_notify(mw_cr_notify_fn fn, void *arg,
			    mw_cr_notify_fn *prev, void **prev_arg);
MW_API int mw_cr_default_notify(enum mw_cr_phase phase, void *arg);
MW_API int mw_cr_checkpoint(void);
MW_API int mw_cr_continue(void);
MW_API int mw_cr_restart(void);
/* MW_CR_CHECKPOINT while quiesced, else 0 (or MW_EFINALIZED). */
MW_API int mw_cr_state(void);
/* How many times each phase completed (this process's whole history). */
MW_API int mw_cr_count(enum mw_cr_phase phase, unsigned long long *n);

#define MW_CR_F_FAIL	0x1U	/* gets fail with MW_EQUIESCED, not block */
#define MW_CR_F_MASK	MW_CR_F_FAIL
/* flags MW_CR_F_*; timeout_ms bounds the wait for busy registrations in
 * a checkpoint (0: 10000). */
MW_API int mw_cr_params(unsigned flags, unsigned timeout_ms);

/*
 * Clients: whatever holds something a checkpoint must release (a cache,
 * a channel, the application's own verbs context) registers one.
 * quiesce() returns 0 or an error (the checkpoint is then undone: clients
 * already quiesced get resume(MW_CR_CONTINUE)); resume() gets
 * MW_CR_CONTINUE or MW_CR_RESTART. Called without library locks held,
 * from the thread running the phase. Caller-owned; next is private.
 */
struct mw_cr_client {
	int (*quiesce)(struct mw_cr_client *c);
	void (*resume)(struct mw_cr_client *c, enum mw_cr_phase how);
	void *arg;
	struct mw_cr_client *next;
};
MW_API int mw_cr_client_add(struct mw_cr_client *c);
MW_API int mw_cr_client_remove(struct mw_cr_client *c);

/*
 * Signal mode: signo (0 = off) runs the notification from a thread of the
 * library. sigqueue() with value MW_CR_* runs that phase; a plain kill()
 * checkpoints when running and, when quiesced, restarts if the process
 * was restored (its start time changed) or else continues. After each
 * phase "<checkpoint|continue|restart> <result>\n" is written to
 * status_file (may be NULL). Stopped by mw_finalize().
 */
MW_API int mw_cr_signal(int signo, const char *status_file);

#ifdef __cplusplus
}
#endif
#endif /* MMUWATCH_MMUWATCH_H */
