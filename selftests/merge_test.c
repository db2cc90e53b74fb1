// SPDX-License-Identifier: GPL-2.0
/*
 * Invalidation sources that merge or collapse pages under a watch: KSM
 * merge, khugepaged and MADV_COLLAPSE, and the VMA split inside a 2 MiB
 * block that notifies CLEAR over the whole block (also when the VMA is a
 * buffer merged with a thread stack). Each test checks the outcome the
 * README table ("Invalidation sources") documents: the word
 * flips and exactly one event with the expected reason and range, or
 * nothing at all. Controls: KSM on pages that differ (never merged), the
 * same munmap in a mapping smaller than the block.
 * MWT_FIXTURES="name ..." runs only those fixtures ("global" for the
 * plain tests); the others skip, to run one part alone.
 * The tests change system settings and put them back; they run as root
 * in the VM only: on a host without /dev/mmuwatch they skip before
 * touching anything.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "sources.h"

#define KSM "/sys/kernel/mm/ksm/"
#define THP "/sys/kernel/mm/transparent_hugepage/"
#define KHP THP "khugepaged/"

/* AnonHugePages (kB) of the mapping that contains addr. */
static long anon_huge_kb(const void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[256];
	int in = 0;
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
			continue;
		}
		if (in && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb;
}

/* ---- KSM ------------------------------------------------------------- */

FIXTURE(ksm) {
	struct mwt m;
	long run, scan, sleep_ms;
};

FIXTURE_SETUP(ksm)
{
	ONLY_IF_SELECTED("ksm");
	MWT_OPEN_OR_SKIP(&self->m, 0, 0);
	self->run = mwt_read_ll(KSM "run");
	if (self->run < 0)
		SKIP(_exit(255), "no KSM (" KSM ")");
	self->scan = mwt_read_ll(KSM "pages_to_scan");
	self->sleep_ms = mwt_read_ll(KSM "sleep_millisecs");
	ASSERT_EQ(0, mws_write_long(KSM "pages_to_scan", 1000));
	ASSERT_EQ(0, mws_write_long(KSM "sleep_millisecs", 10));
}

FIXTURE_TEARDOWN(ksm)
{
	/* run=2 unmerges everything; then the previous mode. */
	mws_write_long(KSM "run", 2);
	mws_write_long(KSM "run", self->run);
	mws_write_long(KSM "pages_to_scan", self->scan);
	mws_write_long(KSM "sleep_millisecs", self->sleep_ms);
	mwt_close(&self->m);
}

/* Wait until ksmd finished 'scans' more full scans or until the watch
 * fires; true if it fired.
 */
static bool ksm_wait(struct mwt *m, struct mmuwatch_range *r, int scans)
{
	long base = mwt_read_ll(KSM "full_scans");
	double end = mws_now() + 120;

	while (mws_now() < end) {
		if (!mwt_valid(m, r))
			return true;
		if (mwt_read_ll(KSM "full_scans") >= base + scans)
			return !mwt_valid(m, r);
		usleep(20000);
	}
	return !mwt_valid(m, r);
}

/* Two identical pages merge: KSM write-protects the page (CLEAR), then
 * replaces it with the KSM page (CLEAR): one event for the one-shot watch.
 */
TEST_F(ksm, merge)
{
	char *a = mws_distinct_pages(4, (unsigned int)getpid());
	struct mmuwatch_range r;
	struct mmuwatch_event e;
	int i;

	ASSERT_NE(NULL, a);
	/* Pages 1 and 2 identical, 0 and 3 unique. */
	memcpy(a + 2 * P, a + P, P);
	ASSERT_EQ(0, mwt_watch(&self->m, a + P, 2 * P, 0x45a, &r));
	ASSERT_EQ(0, madvise(a, 4 * P, MADV_MERGEABLE));
	ASSERT_EQ(0, mws_write_long(KSM "run", 1));
	ASSERT_TRUE(ksm_wait(&self->m, &r, 8));
	EXPECT_ONE_INSIDE(&self->m, &r, MMUWATCH_REASON_CLEAR, &e);
	/* The pages were merged indeed (the counter follows the merge). */
	for (i = 0; i < 500 && mwt_read_ll(KSM "pages_sharing") <= 0; i++)
		usleep(20000);
	EXPECT_LT(0, mwt_read_ll(KSM "pages_sharing"));
	EXPECT_EQ(0, memcmp(a + P, a + 2 * P, P));
}

/* Control: pages that all differ are scanned but never merged. */
TEST_F(ksm, control_distinct)
{
	char *a = mws_distinct_pages(4, (unsigned int)getpid() + 7);
	struct mmuwatch_range r;

	ASSERT_NE(NULL, a);
	ASSERT_EQ(0, mwt_watch(&self->m, a, 4 * P, 0x45b, &r));
	ASSERT_EQ(0, madvise(a, 4 * P, MADV_MERGEABLE));
	ASSERT_EQ(0, mws_write_long(KSM "run", 1));
	ASSERT_FALSE(ksm_wait(&self->m, &r, 4));
	EXPECT_UNTOUCHED(&self->m, &r);
}

