// SPDX-License-Identifier: BSD-3-Clause
/*
 * The arena and its spans: reservation, committing, the per-thread span
 * cache, the global bins and the retention policy.
 *
 * Retention policy (why caches keep hitting, and why the peak RSS stays
 * where glibc's is). A registration cache pins and registers the buffers an
 * application sends from; applications free and re-malloc those buffers all
 * the time. Returning a freed buffer to the OS invalidates its registration,
 * and the next malloc of the same size gets new pages that must be
 * registered again. So freed spans are never unmapped: they go, still
 * committed and at the same address, to a per-thread cache and then to
 * global bins by size class, and the next allocation of that class reuses
 * the most recently freed one (same virtual and physical pages,
 * registration still valid). Memory goes back to the OS only when the
 * retained bytes exceed max(retain_min, peak - in use, in use / 32), capped
 * at 1 GiB, where "in use" counts every span handed out (small pages
 * included) and the program's own anonymous mappings (alloc_outside.c),
 * and "peak" its maximum so far: in-use plus retained memory never grows
 * past the most the program ever had in use at once by more than
 * retain_min (1 MiB or mallopt's M_TRIM_THRESHOLD) or 1/32. A
 * program cycling through the same working set therefore never releases,
 * and one whose needs move on releases the
 * coldest spans first (LRU), always with the release callback first. The
 * check runs when a span is freed and when one is made from fresh memory.
 * malloc_trim() releases every retained span. Released spans keep their
 * address range (madvise, never munmap), so the arena never gets holes.
 *
 * No system call under g.lock: spans to release are taken off the bins
 * under it and released after it is dropped (another thread cannot see
 * them meanwhile), and the arena is committed with a lock-free bump pointer
 * (mprotect is idempotent, so threads racing to commit overlapping ranges
 * are harmless; the committed mark only moves up after the mprotect).
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "hooks/alloc_int.h"
#include "hooks/internal.h"
#include "hooks/raw.h"
#include "hooks/share.h"

#define MW_RESERVE_MAX ((uintptr_t)1 << 40) /* 1 TiB of address space */
#define MW_RESERVE_MIN ((uintptr_t)1 << 30)
#define MW_COMMIT_STEP ((uintptr_t)4 << 20)
#ifndef MW_RETAIN_SLACK
#define MW_RETAIN_SLACK 32 /* in use / 32 may stay retained */
#endif
/* metadata bytes for arena bytes: one entry per unit */
#define MW_META_OF(len) (((len) >> MW_UNIT_SHIFT) * MW_META)

MWH_HIDDEN struct mwh_arena mwh_arena;
MWH_HIDDEN struct mwh_global mwh_g = {.retain_min = MW_RETAIN_MIN, .thp = -1};
#define g mwh_g

MWH_HIDDEN __thread int mwh_locks_held
	__attribute__((tls_model("initial-exec")));

void mwh_glock(void)
{
	mwh_lock(&g.lock);
	mwh_locks_held++;
}

void mwh_gunlock(void)
{
	mwh_locks_held--;
	mwh_unlock(&g.lock);
}

/* Called before each system call the allocator makes. */
void mwh_syscall_check(void)
{
	if (mwh_locks_held)
		atomic_fetch_add_explicit(&g.lock_syscalls, 1,
					  memory_order_relaxed);
}

/* ---- the arena ------------------------------------------------------- */

int mwh_reserve(void)
{
	uintptr_t size;

	for (size = MW_RESERVE_MAX; size >= MW_RESERVE_MIN; size >>= 1) {
		int fl = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
		void *p =
			mw_raw_mmap(NULL, size + MW_UNIT, PROT_NONE, fl, -1, 0);
		void *m;
		uintptr_t b;

		if (mw_raw_failed((long)p))
			continue;
		m = mw_raw_mmap(NULL, MW_META_OF(size), PROT_NONE, fl, -1, 0);
		if (mw_raw_failed((long)m)) {
			mw_raw(SYS_munmap, p, size + MW_UNIT, 0);
			continue;
		}
		/* no huge pages unless a span asks (mwh_span_thp); the test
		 * variant can leave that out (vm/tests.d/45-alloc-thp.sh) */
#ifdef MW_TESTING
		if (!mw_env("MMUWATCH_HOOKS_TEST_ARENA_THP"))
#endif
			mw_raw(SYS_madvise, p, size + MW_UNIT, MADV_NOHUGEPAGE);
		b = ((uintptr_t)p + MW_UNIT - 1) & ~(MW_UNIT - 1);
		atomic_store(&g.bump, b);
		atomic_store(&g.committed, b);
		mwh_arena.size = size;
		mwh_arena.meta = m;
		/* base last: mw_owns() must never see a half-set arena */
		__atomic_store_n(&mwh_arena.base, b, __ATOMIC_RELEASE);
		return 0;
	}
	return -1;
}

