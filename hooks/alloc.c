// SPDX-License-Identifier: BSD-3-Clause
/*
 * malloc and calloc: the slow path behind the inline fast path (alloc.h),
 * small blocks from the thread's heap (alloc_page.c), large blocks as spans
 * of their own (alloc_span.c), aligned as asked (alloc_posix.c asks).
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "hooks/alloc_int.h"
#include "hooks/raw.h"
#include "hooks/share.h"

MWH_HIDDEN size_t (*mw_libc_usable_size)(void *);
MWH_HIDDEN int (*mw_libc_trim)(size_t);
MWH_HIDDEN int (*mw_libc_mallopt)(int, int);

/*
 * calloc of fresh memory (never handed out, or released since) needs no
 * zeroing, but left lazy it costs two faults a page when the program reads
 * before it writes, as hash tables do: the read maps the shared zero page,
 * the write replaces it, and in a threaded program that replacement flushes
 * the other CPUs' TLBs (xz -T2: a sixth of its time). Between these sizes
 * the fresh part is populated writable at once (one system call, pages
 * zeroed by the kernel, one fault's work each). Outside, it stays lazy:
 * big ones for sparse arrays (numpy.zeros) that rely on untouched pages
 * costing nothing, small ones because they are often sparse too (python's
 * allocator callocs 128 and 256 KiB radix-tree nodes it barely touches).
 * Kernels before 5.14 refuse the advice: then it stays lazy.
 */
#define MW_POPULATE_MIN ((size_t)1 << 20)
#define MW_POPULATE_MAX ((size_t)32 << 20)

static void mwh_populate(uintptr_t lo, uintptr_t hi)
{
	lo = (lo + MW_PAGE - 1) & ~(uintptr_t)(MW_PAGE - 1);
	hi = (hi + MW_PAGE - 1) & ~(uintptr_t)(MW_PAGE - 1);
	if (hi <= lo || hi - lo < MW_POPULATE_MIN || hi - lo > MW_POPULATE_MAX)
		return;
	mwh_syscall_check();
	(void)mw_raw(SYS_madvise, lo, hi - lo, MADV_POPULATE_WRITE);
}

/* n bytes aligned to align (a power of two), zeroed when asked. */
void *mwh_large_alloc(struct mw_heap *h, size_t n, size_t align, int zero)
{
	size_t need, units;
	struct mw_page *s;
	uintptr_t p, addr;

	if (align < MW_HDR)
		align = MW_HDR;
	if (n > mwh_arena.size || align > mwh_arena.size) {
		errno = ENOMEM;
		return NULL;
	}
	need = n + align;
	units = (need + MW_UNIT - 1) >> MW_UNIT_SHIFT;
	s = mwh_span_get(h, mwh_large_class(units));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	mwh_span_thp(s);
	addr = mw_page_addr(s);
	if (align < MW_UNIT) {
		p = addr + align;
	} else {
		p = (addr + align - 1) & ~(align - 1);
		if (p != addr) { /* its unit tells where the span is */
			struct mw_page *f = mw_page_of((void *)p);

			f->kind = MW_KIND_FWD;
			f->heap = NULL;
			f->lo = MW_LO_NEVER;
			f->fwd = s;
		}
	}
	if (zero) {
		size_t dirty = p - addr < s->clean_from
				       ? s->clean_from - (p - addr)
				       : 0;

		if (dirty > n)
			dirty = n;
		memset((void *)p, 0, dirty);
		if (!mwh_share_on()) /* shared spans: a file, not anonymous */
			mwh_populate(p + dirty, p + n);
	}
	return (void *)p;
}

void *mw_malloc_slow(size_t n)
{
	struct mw_heap *h = mwh_heap();

	if (!h) {
		errno = ENOMEM;
		return NULL;
	}
	if (n <= MW_SMALL_MAX) {
		struct mw_page *spare = NULL;
		void *b;

		for (;;) {
			mwh_heap_lock(h);
			b = mwh_small_alloc_slow(h, mw_small_class(n), &spare);
			mwh_heap_unlock_put(h);
			if (b || spare)
				break;
			/* a new page, got without the heap's lock */
			spare = mwh_span_get(h, 0);
			if (!spare) {
				errno = ENOMEM;
				return NULL;
			}
		}
		if (spare) /* blocks came back meanwhile: not needed */
			mwh_span_put(h, spare, 0);
		if (!b)
			errno = ENOMEM;
		return b;
	}
	return mwh_large_alloc(h, n, 0, 0);
}

void *mw_malloc(size_t n)
{
	return mw_malloc_inline(n);
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
		struct mw_heap *h = mwh_heap();

		if (!h) {
			errno = ENOMEM;
			return NULL;
		}
		return mwh_large_alloc(h, t, 0, 1);
	}
	p = mw_malloc_inline(t);
	if (p)
		memset(p, 0, t);
	return p;
}
