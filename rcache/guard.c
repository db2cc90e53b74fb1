// SPDX-License-Identifier: BSD-3-Clause
/*
 * The fail-closed rule of the cache: it caches (leaves registrations
 * pinned between uses) only while the active source guarantees every
 * release that can silently replace the pages under a cached registration
 * from inside this process: MW_RCACHE_NEEDS (mmuwatch.h). The word is
 * mwu_guarantee, which the core lowers at run time when a guarantee is
 * lost (hooks bypassed by another library, ...); every get reads it
 * through mwu_gate (libuser/internal.h, one load for the rule, the state
 * and the checkpoint gate), so the next get after a drop registers
 * afresh, and its put deregisters.
 * Releases by other processes (FOREIGN), raw syscalls and page migration
 * are not required: only the kernel source sees them, and pinned pages do
 * not migrate (the hooks source's gaps are listed in hooks/README.md).
 * The test itself is inline (mwr_guaranteed(), internal.h); this file
 * holds the test variant's way to lower the word, and the refusal of
 * flags this build does not know (the test flags, in the shipped build).
 */
#include "rcache/internal.h"

/* Bits of the test-only header's flags (include/testing/mmuwatch_test.h),
 * known here so that the shipped build can name them when refusing. */
#define MWR_TEST_FLAG_BITS 0xc0000000U

/* Unknown mw_rcache_params.flags: MW_EFLAGS, and one line that says so. */
int mwr_bad_flags(unsigned flags)
{
	static const char test_only[] =
		"test-only (they exist in the test build of libmmuwatch, "
		"never in the installed one)";
	unsigned bad = flags & ~MWR_FLAGS_OK;

	mwu_log(MWU_LOG_ERR, "mw_rcache_create: flags %#x are %s", bad,
		bad & MWR_TEST_FLAG_BITS ? test_only : "unknown");
	return MW_EFLAGS;
}

#ifdef MW_TESTING
/* Test only (testing/mmuwatch_test.h): the fail-closed test's way to lose
 * guarantees. */
MW_API unsigned mw_test_support_drop_unsynced(unsigned bits)
{
	if (mwu_ready())
		return 0;
	return __atomic_and_fetch(&mwu_guarantee, ~bits, __ATOMIC_ACQ_REL);
}

MW_API unsigned mw_test_support_drop(unsigned bits)
{
	unsigned left = mw_test_support_drop_unsynced(bits);

	mwu_gate_sync();
	return left;
}
#endif