/* Make [c, hi) of the arena and its metadata read-write. */
static int mwh_commit_from(uintptr_t c, uintptr_t hi)
{
	uintptr_t base = mwh_arena.base, end = base + mwh_arena.size;
	uintptr_t want;
	char *meta = (char *)mwh_arena.meta;

	want = base +
	       ((hi - base + MW_COMMIT_STEP - 1) & ~(MW_COMMIT_STEP - 1));
	if (want > end)
		want = end;
	mwh_syscall_check();
	if (mw_raw_failed(mw_raw(SYS_mprotect, meta + MW_META_OF(c - base),
				 MW_META_OF(want - c), PROT_READ | PROT_WRITE)))
		return -1;
	mwh_syscall_check();
	if (mw_raw_failed(
		    mw_raw(SYS_mprotect, c, want - c, PROT_READ | PROT_WRITE)))
		return -1;
	while (c < want && !atomic_compare_exchange_weak_explicit(
				   &g.committed, &c, want, memory_order_release,
				   memory_order_relaxed))
		;
	return 0;
}

/* Make [.., hi) read-write. A failure can be a race: read with a stale
 * mark, the range may cover spans another thread has committed since,
 * handed out and is moving (realloc, alloc_posix.c: without
 * MREMAP_DONTUNMAP, unmapped for a moment); then the mark has moved past
 * them: look again. */
static int mwh_commit(uintptr_t hi)
{
	for (int tries = 0;; tries++) {
		uintptr_t c = atomic_load_explicit(&g.committed,
						   memory_order_acquire);

		if (hi <= c)
			return 0;
		if (mwh_commit_from(c, hi) == 0)
			return 0;
		if (tries == 3 ||
		    atomic_load_explicit(&g.committed, memory_order_acquire) ==
			    c)
			return -1;
	}
}

static struct mw_page *mwh_span_from_bump(size_t units)
{
	size_t len = units * MW_UNIT;
	uintptr_t end = mwh_arena.base + mwh_arena.size;
	uintptr_t b =
		atomic_fetch_add_explicit(&g.bump, len, memory_order_relaxed);
	struct mw_page *s;

	mwh_share_bump_gate(); /* sharing being switched on: wait for it */
	if (b > end || len > end - b || mwh_commit(b + len) != 0 ||
	    mwh_share_span_fresh(b, units) != 0)
		return NULL; /* the reservation stays used: out of memory */
	s = mw_page_of((void *)b);
	s->clean_from = 0;
	s->thp = MW_THP_NONE;
	return s;
}

/* ---- classes and lists ----------------------------------------------- */

/* Large classes in units: exact up to 8, then 8 per power of two. */
unsigned mwh_large_class(size_t units)
{
	unsigned bit;

	if (units <= 8)
		return (unsigned)units - 1;
	bit = 63 - (unsigned)__builtin_clzl(units - 1);
	return 8 + (bit - 3) * 8 + (unsigned)(((units - 1) >> (bit - 3)) & 7);
}

size_t mwh_large_units(unsigned c)
{
	unsigned k, bit;

	if (c < 8)
		return c + 1;
	k = c - 8;
	bit = 3 + k / 8;
	return ((size_t)1 << bit) + ((size_t)(k % 8 + 1) << (bit - 3));
}

static void mwh_lru_unlink(struct mw_page *s)
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

/* ---- retention ------------------------------------------------------- */

static void mwh_max(atomic_long *peak, long now)
{
	long p = atomic_load_explicit(peak, memory_order_relaxed);

	while (now > p && !atomic_compare_exchange_weak_explicit(
				  peak, &p, now, memory_order_relaxed,
				  memory_order_relaxed))
		;
}

