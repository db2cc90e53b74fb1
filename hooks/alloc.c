// SPDX-License-Identifier: BSD-3-Clause
/*
 * The name-shifted allocator (see alloc.h for the layout).
 *
 * Retention policy (why caches keep hitting). A registration cache pins and
 * registers the buffers an application sends from; applications free and
 * re-malloc those buffers all the time. Returning a freed buffer to the OS
 * invalidates its registration, and the next malloc of the same size gets new
 * pages that must be registered again. So freed large spans are never
 * unmapped: they go, still committed and at the same address, to a per-thread
 * cache and then to global bins by size class, and the next allocation of
 * that class reuses the most recently freed one (same virtual and physical
 * pages, registration still valid). Memory goes back to the OS only when the
 * retained bytes exceed a high-water limit: max(retain_min, peak bytes of
 * large allocations ever live at once), capped at 1 GiB. A program cycling
 * through the same working set therefore never releases; only memory beyond
 * anything the program needed at once is released, coldest first (LRU),
 * and always with the release callback first. malloc_trim() releases every
 * retained span. Released spans keep their address range (madvise, never
 * munmap), so the reservation never gets holes.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hooks/alloc.h"
#include "hooks/internal.h"
#include "hooks/raw.h"

/* glibc, for pointers that are not ours; weak so that a static link does not
 * pull glibc's malloc in next to ours. */
extern void *__libc_malloc(size_t) __attribute__((weak));
extern void __libc_free(void *) __attribute__((weak));
extern void *__libc_realloc(void *, size_t) __attribute__((weak));

MW_HIDDEN struct mw_region mw_region;
MW_HIDDEN __thread struct mw_heap *mw_tls_heap
	__attribute__((tls_model("initial-exec")));
MW_HIDDEN size_t (*mw_libc_usable_size)(void *);
MW_HIDDEN int (*mw_libc_trim)(size_t);
MW_HIDDEN int (*mw_libc_mallopt)(int, int);

#define MW_RESERVE_MAX ((uintptr_t)1 << 40)	/* 1 TiB of address space */
#define MW_RESERVE_MIN ((uintptr_t)1 << 30)
#define MW_COMMIT_STEP ((uintptr_t)4 << 20)
#define MW_RETAIN_MIN ((size_t)64 << 20)
#define MW_RETAIN_CAP ((size_t)1 << 30)
#define MW_TC_BYTES ((size_t)16 << 20)	/* per-thread span cache */
#define MW_PAGE 4096

/* A small spinlock: it never allocates, and fork() can reset it. */
typedef atomic_int mw_lock_t;
static void mw_lock(mw_lock_t *l)
{
	int spins = 0;

	while (atomic_exchange_explicit(l, 1, memory_order_acquire)) {
		while (atomic_load_explicit(l, memory_order_relaxed)) {
			if (++spins > 64) {
				sched_yield();
				spins = 0;
			}
		}
	}
}

static void mw_unlock(mw_lock_t *l)
{
	atomic_store_explicit(l, 0, memory_order_release);
}

/* Lock order: g.heap_lock, then a heap's lock, then g.lock. */
static inline void mw_heap_lock(struct mw_heap *h)
{
	if (h)
		mw_lock(&h->lock);
}

static inline void mw_heap_unlock(struct mw_heap *h)
{
	if (h)
		mw_unlock(&h->lock);
}

static struct {
	mw_lock_t lock;			/* bump, bins, LRU, counters below */
	uintptr_t bump;			/* next unused byte of the region */
	uintptr_t committed;		/* end of the read-write part */
	struct mw_page *hot[MW_NLARGE];	/* retained, committed */
	struct mw_page *cold[MW_NLARGE]; /* released, address kept */
	struct mw_page *lru_head, *lru_tail; /* hot spans, newest first */
	size_t retained;
	size_t retain_min;
	mw_lock_t heap_lock;
	struct mw_heap *heaps;		/* all heaps */
	struct mw_heap *abandoned;
	char *meta, *meta_end;		/* carving space for heap structs */
	pthread_key_t key;
	atomic_int init;		/* 0 no, 1 running, 2 done, 3 failed */
	void *release_on_free;
} g = { .retain_min = MW_RETAIN_MIN };

