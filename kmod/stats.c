// SPDX-License-Identifier: GPL-2.0
/*
 * mmuwatch: global counters in /sys/kernel/mmuwatch/ and per-context
 * numbers in /proc/<pid>/fdinfo/<fd>.
 *
 * filtered = filtered_protection_vma + filtered_protection_page +
 * filtered_soft_dirty: notifications that were not invalidations.
 * repeat_ignored counted invalidations that reached a watch already dead;
 * since 1.2 a watch leaves the tree in the callback that kills it, so none
 * can, and it stays 0 (kept: tools read it). It is not part of filtered.
 * limit_hits_* count refusals by the per-user limits (user.c) and by
 * max_watch_depth and max_mm_contexts; users is
 * the number of users holding a context.
 */
#include <linux/atomic.h>
#include <linux/fs.h>
#include <linux/kobject.h>
#include <linux/pid.h>
#include <linux/seq_file.h>
#include <linux/sysfs.h>
#include "mmuwatch.h"

DEFINE_PER_CPU(struct mmuwatch_stats, mmuwatch_pcpu_stats);
atomic_long_t mmuwatch_nr_contexts = ATOMIC_LONG_INIT(0);
atomic_long_t mmuwatch_nr_watches = ATOMIC_LONG_INIT(0);

u64 mmuwatch_stat_sum(enum mmuwatch_stat s)
{
	u64 sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += READ_ONCE(per_cpu(mmuwatch_pcpu_stats, cpu).v[s]);
	return sum;
}

struct mmuwatch_attr {
	struct kobj_attribute attr;
	enum mmuwatch_stat stat;
};

static ssize_t mmuwatch_counter_show(struct kobject *kobj,
				     struct kobj_attribute *attr, char *buf)
{
	struct mmuwatch_attr *a = container_of(attr, struct mmuwatch_attr,
					       attr);

	return sysfs_emit(buf, "%llu\n", mmuwatch_stat_sum(a->stat));
}

#define MW_COUNTER(_name, _stat) \
	{ .attr = __ATTR(_name, 0444, mmuwatch_counter_show, NULL), \
	  .stat = _stat }

static struct mmuwatch_attr mmuwatch_counters[] = {
	MW_COUNTER(watches_total, MW_STAT_WATCHES_TOTAL),
	MW_COUNTER(unwatches, MW_STAT_UNWATCHES),
	MW_COUNTER(events_unmap, MW_STAT_EV_UNMAP),
	MW_COUNTER(events_clear, MW_STAT_EV_CLEAR),
	MW_COUNTER(events_release, MW_STAT_EV_RELEASE),
	MW_COUNTER(events_migrate, MW_STAT_EV_MIGRATE),
	MW_COUNTER(events_exclusive, MW_STAT_EV_EXCLUSIVE),
	MW_COUNTER(events_other, MW_STAT_EV_OTHER),
	MW_COUNTER(filtered_protection_vma, MW_STAT_F_PROT_VMA),
	MW_COUNTER(filtered_protection_page, MW_STAT_F_PROT_PAGE),
	MW_COUNTER(filtered_soft_dirty, MW_STAT_F_SOFT_DIRTY),
	MW_COUNTER(repeat_ignored, MW_STAT_REPEAT_IGNORED),
	MW_COUNTER(overflows, MW_STAT_OVERFLOWS),
	MW_COUNTER(lost_events, MW_STAT_LOST),
	MW_COUNTER(limit_hits_contexts, MW_STAT_LIMIT_CONTEXTS),
	MW_COUNTER(limit_hits_watches, MW_STAT_LIMIT_WATCHES),
	MW_COUNTER(limit_hits_persistent, MW_STAT_LIMIT_PERSISTENT),
	MW_COUNTER(limit_hits_memory, MW_STAT_LIMIT_MEMORY),
	MW_COUNTER(limit_hits_depth, MW_STAT_LIMIT_DEPTH),
	MW_COUNTER(limit_hits_mm_contexts, MW_STAT_LIMIT_MM_CONTEXTS),
};

static ssize_t version_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	return sysfs_emit(buf, "abi=%d module=%s\n", MMUWATCH_ABI_VERSION,
			  MW_MODULE_VERSION);
}

static ssize_t contexts_show(struct kobject *kobj, struct kobj_attribute *attr,
			     char *buf)
{
	return sysfs_emit(buf, "%ld\n", atomic_long_read(&mmuwatch_nr_contexts));
}

static ssize_t watches_active_show(struct kobject *kobj,
				   struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%ld\n", atomic_long_read(&mmuwatch_nr_watches));
}

/* Users holding at least one context (per-user accounting entries). */
static ssize_t users_show(struct kobject *kobj, struct kobj_attribute *attr,
			  char *buf)
{
	return sysfs_emit(buf, "%ld\n", mmuwatch_nr_users());
}