/* The peak of our spans and the program's own mappings together. */
void mwh_peak_update(void)
{
	mwh_max(&g.peak_all,
		atomic_load_explicit(&g.inuse, memory_order_relaxed) +
			atomic_load_explicit(&g.outside, memory_order_relaxed));
}

static void mwh_account(long delta)
{
	long now = atomic_fetch_add_explicit(&g.inuse, delta,
					     memory_order_relaxed) +
		   delta;

	mwh_max(&g.peak, now);
	if (delta > 0)
		mwh_peak_update();
}

/* The room is measured on everything in use, ours and the program's own
 * mappings (alloc_outside.c): retained spans must not sit on top of memory
 * the program mapped itself since they were freed. */
size_t mwh_retain_limit(void)
{
	long peak = atomic_load_explicit(&g.peak_all, memory_order_relaxed);
	long inuse = atomic_load_explicit(&g.inuse, memory_order_relaxed);
	long all =
		inuse + atomic_load_explicit(&g.outside, memory_order_relaxed);
	size_t room = peak > all ? (size_t)(peak - all) : 0;

	if (room < (size_t)inuse / MW_RETAIN_SLACK) /* slack at the peak */
		room = (size_t)inuse / MW_RETAIN_SLACK;
	if (room > MW_RETAIN_CAP)
		room = MW_RETAIN_CAP;
	return room > g.retain_min ? room : g.retain_min;
}

/* Give a span's pages back to the OS, callback first; g.lock NOT held. */
static void mwh_span_release(struct mw_page *s)
{
	uintptr_t lo = mw_page_addr(s), hi = lo + s->units * MW_UNIT;
	int advice;

	mw_release_notify(lo, hi, MW_RELEASE_ALLOC);
	advice = mwh_share_span_released(lo, hi - lo); /* shared: REMOVE */
	mwh_syscall_check();
	mw_raw(SYS_madvise, lo, hi - lo, advice);
	s->state = MW_SPAN_COLD;
	s->clean_from = 0;
	atomic_fetch_add_explicit(&g.releases, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&g.released_bytes, hi - lo,
				  memory_order_relaxed);
}

/* With g.lock: take the coldest hot spans off the bins until at most limit
 * bytes stay retained; returns them chained through ->next. */
static struct mw_page *mwh_take_victims(size_t limit)
{
	struct mw_page *list = NULL;

	while (g.retained > limit && g.lru_tail) {
		struct mw_page *v = g.lru_tail;

		mwh_lru_unlink(v);
		mwh_bin_unlink(&g.hot[v->cls], v);
		g.retained -= v->units * MW_UNIT;
		v->next = list;
		list = v;
	}
	return list;
}

/* Without g.lock: release the chain, then file it in the cold bins. */
static int mwh_release_list(struct mw_page *list)
{
	struct mw_page *v, *next;
	int n = 0;

	if (!list)
		return 0;
#ifdef MWH_TEST_RELEASE_LOCKED /* the tests' negative control only */
	mwh_glock();
	for (v = list; v; v = v->next)
		mwh_span_release(v);
#else
	for (v = list; v; v = v->next)
		mwh_span_release(v);
	mwh_glock();
#endif
	for (v = list; v; v = next, n++) {
		next = v->next;
		mwh_bin_push(&g.cold[v->cls], v);
	}
	mwh_gunlock();
	return n;
}

void mwh_trim_to_limit(void)
{
	struct mw_page *list;
	size_t limit = mwh_retain_limit();

	if (__atomic_load_n(&g.retained, __ATOMIC_RELAXED) <= limit)
		return;
	mwh_glock();
	list = mwh_take_victims(limit);
	mwh_gunlock();
	mwh_release_list(list);
}

/* Keep a freed span (hot), releasing the coldest beyond the limit. A span
 * bigger than the limit by itself is released directly: keeping it would
 * push every other retained (likely registered) span out first, only for
 * this one to go as well. */
static void mwh_span_retain(struct mw_page *s, int release)
{
	size_t len = s->units * MW_UNIT, limit = mwh_retain_limit();
	struct mw_page *list;

	if (release || len > limit) {
		s->next = NULL;
		mwh_release_list(s);
		mwh_trim_to_limit(); /* the rest may be over it too */
		return;
	}
	mwh_glock();
	s->state = MW_SPAN_HOT;
	mwh_bin_push(&g.hot[s->cls], s);
	s->lru_prev = NULL;
	s->lru_next = g.lru_head;
	if (g.lru_head)
		g.lru_head->lru_prev = s;
	g.lru_head = s;
	if (!g.lru_tail)
		g.lru_tail = s;
	g.retained += len;
	list = mwh_take_victims(limit);
	mwh_gunlock();
	mwh_release_list(list);
}

