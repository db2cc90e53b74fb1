// SPDX-License-Identifier: GPL-2.0
/*
 * Unmapping a watched range in every way the address space can lose it:
 * munmap (whole, partial, spanning), raw syscall, MAP_FIXED over it,
 * mremap (move, shrink, MREMAP_FIXED), brk shrink. Each must flip the word
 * before the syscall returns and queue exactly one event with the cookie,
 * the invalidated part of the watch and reason UNMAP. Controls: changes
 * next to a watch must leave it alone.
 */
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mwt.h"

#define P mwt_page

FIXTURE(unmap) {
	struct mwt m;
	char *buf;	/* 8 pages */
	struct mmuwatch_range r;
};

FIXTURE_SETUP(unmap)
{
	MWT_OPEN_OR_SKIP(&self->m, 0, 0);
	self->buf = mwt_map(8);
	ASSERT_NE(NULL, self->buf);
	ASSERT_EQ(0, mwt_watch(&self->m, self->buf + 2 * P, 4 * P, 0xc0ffee,
			       &self->r));
	ASSERT_TRUE(mwt_valid(&self->m, &self->r));
	MWT_EXPECT_NO_EVENT(&self->m);
}

FIXTURE_TEARDOWN(unmap)
{
	mwt_close(&self->m);
}

TEST_F(unmap, munmap_whole)
{
	ASSERT_EQ(0, munmap(self->buf + 2 * P, 4 * P));
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	MWT_EXPECT_ONE_EVENT(&self->m, 0xc0ffee, self->buf + 2 * P,
			     self->buf + 6 * P, MMUWATCH_REASON_UNMAP);
}

TEST_F(unmap, munmap_partial_middle)
{
	ASSERT_EQ(0, munmap(self->buf + 3 * P, P));
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	MWT_EXPECT_ONE_EVENT(&self->m, 0xc0ffee, self->buf + 3 * P,
			     self->buf + 4 * P, MMUWATCH_REASON_UNMAP);
}

TEST_F(unmap, munmap_overlapping_start)
{
	/* Unmap pages 0..3: the event is clipped to the watch. */
	ASSERT_EQ(0, munmap(self->buf, 4 * P));
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	MWT_EXPECT_ONE_EVENT(&self->m, 0xc0ffee, self->buf + 2 * P,
			     self->buf + 4 * P, MMUWATCH_REASON_UNMAP);
}

TEST_F(unmap, control_neighbour_munmap)
{
	/* Pages 0-1 and 6-7 surround the watch: it must stay valid. */
	ASSERT_EQ(0, munmap(self->buf, 2 * P));
	ASSERT_EQ(0, munmap(self->buf + 6 * P, 2 * P));
	ASSERT_TRUE(mwt_valid(&self->m, &self->r));
	MWT_EXPECT_NO_EVENT(&self->m);
	/* And the same watch does fire when its own memory goes. */
	ASSERT_EQ(0, munmap(self->buf + 5 * P, P));
	MWT_EXPECT_ONE_EVENT(&self->m, 0xc0ffee, self->buf + 5 * P,
			     self->buf + 6 * P, MMUWATCH_REASON_UNMAP);
}

TEST_F(unmap, raw_syscall_munmap)
{
	ASSERT_EQ(0, syscall(SYS_munmap, self->buf + 2 * P, 4 * P));
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	MWT_EXPECT_ONE_EVENT(&self->m, 0xc0ffee, self->buf + 2 * P,
			     self->buf + 6 * P, MMUWATCH_REASON_UNMAP);
}

TEST_F(unmap, map_fixed_over)
{
	char *p = mmap(self->buf + 4 * P, P, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);

	ASSERT_EQ(self->buf + 4 * P, p);
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	MWT_EXPECT_ONE_EVENT(&self->m, 0xc0ffee, self->buf + 4 * P,
			     self->buf + 5 * P, MMUWATCH_REASON_UNMAP);
}

TEST_F(unmap, mremap_move)
{
	char *dst = mwt_hole(4);
	char *p;

	ASSERT_NE(NULL, dst);
	p = mremap(self->buf + 2 * P, 4 * P, 4 * P,
		   MREMAP_MAYMOVE | MREMAP_FIXED, dst);
	ASSERT_EQ(dst, p);
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	MWT_EXPECT_ONE_EVENT(&self->m, 0xc0ffee, self->buf + 2 * P,
			     self->buf + 6 * P, MMUWATCH_REASON_UNMAP);
}

TEST_F(unmap, mremap_maymove_grow)
{
	/* Growing the 8-page mapping while a mapping blocks its end forces
	 * a move: the old pages go, the watch must fire for all of it.
	 */
	char *blk = mmap(self->buf + 8 * P, P, PROT_READ,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			 -1, 0);
	char *p;

	/* EEXIST: something already blocks it, which is just as good. */
	if (blk == MAP_FAILED)
		ASSERT_EQ(EEXIST, errno);
	p = mremap(self->buf, 8 * P, 64 * P, MREMAP_MAYMOVE);
	ASSERT_NE(MAP_FAILED, p);
	ASSERT_NE(self->buf, p);
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	MWT_EXPECT_ONE_EVENT(&self->m, 0xc0ffee, self->buf + 2 * P,
			     self->buf + 6 * P, MMUWATCH_REASON_UNMAP);
}