static atomic_ulong st_releases, st_released_bytes;
static atomic_long st_inuse_large, st_peak_large;

static struct mw_page mw_empty_page;	/* cur[] of a new heap: no blocks */

/* ---- region and spans ------------------------------------------------ */

static int mw_reserve(void)
{
	uintptr_t size;

	for (size = MW_RESERVE_MAX; size >= MW_RESERVE_MIN; size >>= 1) {
		void *p = mw_raw_mmap(NULL, size + MW_UNIT, PROT_NONE,
				      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
				      -1, 0);
		uintptr_t b;

		if (mw_raw_failed((long)p))
			continue;
		b = ((uintptr_t)p + MW_UNIT - 1) & ~(MW_UNIT - 1);
		g.bump = b;
		g.committed = b;
		mw_region.size = size;
		/* base last: mw_owns() must never see a half-set region */
		__atomic_store_n(&mw_region.base, b, __ATOMIC_RELEASE);
		return 0;
	}
	return -1;
}

static void mw_heap_destroy(void *arg);
static void mw_atfork_prepare(void);
static void mw_atfork_parent(void);
static void mw_atfork_child(void);

/* Once, malloc-free; concurrent callers wait. */
static int mw_global_init(void)
{
	int s = atomic_load_explicit(&g.init, memory_order_acquire);
	int zero = 0;

	if (s == 2)
		return 0;
	if (s == 3)
		return -1;
	if (atomic_compare_exchange_strong(&g.init, &zero, 1)) {
		int ok = mw_reserve() == 0;

		if (ok && pthread_key_create(&g.key, mw_heap_destroy) != 0)
			ok = 0;
		if (ok)
			pthread_atfork(mw_atfork_prepare, mw_atfork_parent,
				       mw_atfork_child);
		atomic_store_explicit(&g.init, ok ? 2 : 3, memory_order_release);
		return ok ? 0 : -1;
	}
	while ((s = atomic_load_explicit(&g.init, memory_order_acquire)) == 1)
		sched_yield();
	return s == 2 ? 0 : -1;
}

int mw_alloc_prepare(void)
{
	return mw_global_init();
}

/* Large classes in units: exact up to 8, then 8 per power of two. */
static unsigned mw_large_class(size_t units)
{
	unsigned bit;

	if (units <= 8)
		return (unsigned)units - 1;
	bit = 63 - (unsigned)__builtin_clzl(units - 1);
	return 8 + (bit - 3) * 8 + (unsigned)(((units - 1) >> (bit - 3)) & 7);
}

static size_t mw_large_units(unsigned c)
{
	unsigned k, bit;

	if (c < 8)
		return c + 1;
	k = c - 8;
	bit = 3 + k / 8;
	return ((size_t)1 << bit) + ((size_t)(k % 8 + 1) << (bit - 3));
}

static void mw_lru_unlink(struct mw_page *s)
{
	if (s->lru_prev)
		s->lru_prev->lru_next = s->lru_next;
	else
		g.lru_head = s->lru_next;
	if (s->lru_next)
		s->lru_next->lru_prev = s->lru_prev;
	else
		g.lru_tail = s->lru_prev;
	s->lru_next = s->lru_prev = NULL;
}

static void mw_bin_unlink(struct mw_page **bin, struct mw_page *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		*bin = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->next = s->prev = NULL;
}

static void mw_bin_push(struct mw_page **bin, struct mw_page *s)
{
	s->prev = NULL;
	s->next = *bin;
	if (*bin)
		(*bin)->prev = s;
	*bin = s;
}

/* Give the pages of a hot span back to the OS; called with g.lock held.
 * The header page stays (it holds the bin links). Callback first. */
