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
 *
 * Library loads: a constructor of a library being loaded can take a hook
 * away while other threads release and hit; a check at our next call
 * would leave that window open. So mwu_guard_load() (called by hooks/
 * around every dlopen/dlmopen through our wrappers) takes the hooks'
 * bits out of the guarantee before the load starts (caches register
 * afresh meanwhile) and puts back what is still true after the check
 * that follows the load. Not an rtld-audit la_objopen or r_brk: both fire
 * before the new objects' constructors run (glibc signals RT_CONSISTENT
 * before _dl_init), so neither sees the end of the window; only the
 * return of dlopen does. Loads that do not pass our wrappers (libc's own
 * dlopen of NSS or iconv modules, a dlopen reached through a pointer
 * from dlsym) are still found at the next check only (hooks/README.md).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hooks/hooks.h"
#include "libuser/internal.h"

extern unsigned mw_hooks_check(void) __attribute__((weak));
extern unsigned mw_hooks_check_now(void) __attribute__((weak));
extern const char *mw_hooks_lost_what(void) __attribute__((weak));
extern void mw_hooks_set_load_cb(mw_load_fn fn) __attribute__((weak));

static unsigned lost_done;
static unsigned load_held; /* bits out of the word for loads (below) */
static int load_orphaned;  /* a fork child of a process inside a load */
static void load_end(void);

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
	if (lost & (MW_HOOKS_LOST_LIBC | MW_HOOKS_LOST_FREE))
		b |= MW_SUPPORT_FREE;
	return b;
}

static void guard_check(int now)
{
	unsigned lost, fresh, old, drop;
	char msg[384];

	if (mwu_core.source != MW_SOURCE_HOOKS || !mw_hooks_check ||
	    __atomic_load_n(&mwu_core.state, __ATOMIC_ACQUIRE) != MWU_READY)
		return;
	lost = now && mw_hooks_check_now ? mw_hooks_check_now()
					 : mw_hooks_check();
	fresh = lost & ~__atomic_load_n(&lost_done, __ATOMIC_ACQUIRE);
	if (!fresh || (__atomic_fetch_or(&lost_done, fresh, __ATOMIC_ACQ_REL) &
		       fresh) == fresh)
		return;
	drop = bits_of(fresh);
	old = __atomic_fetch_and(&mwu_guarantee, ~drop, __ATOMIC_ACQ_REL) |
	      __atomic_load_n(&load_held,
			      __ATOMIC_RELAXED); /* for the message */
	mwu_gate_sync();
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

void mwu_guard_check(void)
{
	if (__atomic_load_n(&load_orphaned, __ATOMIC_ACQUIRE) &&
	    __atomic_exchange_n(&load_orphaned, 0, __ATOMIC_ACQ_REL)) {
		load_end();
		return;
	}
	guard_check(0);
}

/* Support bits a library load can take away (all of the hooks' paths). */
#define LOAD_BITS                                                              \
	(MW_SUPPORT_MUNMAP | MW_SUPPORT_MREMAP | MW_SUPPORT_MADVISE |          \
	 MW_SUPPORT_MAP_FIXED | MW_SUPPORT_BRK | MW_SUPPORT_SHMDT |            \
	 MW_SUPPORT_FREE)

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned loads; /* in progress, under load_lock */

int mwu_guard_loading(void)
{
	return __atomic_load_n(&loads, __ATOMIC_ACQUIRE) != 0;
}

/* The last load ended: check, then give back what still holds. */
static void load_end(void)
{
	/* Outside the lock: the check walks the loaded objects. */
	guard_check(1);
	pthread_mutex_lock(&load_lock);
	if (!loads) { /* else the next load's end puts them back */
		__atomic_fetch_or(
			&mwu_guarantee,
			load_held & ~bits_of(__atomic_load_n(&lost_done,
							     __ATOMIC_ACQUIRE)),
			__ATOMIC_ACQ_REL);
		__atomic_store_n(&load_held, 0, __ATOMIC_RELAXED);
		mwu_gate_sync();
	}
	pthread_mutex_unlock(&load_lock);
}

/*
 * fork() while another thread was inside dlopen: that thread, and so the
 * end of its load, is not in the child. The lock may have been held by
 * it; the count would stay up and the bits down for the child's life
 * (never caching). The child's next check (init, a watch, mw_support(),
 * the helper) ends the load instead: a full check first, as after any
 * load, since the constructors may have run half-way.
 */
void mwu_guard_atfork_child(void)
{
	pthread_mutex_init(&load_lock, NULL);
	if (!loads)
		return;
	loads = 0;
#ifdef MW_TESTING
	{
		const char *t = getenv("MMUWATCH_HOOKS_TEST_NO_FORK_LOAD_END");

		if (t && t[0] == '1')
			return; /* the negative control: the old behaviour */
	}
#endif
	load_orphaned = 1;
}

static void guard_load(int begin)
{
	int last = 0;

	if (mwu_core.source != MW_SOURCE_HOOKS ||
	    __atomic_load_n(&mwu_core.state, __ATOMIC_ACQUIRE) != MWU_READY)
		return;
	pthread_mutex_lock(&load_lock);
	if (begin) {
		if (__atomic_fetch_add(&loads, 1, __ATOMIC_ACQ_REL) == 0) {
			__atomic_fetch_or(&load_held,
					  __atomic_fetch_and(&mwu_guarantee,
							     ~LOAD_BITS,
							     __ATOMIC_ACQ_REL) &
						  LOAD_BITS,
					  __ATOMIC_RELAXED);
			mwu_gate_sync();
		}
	} else if (loads) {
		last = __atomic_sub_fetch(&loads, 1, __ATOMIC_ACQ_REL) == 0;
	}
	pthread_mutex_unlock(&load_lock);
	if (last)
		load_end();
}

/* Test variant only: MMUWATCH_HOOKS_TEST_NO_LOAD_GUARD=1 leaves the load
 * window open (the negative control of rcache/tests/dlopen_window.c). */
void mwu_guard_attach(int on)
{
#ifdef MW_TESTING
	const char *t = getenv("MMUWATCH_HOOKS_TEST_NO_LOAD_GUARD");

	if (t && t[0] == '1')
		on = 0;
#endif
	if (!mw_hooks_set_load_cb)
		return;
	mw_hooks_set_load_cb(on ? guard_load : NULL);
}
