// SPDX-License-Identifier: GPL-2.0
/*
 * The sysfs counters in /sys/kernel/mmuwatch move exactly as the
 * operations done here: contexts, active watches, watches_total,
 * unwatches, events by reason, filtered (the sum of the filtered_* reasons)
 * apart from repeat_ignored, overflows and lost events; close() frees live
 * watches at once; fdinfo shows the context's own numbers; module
 * parameters refuse values out of their range.
 */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mwt.h"

#define P mwt_page

TEST(info_after_load)
{
	struct mwt m;

	MWT_OPEN_OR_SKIP(&m, 0, 0);
	ASSERT_EQ((__u32)MMUWATCH_ABI_VERSION, m.info.abi_version);
	ASSERT_NE(0U, m.info.ring_entries);
	mwt_close(&m);
}

TEST(counters_move)
{
	long long ctx0, act0, tot0, unw0, unmap0, clear0, rel0;
	struct mmuwatch_range r[3];
	struct mwt m;
	char *buf;

	ctx0 = mwt_counter("contexts");
	MWT_OPEN_OR_SKIP(&m, 0, 0);
	ASSERT_LE(0, ctx0);
	ASSERT_EQ(ctx0 + 1, mwt_counter("contexts"));
	act0 = mwt_counter("watches_active");
	tot0 = mwt_counter("watches_total");
	unw0 = mwt_counter("unwatches");
	unmap0 = mwt_counter("events_unmap");
	clear0 = mwt_counter("events_clear");
	rel0 = mwt_counter("events_release");

	buf = mwt_map(3);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, mwt_watch(&m, buf, P, 1, &r[0]));
	ASSERT_EQ(0, mwt_watch(&m, buf + P, P, 2, &r[1]));
	ASSERT_EQ(0, mwt_watch(&m, buf + 2 * P, P, 3, &r[2]));
	EXPECT_EQ(act0 + 3, mwt_counter("watches_active"));
	EXPECT_EQ(tot0 + 3, mwt_counter("watches_total"));

	ASSERT_EQ(0, mwt_unwatch(&m, &r[0]));
	EXPECT_EQ(unw0 + 1, mwt_counter("unwatches"));
	EXPECT_EQ(act0 + 2, mwt_counter("watches_active"));

	ASSERT_EQ(0, madvise(buf + P, P, MADV_DONTNEED));
	EXPECT_EQ(clear0 + 1, mwt_counter("events_clear"));
	EXPECT_EQ(unmap0, mwt_counter("events_unmap"));
	ASSERT_EQ(0, munmap(buf, 3 * P));
	/* The first watch is gone, the second already fired: one more. */
	EXPECT_EQ(unmap0 + 1, mwt_counter("events_unmap"));
	EXPECT_EQ(clear0 + 1, mwt_counter("events_clear"));
	EXPECT_EQ(rel0, mwt_counter("events_release"));
	EXPECT_EQ(2U, mwt_pending(&m));

	mwt_close(&m);
	EXPECT_EQ(ctx0, mwt_counter("contexts"));
	EXPECT_EQ(act0, mwt_counter("watches_active"));
}

/* filtered is the sum of the filtered_* reasons and moves with them. */
static long long filtered_sum(void)
{
	return mwt_counter("filtered_protection_vma") +
	       mwt_counter("filtered_protection_page") +
	       mwt_counter("filtered_soft_dirty");
}

/* A context and two fresh pages, for the filtered-counter tests. */
FIXTURE(two) {
	struct mwt m;
	char *buf;
};

FIXTURE_SETUP(two)
{
	MWT_OPEN_OR_SKIP(&self->m, 0, 0);
	self->buf = mwt_map(2);
	ASSERT_NE(NULL, self->buf);
}

FIXTURE_TEARDOWN(two)
{
	mwt_close(&self->m);
}