static void mw_span_release(struct mw_page *s)
{
	uintptr_t lo = (uintptr_t)s + MW_PAGE;
	uintptr_t hi = (uintptr_t)s + s->units * MW_UNIT;

	mw_release_notify(lo, hi, MW_RELEASE_ALLOC);
	mw_raw(SYS_madvise, lo, hi - lo, MADV_DONTNEED);
	s->state = MW_SPAN_COLD;
	s->clean_from = MW_PAGE;
	atomic_fetch_add_explicit(&st_releases, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&st_released_bytes, hi - lo,
				  memory_order_relaxed);
}

static size_t mw_retain_limit(void)
{
	size_t peak = (size_t)atomic_load_explicit(&st_peak_large,
						   memory_order_relaxed);

	if (peak > MW_RETAIN_CAP)
		peak = MW_RETAIN_CAP;
	return peak > g.retain_min ? peak : g.retain_min;
}

/* Keep a freed span (hot), then trim the coldest beyond the limit. A span
 * bigger than the limit by itself is released directly: keeping it would
 * push every other retained (likely registered) span out first, only for
 * this one to go as well. */
static void mw_span_retain_locked(struct mw_page *s, size_t limit)
{
	if (s->units * MW_UNIT > limit) {
		mw_span_release(s);
		mw_bin_push(&g.cold[s->cls], s);
		return;
	}
	s->state = MW_SPAN_HOT;
	mw_bin_push(&g.hot[s->cls], s);
	s->lru_prev = NULL;
	s->lru_next = g.lru_head;
	if (g.lru_head)
		g.lru_head->lru_prev = s;
	g.lru_head = s;
	if (!g.lru_tail)
		g.lru_tail = s;
	g.retained += s->units * MW_UNIT;
	while (g.retained > limit && g.lru_tail) {
		struct mw_page *v = g.lru_tail;

		mw_lru_unlink(v);
		mw_bin_unlink(&g.hot[v->cls], v);
		g.retained -= v->units * MW_UNIT;
		mw_span_release(v);
		mw_bin_push(&g.cold[v->cls], v);
	}
}

static struct mw_page *mw_span_from_bump(size_t units)
{
	size_t len = units * MW_UNIT;
	uintptr_t end = mw_region.base + mw_region.size;
	struct mw_page *s;

	if (len > end - g.bump)
		return NULL;
	if (g.bump + len > g.committed) {
		uintptr_t want = (g.bump + len + MW_COMMIT_STEP - 1) &
				 ~(MW_COMMIT_STEP - 1);

		if (want > end)
			want = end;
		if (mw_raw_failed(mw_raw(SYS_mprotect, g.committed,
					 want - g.committed,
					 PROT_READ | PROT_WRITE)))
			return NULL;
		g.committed = want;
	}
	s = (struct mw_page *)g.bump;
	g.bump += len;
	s->clean_from = MW_HDR;
	return s;
}

/*
 * The per-thread span cache is changed by its owner only, without the heap
 * lock (large blocks take this path on every malloc and free), in an order
 * that a fork() child, which sees some prefix of the owner's stores, always
 * finds sound: an entry below tcount is a cached span (state HOT), and
 * tbytes never counts less than what is cached (the child recomputes it).
 */
static struct mw_page *mw_tc_pop(struct mw_heap *h, unsigned c)
{
	uint8_t n = h->tcount[c];
	struct mw_page *s;

	if (!n)
		return NULL;
	s = h->tcache[c][n - 1];
	__atomic_store_n(&h->tcount[c], (uint8_t)(n - 1), __ATOMIC_RELEASE);
	/* the span leaves the cache before anything else changes */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	h->tbytes -= s->units * MW_UNIT;
	return s;
}

