// SPDX-License-Identifier: GPL-2.0
/*
 * mmuwatch: module parameters, each checked against a fixed range when set.
 * New values apply to contexts set up afterwards; the per-user limits
 * (max_user_*) apply to the next charge, so lowering one below what a user
 * holds refuses that user's next open/WATCH/SETUP and takes nothing away.
 * Root changes them at run time in /sys/module/mmuwatch/parameters/.
 *
 * Per-user defaults are sized for a full node of 256 MPI ranks of one user,
 * each with one libmmuwatch context (README "Limits" has the arithmetic):
 * contexts 512 (2 per rank), watches 1 Mi (4096 live registrations per
 * rank), persistent 256 (one whole-address-space stream per rank), memory
 * 1536 MiB (256 x the library's default context of 2^18 words and 2^14
 * events, 5.5 MiB, plus margin).
 *
 * What another task's invalidation of one page pays for a user's watches
 * on it is bounded by max_mm_contexts x max_watch_depth one-shot watches
 * (2 x 3 = 6) plus max_mm_contexts x max_persistent persistent ones per
 * invalidation (2 x 4 = 8). Measured (6.1, TCG, mw-kbench dos 256 21
 * stacked, the worst layout these limits allow, over no module): 1.79x;
 * with 2 x 4, 2.28x; with 4 x 4, 3.2x. A rank has one context (the
 * library's); a registration cache's page-aligned regions overlap at their
 * boundary pages, and libmmuwatch's cache evicts idle overlapping regions
 * when WATCH is refused for depth.
 */
#include <linux/bits.h>
#include <linux/kernel.h>
#include <linux/moduleparam.h>
#include "mmuwatch.h"

/* Hard ceilings keep one context's accounted memory bounded. */
#define MW_WATCHES_CEIL		BIT(22)
#define MW_RING_CEIL		BIT(22)
#define MW_BATCH_CEIL		BIT(16)
#define MW_PERSISTENT_CEIL	64
#define MW_MM_CONTEXTS_CEIL	4096
#define MW_USER_CEIL		BIT(30)

unsigned int mmuwatch_max_watches = 1U << 20;
unsigned int mmuwatch_default_watches = 1U << 14;
unsigned int mmuwatch_max_ring_entries = 1U << 20;
unsigned int mmuwatch_default_ring_entries = 1U << 12;
unsigned int mmuwatch_max_batch = 1U << 12;
unsigned int mmuwatch_max_persistent = 4;
unsigned int mmuwatch_max_watch_depth = 3;
unsigned int mmuwatch_max_mm_contexts = 2;
unsigned int mmuwatch_max_user[MW_U_NR] = {
	[MW_U_CONTEXTS] = 512,
	[MW_U_WATCHES] = 1U << 20,
	[MW_U_PERSISTENT] = 256,
	[MW_U_MEMORY_KB] = 1536U << 10,
};

bool mmuwatch_root_exempt;

static const struct {
	unsigned int *var;
	unsigned int min;
	unsigned int max;
} mmuwatch_param_ranges[] = {
	{ &mmuwatch_max_watches, 1, MW_WATCHES_CEIL },
	{ &mmuwatch_default_watches, 1, MW_WATCHES_CEIL },
	{ &mmuwatch_max_ring_entries, 1, MW_RING_CEIL },
	{ &mmuwatch_default_ring_entries, 1, MW_RING_CEIL },
	{ &mmuwatch_max_batch, 1, MW_BATCH_CEIL },
	{ &mmuwatch_max_persistent, 0, MW_PERSISTENT_CEIL },
	{ &mmuwatch_max_watch_depth, 1, MW_DEPTH_CEIL },
	{ &mmuwatch_max_mm_contexts, 1, MW_MM_CONTEXTS_CEIL },
	{ &mmuwatch_max_user[MW_U_CONTEXTS], 0, MW_USER_CEIL },
	{ &mmuwatch_max_user[MW_U_WATCHES], 0, MW_USER_CEIL },
	{ &mmuwatch_max_user[MW_U_PERSISTENT], 0, MW_USER_CEIL },
	{ &mmuwatch_max_user[MW_U_MEMORY_KB], 0, MW_USER_CEIL },
};

