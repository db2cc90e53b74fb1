// SPDX-License-Identifier: BSD-3-Clause
/*
 * The release path: every interceptor and the allocator call
 * mw_release_notify() before memory goes back to the OS. It runs in any
 * thread, inside malloc/free or a syscall wrapper: no allocation, no locks.
 */
#include <stdatomic.h>

#include "hooks/internal.h"
#include "hooks/share.h"

static _Atomic(mw_release_fn) release_cb;
static atomic_ulong release_count;
static atomic_uintptr_t watch_lo, watch_hi;
static atomic_ulong watch_hits;
/* verify.c's probes: count, but the core is not told (scratch memory) */
MWH_HIDDEN __thread int mw_release_probing
	__attribute__((tls_model("initial-exec")));

void mw_hooks_set_release_cb(mw_release_fn fn)
{
	atomic_store(&release_cb, fn);
}

void mw_release_notify(uintptr_t start, uintptr_t end,
		       enum mw_release_kind kind)
{
	mw_release_fn fn;
	uintptr_t lo;

	if (end <= start)
		return;
	atomic_fetch_add_explicit(&release_count, 1, memory_order_relaxed);
	lo = atomic_load_explicit(&watch_lo, memory_order_relaxed);
	if (lo && start < atomic_load_explicit(&watch_hi, memory_order_relaxed) &&
	    end > lo)
		atomic_fetch_add_explicit(&watch_hits, 1, memory_order_relaxed);
	/* shared heap spans: the generation moves before the memory goes */
	if (kind != MW_RELEASE_ALLOC && !mw_release_probing)
		mwh_share_foreign(start, end, kind);
	fn = atomic_load_explicit(&release_cb, memory_order_acquire);
	if (fn && !mw_release_probing)
		fn(start, end, kind);
}

void mw_release_watch(uintptr_t lo, uintptr_t hi)
{
	atomic_store(&watch_hits, 0);
	atomic_store(&watch_hi, hi);
	atomic_store(&watch_lo, lo);
}

unsigned long mw_release_watch_hits(void)
{
	return atomic_load(&watch_hits);
}

unsigned long mw_release_count(void)
{
	return atomic_load(&release_count);
}