static int mw_tc_push(struct mw_heap *h, unsigned c, struct mw_page *s)
{
	uint8_t n = h->tcount[c];
	size_t len = s->units * MW_UNIT;

	if (n >= MW_TC_DEPTH || h->tbytes + len > MW_TC_BYTES)
		return 0;
	s->state = MW_SPAN_HOT;
	h->tbytes += len;
	h->tcache[c][n] = s;
	__atomic_store_n(&h->tcount[c], (uint8_t)(n + 1), __ATOMIC_RELEASE);
	return 1;
}

/* A span of class c for the calling heap h (may be NULL). */
static struct mw_page *mw_span_get(struct mw_heap *h, unsigned c)
{
	struct mw_page *s = NULL;
	size_t units = mw_large_units(c);

	if (h && c < MW_NTCACHE)
		s = mw_tc_pop(h, c);
	if (!s) {
		mw_lock(&g.lock);
		if ((s = g.hot[c]) != NULL) {
			mw_bin_unlink(&g.hot[c], s);
			mw_lru_unlink(s);
			g.retained -= units * MW_UNIT;
		} else if ((s = g.cold[c]) != NULL) {
			mw_bin_unlink(&g.cold[c], s);
		} else {
			s = mw_span_from_bump(units);
		}
		mw_unlock(&g.lock);
		if (!s)
			return NULL;
	}
	s->units = units;
	s->cls = (uint8_t)c;
	s->state = MW_SPAN_INUSE;
	s->next = s->prev = NULL;
	s->lru_next = s->lru_prev = NULL;
	return s;
}

/* h: the calling thread's heap (may be NULL). */
static void mw_span_put(struct mw_heap *h, struct mw_page *s, int release)
{
	size_t len = s->units * MW_UNIT;
	unsigned c = s->cls;

	s->kind = MW_KIND_LARGE;
	s->clean_from = (uint32_t)(len < UINT32_MAX ? len : UINT32_MAX);
	if (!release && h && c < MW_NTCACHE && mw_tc_push(h, c, s))
		return;
	mw_lock(&g.lock);
	if (release) {
		mw_span_release(s);
		mw_bin_push(&g.cold[c], s);
	} else {
		mw_span_retain_locked(s, mw_retain_limit());
	}
	mw_unlock(&g.lock);
}

static void mw_tcache_flush(struct mw_heap *h)
{
	struct mw_page *s;
	unsigned c;

	for (c = 0; c < MW_NTCACHE; c++)
		while ((s = mw_tc_pop(h, c)) != NULL) {
			mw_lock(&g.lock);
			mw_span_retain_locked(s, mw_retain_limit());
			mw_unlock(&g.lock);
		}
}

/* ---- heaps ----------------------------------------------------------- */

static struct mw_heap *mw_heap_get(void)
{
	struct mw_heap *h;
	unsigned c;

	if (mw_global_init() != 0)
		return NULL;
	mw_lock(&g.heap_lock);
	h = g.abandoned;
	if (h) {
		g.abandoned = h->free_next;
	} else {
		if (g.meta + sizeof(*h) > g.meta_end) {
			struct mw_page *s = mw_span_get(NULL, 0);

			if (!s) {
				mw_unlock(&g.heap_lock);
				return NULL;
			}
			s->kind = MW_KIND_FWD;	/* metadata, never freed */
			g.meta = (char *)s + MW_HDR;
			g.meta_end = (char *)s + MW_UNIT;
		}
		h = (struct mw_heap *)g.meta;
		g.meta += (sizeof(*h) + 63) & ~(size_t)63;
		memset(h, 0, sizeof(*h));
		for (c = 0; c < MW_NSMALL; c++)
			h->cur[c] = &mw_empty_page;
		h->all_next = g.heaps;
		g.heaps = h;
	}
	h->owned = 1;
	h->free_next = NULL;
	mw_unlock(&g.heap_lock);
	/* TLS first: pthread_setspecific may allocate for high keys */
	mw_tls_heap = h;
	pthread_setspecific(g.key, h);
	return h;
}