TEST_F(two, filtered_total)
{
	long long f0, vma0, rep0, unmap0;
	struct mwt *m = &self->m;
	char *buf = self->buf;
	struct mmuwatch_range r;

	ASSERT_EQ(0, mwt_watch(m, buf, 2 * P, 7, &r));
	f0 = mwt_counter("filtered");
	ASSERT_LE(0, f0);
	ASSERT_EQ(filtered_sum(), f0);
	vma0 = mwt_counter("filtered_protection_vma");
	rep0 = mwt_counter("repeat_ignored");
	ASSERT_LE(0, rep0);
	unmap0 = mwt_counter("events_unmap");

	/* Not an invalidation: filtered and its reason move by one. */
	ASSERT_EQ(0, mprotect(buf, 2 * P, PROT_READ));
	ASSERT_TRUE(mwt_valid(m, &r));
	EXPECT_EQ(f0 + 1, mwt_counter("filtered"));
	EXPECT_EQ(vma0 + 1, mwt_counter("filtered_protection_vma"));
	EXPECT_EQ(rep0, mwt_counter("repeat_ignored"));

	/* An invalidation: filtered stays, events move. */
	ASSERT_EQ(0, munmap(buf, 2 * P));
	MWT_EXPECT_ONE_EVENT(m, 7, buf, buf + 2 * P, MMUWATCH_REASON_UNMAP);
	EXPECT_EQ(f0 + 1, mwt_counter("filtered"));
	EXPECT_EQ(unmap0 + 1, mwt_counter("events_unmap"));
	EXPECT_EQ(filtered_sum(), mwt_counter("filtered"));
}

/*
 * One watch over two VMAs; MADV_DONTNEED zaps them one at a time. The
 * first zap kills the watch and takes it out of the tree, so the second
 * finds nothing: one event, repeat_ignored stays (it has been 0 since
 * 1.2), and nothing is counted as filtered.
 */
TEST_F(two, repeat_not_filtered)
{
	long long f0, rep0, rep1, clear0;
	struct mwt *m = &self->m;
	char *buf = self->buf;
	struct mmuwatch_range r;

	ASSERT_EQ(0, mprotect(buf + P, P, PROT_READ));
	ASSERT_EQ(0, mwt_watch(m, buf, 2 * P, 8, &r));
	f0 = mwt_counter("filtered");
	rep0 = mwt_counter("repeat_ignored");
	clear0 = mwt_counter("events_clear");
	ASSERT_EQ(0, madvise(buf, 2 * P, MADV_DONTNEED));
	ASSERT_TRUE(mwt_invalid(m, &r));
	MWT_EXPECT_ONE_EVENT(m, 8, buf, buf + P, MMUWATCH_REASON_CLEAR);
	rep1 = mwt_counter("repeat_ignored");
	EXPECT_EQ(rep0, rep1);
	EXPECT_EQ(clear0 + 1, mwt_counter("events_clear"));
	EXPECT_EQ(f0, mwt_counter("filtered"));
	ASSERT_EQ(0, munmap(buf, 2 * P));
}

TEST(overflow_counters)
{
	long long ovf0, lost0;
	struct mmuwatch_range r;
	struct mwt m;
	char *buf;
	int i;

	MWT_OPEN_OR_SKIP(&m, 2, 16);
	ASSERT_EQ(2U, m.info.ring_entries);
	ovf0 = mwt_counter("overflows");
	lost0 = mwt_counter("lost_events");
	buf = mwt_map(5);
	ASSERT_NE(NULL, buf);
	for (i = 0; i < 5; i++)
		ASSERT_EQ(0, mwt_watch(&m, buf + i * P, P, i, &r));
	ASSERT_EQ(0, munmap(buf, 5 * P));
	/* Ring of 2: 3 lost, one overflow episode. */
	EXPECT_EQ(ovf0 + 1, mwt_counter("overflows"));
	EXPECT_EQ(lost0 + 3, mwt_counter("lost_events"));
	mwt_close(&m);
}

TEST(version_and_params)
{
	char buf[64] = "";
	int fd = open(MWT_SYSFS "/version", O_RDONLY);

	if (fd < 0 && !getenv("MWT_REQUIRE_DEVICE"))
		SKIP(return, "module not loaded");
	ASSERT_LE(0, fd);
	ASSERT_LT(0, read(fd, buf, sizeof(buf) - 1));
	close(fd);
	ASSERT_EQ(0, strncmp(buf, "abi=1 ", 6));
	EXPECT_LT(0, mwt_param("max_watches"));
	EXPECT_LT(0, mwt_param("max_batch"));
	EXPECT_LT(0, mwt_param("max_ring_entries"));
	EXPECT_LT(0, mwt_param("default_watches"));
	EXPECT_LT(0, mwt_param("default_ring_entries"));
}

