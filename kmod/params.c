// SPDX-License-Identifier: GPL-2.0
/*
 * mmuwatch: module parameters, each checked against a fixed range when set.
 * New values apply to contexts set up afterwards.
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

unsigned int mw_max_watches = 1U << 20;
unsigned int mw_default_watches = 1U << 14;
unsigned int mw_max_ring_entries = 1U << 20;
unsigned int mw_default_ring_entries = 1U << 12;
unsigned int mw_max_batch = 1U << 12;
unsigned int mw_max_persistent = 4;

static const struct {
	unsigned int *var;
	unsigned int min;
	unsigned int max;
} mw_param_ranges[] = {
	{ &mw_max_watches, 1, MW_WATCHES_CEIL },
	{ &mw_default_watches, 1, MW_WATCHES_CEIL },
	{ &mw_max_ring_entries, 1, MW_RING_CEIL },
	{ &mw_default_ring_entries, 1, MW_RING_CEIL },
	{ &mw_max_batch, 1, MW_BATCH_CEIL },
	{ &mw_max_persistent, 0, MW_PERSISTENT_CEIL },
};

static int mw_param_set(const char *val, const struct kernel_param *kp)
{
	unsigned int v, i;
	int ret;

	ret = kstrtouint(val, 0, &v);
	if (ret)
		return ret;
	for (i = 0; i < ARRAY_SIZE(mw_param_ranges); i++) {
		if (mw_param_ranges[i].var != kp->arg)
			continue;
		if (v < mw_param_ranges[i].min || v > mw_param_ranges[i].max)
			return -ERANGE;
		WRITE_ONCE(*mw_param_ranges[i].var, v);
		return 0;
	}
	return -EINVAL;
}

static const struct kernel_param_ops mw_param_ops = {
	.set = mw_param_set,
	.get = param_get_uint,
};

module_param_cb(max_watches, &mw_param_ops, &mw_max_watches, 0644);
MODULE_PARM_DESC(max_watches,
		 "Per-context limit of watches (validity words), 1..4194304");
module_param_cb(default_watches, &mw_param_ops, &mw_default_watches, 0644);
MODULE_PARM_DESC(default_watches,
		 "Validity words of a context set up with defaults (capped by max_watches)");
module_param_cb(max_ring_entries, &mw_param_ops, &mw_max_ring_entries, 0644);
MODULE_PARM_DESC(max_ring_entries,
		 "Largest event ring a context may ask for, 1..4194304");
module_param_cb(default_ring_entries, &mw_param_ops,
		&mw_default_ring_entries, 0644);
MODULE_PARM_DESC(default_ring_entries,
		 "Event ring entries of a context set up with defaults (capped by max_ring_entries)");
module_param_cb(max_batch, &mw_param_ops, &mw_max_batch, 0644);
MODULE_PARM_DESC(max_batch,
		 "Largest WATCH_BATCH/UNWATCH_BATCH count, 1..65536");
module_param_cb(max_persistent, &mw_param_ops, &mw_max_persistent, 0644);
MODULE_PARM_DESC(max_persistent,
		 "Per-context limit of persistent watches, 0..64 (0: none)");
