/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The name-shifted allocator: what the rest of hooks/ calls, and the inline
 * fast paths the interposed malloc/free are made of. The allocator itself is
 * split by job (alloc_int.h lists the files).
 *
 * Layout. One big address range (the arena) is reserved PROT_NONE at first
 * use and committed as it is handed out, so "is this pointer ours" is one
 * subtraction and compare. It is cut into 64 KiB units. Every allocation
 * lives in a "page": a run of units described by one entry (struct mw_page)
 * of a separate, dense metadata array indexed by unit number (the entries
 * of neighbouring units share cache lines; headers at the start of 64 KiB
 * units would all fall into the same cache sets and evict each other).
 *   - small (<= 32 KiB): one-unit pages holding blocks of one size class,
 *     owned by one thread's heap; the owner allocates and frees without
 *     atomics, other threads hand blocks back through the owner's lock-free
 *     "remote" list;
 *   - large (> 32 KiB): a span of units to itself (page-granular, effectively
 *     a direct mapping), kept in a per-thread cache and global bins when
 *     freed (see the retention policy in alloc_span.c).
 * The entry of any pointer p we returned is the one of the unit holding p;
 * an over-aligned large block that starts past its span's first unit has
 * that unit's entry marked as forwarding to the span.
 */
#ifndef MW_HOOKS_ALLOC_H
#define MW_HOOKS_ALLOC_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "hooks/hooks.h"

#define MW_UNIT_SHIFT 16
#define MW_UNIT	      ((size_t)1 << MW_UNIT_SHIFT)
#define MW_HDR	      128 /* offset (and least alignment) of a large block */
#define MW_META	      128 /* bytes per metadata entry */
#define MW_NSMALL     54  /* small size classes */
#define MW_SMALL_MAX  32768
#define MW_NLARGE     240 /* large classes (in units) */
#define MW_NTCACHE    24  /* large classes cached per thread */
#define MW_TC_DEPTH   4
#define MW_STK	      32    /* per-class stack of freed blocks */
#define MW_STK_BYTES  16384 /* ... holding at most about this */
#define MW_FSTK	      128   /* other threads' blocks, batched */

enum mw_page_kind {
	MW_KIND_SMALL = 1,
	MW_KIND_LARGE,
	MW_KIND_FWD,
	MW_KIND_META
};
enum mw_span_state { MW_SPAN_INUSE = 1, MW_SPAN_HOT, MW_SPAN_COLD };

struct mw_heap;

/* One unit's metadata. Small pages: written by the owning heap's thread
 * only (others read heap/lo to see that the block is not theirs). */
struct mw_page {
	void *free;	      /* small: owner's free list */
	struct mw_heap *heap; /* small: owning heap; else NULL */
	uint32_t used;	      /* small: blocks handed out */
	uint32_t lo;	      /* owner's free is inline while used > lo */
	uint32_t capacity;
	uint32_t block; /* small: block size */
	uint8_t kind;
	uint8_t cls;		     /* small or large class */
	uint8_t full;		     /* small: exhausted, not on avail list */
	uint8_t has_aligned;	     /* small: some block returned offset */
	uint8_t state;		     /* large: enum mw_span_state */
	uint8_t roomy;		     /* large: given to a growing realloc */
	uint8_t thp;		     /* large: MADV_HUGEPAGE given */
	uint32_t clean_from;	     /* large: offset from which data is 0 */
	size_t units;		     /* span length in units */
	struct mw_page *next, *prev; /* heap avail list or bin list */
	struct mw_page *lru_next, *lru_prev; /* global retained LRU */
	struct mw_page *fwd;		     /* MW_KIND_FWD: the real span */
};
_Static_assert(sizeof(struct mw_page) <= MW_META, "page entry too big");

struct mw_heap {
	/* Blocks freed by this thread (any heap's), by class, as a stack of
	 * pointers: malloc and free of a recently used size never touch the
	 * block's memory (a freed block is usually cold: reading its
	 * free-list link was the hot path's cache miss). Owner only;
	 * bounded by stcap. */
	uint32_t stn[MW_NSMALL];
	uint32_t stcap[MW_NSMALL];
	void *stk[MW_NSMALL][MW_STK];
	/* Blocks of other heaps freed by this thread, handed back in batches
	 * (one atomic exchange per owner per batch, not one per block). */
	uint32_t fn;
	void *fstk[MW_FSTK];
	struct mw_page *cur[MW_NSMALL];
	struct mw_page *avail[MW_NSMALL];
	struct mw_page *pending; /* emptied pages to give back */
	_Atomic(void *) remote;	 /* blocks freed by other threads */
	struct mw_page *tcache[MW_NTCACHE][MW_TC_DEPTH];
	uint8_t tcount[MW_NTCACHE];
	size_t tbytes;
	struct mw_heap *all_next;  /* every heap ever made */
	struct mw_heap *free_next; /* abandoned heaps */
	int owned;
	/* Taken by the owner around the small-block slow paths (the only
	 * code that changes the page lists), and by fork's prepare handler
	 * for every heap: a child never inherits a heap in the middle of a
	 * list update. Uncontended except at fork. The fast paths and the
	 * span cache (tcache) do without it (see alloc_span.c). */
	atomic_int lock;
};