/* ---- the per-thread span cache --------------------------------------- */

/*
 * Spans in it count as in use (so the hot large-block path makes no atomic
 * update of the shared counters, and in use + retained still counts every
 * committed span once).
 *
 * Changed by its owner only, without the heap lock (large blocks take this
 * path on every malloc and free), in an order that a fork() child, which
 * sees some prefix of the owner's stores, always finds sound: an entry
 * below tcount is a cached span (state HOT), and tbytes never counts less
 * than what is cached (the child recomputes it).
 */
static struct mw_page *mwh_tc_pop(struct mw_heap *h, unsigned c)
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

static int mwh_tc_push(struct mw_heap *h, unsigned c, struct mw_page *s)
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

void mwh_tcache_flush(struct mw_heap *h)
{
	struct mw_page *s;
	unsigned c;

	for (c = 0; c < MW_NTCACHE; c++)
		while ((s = mwh_tc_pop(h, c)) != NULL) {
			mwh_account(-(long)(s->units * MW_UNIT));
			mwh_span_retain(s, 0);
		}
}

/* ---- spans ------------------------------------------------------------ */

/*
 * A span of class c for the calling heap h (may be NULL). A retained span
 * of one of the next MW_FIT classes (up to a quarter bigger) is better
 * than fresh memory: its pages are resident already, and fresh pages would
 * push retained ones out. Small pages (class 0) take exactly one unit.
 */
#define MW_FIT 2

/* With g.lock: the smallest retained span of class c .. last, off the bins
 * (*c set to its class), or NULL. */
static struct mw_page *mwh_hot_take(unsigned *c, unsigned last)
{
	struct mw_page *s;
	unsigned k;

	for (k = *c; k <= last && k < MW_NLARGE && !g.hot[k]; k++)
		;
	if (k > last || k >= MW_NLARGE)
		return NULL;
	s = g.hot[k];
	mwh_bin_unlink(&g.hot[k], s);
	mwh_lru_unlink(s);
	g.retained -= mwh_large_units(k) * MW_UNIT;
	*c = k;
	return s;
}

/* Span s of class c handed out; counted unless it comes from the thread's
 * cache (still in use), the rest trimmed if its pages are new. */
static void mwh_span_inuse(struct mw_page *s, unsigned c, int cached, int fresh)
{
	size_t units = mwh_large_units(c);

	s->units = units;
	s->cls = (uint8_t)c;
	s->kind = MW_KIND_LARGE;
	s->state = MW_SPAN_INUSE;
	s->roomy = 0;
	s->heap = NULL;
	s->lo = MW_LO_NEVER;
	s->next = s->prev = NULL;
	s->lru_next = s->lru_prev = NULL;
	if (!cached)
		mwh_account((long)(units * MW_UNIT));
	if (fresh) /* new physical pages: in use + retained grows */
		mwh_trim_to_limit();
}

/* A retained span of class c .. last (resident pages, nothing fresh), or
 * NULL. Not for the shareable heap (a span reused there waits for peers). */
struct mw_page *mwh_span_get_retained(unsigned c, unsigned last)
{
	struct mw_page *s;

	if (mwh_share_on())
		return NULL;
	mwh_glock();
	s = mwh_hot_take(&c, last);
	mwh_gunlock();
	if (s)
		mwh_span_inuse(s, c, 0, 0);
	return s;
}

struct mw_page *mwh_span_get(struct mw_heap *h, unsigned c)
{
	struct mw_page *s = NULL;
	int fresh = 0, cached = 0;

	if (h && c < MW_NTCACHE)
		cached = (s = mwh_tc_pop(h, c)) != NULL;
	if (!s) {
		mwh_glock();
		s = mwh_hot_take(&c, c ? c + MW_FIT : c);
		if (!s && (s = g.cold[c]) != NULL) {
			mwh_bin_unlink(&g.cold[c], s);
			fresh = 1;
		}
		mwh_gunlock();
		if (!s) {
			s = mwh_span_from_bump(mwh_large_units(c));
			if (!s)
				return NULL;
			fresh = 1;
		}
	}
	mwh_span_inuse(s, c, cached, fresh);
	/* shared span: no peer copy of its last block still in flight; one
	 * a peer never left is quarantined: it stays "in use", unused */
	if (mwh_share_span_reused(mw_page_addr(s), s->units * MW_UNIT) != 0)
		return mwh_span_get(h, c);
	return s;
}