TEST_F(unmap, mremap_shrink)
{
	/* Shrink the 8-page mapping to 3 pages: watched pages 3..5 go. */
	char *p = mremap(self->buf, 8 * P, 3 * P, 0);

	ASSERT_EQ(self->buf, p);
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	MWT_EXPECT_ONE_EVENT(&self->m, 0xc0ffee, self->buf + 3 * P,
			     self->buf + 6 * P, MMUWATCH_REASON_UNMAP);
}

TEST_F(unmap, mremap_fixed_onto_watch)
{
	/* Another mapping moved on top of the watched pages replaces them. */
	char *src = mwt_map(2);
	char *p;

	ASSERT_NE(NULL, src);
	p = mremap(src, 2 * P, 2 * P, MREMAP_MAYMOVE | MREMAP_FIXED,
		   self->buf + 3 * P);
	ASSERT_EQ(self->buf + 3 * P, p);
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	MWT_EXPECT_ONE_EVENT(&self->m, 0xc0ffee, self->buf + 3 * P,
			     self->buf + 5 * P, MMUWATCH_REASON_UNMAP);
}

TEST_F(unmap, control_mremap_grow_in_place)
{
	/* Growing in place keeps every watched page: no event. */
	char *p;

	ASSERT_EQ(0, munmap(self->buf + 6 * P, 2 * P));
	p = mremap(self->buf, 6 * P, 8 * P, 0);
	ASSERT_EQ(self->buf, p);
	ASSERT_TRUE(mwt_valid(&self->m, &self->r));
	MWT_EXPECT_NO_EVENT(&self->m);
}

TEST(munmap_spanning_watches)
{
	struct mmuwatch_range r[3], outside;
	struct mmuwatch_event e;
	struct mwt m;
	char *buf;
	int i;

	MWT_OPEN_OR_SKIP(&m, 0, 0);
	buf = mwt_map(10);
	ASSERT_NE(NULL, buf);
	/* Watches on pages 1-2, 3-5, 6 and one on page 8 (left alone). */
	ASSERT_EQ(0, mwt_watch(&m, buf + 1 * P, 2 * P, 100, &r[0]));
	ASSERT_EQ(0, mwt_watch(&m, buf + 3 * P, 3 * P, 101, &r[1]));
	ASSERT_EQ(0, mwt_watch(&m, buf + 6 * P, 1 * P, 102, &r[2]));
	ASSERT_EQ(0, mwt_watch(&m, buf + 8 * P, 1 * P, 103, &outside));
	/* Unmap pages 2..6: clips the first watch, covers the others. */
	ASSERT_EQ(0, munmap(buf + 2 * P, 5 * P));
	for (i = 0; i < 3; i++)
		ASSERT_TRUE(mwt_invalid(&m, &r[i]));
	ASSERT_TRUE(mwt_valid(&m, &outside));
	ASSERT_EQ(3U, mwt_pending(&m));
	/* One event each; order follows the interval tree, so match by cookie. */
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(1, mwt_pop(&m, &e));
		ASSERT_GE(e.cookie, 100U);
		ASSERT_LE(e.cookie, 102U);
		switch (e.cookie) {
		case 100:
			EXPECT_EQ((uintptr_t)(buf + 2 * P), e.start);
			EXPECT_EQ((uintptr_t)(buf + 3 * P), e.end);
			break;
		case 101:
			EXPECT_EQ((uintptr_t)(buf + 3 * P), e.start);
			EXPECT_EQ((uintptr_t)(buf + 6 * P), e.end);
			break;
		case 102:
			EXPECT_EQ((uintptr_t)(buf + 6 * P), e.start);
			EXPECT_EQ((uintptr_t)(buf + 7 * P), e.end);
			break;
		}
		EXPECT_EQ(r[e.cookie - 100].slot, e.slot);
		EXPECT_EQ((__u32)MMUWATCH_REASON_UNMAP, e.reason);
	}
	MWT_EXPECT_NO_EVENT(&m);
	mwt_close(&m);
}

TEST(brk_shrink)
{
	struct mmuwatch_range r;
	struct mwt m;
	char *cur, *base;

	MWT_OPEN_OR_SKIP(&m, 0, 0);
	cur = sbrk(0);
	base = (char *)(((uintptr_t)cur + P - 1) & ~(uintptr_t)(P - 1));
	ASSERT_EQ(0, brk(base + 4 * P));
	memset(base, 1, 4 * P);
	ASSERT_EQ(0, mwt_watch(&m, base, 4 * P, 77, &r));
	ASSERT_TRUE(mwt_valid(&m, &r));
	MWT_EXPECT_NO_EVENT(&m);
	/* Shrink by two pages: the upper half of the watch goes. */
	ASSERT_EQ(0, brk(base + 2 * P));
	ASSERT_TRUE(mwt_invalid(&m, &r));
	MWT_EXPECT_ONE_EVENT(&m, 77, base + 2 * P, base + 4 * P,
			     MMUWATCH_REASON_UNMAP);
	mwt_close(&m);
}

TEST_HARNESS_MAIN
