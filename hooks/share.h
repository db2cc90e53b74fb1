/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shareable span source (alloc_share.c): the interface that peer/ (the
 * peer mapping cache, a layer above) uses. Nothing here calls upward.
 *
 * When sharing is on, the part of the arena not yet handed out when it was
 * switched on, [base, base + size), is a MAP_SHARED mapping of one memfd
 * file (offset = address - base), sealed against shrinking, so every large
 * block handed out from then on lies in a file another process can map.
 * A span's id is its unit index from base; its generation is a 32-bit word
 * in a second memfd (the control file), which peers map as well:
 *   - the owner's free of a span adds one to it (a peer's descriptor of the
 *     freed block no longer matches: its copies are refused);
 *   - any other release the event source reports over a span (munmap,
 *     madvise, MAP_FIXED, ... by the application) adds one as well, before
 *     the operation, and marks the span dead when its
 *     mapping of the file goes (never described again: CMA);
 *   - peers add one to the span's busy word around each copy; the owner
 *     waits for it to be zero before it reuses a freed span or gives its
 *     pages back (bounded: MWH_SHARE_WAIT_NS, after which the span is
 *     quarantined, never reused), so no peer access that began before a
 *     free ever reaches the block that follows it.
 */
#ifndef MW_HOOKS_SHARE_H
#define MW_HOOKS_SHARE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "hooks/hooks.h"

#define MWH_SHARE_MAGIC	  0x6d7773686132ULL /* "mwsha2" */
#define MWH_SHARE_HDR	  4096		    /* control file: header page */
#define MWH_SHARE_WAIT_NS 2000000000L	    /* owner's wait for busy peers */

/* Page 0 of the control file; written once by the owner before sharing. */
struct mwh_share_hdr {
	uint64_t magic;
	uint64_t pid;	   /* the owner */
	uint64_t base;	   /* owner address of data file offset 0 */
	uint64_t size;	   /* data file size (sealed: never shrinks) */
	uint64_t unit;	   /* span ids count units of this size */
	uint64_t data_ino; /* st_ino/st_dev of the data file: a peer that */
	uint64_t data_dev; /* got an fd by number checks it is this file */
	/* Kernel mode (written by peer/kwatch.c, the owner's side): the
	 * owner's /dev/mmuwatch fd number and the size of its words mapping;
	 * kwords_size 0: none (hooks mode, or a fork child's copy). */
	_Atomic int64_t kdev_fd;
	_Atomic uint64_t kwords_size;
};

/* One per unit after the header page. */
struct mwh_share_word {
	_Atomic uint64_t gen;  /* 64 bits: never wraps to an old value */
	_Atomic int32_t busy;  /* copies in flight (peers) */
	_Atomic uint32_t dead; /* the owner's mapping of it went */
	/* Kernel mode, for a span the owner described (peer/kwatch.c): its
	 * kernel watch, valid while word kslot of context kctx == ktoken;
	 * kctx 0: none. Rewritten only after gen moved. */
	_Atomic uint64_t kctx;
	_Atomic uint64_t ktoken;
	_Atomic uint32_t kslot;
	uint32_t kpad;
};

/* What the owner tells a peer about a block (peer/ puts it in messages). */
struct mwh_share_desc {
	uint64_t span;	   /* unit index from base */
	uint64_t span_len; /* bytes */
	uint64_t off;	   /* of the block's first byte in the span */
	uint64_t gen;
	int32_t data_fd, ctl_fd; /* the owner's fd numbers (pidfd_getfd) */
};

/* Switch sharing on for the not yet used part of the arena. 0 when on
 * (already or now), else -errno (no allocator arena, memfd refused...).
 * Thread-safe; the first call decides. */
MWH_HIDDEN int mwh_share_enable(void);
MWH_HIDDEN int mwh_share_on(void);
/* At the allocator's set-up: enable when MMUWATCH_SHAREABLE_HEAP=1. */
MWH_HIDDEN void mwh_share_env_init(void);
/* The owner's two fds (valid while sharing is on), -1 when off. */
MWH_HIDDEN int mwh_share_fds(int *data_fd, int *ctl_fd);
/* [p, p + n) inside one live large block in the shared part: fill d,
 * return 0; else -ENOENT (the caller uses another path, never guesses). */
MWH_HIDDEN int mwh_share_describe(const void *p, size_t n,
				  struct mwh_share_desc *d);
/* The control file's header and a span's word, for peer/kwatch.c (the
 * owner's kernel fields); NULL when sharing is off or span is out of
 * range. */
MWH_HIDDEN struct mwh_share_hdr *mwh_share_header(void);
MWH_HIDDEN struct mwh_share_word *mwh_share_span_word(uint64_t span);
/* Statistics: owner waits for busy peers, and waits that timed out. */
MWH_HIDDEN void mwh_share_stats(unsigned long *waits, unsigned long *timeouts);
/* Test only: 1 makes the owner skip the generation bump and the wait (the
 * oracle's negative control: invalidation off). */
MWH_HIDDEN void mwh_share_test_noinval(int on);
/* Test only: 1 makes fork() leave the child sharing the parent's heap
 * (the fork test's negative control). */
MWH_HIDDEN void mwh_share_test_nofork(int on);

/* The allocator's span paths (alloc_span.c, release.c); cheap when off. */
MWH_HIDDEN void mwh_share_span_freed(uintptr_t lo, size_t len);
/* 0, or -1: the span is quarantined (a peer never left a copy of it):
 * the caller must not use it, and leaks it. */
MWH_HIDDEN int mwh_share_span_reused(uintptr_t lo, size_t len);
/* Before the pages go back to the OS; returns the madvise advice to use
 * (MADV_REMOVE frees a shared span's file pages, DONTNEED would not). */
MWH_HIDDEN int mwh_share_span_released(uintptr_t lo, size_t len);
MWH_HIDDEN void mwh_share_foreign(uintptr_t lo, uintptr_t hi,
				  enum mw_release_kind kind);
/* Bump pointer hand-outs wait while sharing is being switched on. */
MWH_HIDDEN void mwh_share_bump_gate(void);
/* A span just made from the bump pointer: one-unit spans go private. */
MWH_HIDDEN int mwh_share_span_fresh(uintptr_t lo, size_t units);
/* fork: the child makes its own copy of the shared part (alloc_heap.c). */
MWH_HIDDEN void mwh_share_atfork_prepare(void);
MWH_HIDDEN void mwh_share_atfork_parent(void);
MWH_HIDDEN void mwh_share_atfork_child(void);

#endif /* MW_HOOKS_SHARE_H */
