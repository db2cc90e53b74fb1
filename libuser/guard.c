// SPDX-License-Identifier: BSD-3-Clause
/*
 * Fail closed at run time. The hooks source's guarantee (mwu_guarantee)
 * holds only while our hooks are in the path of the releases it claims.
 * mwu_guard_check() asks hooks/ whether a hook was lost (another library
 * overwrote our interposer, took back a GOT slot, replaced our jump at
 * libc's entry: hooks/verify.c) and, the first time a path is lost:
 * clears its support bits (caches test mwu_guaranteed() on every get),
 * says so once on stderr, counts it (mw_stats.hooks_lost), and flushes:
 * one release of the whole address space through the normal release path,
 * so every watch reads invalid and every release callback drops
 * everything, since a release may already have gone unseen.
 * No switch to the kernel source: had /dev/mmuwatch opened at init the
 * kernel would be the source already (hooks is chosen only without it or
 * when forced by MMUWATCH_SOURCE=hooks).
 * Called at init, on every watch creation (the cache's miss path), from
 * mw_support(), and from each progress round (the helper thread: the
 * periodic check). Cheap unless a library was loaded (hooks/verify.c).
 */
#include <string.h>
#include <unistd.h>

#include "hooks/hooks.h"
#include "libuser/internal.h"

extern unsigned mw_hooks_check(void) __attribute__((weak));
extern const char *mw_hooks_lost_what(void) __attribute__((weak));

static unsigned lost_done;

/* Support bits that depend on each hook (see hooks/README.md's table). */
static unsigned bits_of(unsigned lost)
{
	unsigned b = 0;

	if (lost & MW_HOOKS_LOST_MUNMAP)
		b |= MW_SUPPORT_MUNMAP;
	if (lost & MW_HOOKS_LOST_MREMAP)
		b |= MW_SUPPORT_MREMAP;
	if (lost & MW_HOOKS_LOST_MADVISE)
		b |= MW_SUPPORT_MADVISE;
	if (lost & MW_HOOKS_LOST_MAP_FIXED)
		b |= MW_SUPPORT_MAP_FIXED;
	if (lost & MW_HOOKS_LOST_BRK)
		b |= MW_SUPPORT_BRK;
	if (lost & MW_HOOKS_LOST_SHMDT)
		b |= MW_SUPPORT_SHMDT;
	if (lost & MW_HOOKS_LOST_LIBC)
		b |= MW_SUPPORT_FREE;
	return b;
}

void mwu_guard_check(void)
{
	unsigned lost, fresh, old, drop;
	char msg[384];

	if (mwu_core.source != MW_SOURCE_HOOKS || !mw_hooks_check ||
	    __atomic_load_n(&mwu_core.state, __ATOMIC_ACQUIRE) != MWU_READY)
		return;
	lost = mw_hooks_check();
	fresh = lost & ~__atomic_load_n(&lost_done, __ATOMIC_ACQUIRE);
	if (!fresh || (__atomic_fetch_or(&lost_done, fresh, __ATOMIC_ACQ_REL) &
		       fresh) == fresh)
		return;
	drop = bits_of(fresh);
	old = __atomic_fetch_and(&mwu_guarantee, ~drop, __ATOMIC_ACQ_REL);
	mwu_stat_add(MWU_ST_HOOKS_LOST, 1);
	snprintf(msg, sizeof(msg),
		 "mmuwatch: warning: hooks bypassed by another library (%s): "
		 "support 0x%x -> 0x%x; cached registrations flushed, those "
		 "releases no longer trusted\n",
		 mw_hooks_lost_what ? mw_hooks_lost_what() : "?", old,
		 old & ~drop);
	if (write(2, msg, strlen(msg)) < 0) {
		/* nothing more to do: the support query says it too */
	}
	/* Everything may be stale: the normal release path, whole space. */
	mwu_soft_release(0, UINTPTR_MAX);
	mwu_release_deliver(0, UINTPTR_MAX, MW_SOURCE_HOOKS);
}