/* A freed span, whatever it held (a small page's class 0 included):
 * large, no heap's, never freed inline. */
static void mwh_span_unowned(struct mw_page *s)
{
	s->kind = MW_KIND_LARGE;
	s->heap = NULL;
	s->lo = MW_LO_NEVER;
}

/* h: the calling thread's heap (may be NULL). */
void mwh_span_put(struct mw_heap *h, struct mw_page *s, int release)
{
	size_t len = s->units * MW_UNIT;
	unsigned c = s->cls;

	/* shared span: peers' descriptors of the block are void from here */
	mwh_share_span_freed(mw_page_addr(s), len);
	mwh_span_unowned(s);
	s->clean_from = (uint32_t)(len < UINT32_MAX ? len : UINT32_MAX);
	if (!release && h && c < MW_NTCACHE && mwh_tc_push(h, c, s))
		return; /* still "in use" for the retention limit */
	mwh_account(-(long)len);
	mwh_span_retain(s, release);
}

/*
 * Grow an in-use span in place to class c when it ends where the arena's
 * unused part begins (nothing was carved after it): realloc's cheapest
 * growth, with no copy, no move and no new fault on the pages it has. The
 * units added were never handed out, so no registration covers them and
 * nothing is told. 0 grown, -1 not possible (the caller moves or copies).
 */
int mwh_span_grow(struct mw_page *s, unsigned c)
{
	size_t units = mwh_large_units(c), old = s->units;
	uintptr_t end = mw_page_addr(s) + old * MW_UNIT;
	uintptr_t lim = mwh_arena.base + mwh_arena.size, want;

	if (units <= old || (units - old) > (lim - end) / MW_UNIT ||
	    mwh_share_on())
		return -1;
	want = end + (units - old) * MW_UNIT;
	if (!atomic_compare_exchange_strong_explicit(&g.bump, &end, want,
						     memory_order_relaxed,
						     memory_order_relaxed))
		return -1;
	/* Sharing switched on meanwhile (no span may straddle its base) or
	 * no memory: the units stay reserved and unused, as in
	 * mwh_span_from_bump(). */
	mwh_share_bump_gate();
	if (mwh_share_on() || mwh_commit(want) != 0)
		return -1;
	s->units = units;
	s->cls = (uint8_t)c;
	mwh_account((long)((units - old) * MW_UNIT));
	mwh_trim_to_limit(); /* new pages: in use + retained grows */
	mwh_span_thp_stale(s); /* the units added have no advice yet */
	return 0;
}

/*
 * Transparent huge pages. The arena is reserved MADV_NOHUGEPAGE: under the
 * kernel's "always" mode (Debian's default) any first touch of an aligned
 * 2 MiB of the committed arena took a huge page, small pages included
 * (Debian 6.1 guest: git log's peak RSS 8.9 MB against glibc's 4.8,
 * sqlite3 15.9 against 12.1). Big spans, MW_THP_MIN or more, are advised
 * MADV_HUGEPAGE, the whole span (one mapping: realloc moves a span's
 * pages with one mremap, which fails across mappings), so that its 2 MiB
 * aligned part takes huge pages (one fault per 2 MiB where
 * a buffer filled end to end took 512: sort --parallel=2's 16 MiB buffer,
 * 8300 faults -> 1060, CPU 0.95x) when MMUWATCH_HOOKS_ALLOCATOR_THP=1 or,
 * unset, when the mode is "always": glibc's big blocks are mappings of
 * their own, which that mode gives huge pages. Not by default under
 * "madvise": blocks used in part become resident by 2 MiB, and peak RSS
 * over glibc's went 1.02 -> 1.08 for sort and 1.01 -> 1.17 for xz (its
 * 7-16 MiB match-finder tables), past the allocator's goal of glibc + 5 %.
 * A span is advised once (it keeps its size and its advice for life:
 * spans are never split, merged or reused for another class, so small
 * pages never land in advised memory), outside every lock, and again
 * (MW_THP_STALE) where its range got pages or units without the advice:
 * grown in place, pages moved in or out by realloc. Each advised span may
 * be a mapping of its own (with its neighbours when they are advised too):
 * at most MW_THP_SPANS spans are ever advised, far below
 * vm.max_map_count.
 */