/* Thread exit: the heap (with its pages) waits for the next new thread. */
static void mw_heap_destroy(void *arg)
{
	struct mw_heap *h = arg;

	mw_tcache_flush(h);
	mw_tls_heap = NULL;
	mw_lock(&g.heap_lock);
	h->owned = 0;
	h->free_next = g.abandoned;
	g.abandoned = h;
	mw_unlock(&g.heap_lock);
}

/*
 * fork(): every lock, so the child gets the page lists of the other
 * threads' heaps between two of their slow paths, and the global bins
 * consistent. What their owners change without a lock is harmless in any
 * prefix: a fast path in flight leaves at worst a block that nobody holds
 * or a page that is never given back, the span cache is ordered for it
 * (mw_tc_pop). The child's new threads adopt those heaps.
 */
static void mw_atfork_prepare(void)
{
	struct mw_heap *h;

	mw_lock(&g.heap_lock);
	for (h = g.heaps; h; h = h->all_next)
		mw_lock(&h->lock);
	mw_lock(&g.lock);
}

static void mw_atfork_parent(void)
{
	struct mw_heap *h;

	mw_unlock(&g.lock);
	for (h = g.heaps; h; h = h->all_next)
		mw_unlock(&h->lock);
	mw_unlock(&g.heap_lock);
}

/* Child: only this thread survives; the other heaps become adoptable. */
static void mw_atfork_child(void)
{
	struct mw_heap *h;

	atomic_store(&g.lock, 0);
	atomic_store(&g.heap_lock, 0);
	g.abandoned = NULL;
	for (h = g.heaps; h; h = h->all_next) {
		unsigned c, k;

		atomic_store(&h->lock, 0);
		h->tbytes = 0;		/* exact again (see mw_tc_pop) */
		for (c = 0; c < MW_NTCACHE; c++)
			for (k = 0; k < h->tcount[c]; k++)
				h->tbytes += h->tcache[c][k]->units * MW_UNIT;
		if (h == mw_tls_heap)
			continue;
		h->owned = 0;
		h->free_next = g.abandoned;
		g.abandoned = h;
	}
}

/* ---- small pages ----------------------------------------------------- */

static void mw_avail_push(struct mw_heap *h, struct mw_page *pg)
{
	mw_bin_push(&h->avail[pg->cls], pg);
}

static struct mw_page *mw_small_page_new(struct mw_heap *h, unsigned c)
{
	struct mw_page *pg = mw_span_get(h, 0);
	size_t bs = mw_small_size(c);
	char *b, *end;
	void **link;

	if (!pg)
		return NULL;
	pg->kind = MW_KIND_SMALL;
	pg->cls = (uint8_t)c;
	pg->heap = h;
	pg->block = (uint32_t)bs;
	pg->used = 0;
	pg->full = 0;
	pg->has_aligned = 0;
	pg->capacity = (uint32_t)((MW_UNIT - MW_HDR) / bs);
	/* thread the free list through the blocks, in address order */
	b = (char *)pg + MW_HDR;
	end = b + (size_t)pg->capacity * bs;
	link = &pg->free;
	for (; b < end; b += bs) {
		*link = b;
		link = (void **)b;
	}
	*link = NULL;
	return pg;
}

static void *mw_block_start(struct mw_page *pg, void *p)
{
	uintptr_t data = (uintptr_t)pg + MW_HDR;

	return (void *)(data + ((uintptr_t)p - data) / pg->block * pg->block);
}

/* Free by the owner: p is a block start. */
static void mw_small_free_local(struct mw_heap *h, struct mw_page *pg, void *p)
{
	*(void **)p = pg->free;
	pg->free = p;
	pg->used--;
	if (pg->full) {
		pg->full = 0;
		mw_avail_push(h, pg);
	}
	if (pg->used == 0 && h->cur[pg->cls] != pg) {
		mw_bin_unlink(&h->avail[pg->cls], pg);
		pg->heap = NULL;
		pg->cls = 0;		/* now a one-unit span (large class 0) */
		mw_span_put(h, pg, 0);
	}
}

