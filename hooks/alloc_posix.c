// SPDX-License-Identifier: BSD-3-Clause
/*
 * The rest of the malloc family on top of alloc.c/alloc_free.c: realloc,
 * memalign/posix_memalign/aligned_alloc/valloc/pvalloc with glibc 2.36's
 * rules, malloc_usable_size, malloc_trim, mallopt, and the statistics and
 * self-test knobs the other hooks files use.
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "hooks/alloc_int.h"
#include "hooks/internal.h"
#include "hooks/raw.h"
#include "hooks/share.h"

extern void *__libc_realloc(void *, size_t) __attribute__((weak));

size_t mw_malloc_usable_size(void *p)
{
	struct mw_page *pg;

	if (!p)
		return 0;
	if (!mw_owns(p))
		return mw_libc_usable_size ? mw_libc_usable_size(p) : 0;
	pg = mw_page_of(p);
	if (pg->kind == MW_KIND_SMALL) {
		char *b = pg->has_aligned ? mwh_block_start(pg, p) : p;

		return pg->block - (size_t)((char *)p - b);
	}
	pg = mwh_large_span(pg);
	return mw_page_addr(pg) + pg->units * MW_UNIT - (uintptr_t)p;
}

/*
 * Growing a large block. Where it is, when its span is the last one carved
 * from the arena (a buffer growing step by step usually is): no copy, no
 * move, no fault on its pages (mwh_span_grow). Else: move its pages
 * instead of copying them, as glibc's mremap of an mmapped chunk does (no
 * copy, no page fault on the new block: python's string and list growth
 * spent a third of its extra faults in memmove). The old span's pages go
 * onto the new span with mremap(MREMAP_FIXED | MREMAP_DONTUNMAP): the old
 * range stays mapped, emptied, in the same call, so the arena never has a
 * hole, not even for a moment (before Linux 5.7: mremap, then fresh zero
 * pages mapped over the old range; mwh_commit copes with the moment).
 * Both ranges change their pages: the release path hears of both first
 * (registrations of either are stale). Not for the shareable heap (a
 * span's file offset is its address) and not past MW_MOVES moves: each
 * moved span stays a VMA of its own, and a process may have only
 * vm.max_map_count (65530) of them. The old span then holds no pages: it
 * is filed as released, not retained.
 */
#define MW_MOVE_MIN ((size_t)256 << 10)
#define MW_MOVES 4096

static atomic_uint mwh_moves;

static int mwh_move_pages(void *p, void *q)
{
	struct mw_page *ps = mwh_large_span(mw_page_of(p));
	struct mw_page *qs = mwh_large_span(mw_page_of(q));
	uintptr_t pa = mw_page_addr(ps), qa = mw_page_addr(qs);
	size_t len = ps->units * MW_UNIT;
	int ret = -1;
	long r;

	if ((uintptr_t)p - pa != (uintptr_t)q - qa || qs->units < ps->units ||
	    mwh_share_on())
		return -1;
	/* a move taken, given back when nothing moved */
	if (atomic_fetch_add_explicit(&mwh_moves, 1, memory_order_relaxed) >=
	    MW_MOVES)
		goto no_move;
	mw_release_notify(qa, qa + len, MW_RELEASE_ALLOC);
	mw_release_notify(pa, pa + len, MW_RELEASE_ALLOC);
	/* Linux 5.7+: the old range stays mapped, empty, in the same call; no
	 * moment without a mapping there (another thread committing the
	 * arena with mprotect over it would fail) */
	r = mw_raw6(SYS_mremap, (long)pa, (long)len, (long)len,
		    MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, (long)qa,
		    0);
	if (!mw_raw_failed(r))
		return 0;
	if (r != -EINVAL ||
	    mw_raw_failed(mw_raw6(SYS_mremap, (long)pa, (long)len, (long)len,
				  MREMAP_MAYMOVE | MREMAP_FIXED, (long)qa, 0)))
		goto repair; /* nothing moved: copy */
	/* a hole: the old span is never freed (leaked) */
	return mwh_map_fresh(pa, len) ? 1 : 0;
repair:
	/* A failed MREMAP_FIXED may have unmapped the target already (Linux
	 * unmaps it before it checks the source: a source over two mappings
	 * failed so before 6.17, and the copy then wrote into a hole): the
	 * target's range afresh, its advice again; -2 if even that fails (q's
	 * range lost: q is never freed, leaked). Untouched by the test build
	 * with MW_NO_MOVE_REPAIR (the control). */
#ifndef MW_NO_MOVE_REPAIR
	if (mwh_map_fresh(qa, len))
		ret = -2;
	else
		mwh_span_thp_stale(qs);
#endif
no_move:
	atomic_fetch_sub_explicit(&mwh_moves, 1, memory_order_relaxed);
	return ret;
}

