/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * TEST DOUBLE of the CUDA driver API, for machines without a GPU. Built as
 * a test-only libcuda.so.1 and loaded in place of the real driver; it
 * implements the cuda.h signatures smcuda and its tests use, and
 * cuGetProcAddress, with the behaviours the channel's logic depends on:
 *
 *  - "device memory" is a per-process reserved, inaccessible address
 *    window with a first-fit allocator in 2 MiB granules, so a freed base
 *    is reused, also for a larger size; its bytes live in a heap in a
 *    shared file, so several real processes exchange data;
 *  - buffer ids unique across processes and never reused;
 *  - IPC handles identical for one allocation, different after a free and
 *    reallocation; opening is refused in the exporting process, maps at a
 *    different address (import window), re-opens are refcounted or fail
 *    with ALREADY_MAPPED (older drivers, selectable); a new handle that
 *    overlaps a still-open stale mapping of the same exporter fails with
 *    ALREADY_MAPPED; a stale mapping keeps the old bytes alive, so reading
 *    through it yields wrong data, detectably;
 *  - async copies and events in one in-order queue, run at once or only
 *    when the test advances them; a copy that runs after its mapping was
 *    closed counts a fault;
 *  - a configurable peer-access matrix, injectable errors and limits,
 *    per-entry-point call counters.
 *
 * This is its internal header (td_*.c, one file per job): the shared
 * "GPU" segment's layout, this process's driver state, the entry path
 * every driver call takes (ENTER, LEAVE) and the helpers the files share.
 * The shared segment is td_shm.c; process state, entry, translation and
 * the async queue td_state.c; the entry points by driver-API area
 * td_ctx.c, td_mem.c, td_ipc.c, td_stream.c, td_lookup.c; the test
 * control td_control.c.
 */
#ifndef MWTD_INTERNAL_H
#define MWTD_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "cu_api.h"
#include "mwtd.h"

#define EXPORT __attribute__((visibility("default")))
/* Shared between the double's files, not exported (built with default
 * visibility: the driver API must be). */
#define TD_HIDDEN __attribute__((visibility("hidden")))

#define TD_MAGIC 0x6d777464636f7265ull
#define MAXDEV 8
#define NREC 16384
#define CHUNK (64u * 1024u)
#define MAXCHUNKS 16384u
#define GRAN ((uint64_t)2 << 20)
#define WIN_SIZE ((uint64_t)8 << 30)
#define ALLOC_HINT 0x600000000000ull
#define MAP_HINT 0x640000000000ull
#define HMAGIC 0x4d575444u

enum { REC_FREE = 0, REC_LIVE, REC_FREED };

struct td_rec {
	uint64_t id;
	int32_t owner;		/* pid */
	int32_t dev;
	uint64_t base, size;
	uint32_t chunk0, nchunks;
	int32_t state;
	int32_t map_refs;	/* importers' open mappings */
	int32_t kind;
	int32_t pad;
};

struct td_shared {
	_Atomic uint64_t magic;
	pthread_mutex_t lock;
	_Atomic uint64_t next_id;
	int32_t ndev;
	_Atomic int32_t reopen_refcount;
	_Atomic int32_t deny[MAXDEV][MAXDEV];
	uint64_t heap_off, heap_size;
	uint32_t nchunks;
	unsigned char chunk_used[MAXCHUNKS];
	struct td_rec rec[NREC];
};

struct td_handle {
	uint32_t magic, slot;
	uint64_t id;
	int32_t owner, dev;
	uint64_t base, size;
};
_Static_assert(sizeof(struct td_handle) <= CU_IPC_HANDLE_SIZE, "handle");

struct td_alloc {
	uint32_t slot;
	uint64_t id, base, size;
	int kind;
};

struct td_mapping {
	uint32_t slot;
	uint64_t rid, va, size, map_id;
	int refs;
	int owner;
};

struct td_op {
	uint64_t seq;
	int copy;
	uint64_t dst, src, n;
};

struct td_stream {
	uint32_t magic;
	uint64_t last_seq;
};

struct td_event {
	uint32_t magic;
	uint64_t rec_seq;
};

struct td_ctxobj {
	uint32_t magic;
	int dev;
};

struct td_win {
	uint64_t base, size;
	uint64_t *used;		/* sorted [base,size] pairs */
	size_t n, cap;
};

enum fnid {
#define F(x) FN_##x,
#include "fnlist.h"
#undef F
	FN_COUNT
};
TD_HIDDEN extern const char *const fn_names[];

struct td_inject {
	int fn;
	CUresult err;
	int skip, count;
};

/* The process's driver state; mu guards it (entry points: ENTER). */
struct td_state {
	pthread_mutex_t mu;	/* local state */
	pid_t pid;
	struct td_shared *sh;
	size_t sh_size;
	char path[256];
	bool inited;
	int dev;
	struct td_ctxobj ctx[MAXDEV];
	struct td_win aw, mw;
	struct td_alloc *al;
	size_t nal, capal;
	struct td_mapping *mp;
	size_t nmp, capmp;
	struct td_op *ops;
	size_t ops_head, ops_n, ops_cap;
	uint64_t next_seq, done_seq;
	bool manual;
	int max_peers;
	unsigned long long count[FN_COUNT], total, faults;
	struct td_inject inj[16];
	int ninj;
};
TD_HIDDEN extern struct td_state td;

TD_HIDDEN extern _Thread_local CUcontext tl_ctx; /* current context */

/* Entry: lock, set up, count, apply injected errors (td_state.c). */
#define ENTER(fn) do { CUresult e_ = td_enter(FN_##fn); \
	if (e_ != CUDA_SUCCESS) return e_; } while (0)
#define LEAVE(r) do { CUresult r_ = (r); pthread_mutex_unlock(&td.mu); \
	return r_; } while (0)
#define NEED_INIT() do { if (!td.inited) \
	LEAVE(CUDA_ERROR_NOT_INITIALIZED); } while (0)
#define NEED_CTX() do { NEED_INIT(); if (!tl_ctx) \
	LEAVE(CUDA_ERROR_INVALID_CONTEXT); } while (0)

/* td_shm.c: the shared segment (sh_lock guards records and heap). */
TD_HIDDEN void td_sh_lock(void);
TD_HIDDEN void td_sh_unlock(void);
TD_HIDDEN int td_sh_attach(void);
TD_HIDDEN unsigned char *td_heap_ptr(const struct td_rec *r);
TD_HIDDEN int td_heap_alloc(uint64_t size, uint32_t *c0, uint32_t *nc);
TD_HIDDEN void td_rec_maybe_release(struct td_rec *r);
/* td_state.c: windows, set-up, entry, translation, async queue. */
TD_HIDDEN uint64_t td_win_alloc(struct td_win *w, uint64_t size);
TD_HIDDEN void td_win_free(struct td_win *w, uint64_t base);
TD_HIDDEN int td_setup(void);
TD_HIDDEN CUresult td_enter(int fn);
TD_HIDDEN struct td_alloc *td_find_alloc(uint64_t a);
TD_HIDDEN struct td_mapping *td_find_map(uint64_t a);
TD_HIDDEN unsigned char *td_translate(uint64_t a, uint64_t n);
TD_HIDDEN void td_run_one(void);
TD_HIDDEN void td_run_until(uint64_t seq);
TD_HIDDEN CUresult td_enqueue(int copy, uint64_t dst, uint64_t src, uint64_t n,
			uint64_t *seq);

#endif /* MWTD_INTERNAL_H */