static void mw_remote_drain(struct mw_heap *h)
{
	void *b = atomic_exchange_explicit(&h->remote, NULL,
					   memory_order_acquire);

	while (b) {
		void *next = *(void **)b;

		mw_small_free_local(h, mw_page_of(b), b);
		b = next;
	}
}

static void *mw_small_alloc_slow(struct mw_heap *h, unsigned c)
{
	struct mw_page *pg;
	void *b;

	if (atomic_load_explicit(&h->remote, memory_order_relaxed))
		mw_remote_drain(h);
	pg = h->cur[c];
	if (!pg->free) {
		if (pg != &mw_empty_page)
			pg->full = 1;
		pg = h->avail[c];
		if (pg)
			mw_bin_unlink(&h->avail[c], pg);
		else
			pg = mw_small_page_new(h, c);
		if (!pg) {
			h->cur[c] = &mw_empty_page;
			return NULL;
		}
		h->cur[c] = pg;
	}
	b = pg->free;
	pg->free = *(void **)b;
	pg->used++;
	return b;
}

/* ---- large blocks ---------------------------------------------------- */

static void mw_large_account(long delta)
{
	long now = atomic_fetch_add_explicit(&st_inuse_large, delta,
					     memory_order_relaxed) + delta;
	long peak = atomic_load_explicit(&st_peak_large, memory_order_relaxed);

	while (now > peak &&
	       !atomic_compare_exchange_weak_explicit(&st_peak_large, &peak, now,
						      memory_order_relaxed,
						      memory_order_relaxed))
		;
}

/* n bytes aligned to align (a power of two). */
static void *mw_large_alloc(struct mw_heap *h, size_t n, size_t align,
			    int zero)
{
	size_t need, units;
	struct mw_page *s;
	uintptr_t p;

	if (align < MW_HDR)
		align = MW_HDR;
	if (n > mw_region.size || align > mw_region.size) {
		errno = ENOMEM;
		return NULL;
	}
	need = n + align;
	units = (need + MW_UNIT - 1) >> MW_UNIT_SHIFT;
	s = mw_span_get(h, mw_large_class(units));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->kind = MW_KIND_LARGE;
	if (align <= MW_UNIT) {
		p = (uintptr_t)s + align;
	} else {
		p = ((uintptr_t)s + MW_UNIT + align - 1) & ~(align - 1);
		if (p - MW_UNIT != (uintptr_t)s) {
			struct mw_page *f = (struct mw_page *)(p - MW_UNIT);

			f->kind = MW_KIND_FWD;
			f->fwd = s;
		}
	}
	if (zero && p - (uintptr_t)s < s->clean_from) {
		size_t dirty = s->clean_from - (p - (uintptr_t)s);

		memset((void *)p, 0, dirty < n ? dirty : n);
	}
	mw_large_account((long)(s->units * MW_UNIT));
	return (void *)p;
}

static struct mw_page *mw_large_span(struct mw_page *pg)
{
	if (pg->kind == MW_KIND_FWD)
		pg = pg->fwd;
	if (pg->kind != MW_KIND_LARGE || pg->state != MW_SPAN_INUSE) {
		mw_raw_write_str(2, "mmuwatch: free(): invalid pointer or double free\n");
		__builtin_trap();
	}
	return pg;
}

static void mw_large_free(struct mw_page *pg, void *p)
{
	struct mw_page *s = mw_large_span(pg);
	int release = g.release_on_free && g.release_on_free == p;

	if (release)
		g.release_on_free = NULL;
	mw_large_account(-(long)(s->units * MW_UNIT));
	mw_span_put(mw_tls_heap, s, release);
}

/* ---- the name-shifted API -------------------------------------------- */