/* The arena: [base, base + size), and the metadata array of its units. */
struct mwh_arena {
	uintptr_t base;
	uintptr_t size;
	struct mw_page *meta;
};

MWH_HIDDEN extern struct mwh_arena mwh_arena;
MWH_HIDDEN extern __thread struct mw_heap *mw_tls_heap
	__attribute__((tls_model("initial-exec")));

static inline int mw_owns(const void *p)
{
	return (uintptr_t)p - mwh_arena.base < mwh_arena.size;
}

/* The entry of the unit holding p (p ours). */
static inline struct mw_page *mw_page_of(const void *p)
{
	return mwh_arena.meta +
	       (((uintptr_t)p - mwh_arena.base) >> MW_UNIT_SHIFT);
}

/* The first byte of the unit an entry describes. */
static inline uintptr_t mw_page_addr(const struct mw_page *pg)
{
	return mwh_arena.base +
	       ((uintptr_t)(pg - mwh_arena.meta) << MW_UNIT_SHIFT);
}

/* 16-byte steps to 128, four classes per power of two to 512, eight to
 * 4 KiB, then one class per number of blocks a 64 KiB page holds: 15 down
 * to 2, each as big as that count allows (MW_UNIT / k, 16-aligned). Above
 * 4 KiB the bytes between a page's last block and its end share an OS page
 * with that block, so they are resident: sqlite's 4368-byte page-cache
 * entries fit 14 to a page in a 4608-byte class and 15 in 4368 (its peak
 * RSS 13.2 -> 12.8 MB, glibc 12.3). Blocks up to 32 KiB share pages rather
 * than taking a unit each: pages are threaded lazily, so a block touches
 * only its own memory. */
static inline unsigned mw_small_class(size_t n)
{
	unsigned bit;

	if (n <= 128)
		return n ? (unsigned)((n + 15) >> 4) - 1 : 0;
	bit = 63 - (unsigned)__builtin_clzl(n - 1);
	if (n <= 512)
		return 8 + (bit - 7) * 4 +
		       (unsigned)(((n - 1) >> (bit - 2)) & 3);
	if (n <= 4096)
		return 16 + (bit - 9) * 8 +
		       (unsigned)(((n - 1) >> (bit - 3)) & 7);
	/* the most blocks of at least n (16-aligned) a page holds */
	return MW_NSMALL - 1 -
	       ((uint32_t)MW_UNIT / (uint32_t)((n + 15) & ~(size_t)15) - 2);
}

static inline size_t mw_small_size(unsigned c)
{
	unsigned k, bit;

	if (c < 8)
		return (size_t)(c + 1) << 4;
	if (c < 16) {
		k = c - 8;
		bit = 7 + k / 4;
		return ((size_t)1 << bit) +
		       (size_t)(k % 4 + 1) * ((size_t)1 << (bit - 2));
	}
	if (c >= 40)
		return (MW_UNIT / (MW_NSMALL + 1 - c)) & ~(size_t)15;
	k = c - 16;
	bit = 9 + k / 8;
	return ((size_t)1 << bit) +
	       (size_t)(k % 8 + 1) * ((size_t)1 << (bit - 3));
}

MWH_HIDDEN void *mw_malloc_slow(size_t n);
MWH_HIDDEN void mw_free_slow(void *p, struct mw_page *pg);

/* The two ways a small block is handed out (the inline malloc, the slow
 * path, lending in alloc_page.c). Off the calling thread's stack of class
 * c, which holds k > 0: the count first, so a fork child sees the block
 * gone. */