static int mmuwatch_param_set(const char *val, const struct kernel_param *kp)
{
	unsigned int v, i;
	int ret;

	ret = kstrtouint(val, 0, &v);
	if (ret)
		return ret;
	for (i = 0; i < ARRAY_SIZE(mmuwatch_param_ranges); i++) {
		if (mmuwatch_param_ranges[i].var != kp->arg)
			continue;
		if (v < mmuwatch_param_ranges[i].min || v > mmuwatch_param_ranges[i].max)
			return -ERANGE;
		WRITE_ONCE(*mmuwatch_param_ranges[i].var, v);
		return 0;
	}
	return -EINVAL;
}

static const struct kernel_param_ops mmuwatch_param_ops = {
	.set = mmuwatch_param_set,
	.get = param_get_uint,
};

module_param_cb(max_watches, &mmuwatch_param_ops, &mmuwatch_max_watches, 0644);
MODULE_PARM_DESC(max_watches,
		 "Per-context limit of watches (validity words), 1..4194304");
module_param_cb(default_watches, &mmuwatch_param_ops, &mmuwatch_default_watches,
		0644);
MODULE_PARM_DESC(default_watches,
		 "Validity words of a context set up with defaults (capped by max_watches)");
module_param_cb(max_ring_entries, &mmuwatch_param_ops,
		&mmuwatch_max_ring_entries, 0644);
MODULE_PARM_DESC(max_ring_entries,
		 "Largest event ring a context may ask for, 1..4194304");
module_param_cb(default_ring_entries, &mmuwatch_param_ops,
		&mmuwatch_default_ring_entries, 0644);
MODULE_PARM_DESC(default_ring_entries,
		 "Event ring entries of a context set up with defaults (capped by max_ring_entries)");
module_param_cb(max_batch, &mmuwatch_param_ops, &mmuwatch_max_batch, 0644);
MODULE_PARM_DESC(max_batch,
		 "Largest WATCH_BATCH/UNWATCH_BATCH count, 1..65536");
module_param_cb(max_persistent, &mmuwatch_param_ops, &mmuwatch_max_persistent,
		0644);
MODULE_PARM_DESC(max_persistent,
		 "Per-context limit of persistent watches, 0..64 (0: none)");
module_param_cb(max_watch_depth, &mmuwatch_param_ops, &mmuwatch_max_watch_depth,
		0644);
MODULE_PARM_DESC(max_watch_depth,
		 "Per-context limit of one-shot watches covering any one page (WATCH: ENOSPC), 1..32");
module_param_cb(max_mm_contexts, &mmuwatch_param_ops, &mmuwatch_max_mm_contexts,
		0644);
MODULE_PARM_DESC(max_mm_contexts,
		 "Per-user limit of open contexts on one address space (open: EMFILE), 1..4096");
module_param_cb(max_user_contexts, &mmuwatch_param_ops,
		&mmuwatch_max_user[MW_U_CONTEXTS], 0644);
MODULE_PARM_DESC(max_user_contexts,
		 "Per-user limit of open contexts (open: EMFILE), 0..2^30");
module_param_cb(max_user_watches, &mmuwatch_param_ops,
		&mmuwatch_max_user[MW_U_WATCHES], 0644);
MODULE_PARM_DESC(max_user_watches,
		 "Per-user limit of watches, persistent ones included (WATCH: ENOSPC), 0..2^30");
module_param_cb(max_user_persistent, &mmuwatch_param_ops,
		&mmuwatch_max_user[MW_U_PERSISTENT], 0644);
MODULE_PARM_DESC(max_user_persistent,
		 "Per-user limit of persistent watches (WATCH: ENOSPC), 0..2^30");
module_param_cb(max_user_memory_kb, &mmuwatch_param_ops,
		&mmuwatch_max_user[MW_U_MEMORY_KB], 0644);
MODULE_PARM_DESC(max_user_memory_kb,
		 "Per-user limit of ring, word and slot memory in KiB (SETUP: ENOSPC), 0..2^30");
module_param_named(root_exempt, mmuwatch_root_exempt, bool, 0644);
MODULE_PARM_DESC(root_exempt,
		 "Contexts opened with CAP_SYS_ADMIN in the init user namespace ignore the max_user_* limits (default: no)");