/* Grow large block p to n bytes where it is (mwh_span_grow). */
static int mwh_grow_in_place(void *p, size_t n)
{
	struct mw_page *s = mwh_large_span(mw_page_of(p));
	size_t off = (uintptr_t)p - mw_page_addr(s), units;

	if (n > mwh_arena.size)
		return -1;
	units = (off + n + MW_UNIT - 1) >> MW_UNIT_SHIFT;
	return mwh_span_grow(s, mwh_large_class(units));
}

/*
 * Growing into room. A buffer grown by small steps to a size, freed and
 * grown again (Python's list of the json encoder's chunks: 33 KB to 800
 * KB, sixteen times) got fresh pages each time, at the arena's end, while
 * the previous cycle's 800 KB span sat retained: 3100 page faults. A
 * realloc that must leave its block for a large one takes the smallest
 * retained span of up to MW_ROOM times its need when there is one (its
 * pages are resident) and marks it roomy: later reallocs stay in a roomy
 * block down to 1/MW_ROOM of it, not only to half, so the growth goes on
 * there with no copy and no fault. Growing in place at the arena's end
 * comes first (no copy at all).
 */
#ifndef MW_ROOM
#define MW_ROOM 32
#endif

static void *mwh_room_alloc(size_t n)
{
	size_t units, most;
	struct mw_page *s;

	if (n > mwh_arena.size / MW_ROOM)
		return NULL;
	units = (n + MW_HDR + MW_UNIT - 1) >> MW_UNIT_SHIFT;
	most = n * MW_ROOM >> MW_UNIT_SHIFT; /* whole units it may stay in */
	if (most < units)
		return NULL;
	s = mwh_span_get_retained(mwh_large_class(units),
				  mwh_large_class(most + 1) - 1);
	if (!s)
		return NULL;
	s->roomy = 1;
	return (void *)(mw_page_addr(s) + MW_HDR);
}

static int mwh_roomy(void *p)
{
	struct mw_page *pg = mw_page_of(p);

	if (pg->kind == MW_KIND_FWD)
		pg = pg->fwd;
	return pg->kind == MW_KIND_LARGE && pg->roomy;
}

/* Both are small blocks (sizes multiples of 16) of at least n bytes: whole
 * 16-byte words, inline for the short ones printf() grows. */
static inline void mwh_copy_small(void *q, const void *p, size_t n)
{
	typedef char mw_w16 __attribute__((vector_size(16), may_alias));
	mw_w16 *d = q;
	const mw_w16 *s = p;
	size_t i;

	if (n > 128) {
		memcpy(q, p, n);
		return;
	}
	for (i = 0; i < (n + 15) / 16; i++)
		d[i] = s[i];
}

