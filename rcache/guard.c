// SPDX-License-Identifier: BSD-3-Clause
/*
 * The fail-closed rule of the cache: it caches (leaves registrations
 * pinned between uses) only while the active source guarantees every
 * release that can silently replace the pages under a cached registration
 * from inside this process: MW_RCACHE_NEEDS (mmuwatch.h). The word tested
 * is mwu_guarantee, which the core lowers at run time when a guarantee is
 * lost (hooks bypassed by another library, ...); it is read on every get,
 * so the next get after a drop registers afresh, and its put deregisters.
 * Releases by other processes (FOREIGN), raw syscalls and page migration
 * are not required: only the kernel source sees them, and pinned pages do
 * not migrate (the hooks source's gaps are listed in hooks/README.md).
 * The test itself is inline (mwr_guaranteed(), internal.h); this file
 * holds the test-only way to lower the word.
 */
#include "rcache/internal.h"

/* Test only (mmuwatch.h): the fail-closed test's way to lose guarantees. */
MW_API unsigned mw_test_support_drop(unsigned bits)
{
	if (mwu_ready())
		return 0;
	return __atomic_and_fetch(&mwu_guarantee, ~bits, __ATOMIC_ACQ_REL);
}
