// SPDX-License-Identifier: BSD-3-Clause
/*
 * Post-install self-test (the MX / Open MPI idea): allocate 4 MiB through
 * malloc, realloc and memalign as a normally linked object sees them (through
 * our own GOT, which the installer rewrote like everyone else's), free each,
 * and check that the release path saw the range; then munmap a raw mapping
 * through the munmap symbol. Our allocator keeps freed memory on purpose, so
 * it is told to release exactly this block; with glibc's allocator (hooks on,
 * our allocator off) the block is 64 MiB, which glibc always mmaps, and the
 * release is seen through the patched libc entry.
 */
#include <malloc.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "hooks/alloc.h"
#include "hooks/internal.h"
#include "hooks/raw.h"

static int mw_seen(void *p, size_t n, void (*release)(void *))
{
	if (!p)
		return 0;
	mw_release_watch((uintptr_t)p, (uintptr_t)p + n);
	if (mw_owns(p))
		mw_alloc_release_on_free(p);
	release(p);
	mw_alloc_release_on_free(NULL);
	return mw_release_watch_hits() > 0;
}

static void *(*volatile st_malloc)(size_t) = malloc;
static void (*volatile st_free)(void *) = free;
static void *(*volatile st_realloc)(void *, size_t) = realloc;
static void *(*volatile st_memalign)(size_t, size_t) = memalign;
static int (*volatile st_munmap)(void *, size_t) = munmap;

static void mw_realloc_free(void *p)
{
	st_realloc(p, 0);	/* glibc and ours: frees, returns NULL */
}

unsigned mw_selftest(void)
{
	size_t n = mw_alloc_mode == MW_ALLOC_OURS ? (size_t)4 << 20
						  : (size_t)64 << 20;
	unsigned sup = 0;
	int ok = 1;
	void *p;

	/* re-read through the (possibly rewritten) GOT each time */
	st_malloc = malloc;
	st_free = free;
	st_realloc = realloc;
	st_memalign = memalign;
	st_munmap = munmap;

	ok &= mw_seen(st_malloc(n), n, st_free);
	ok &= mw_seen(st_realloc(NULL, n), n, mw_realloc_free);
	ok &= mw_seen(st_memalign(64, n), n, st_free);
	if (ok)
		sup |= MW_HOOKS_SUPPORT_FREE;

	p = mw_raw_mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!mw_raw_failed((long)p)) {
		mw_release_watch((uintptr_t)p, (uintptr_t)p + 2 * 4096);
		st_munmap(p, 2 * 4096);
		if (mw_release_watch_hits() == 1)
			sup |= MW_HOOKS_SUPPORT_MUNMAP;
	}
	mw_release_watch(0, 0);
	return sup;
}