/* ---- THP collapse ---------------------------------------------------- */

FIXTURE(collapse) {
	struct mwt m;
	char *raw, *a;
	struct mmuwatch_range r;
	long sleep_ms, scan;
};

FIXTURE_SETUP(collapse)
{
	char mode[64] = "";
	FILE *f;
	size_t i;

	ONLY_IF_SELECTED("collapse");
	MWT_OPEN_OR_SKIP(&self->m, 0, 0);
	f = fopen(THP "enabled", "re");
	if (!f)
		SKIP(_exit(255), "no transparent huge pages");
	if (!fgets(mode, sizeof(mode), f))
		mode[0] = 0;
	fclose(f);
	if (strstr(mode, "[never]"))
		SKIP(_exit(255), "THP disabled");
	self->sleep_ms = mwt_read_ll(KHP "scan_sleep_millisecs");
	self->scan = mwt_read_ll(KHP "pages_to_scan");
	/* A 2 MiB aligned block, populated with small pages first. */
	self->raw = mmap(NULL, 2 * HUGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->raw);
	self->a = (char *)(((uintptr_t)self->raw + HUGE - 1) & ~(HUGE - 1));
	ASSERT_EQ(0, madvise(self->a, HUGE, MADV_NOHUGEPAGE));
	for (i = 0; i < HUGE; i += P)
		self->a[i] = (char)(i / P + 1);
	ASSERT_EQ(0, anon_huge_kb(self->a));
	ASSERT_EQ(0, mwt_watch(&self->m, self->a + P, 2 * P, 0xc011, &self->r));
}

FIXTURE_TEARDOWN(collapse)
{
	if (self->sleep_ms >= 0)
		mws_write_long(KHP "scan_sleep_millisecs", self->sleep_ms);
	if (self->scan >= 0)
		mws_write_long(KHP "pages_to_scan", self->scan);
	mwt_close(&self->m);
}

/* khugepaged collapses the block into one huge page: the old PTEs are
 * cleared under MMU_NOTIFY_CLEAR over the whole 2 MiB, so the event
 * covers the whole watch.
 */
TEST_F(collapse, khugepaged)
{
	double end = mws_now() + 120;

	ASSERT_EQ(0, madvise(self->a, HUGE, MADV_HUGEPAGE));
	EXPECT_UNTOUCHED(&self->m, &self->r);
	ASSERT_EQ(0, mws_write_long(KHP "scan_sleep_millisecs", 50));
	ASSERT_EQ(0, mws_write_long(KHP "pages_to_scan", 4096));
	while (mws_now() < end && anon_huge_kb(self->a) < 2048)
		usleep(50000);
	ASSERT_EQ(2048, anon_huge_kb(self->a));
	MWT_EXPECT_ONE_EVENT(&self->m, 0xc011, self->a + P, self->a + 3 * P,
			     MMUWATCH_REASON_CLEAR);
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	EXPECT_EQ(2, self->a[P]);
}

/* MADV_COLLAPSE (6.1+): the same collapse, synchronous. */
TEST_F(collapse, madv_collapse)
{
	ASSERT_EQ(0, madvise(self->a, HUGE, MADV_HUGEPAGE));
	if (madvise(self->a, HUGE, MADV_COLLAPSE)) {
		ASSERT_EQ(EINVAL, errno);
		SKIP(return, "MADV_COLLAPSE not supported");
	}
	ASSERT_EQ(2048, anon_huge_kb(self->a));
	MWT_EXPECT_ONE_EVENT(&self->m, 0xc011, self->a + P, self->a + 3 * P,
			     MMUWATCH_REASON_CLEAR);
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	EXPECT_EQ(3, self->a[2 * P]);
}

/*
 * A VMA split inside a 2 MiB-aligned block that the VMA covers entirely
 * (munmap of one page in the middle of a large mapping): the kernel's
 * vma_adjust_trans_huge() calls __split_huge_pmd(), which notifies CLEAR
 * over the whole block before it looks whether a huge page is mapped
 * there. With MADV_NOHUGEPAGE there never is one: the pages stay where
 * they are, yet every watch in the block fires (clipped to the block).
 * The module cannot tell this from a real split and must not try (a
 * missed one would be a stale registration). Found by the soak test.
 * Control: the same munmap in a mapping smaller than the block.
 */
