// SPDX-License-Identifier: GPL-2.0
/*
 * Validity word semantics: a watch covers the pages its byte range touches
 * (unaligned ranges round out to pages, events are in page units and
 * clipped to the watch), interior and neighbouring changes, duplicate and
 * nested watches, token generations, watching a hole.
 */
#include <sys/mman.h>
#include "kselftest_harness.h"
#include "mwt.h"

#define P mwt_page

FIXTURE(w) {
	struct mwt m;
	char *buf;	/* 8 pages */
};

FIXTURE_SETUP(w)
{
	MWT_OPEN_OR_SKIP(&self->m, 64, 64);
	self->buf = mwt_map(8);
	ASSERT_NE(NULL, self->buf);
}

FIXTURE_TEARDOWN(w)
{
	mwt_close(&self->m);
}

TEST_F(w, unaligned_inside_one_page)
{
	struct mmuwatch_range r;

	ASSERT_EQ(0, mwt_watch(&self->m, self->buf + 2 * P + 100, 10, 1, &r));
	/* Pages 1 and 3 are neighbours, not part of the watch. */
	ASSERT_EQ(0, madvise(self->buf + P, P, MADV_DONTNEED));
	ASSERT_EQ(0, madvise(self->buf + 3 * P, P, MADV_DONTNEED));
	ASSERT_TRUE(mwt_valid(&self->m, &r));
	MWT_EXPECT_NO_EVENT(&self->m);
	ASSERT_EQ(0, madvise(self->buf + 2 * P, P, MADV_DONTNEED));
	ASSERT_TRUE(mwt_invalid(&self->m, &r));
	MWT_EXPECT_ONE_EVENT(&self->m, 1, self->buf + 2 * P,
			     self->buf + 3 * P, MMUWATCH_REASON_CLEAR);
}

TEST_F(w, unaligned_across_page_boundary)
{
	struct mmuwatch_range r;

	/* 16 bytes around the start of page 4: pages 3 and 4. */
	ASSERT_EQ(0, mwt_watch(&self->m, self->buf + 4 * P - 8, 16, 2, &r));
	ASSERT_EQ(0, munmap(self->buf + 5 * P, P));
	ASSERT_EQ(0, munmap(self->buf + 2 * P, P));
	ASSERT_TRUE(mwt_valid(&self->m, &r));
	MWT_EXPECT_NO_EVENT(&self->m);
	ASSERT_EQ(0, munmap(self->buf + 4 * P, 4 * P));
	ASSERT_TRUE(mwt_invalid(&self->m, &r));
	MWT_EXPECT_ONE_EVENT(&self->m, 2, self->buf + 4 * P,
			     self->buf + 5 * P, MMUWATCH_REASON_UNMAP);
}

TEST_F(w, last_byte_of_page)
{
	struct mmuwatch_range r;

	/* One byte: the last one of page 0. */
	ASSERT_EQ(0, mwt_watch(&self->m, self->buf + P - 1, 1, 3, &r));
	ASSERT_EQ(0, munmap(self->buf + P, P));
	ASSERT_TRUE(mwt_valid(&self->m, &r));
	ASSERT_EQ(0, munmap(self->buf, P));
	MWT_EXPECT_ONE_EVENT(&self->m, 3, self->buf, self->buf + P,
			     MMUWATCH_REASON_UNMAP);
}

TEST_F(w, duplicate_watches_both_fire)
{
	struct mmuwatch_range a, b;
	struct mmuwatch_event e1, e2;

	ASSERT_EQ(0, mwt_watch(&self->m, self->buf, P, 10, &a));
	ASSERT_EQ(0, mwt_watch(&self->m, self->buf, P, 11, &b));
	ASSERT_NE(a.slot, b.slot);
	ASSERT_EQ(0, munmap(self->buf, P));
	ASSERT_TRUE(mwt_invalid(&self->m, &a));
	ASSERT_TRUE(mwt_invalid(&self->m, &b));
	ASSERT_EQ(2U, mwt_pending(&self->m));
	ASSERT_EQ(1, mwt_pop(&self->m, &e1));
	ASSERT_EQ(1, mwt_pop(&self->m, &e2));
	ASSERT_EQ(21U, e1.cookie + e2.cookie);
	ASSERT_NE(e1.cookie, e2.cookie);
}

