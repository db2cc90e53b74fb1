// SPDX-License-Identifier: BSD-3-Clause
/*
 * Test preload library: libmw_hooks.a plus a release callback that records
 * what it is told. Programs under test find the record through
 * dlsym(RTLD_DEFAULT, "mwtest_state"); with MWTEST_REPORT=1 a summary goes
 * to stderr at exit.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hooks/alloc.h"
#include "hooks/hooks.h"
#include "hooks/tests/mwtest.h"

__attribute__((visibility("default"))) struct mwtest_state mwtest_state;

__attribute__((visibility("default"))) int mwtest_owns(const void *p)
{
	return mw_owns(p);
}

/* The other allocator left in charge, or NULL (hooks/README.md). */
__attribute__((visibility("default"))) const char *mwtest_foreign(void)
{
	return mw_hooks_foreign_allocator();
}

static void cb(uintptr_t s, uintptr_t e, enum mw_release_kind k)
{
	struct mwtest_state *t = &mwtest_state;
	unsigned long i = atomic_fetch_add(&t->n, 1);

	if (k < MWTEST_KINDS)
		atomic_fetch_add(&t->by_kind[k], 1);
	if (i < MWTEST_LOG) {
		t->log[i].start = s;
		t->log[i].end = e;
		t->log[i].kind = k;
	}
}

static void report(void)
{
	if (getenv("MWTEST_REPORT"))
		fprintf(stderr, "mwtest: active=%d support=%u decision=\"%s\" "
			"releases=%lu conflicts=%u late=%d\n", mw_hooks_active(),
			mw_hooks_support(), mw_hooks_decision(),
			(unsigned long)atomic_load(&mwtest_state.n),
			mw_hooks_patch_conflicts(), mw_hooks_installed_late());
}

__attribute__((constructor(102))) static void init(void)
{
	mwtest_state.active = mw_hooks_init();
	mwtest_state.support = mw_hooks_support();
	mwtest_state.late = mw_hooks_installed_late();
	mw_hooks_set_release_cb(cb);
	atexit(report);
}