static char *split_map(size_t len, char **block)
{
	char *raw = mmap(NULL, len + HUGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *p;

	if (raw == MAP_FAILED)
		return NULL;
	/* len bytes starting at a 2 MiB boundary, the rest unmapped. */
	p = (char *)(((uintptr_t)raw + HUGE - 1) & ~(HUGE - 1));
	if (p > raw)
		munmap(raw, p - raw);
	munmap(p + len, raw + len + HUGE - (p + len));
	if (madvise(p, len, MADV_NOHUGEPAGE))
		return NULL;
	memset(p, 0x3c, len);
	*block = p;
	return p;
}

static void split_run(struct __test_metadata *_metadata, size_t len,
		      bool fires)
{
	struct mwt m;
	struct mmuwatch_range r;
	char *blk;
	uint64_t pfn;

	ONLY_IF_SELECTED("global");
	MWT_OPEN_OR_SKIP(&m, 0, 0);
	ASSERT_NE(NULL, split_map(len, &blk));
	pfn = mwt_pfn(blk + 8 * P);
	ASSERT_EQ(0, mwt_watch(&m, blk + 8 * P, 4 * P, 0x5b1, &r));
	/* Unmap one page away from the watch, splitting the VMA. */
	ASSERT_EQ(0, munmap(blk + 100 * P, P));
	EXPECT_EQ(pfn, mwt_pfn(blk + 8 * P));
	EXPECT_EQ(0x3c, blk[8 * P]);
	if (fires) {
		EXPECT_TRUE(mwt_invalid(&m, &r));
		MWT_EXPECT_ONE_EVENT(&m, 0x5b1, blk + 8 * P, blk + 12 * P,
				     MMUWATCH_REASON_CLEAR);
	} else {
		EXPECT_TRUE(mwt_valid(&m, &r));
		MWT_EXPECT_NO_EVENT(&m);
	}
	munmap(blk, len);
	mwt_close(&m);
}

TEST(split_vma_over_whole_block_no_thp)
{
	split_run(_metadata, HUGE, true);
}

TEST(control_split_vma_smaller_than_block)
{
	split_run(_metadata, 128 * P, false);
}

/*
 * The same split, reached through a merge with a thread stack: since 6.7
 * MAP_STACK gives a VMA VM_NOHUGEPAGE, so an MADV_NOHUGEPAGE buffer just
 * above a stack gets the stack's flags and the two merge. A split of the
 * stack part inside the block that the buffer's first pages share with
 * it then notifies CLEAR over that block: the untouched buffer's watch
 * fires over those pages although none moved (what the soak test met on
 * 6.12). On 6.1 MAP_STACK sets no flag: no merge, nothing fires. Layout:
 * stack [B - 2 MiB, B + 2 MiB - 4 pages), buffer of 8 pages above it.
 */
static bool stack_gets_nohugepage(void)
{
	struct utsname u;
	int major, minor;

	return !uname(&u) && sscanf(u.release, "%d.%d", &major, &minor) == 2 &&
	       (major > 6 || (major == 6 && minor >= 7));
}

TEST(split_vma_merged_with_stack)
{
	struct mwt m;
	struct mmuwatch_range r;
	char *raw, *blk, *stk, *buf;
	uint64_t pfn;
	bool fires = stack_gets_nohugepage();

	ONLY_IF_SELECTED("global");
	MWT_OPEN_OR_SKIP(&m, 0, 0);
	/* A PROT_NONE reservation: its rest keeps foreign VMAs away. */
	raw = mmap(NULL, 5 * HUGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
		   -1, 0);
	ASSERT_NE(MAP_FAILED, raw);
	blk = (char *)(((uintptr_t)raw + 2 * HUGE - 1) & ~(HUGE - 1));
	stk = mmap(blk - HUGE, 2 * HUGE - 4 * P, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_FIXED, -1, 0);
	ASSERT_EQ(blk - HUGE, stk);
	memset(stk, 0x5c, 2 * HUGE - 4 * P);
	buf = mmap(blk + HUGE - 4 * P, 8 * P, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	ASSERT_EQ(blk + HUGE - 4 * P, buf);
	ASSERT_EQ(0, madvise(buf, 8 * P, MADV_NOHUGEPAGE));
	memset(buf, 0x3c, 8 * P);
	pfn = mwt_pfn(buf);
	ASSERT_EQ(0, mwt_watch(&m, buf, 8 * P, 0x5b2, &r));
	/* One page of the stack part, inside the block the watch starts in. */
	ASSERT_EQ(0, munmap(blk + 100 * P, P));
	EXPECT_EQ(pfn, mwt_pfn(buf));
	EXPECT_EQ(0x3c, buf[0]);
	if (fires) {
		EXPECT_TRUE(mwt_invalid(&m, &r));
		MWT_EXPECT_ONE_EVENT(&m, 0x5b2, buf, blk + HUGE,
				     MMUWATCH_REASON_CLEAR);
	} else {
		EXPECT_TRUE(mwt_valid(&m, &r));
		MWT_EXPECT_NO_EVENT(&m);
	}
	munmap(raw, 5 * HUGE);
	mwt_close(&m);
}

TEST_HARNESS_MAIN