TEST_F(w, nested_watches)
{
	struct mmuwatch_range big, small;

	ASSERT_EQ(0, mwt_watch(&self->m, self->buf, 8 * P, 20, &big));
	ASSERT_EQ(0, mwt_watch(&self->m, self->buf + 3 * P, P, 21, &small));
	ASSERT_EQ(0, madvise(self->buf + 5 * P, P, MADV_DONTNEED));
	ASSERT_TRUE(mwt_invalid(&self->m, &big));
	ASSERT_TRUE(mwt_valid(&self->m, &small));
	MWT_EXPECT_ONE_EVENT(&self->m, 20, self->buf + 5 * P,
			     self->buf + 6 * P, MMUWATCH_REASON_CLEAR);
	/* One-shot: the big watch does not fire again, the small one does. */
	ASSERT_EQ(0, madvise(self->buf + 2 * P, 2 * P, MADV_DONTNEED));
	ASSERT_TRUE(mwt_invalid(&self->m, &small));
	MWT_EXPECT_ONE_EVENT(&self->m, 21, self->buf + 3 * P,
			     self->buf + 4 * P, MMUWATCH_REASON_CLEAR);
}

TEST_F(w, token_generations)
{
	struct mmuwatch_range r1, r2;

	ASSERT_EQ(0, mwt_watch(&self->m, self->buf, P, 30, &r1));
	ASSERT_EQ(0U, r1.token & MMUWATCH_WORD_INVALID);
	ASSERT_NE(0U, r1.token);
	ASSERT_EQ(r1.token, self->m.words[r1.slot]);
	ASSERT_EQ(0, mwt_unwatch(&self->m, &r1));
	/* Unwatch leaves the word saying "not valid" for stale readers. */
	ASSERT_EQ(r1.token | MMUWATCH_WORD_INVALID, self->m.words[r1.slot]);
	/* The freed slot comes back with a later generation. */
	ASSERT_EQ(0, mwt_watch(&self->m, self->buf, P, 31, &r2));
	ASSERT_EQ(r1.slot, r2.slot);
	ASSERT_EQ(r1.token + 2, r2.token);
	ASSERT_FALSE(mwt_valid(&self->m, &r1));
	ASSERT_TRUE(mwt_valid(&self->m, &r2));
	/* Words of other slots are untouched. */
	ASSERT_EQ(0U, self->m.words[r2.slot + 1]);
}

TEST_F(w, watch_a_hole)
{
	struct mmuwatch_range r;
	char *hole = mwt_hole(2), *p;

	ASSERT_NE(NULL, hole);
	/* A range with nothing mapped can be watched; mapping it is not an
	 * invalidation, unmapping what was mapped there is.
	 */
	ASSERT_EQ(0, mwt_watch(&self->m, hole, 2 * P, 40, &r));
	p = mmap(hole, 2 * P, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	ASSERT_EQ(hole, p);
	memset(p, 1, 2 * P);
	ASSERT_TRUE(mwt_valid(&self->m, &r));
	MWT_EXPECT_NO_EVENT(&self->m);
	ASSERT_EQ(0, munmap(p, 2 * P));
	MWT_EXPECT_ONE_EVENT(&self->m, 40, hole, hole + 2 * P,
			     MMUWATCH_REASON_UNMAP);
}

TEST_F(w, many_watches_exact_words)
{
	struct mmuwatch_range r[64];
	int i;

	/* 64 one-page watches over 8 pages; kill pages 1, 4 and 6. */
	for (i = 0; i < 64; i++)
		ASSERT_EQ(0, mwt_watch(&self->m, self->buf + (i % 8) * P, P,
				       i, &r[i]));
	ASSERT_EQ(0, madvise(self->buf + P, P, MADV_DONTNEED));
	ASSERT_EQ(0, munmap(self->buf + 4 * P, P));
	ASSERT_EQ(0, mprotect(self->buf + 6 * P, P, PROT_READ));
	for (i = 0; i < 64; i++) {
		bool dead = (i % 8) == 1 || (i % 8) == 4;

		ASSERT_EQ(dead, mwt_invalid(&self->m, &r[i]));
		ASSERT_EQ(!dead, mwt_valid(&self->m, &r[i]));
	}
	ASSERT_EQ(16U, mwt_pending(&self->m));
}

TEST_HARNESS_MAIN