void *mw_malloc_slow(size_t n)
{
	struct mw_heap *h = mw_tls_heap;

	if (!h) {
		h = mw_heap_get();
		if (!h) {
			errno = ENOMEM;
			return NULL;
		}
	}
	if (n <= MW_SMALL_MAX) {
		void *b;

		mw_heap_lock(h);
		b = mw_small_alloc_slow(h, mw_small_class(n));
		mw_heap_unlock(h);
		if (!b)
			errno = ENOMEM;
		return b;
	}
	return mw_large_alloc(h, n, 0, 0);
}

void mw_free_slow(void *p, struct mw_page *pg)
{
	struct mw_heap *h;

	if (!pg) {			/* not ours: glibc's */
		if (__libc_free)
			__libc_free(p);
		return;
	}
	if (pg->kind != MW_KIND_SMALL) {
		mw_large_free(pg, p);
		return;
	}
	if (pg->has_aligned)
		p = mw_block_start(pg, p);
	h = mw_tls_heap;
	if (pg->heap == h && h) {
		mw_heap_lock(h);
		mw_small_free_local(h, pg, p);
		mw_heap_unlock(h);
		return;
	}
	/* another thread's block: push on its heap's remote list */
	h = pg->heap;
	{
		void *head = atomic_load_explicit(&h->remote, memory_order_relaxed);

		do
			*(void **)p = head;
		while (!atomic_compare_exchange_weak_explicit(
			&h->remote, &head, p, memory_order_release,
			memory_order_relaxed));
	}
}

void *mw_malloc(size_t n)
{
	return mw_malloc_inline(n);
}

void mw_free(void *p)
{
	mw_free_inline(p);
}

void *mw_calloc(size_t n, size_t m)
{
	size_t t;
	void *p;

	if (__builtin_mul_overflow(n, m, &t)) {
		errno = ENOMEM;
		return NULL;
	}
	if (t > MW_SMALL_MAX) {
		struct mw_heap *h = mw_tls_heap;

		if (!h && !(h = mw_heap_get())) {
			errno = ENOMEM;
			return NULL;
		}
		return mw_large_alloc(h, t, 0, 1);
	}
	p = mw_malloc_inline(t);
	if (p)
		memset(p, 0, t);
	return p;
}

size_t mw_malloc_usable_size(void *p)
{
	struct mw_page *pg;

	if (!p)
		return 0;
	if (!mw_owns(p))
		return mw_libc_usable_size ? mw_libc_usable_size(p) : 0;
	pg = mw_page_of(p);
	if (pg->kind == MW_KIND_SMALL) {
		char *b = pg->has_aligned ? mw_block_start(pg, p) : p;

		return pg->block - (size_t)((char *)p - b);
	}
	pg = mw_large_span(pg);
	return (uintptr_t)pg + pg->units * MW_UNIT - (uintptr_t)p;
}

void *mw_realloc(void *p, size_t n)
{
	size_t have;
	void *q;

	if (!p)
		return mw_malloc(n);
	if (!mw_owns(p)) {
		/* glibc's block stays glibc's */
		if (__libc_realloc)
			return __libc_realloc(p, n);
		errno = ENOMEM;
		return NULL;
	}
	if (n == 0) {			/* glibc: free and return NULL */
		mw_free(p);
		return NULL;
	}
	have = mw_malloc_usable_size(p);
	if (n <= have && n >= have / 2)
		return p;
	q = mw_malloc(n);
	if (!q)
		return NULL;
	memcpy(q, p, n < have ? n : have);
	mw_free(p);
	return q;
}

