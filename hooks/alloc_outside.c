// SPDX-License-Identifier: BSD-3-Clause
/*
 * Memory the program maps itself, counted for the retention limit.
 *
 * The retention policy (alloc_span.c) keeps freed spans while in use plus
 * retained stays under the peak. Counting our spans only, it kept a freed
 * 4.5 MiB buffer of python's json while python's own allocator, which maps
 * its 1 MiB arenas itself, grew past it: the process's peak RSS was our
 * retained span on top of their growth (python json: +5 MiB over glibc,
 * which had unmapped the buffer). So the private writable anonymous
 * mappings the program makes through mmap (the interposer reports them;
 * stacks, reservations and small ones left out) count as in use, and the
 * peak the limit looks at is that of both together. A table of them
 * (address -> length) lets munmap take off exactly what mmap added; an
 * unmap of part of one, or a full table, leaves the count high, which only
 * makes retention stricter, never lets it grow.
 */
#include <stdatomic.h>
#include <sys/mman.h>

#include "hooks/alloc_int.h"

#define MW_OUT_SLOTS 4096 /* power of two */
#define MW_OUT_PROBE 32
#define MW_OUT_MIN   ((size_t)64 << 10)
#define MW_OUT_TOMB  ((uintptr_t)1)

struct mwh_out_slot {
	_Atomic uintptr_t addr; /* 0 empty, MW_OUT_TOMB removed */
	_Atomic size_t len;
};

static struct mwh_out_slot mwh_out[MW_OUT_SLOTS];

static unsigned mwh_out_hash(uintptr_t a)
{
	return (unsigned)((a >> 16) * 0x9E3779B97F4A7C15ull >> 52) &
	       (MW_OUT_SLOTS - 1);
}

static void mwh_out_add(long delta)
{
	atomic_fetch_add_explicit(&mwh_g.outside, delta, memory_order_relaxed);
	if (delta > 0) /* only growth can make a new peak */
		mwh_peak_update();
}

/* Remove a's entry; its length, or 0 when a has none. */
static size_t mwh_out_take(uintptr_t a)
{
	unsigned h = mwh_out_hash(a);

	for (unsigned i = 0; i < MW_OUT_PROBE; i++) {
		struct mwh_out_slot *s = &mwh_out[(h + i) & (MW_OUT_SLOTS - 1)];
		uintptr_t k =
			atomic_load_explicit(&s->addr, memory_order_acquire);

		if (k == 0)
			return 0;
		if (k == a &&
		    atomic_compare_exchange_strong(&s->addr, &k, MW_OUT_TOMB))
			return atomic_load_explicit(&s->len,
						    memory_order_relaxed);
	}
	return 0;
}

static void mwh_out_put(uintptr_t a, size_t n)
{
	unsigned h = mwh_out_hash(a);

	for (unsigned i = 0; i < MW_OUT_PROBE; i++) {
		struct mwh_out_slot *s = &mwh_out[(h + i) & (MW_OUT_SLOTS - 1)];
		uintptr_t k =
			atomic_load_explicit(&s->addr, memory_order_relaxed);

		if ((k == 0 || k == MW_OUT_TOMB) &&
		    atomic_compare_exchange_strong(&s->addr, &k, a)) {
			atomic_store_explicit(&s->len, n, memory_order_release);
			mwh_out_add((long)n);
			return;
		}
	}
	/* full around here: not counted */
}

/* Take a's entry off the count; its length, or 0 when a has none. */
static size_t mwh_out_drop(uintptr_t a)
{
	size_t len = mwh_out_take(a);

	if (len)
		mwh_out_add(-(long)len);
	return len;
}

/* The program's memory grew: retained spans must not stay on top of it
 * until our next free (python json: 5 MiB retained at its peak RSS once
 * growing reallocs reused retained spans instead of fresh memory). Not
 * from inside the allocator (a signal handler's mmap). */
static void mwh_out_trim(void)
{
	if (!mwh_locks_held)
		mwh_trim_to_limit();
}

void mwh_outside_map(uintptr_t a, size_t n, int prot, int flags)
{
	const int skip = MAP_SHARED | MAP_STACK | MAP_GROWSDOWN | MAP_NORESERVE;

	if (!mwh_arena.base || n < MW_OUT_MIN || !(prot & PROT_WRITE) ||
	    !(flags & MAP_ANONYMOUS) || (flags & skip) || mw_owns((void *)a))
		return;
	mwh_out_drop(a); /* MAP_FIXED over one of them */
	mwh_out_put(a, n);
	mwh_out_trim();
}

void mwh_outside_unmap(uintptr_t a, size_t n)
{
	size_t len;

	if (!mwh_arena.base)
		return;
	len = mwh_out_drop(a);
	if (len > n) /* its head only: the rest stays counted */
		mwh_out_put(a + n, len - n);
}

void mwh_outside_remap(uintptr_t old, size_t osz, uintptr_t na, size_t nsz)
{
	size_t len;

	if (!mwh_arena.base)
		return;
	len = mwh_out_drop(old);
	if (len && len == osz) { /* one we counted, moved or resized whole */
		mwh_out_put(na, nsz);
		if (nsz > osz)
			mwh_out_trim();
	}
}
