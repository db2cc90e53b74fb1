/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test-only knobs of libmmuwatch: what the negative controls use to switch
 * a guarantee off and show that a test can fail. They exist only in the
 * test variant of the library, built from the same sources with
 * -DMW_TESTING into build/lib/test/ (libmmuwatch-test.so, soname
 * libmmuwatch.so.1 so that LD_LIBRARY_PATH or LD_PRELOAD swaps it in for
 * the shipped one, and libmmuwatch-test.a). That variant is never
 * installed, packaged or named in mmuwatch.pc; this header is not installed
 * either (include/mmuwatch/ is). The shipped library refuses the flags
 * below with MW_EFLAGS and has none of the functions, nor the test
 * environment switches MMUWATCH_HOOKS_TEST_RAW, MMUWATCH_HOOKS_TEST_NO_VERIFY
 * and MMUWATCH_SYSFS_ROOT (tools/abi-check.sh checks both variants).
 */
#ifndef MMUWATCH_TEST_H
#define MMUWATCH_TEST_H

#include "mmuwatch/mmuwatch.h"
#include "mmuwatch/smcuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mw_rcache_params.flags: ignore invalidations (the negative control of
 * the oracles: stale hits must then be seen). */
#define MW_RCACHE_F_TEST_NO_INVALIDATE 0x80000000U
/* mw_rcache_params.flags: cache even without MW_RCACHE_NEEDS (the negative
 * control of the fail-closed test). */
#define MW_RCACHE_F_TEST_NO_GUARANTEE 0x40000000U
#define MW_RCACHE_F_TEST_MASK                                                  \
	(MW_RCACHE_F_TEST_NO_INVALIDATE | MW_RCACHE_F_TEST_NO_GUARANTEE)

/* Take bits out of the run-time guarantee word (as a lost hook does);
 * returns what is left. */
MW_API unsigned mw_test_support_drop(unsigned bits);
/* The same drop with the hit path's gate left as it was: the state a fork
 * finds when another thread is between a drop and its gate update. */
MW_API unsigned mw_test_support_drop_unsynced(unsigned bits);

/* smcuda: switch one safety mechanism off (value 0 or 1); -EINVAL for an
 * unknown knob or value. In libmmuwatch-test.a only (the .so keeps it
 * local: libuser/libmmuwatch.map). */
enum mw_smc_knob {
	MW_SMC_KNOB_NO_BUFID_CHECK = 1, /* trust cache by base+size only */
	MW_SMC_KNOB_NO_CACHE,		/* open+close a handle per copy */
	MW_SMC_KNOB_NO_OVERLAP_SCAN,	/* rely on ALREADY_MAPPED only */
	MW_SMC_KNOB_NO_INFLIGHT_PIN,	/* evict mappings under copies */
	MW_SMC_KNOB_PEER_STALE,		/* send peer descriptors a generation
					 * old (the receiver must refuse) */
	MW_SMC_KNOB_PEER_NO_CHECK,	/* receiver: a refused peer copy is
					 * reported done (no fallback) */
	MW_SMC_KNOB_NO_IPC_EPOCH,	/* take IPC answers of an earlier
					 * C/R life */
};
MW_SMC_API int mw_smc_test_knob(struct mw_smc *c, int knob, long value);

#ifdef __cplusplus
}
#endif

#endif /* MMUWATCH_TEST_H */
