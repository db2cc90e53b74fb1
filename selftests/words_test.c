// SPDX-License-Identifier: GPL-2.0
/*
 * Validity word semantics: a watch covers the pages its byte range touches
 * (unaligned ranges round out to pages, events are in page units and
 * clipped to the watch), interior and neighbouring changes, duplicate and
 * nested watches, token generations, watching a hole, and an old token
 * that never matches again once its slot is unwatched or reaped.
 */
#include <sys/mman.h>
#include <unistd.h>
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
	struct mmuwatch_range r[24];
	int i;

	/* 24 one-page watches over 8 pages (3 deep, the default
	 * max_watch_depth); kill pages 1, 4 and 6.
	 */
	for (i = 0; i < 24; i++)
		ASSERT_EQ(0, mwt_watch(&self->m, self->buf + (i % 8) * P, P,
				       i, &r[i]));
	ASSERT_EQ(0, madvise(self->buf + P, P, MADV_DONTNEED));
	ASSERT_EQ(0, munmap(self->buf + 4 * P, P));
	ASSERT_EQ(0, mprotect(self->buf + 6 * P, P, PROT_READ));
	for (i = 0; i < 24; i++) {
		bool dead = (i % 8) == 1 || (i % 8) == 4;

		ASSERT_EQ(dead, mwt_invalid(&self->m, &r[i]));
		ASSERT_EQ(!dead, mwt_valid(&self->m, &r[i]));
	}
	ASSERT_EQ(6U, mwt_pending(&self->m));
}

/*
 * Unwatch, then a new watch at once (the sequence mmuwatch-smoke checked,
 * with the meaning commit 630ead4 gave it): the new watch may or may not get the old slot back, the slot
 * allocator decides; either way the old token never matches again,
 * UNWATCH with it is ENOENT and leaves the new watch alone, and the new
 * watch fires on its own munmap. Control: the unwatched range's munmap
 * queues nothing, the new one's queues its event.
 */
TEST_F(w, old_token_dead_after_unwatch)
{
	struct mmuwatch_range r, r2;

	ASSERT_EQ(0, mwt_watch(&self->m, self->buf, 2 * P, 301, &r));
	ASSERT_EQ(0, mwt_unwatch(&self->m, &r));
	ASSERT_EQ(r.token | MMUWATCH_WORD_INVALID, self->m.words[r.slot]);
	ASSERT_EQ(-ENOENT, mwt_unwatch(&self->m, &r));
	ASSERT_EQ(0, munmap(self->buf, P));
	MWT_EXPECT_NO_EVENT(&self->m);
	ASSERT_EQ(0, mwt_watch(&self->m, self->buf + P, P, 302, &r2));
	TH_LOG("slot %u %s: token %#llx, new watch slot %u token %#llx",
	       r.slot, r2.slot == r.slot ? "reused" : "not reused",
	       (unsigned long long)r.token, r2.slot,
	       (unsigned long long)r2.token);
	ASSERT_TRUE(mwt_valid(&self->m, &r2));
	ASSERT_NE(r.token, self->m.words[r.slot]);
	ASSERT_TRUE(r2.slot != r.slot || r2.token != r.token);
	ASSERT_EQ(-ENOENT, mwt_unwatch(&self->m, &r));
	ASSERT_TRUE(mwt_valid(&self->m, &r2));
	ASSERT_EQ(0, munmap(self->buf + P, P));
	ASSERT_TRUE(mwt_invalid(&self->m, &r2));
	MWT_EXPECT_ONE_EVENT(&self->m, 302, self->buf + P, self->buf + 2 * P,
			     MMUWATCH_REASON_UNMAP);
}

/*
 * A slot whose watch died by invalidation is free again at once (the
 * callback that killed it took it out): in a one-word context the next
 * WATCH gets it, with no wait. The new generation's token differs; the old one
 * matches neither "valid" nor "this watch invalidated" any more, and
 * UNWATCH with it is ENOENT and leaves the new watch alone. Control: while
 * the first watch lives, the table is full.
 */
TEST(old_token_dead_after_reap)
{
	struct mmuwatch_range r1, r2;
	struct mwt m;
	char *buf;

	MWT_OPEN_OR_SKIP(&m, 16, 1);
	buf = mwt_map(2);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, mwt_watch(&m, buf, P, 1, &r1));
	ASSERT_EQ(-ENOSPC, mwt_watch(&m, buf + P, P, 2, &r2));
	ASSERT_EQ(0, munmap(buf, P));
	ASSERT_TRUE(mwt_invalid(&m, &r1));
	MWT_EXPECT_ONE_EVENT(&m, 1, buf, buf + P, MMUWATCH_REASON_UNMAP);
	ASSERT_EQ(0, mwt_watch(&m, buf + P, P, 2, &r2));
	ASSERT_EQ(r1.slot, r2.slot);
	ASSERT_NE(r1.token, r2.token);
	ASSERT_TRUE(mwt_valid(&m, &r2));
	ASSERT_FALSE(mwt_valid(&m, &r1));
	ASSERT_FALSE(mwt_invalid(&m, &r1));
	ASSERT_EQ(-ENOENT, mwt_unwatch(&m, &r1));
	ASSERT_TRUE(mwt_valid(&m, &r2));
	ASSERT_EQ(0, munmap(buf + P, P));
	ASSERT_TRUE(mwt_invalid(&m, &r2));
	MWT_EXPECT_ONE_EVENT(&m, 2, buf + P, buf + 2 * P,
			     MMUWATCH_REASON_UNMAP);
	mwt_close(&m);
}

TEST_HARNESS_MAIN