static inline void *mw_stk_take(struct mw_heap *h, unsigned c, uint32_t k)
{
	__atomic_store_n(&h->stn[c], k - 1, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return h->stk[c][k - 1];
}

/* Off page pg's free list, which is not empty. */
static inline void *mw_page_take(struct mw_page *pg)
{
	void *b = pg->free;

	pg->free = *(void **)b;
	pg->used++;
	return b;
}

/* Fast paths, inlined into the interposed symbols. */
static inline void *mw_malloc_inline(size_t n)
{
	struct mw_heap *h = mw_tls_heap;

	if (__builtin_expect(h != NULL && n <= MW_SMALL_MAX, 1)) {
		unsigned c = mw_small_class(n);
		uint32_t k = h->stn[c];
		struct mw_page *pg;

		if (__builtin_expect(k != 0, 1))
			return mw_stk_take(h, c, k);
		pg = h->cur[c];
		if (__builtin_expect(pg->free != NULL, 1))
			return mw_page_take(pg);
	}
	return mw_malloc_slow(n);
}

/* Inline when the calling thread's stack for the block's class has room,
 * whichever heap's page the block is on: the page counts it as in use
 * until it comes back to the page, so it may just as well be handed out
 * again by this thread (as jemalloc's thread caches do); overflowing
 * stacks give blocks back to their pages' owners (alloc_page.c). pg->lo is
 * UINT32_MAX (MW_LO_NEVER) for every entry that is not a small page and
 * for a page with offset (aligned) blocks, whose pointers are not block
 * starts; see alloc_page.c for its other values. */
static inline void mw_free_inline(void *p)
{
	struct mw_page *pg;
	struct mw_heap *h;

	if (__builtin_expect(!mw_owns(p), 0)) {
		if (p)
			mw_free_slow(p, NULL);
		return;
	}
	pg = mw_page_of(p);
	h = mw_tls_heap;
	if (__builtin_expect(h != NULL && pg->lo != UINT32_MAX, 1)) {
		unsigned c = pg->cls;
		uint32_t k = h->stn[c];

		if (__builtin_expect(k < h->stcap[c], 1)) {
			/* block first: a fork child never counts a stale slot
			 */
			h->stk[c][k] = p;
			__atomic_signal_fence(__ATOMIC_SEQ_CST);
			__atomic_store_n(&h->stn[c], k + 1, __ATOMIC_RELAXED);
			return;
		}
	}
	mw_free_slow(p, pg);
}

/* Name-shifted allocator (the mw_ names). */
MWH_HIDDEN void *mw_malloc(size_t n);
MWH_HIDDEN void mw_free(void *p);
MWH_HIDDEN void *mw_calloc(size_t n, size_t m);
MWH_HIDDEN void *mw_realloc(void *p, size_t n);
MWH_HIDDEN void *mw_memalign(size_t align, size_t n);
MWH_HIDDEN int mw_posix_memalign(void **out, size_t align, size_t n);
MWH_HIDDEN void *mw_aligned_alloc(size_t align, size_t n);
MWH_HIDDEN void *mw_valloc(size_t n);
MWH_HIDDEN void *mw_pvalloc(size_t n);
MWH_HIDDEN size_t mw_malloc_usable_size(void *p);
MWH_HIDDEN int mw_malloc_trim(size_t pad);
MWH_HIDDEN int mw_mallopt(int param, int value);

/* The program's own anonymous mappings, as the interposer saw them made
 * and unmapped: counted for the retention limit (alloc_outside.c). */
MWH_HIDDEN void mwh_outside_map(uintptr_t a, size_t n, int prot, int flags);
MWH_HIDDEN void mwh_outside_unmap(uintptr_t a, size_t n);
MWH_HIDDEN void mwh_outside_remap(uintptr_t old, size_t osz, uintptr_t na,
				  size_t nsz);

/* Reserve the region now (malloc-free); -1 when that is impossible. */
MWH_HIDDEN int mw_alloc_prepare(void);

/* Allocator statistics (relaxed counters). */
struct mw_alloc_stats {
	unsigned long releases; /* times memory went back to the OS */
	unsigned long released_bytes;
	unsigned long retained_bytes; /* freed spans kept committed (global) */
	unsigned long retain_limit;
	unsigned long inuse_large;   /* bytes of spans in use (pages too) */
	unsigned long peak_large;    /* the most ever in use at once */
	unsigned long lock_syscalls; /* syscalls made holding g.lock: 0 */
	unsigned long outside;	     /* the program's own mappings counted */
	unsigned long thp_spans;     /* spans given huge-page advice */
	unsigned long moves;	     /* realloc growths that moved pages */
};
MWH_HIDDEN void mw_alloc_get_stats(struct mw_alloc_stats *st);
/* Self-test support: the next free of exactly this pointer bypasses the
 * retention policy and releases the span (so the release path is seen). */
MWH_HIDDEN void mw_alloc_release_on_free(void *p);
/* glibc fallbacks for pointers that are not ours (set by install). */
MWH_HIDDEN extern size_t (*mw_libc_usable_size)(void *);
MWH_HIDDEN extern int (*mw_libc_trim)(size_t);
MWH_HIDDEN extern int (*mw_libc_mallopt)(int, int);

#endif /* MW_HOOKS_ALLOC_H */