/* Every notification that was not an invalidation, whatever its reason. */
static ssize_t filtered_show(struct kobject *kobj, struct kobj_attribute *attr,
			     char *buf)
{
	return sysfs_emit(buf, "%llu\n", mmuwatch_stat_sum(MW_STAT_F_PROT_VMA) +
			  mmuwatch_stat_sum(MW_STAT_F_PROT_PAGE) +
			  mmuwatch_stat_sum(MW_STAT_F_SOFT_DIRTY));
}

static struct kobj_attribute mmuwatch_version_attr = __ATTR_RO(version);
static struct kobj_attribute mmuwatch_contexts_attr = __ATTR_RO(contexts);
static struct kobj_attribute mmuwatch_watches_active_attr = __ATTR_RO(watches_active);
static struct kobj_attribute mmuwatch_filtered_attr = __ATTR_RO(filtered);
static struct kobj_attribute mmuwatch_users_attr = __ATTR_RO(users);

static struct attribute *mmuwatch_attrs[ARRAY_SIZE(mmuwatch_counters) + 6];
static const struct attribute_group mmuwatch_group = { .attrs = mmuwatch_attrs };
static struct kobject *mmuwatch_kobj;

int mmuwatch_sysfs_init(void)
{
	unsigned int i, n = 0;
	int ret;

	mmuwatch_attrs[n++] = &mmuwatch_version_attr.attr;
	mmuwatch_attrs[n++] = &mmuwatch_contexts_attr.attr;
	mmuwatch_attrs[n++] = &mmuwatch_watches_active_attr.attr;
	mmuwatch_attrs[n++] = &mmuwatch_filtered_attr.attr;
	mmuwatch_attrs[n++] = &mmuwatch_users_attr.attr;
	for (i = 0; i < ARRAY_SIZE(mmuwatch_counters); i++)
		mmuwatch_attrs[n++] = &mmuwatch_counters[i].attr.attr;
	mmuwatch_attrs[n] = NULL;

	mmuwatch_kobj = kobject_create_and_add("mmuwatch", kernel_kobj);
	if (!mmuwatch_kobj)
		return -ENOMEM;
	ret = sysfs_create_group(mmuwatch_kobj, &mmuwatch_group);
	if (ret)
		kobject_put(mmuwatch_kobj);
	return ret;
}

void mmuwatch_sysfs_exit(void)
{
	sysfs_remove_group(mmuwatch_kobj, &mmuwatch_group);
	kobject_put(mmuwatch_kobj);
}

void mmuwatch_show_fdinfo(struct seq_file *m, struct file *file)
{
	struct mmuwatch_ctx *ctx = file->private_data;
	u32 entries = 0, head = 0, tail = 0, flags = 0, words = 0, used = 0;
	u32 persistent;
	u64 watched, events, lost_now = 0, lost;

	spin_lock(&ctx->lock);
	if (ctx->ready) {
		entries = ctx->ring_entries;
		head = ctx->head;
		tail = READ_ONCE(ctx->ring->tail);
		flags = ctx->rflags;
		lost_now = ctx->lost;
		words = ctx->nr_words;
		used = ctx->nr_words - ctx->nr_free;
	}
	persistent = ctx->nr_persistent;
	watched = ctx->nr_watched;
	events = ctx->nr_events;
	lost = ctx->nr_lost;
	spin_unlock(&ctx->lock);

	seq_printf(m, "mmuwatch-abi:\t%d\n", MMUWATCH_ABI_VERSION);
	/* In the reader's pid namespace; 0 if the owner is not visible there. */
	seq_printf(m, "mmuwatch-owner-tgid:\t%d\n", pid_vnr(ctx->owner));
	seq_printf(m, "mmuwatch-ctx-id:\t%llu\n", ctx->id);
	seq_printf(m, "mmuwatch-words:\t%u\n", words);
	seq_printf(m, "mmuwatch-slots-used:\t%u\n", used);
	seq_printf(m, "mmuwatch-persistent:\t%u\n", persistent);
	seq_printf(m, "mmuwatch-ring-entries:\t%u\n", entries);
	seq_printf(m, "mmuwatch-ring-head:\t%u\n", head);
	seq_printf(m, "mmuwatch-ring-tail:\t%u\n", tail);
	seq_printf(m, "mmuwatch-ring-overflow:\t%u\n",
		   !!(flags & MMUWATCH_RING_F_OVERFLOW));
	seq_printf(m, "mmuwatch-ring-lost:\t%llu\n", lost_now);
	seq_printf(m, "mmuwatch-watches-total:\t%llu\n", watched);
	seq_printf(m, "mmuwatch-events:\t%llu\n", events);
	seq_printf(m, "mmuwatch-lost-total:\t%llu\n", lost);
	seq_printf(m, "mmuwatch-filtered:\t%lld\n",
		   (long long)atomic64_read(&ctx->nr_filtered));
}