void *mw_memalign(size_t align, size_t n)
{
	struct mw_heap *h;
	size_t want;
	char *b;
	uintptr_t p;
	struct mw_page *pg;

	/* glibc 2.36's memalign: small alignments are malloc's; others are
	 * rounded up to a power of two; only impossible ones are EINVAL. */
	if (align <= 16)
		return mw_malloc(n);
	if (align > SIZE_MAX / 2 + 1) {
		errno = EINVAL;
		return NULL;
	}
	if (align & (align - 1))
		align = (size_t)1 << (sizeof(long) * 8 - __builtin_clzl(align));
	if (n > mw_region.size) {
		errno = ENOMEM;
		return NULL;
	}
	/* At least one byte: the aligned pointer may sit up to align - 16
	 * bytes into a block of n + align - 16 bytes, so with n = 0 it could
	 * be the end of the block, i.e. the start of the next one. */
	if (n == 0)
		n = 1;
	want = n + align - 16;
	if (want > MW_SMALL_MAX || align > MW_PAGE) {
		h = mw_tls_heap;
		if (!h && !(h = mw_heap_get())) {
			errno = ENOMEM;
			return NULL;
		}
		return mw_large_alloc(h, n, align, 0);
	}
	b = mw_malloc(want);
	if (!b)
		return NULL;
	p = ((uintptr_t)b + align - 1) & ~(align - 1);
	if (p != (uintptr_t)b) {
		pg = mw_page_of(b);
		pg->has_aligned = 1;
		/* set before the pointer can be stored anywhere (fork) */
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	}
	return (void *)p;
}

int mw_posix_memalign(void **out, size_t align, size_t n)
{
	void *p;
	int saved = errno;

	if (!out || align < sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	p = mw_memalign(align, n);
	if (!p) {
		int e = errno;

		errno = saved;
		return e ? e : ENOMEM;
	}
	*out = p;
	return 0;
}

/* glibc 2.36: aligned_alloc is memalign (the power-of-two check came in
 * 2.38). */
void *mw_aligned_alloc(size_t align, size_t n)
{
	return mw_memalign(align, n);
}

void *mw_valloc(size_t n)
{
	return mw_memalign(MW_PAGE, n);
}

void *mw_pvalloc(size_t n)
{
	size_t r;

	if (__builtin_add_overflow(n, MW_PAGE - 1, &r)) {
		errno = ENOMEM;
		return NULL;
	}
	return mw_memalign(MW_PAGE, (r & ~(size_t)(MW_PAGE - 1)) ?: MW_PAGE);
}

/* Release every retained span; glibc's heap is trimmed too. */
int mw_malloc_trim(size_t pad)
{
	int any = 0;

	if (mw_libc_trim)
		any = mw_libc_trim(pad);
	if (atomic_load(&g.init) != 2)
		return any;
	if (mw_tls_heap)
		mw_tcache_flush(mw_tls_heap);
	mw_lock(&g.lock);
	while (g.lru_tail) {
		struct mw_page *v = g.lru_tail;

		mw_lru_unlink(v);
		mw_bin_unlink(&g.hot[v->cls], v);
		g.retained -= v->units * MW_UNIT;
		mw_span_release(v);
		mw_bin_push(&g.cold[v->cls], v);
		any = 1;
	}
	mw_unlock(&g.lock);
	return any;
}

int mw_mallopt(int param, int value)
{
	if (mw_libc_mallopt)
		mw_libc_mallopt(param, value);
	switch (param) {
	case -1:	/* M_TRIM_THRESHOLD: our minimum retention */
		if (value < 0)
			return 0;
		g.retain_min = (size_t)value;
		return 1;
	case -2: case -3: case -4: case -5: case -6: case -7: case -8:
	case 1: case 2:	/* other glibc knobs: accepted, nothing to tune */
		return 1;
	default:
		return 0;
	}
}

void mw_alloc_release_on_free(void *p)
{
	g.release_on_free = p;
}

void mw_alloc_get_stats(struct mw_alloc_stats *st)
{
	st->releases = atomic_load(&st_releases);
	st->released_bytes = atomic_load(&st_released_bytes);
	st->retained_bytes = g.retained;
	st->retain_limit = mw_retain_limit();
	st->inuse_large = (unsigned long)atomic_load(&st_inuse_large);
	st->peak_large = (unsigned long)atomic_load(&st_peak_large);
}