/* close() frees the watches that are still live at once (no deferred
 * work needed), and the context with them. Control: before the close
 * both are counted.
 */
TEST(close_frees_live_watches)
{
	long long ctx0 = mwt_counter("contexts");
	long long act0 = mwt_counter("watches_active");
	struct mmuwatch_range r;
	struct mwt m;
	char *buf;

	MWT_OPEN_OR_SKIP(&m, 0, 0);
	buf = mwt_map(3);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, mwt_watch(&m, buf, P, 1, &r));
	ASSERT_EQ(0, mwt_watch(&m, buf + P, 2 * P, 2, &r));
	EXPECT_EQ(ctx0 + 1, mwt_counter("contexts"));
	EXPECT_EQ(act0 + 2, mwt_counter("watches_active"));
	mwt_close(&m);
	EXPECT_EQ(ctx0, mwt_counter("contexts"));
	EXPECT_EQ(act0, mwt_counter("watches_active"));
	/* Nothing watches the pages any more: munmap is harmless. */
	ASSERT_EQ(0, munmap(buf, 3 * P));
}

/*
 * /proc/self/fdinfo shows the context's own numbers (the sysfs counters
 * are global): words, slots in use, watches made, events queued, the
 * ring head. Control: a key the module does not print reads as missing.
 */
TEST(fdinfo_counts)
{
	struct mmuwatch_range r[2];
	int me = getpid();
	struct mwt m;
	char *buf;

	MWT_OPEN_OR_SKIP(&m, 16, 16);
	EXPECT_EQ(MMUWATCH_ABI_VERSION, mwt_fdinfo(me, m.fd, "mmuwatch-abi"));
	EXPECT_EQ(16, mwt_fdinfo(me, m.fd, "mmuwatch-words"));
	EXPECT_EQ(16, mwt_fdinfo(me, m.fd, "mmuwatch-ring-entries"));
	EXPECT_EQ(0, mwt_fdinfo(me, m.fd, "mmuwatch-slots-used"));
	EXPECT_EQ(0, mwt_fdinfo(me, m.fd, "mmuwatch-events"));
	buf = mwt_map(2);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, mwt_watch(&m, buf, P, 1, &r[0]));
	ASSERT_EQ(0, mwt_watch(&m, buf + P, P, 2, &r[1]));
	EXPECT_EQ(2, mwt_fdinfo(me, m.fd, "mmuwatch-watches-total"));
	EXPECT_EQ(2, mwt_fdinfo(me, m.fd, "mmuwatch-slots-used"));
	EXPECT_EQ(0, mwt_fdinfo(me, m.fd, "mmuwatch-events"));
	ASSERT_EQ(0, munmap(buf, P));
	EXPECT_EQ(1, mwt_fdinfo(me, m.fd, "mmuwatch-events"));
	EXPECT_EQ(1, mwt_fdinfo(me, m.fd, "mmuwatch-ring-head"));
	EXPECT_EQ(0, mwt_fdinfo(me, m.fd, "mmuwatch-ring-tail"));
	EXPECT_EQ(-1, mwt_fdinfo(me, m.fd, "mmuwatch-no-such-key"));
	mwt_close(&m);
}

/*
 * Module parameters take values in their range only, and a new context
 * sees the value in force in INFO. Control: an in-range value is taken.
 */
TEST(param_ranges)
{
	long long old = mwt_param("max_batch");
	struct mwt m;

	if (old < 0 && !getenv("MWT_REQUIRE_DEVICE"))
		SKIP(return, "module not loaded");
	if (geteuid())
		SKIP(return, "needs root");
	ASSERT_LT(0, old);
	EXPECT_NE(0, mwt_set_param("max_batch", 99999999));
	EXPECT_NE(0, mwt_set_param("max_batch", 0));
	EXPECT_EQ(old, mwt_param("max_batch"));
	EXPECT_EQ(0, mwt_set_param("max_batch", 128));
	EXPECT_EQ(128, mwt_param("max_batch"));
	EXPECT_EQ(0, mwt_open(&m, 0, 0));
	EXPECT_EQ(128U, m.info.max_batch);
	mwt_close(&m);
	EXPECT_EQ(0, mwt_set_param("max_batch", old));
	EXPECT_EQ(old, mwt_param("max_batch"));
}

TEST_HARNESS_MAIN