void *mw_realloc(void *p, size_t n)
{
	struct mw_page *pg;
	size_t have;
	int moved;
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
	if (n == 0) { /* glibc: free and return NULL */
		mw_free(p);
		return NULL;
	}
	pg = mw_page_of(p);
	/* Small to small, without a call: glibc grows a small chunk in place
	 * where ours changes class (sqlite's printf(): 16 to 24 bytes, 150000
	 * times in the bench's sqlite3 run, 1.5 % of its time out of line). */
	if (pg->kind == MW_KIND_SMALL && !pg->has_aligned &&
	    n <= MW_SMALL_MAX) {
		have = pg->block;
		if (n <= have && n >= have / 2)
			return p;
		q = mw_malloc_inline(n);
		if (q) {
			mwh_copy_small(q, p, n < have ? n : have);
			mw_free_inline(p);
		}
		return q;
	}
	have = mw_malloc_usable_size(p);
	if (n <= have &&
	    (n >= have / 2 || (n >= have / MW_ROOM && mwh_roomy(p))))
		return p;
	if (n > have && have > MW_SMALL_MAX && mwh_grow_in_place(p, n) == 0)
		return p;
	q = n > have && n > MW_SMALL_MAX ? mwh_room_alloc(n) : NULL;
	if (!q)
		q = mw_malloc(n);
	if (!q)
		return NULL;
	/* have >= MW_MOVE_MIN (> MW_SMALL_MAX): both blocks are large */
	moved = n > have && have >= MW_MOVE_MIN ? mwh_move_pages(p, q) : -1;
	if (moved == -2 && (q = mw_malloc(n)) == NULL)
		return NULL;
	if (moved < 0) {
		memcpy(q, p, n < have ? n : have);
		mw_free(p);
	} else {
		/* the pages moved in came with their own advice */
		mwh_span_thp_stale(mwh_large_span(mw_page_of(q)));
		if (moved == 0)
			mwh_span_put_moved(mwh_large_span(mw_page_of(p)));
	}
	return q;
}

void *mw_memalign(size_t align, size_t n)
{
	struct mw_heap *h;
	size_t want;
	char *b;
	uintptr_t p;

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
	if (n > mwh_arena.size) {
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
		h = mwh_heap();
		if (!h) {
			errno = ENOMEM;
			return NULL;
		}
		return mwh_large_alloc(h, n, align, 0);
	}
	b = mw_malloc(want);
	if (!b)
		return NULL;
	p = ((uintptr_t)b + align - 1) & ~(align - 1);
	if (p != (uintptr_t)b) {
		mwh_page_set_aligned(mw_page_of(b));
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
	if (atomic_load(&mwh_g.init) != 2)
		return any;
	return mwh_trim_all() || any;
}

int mw_mallopt(int param, int value)
{
	if (mw_libc_mallopt)
		mw_libc_mallopt(param, value);
	switch (param) {
	case -1: /* M_TRIM_THRESHOLD: our minimum retention */
		if (value < 0)
			return 0;
		mwh_g.retain_min = (size_t)value;
		return 1;
	case -2:
	case -3:
	case -4:
	case -5:
	case -6:
	case -7:
	case -8:
	case 1:
	case 2: /* other glibc knobs: accepted, nothing to tune */
		return 1;
	default:
		return 0;
	}
}

void mw_alloc_release_on_free(void *p)
{
	mwh_g.release_on_free = p;
}

void mw_alloc_get_stats(struct mw_alloc_stats *st)
{
	st->releases = atomic_load(&mwh_g.releases);
	st->released_bytes = atomic_load(&mwh_g.released_bytes);
	st->retained_bytes = mwh_g.retained;
	st->retain_limit = mwh_retain_limit();
	st->inuse_large = (unsigned long)atomic_load(&mwh_g.inuse);
	st->peak_large = (unsigned long)atomic_load(&mwh_g.peak);
	st->lock_syscalls = atomic_load(&mwh_g.lock_syscalls);
	st->outside = (unsigned long)atomic_load(&mwh_g.outside);
	st->thp_spans = atomic_load(&mwh_g.thp_spans);
	st->moves = atomic_load(&mwh_moves);
}