#define MW_THP_MIN   ((size_t)4 << 20)
#define MW_THP_SPANS 4096

/* MMUWATCH_HOOKS_ALLOCATOR_THP when set, else is the kernel's mode
 * "always"? Asked once, at the first big span (in practice the hooks'
 * 4 MiB self-test at start-up). Malloc-free; threads racing here find the
 * same. */
static int mwh_thp_wanted(void)
{
	int want = atomic_load_explicit(&g.thp, memory_order_relaxed);
	enum mw_lp e;
	char buf[64];
	long fd, n;

	if (want >= 0)
		return want;
	e = mw_lp_parse(mw_env("MMUWATCH_HOOKS_ALLOCATOR_THP"));
	if (e == MW_LP_YES || e == MW_LP_NO) {
		want = e == MW_LP_YES;
	} else {
		fd = mw_raw6(
			SYS_openat, AT_FDCWD,
			(long)"/sys/kernel/mm/transparent_hugepage/enabled",
			O_RDONLY | O_CLOEXEC, 0, 0, 0);
		n = 0;
		if (!mw_raw_failed(fd)) {
			n = mw_raw(SYS_read, fd, buf, sizeof(buf) - 1);
			mw_raw(SYS_close, fd, 0, 0);
		}
		buf[n > 0 ? n : 0] = 0;
		want = strstr(buf, "[always]") != NULL;
	}
	atomic_store_explicit(&g.thp, want, memory_order_relaxed);
	return want;
}

/* s: a span this thread holds (handed out, not yet visible to others). */
void mwh_span_thp(struct mw_page *s)
{
	size_t len = s->units * MW_UNIT;
	int was = s->thp;

	if (was == MW_THP_ON || len < MW_THP_MIN || mwh_share_on() ||
	    !mwh_thp_wanted())
		return;
	s->thp = MW_THP_ON;
	if (was == MW_THP_NONE &&
	    atomic_fetch_add_explicit(&g.thp_spans, 1, memory_order_relaxed) >=
		    MW_THP_SPANS)
		return;
	mwh_syscall_check();
	mw_raw(SYS_madvise, mw_page_addr(s), len, MADV_HUGEPAGE);
}

/* s's range changed under it (see above): advise it again if it was. */
void mwh_span_thp_stale(struct mw_page *s)
{
	if (s->thp == MW_THP_ON)
		s->thp = MW_THP_STALE;
	mwh_span_thp(s);
}

/* Fresh zero pages over [a, a + len) of the arena (or of the shareable
 * heap's private units), without huge pages as the arena was reserved;
 * -1 if they could not be mapped (a hole). */
int mwh_map_fresh(uintptr_t a, size_t len)
{
	if (mw_raw_failed((long)mw_raw_mmap(
		    (void *)a, len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)))
		return -1;
	mw_raw(SYS_madvise, a, len, MADV_NOHUGEPAGE);
	return 0;
}

/* A span whose pages were moved away (realloc, alloc_posix.c) and replaced
 * by fresh zero pages: it holds no memory, so it is filed as released
 * (cold, all zero), not retained: kept hot it would count against the
 * retention limit and push spans that do hold pages out to the OS. */
void mwh_span_put_moved(struct mw_page *s)
{
	mwh_account(-(long)(s->units * MW_UNIT));
	mwh_span_unowned(s);
	s->state = MW_SPAN_COLD;
	s->clean_from = 0;
	if (s->thp == MW_THP_ON) /* may be a fresh mapping now (no advice) */
		s->thp = MW_THP_STALE;
	mwh_glock();
	mwh_bin_push(&g.cold[s->cls], s);
	mwh_gunlock();
}

/* malloc_trim(): every retained span goes. */
int mwh_trim_all(void)
{
	struct mw_page *list;

	if (mw_tls_heap) {
		mwh_heap_flush(mw_tls_heap);
		mwh_tcache_flush(mw_tls_heap);
	}
	mwh_glock();
	list = mwh_take_victims(0);
	mwh_gunlock();
	return mwh_release_list(list) > 0;
}
