// SPDX-License-Identifier: GPL-2.0
/*
 * WATCH_BATCH and UNWATCH_BATCH: a batch is done element by element and
 * stops at the first bad element, 'done' says how many took effect; every
 * watched element gets its own slot, token and valid word; an unwatched
 * batch queues nothing when its memory goes; a whole batch fires one event
 * per element, each with its own cookie, slot and range. Bad batch headers
 * (count 0, flags, reserved, size, pointers) are in badinput_test.
 */
#include <sys/ioctl.h>
#include <sys/mman.h>
#include "kselftest_harness.h"
#include "mwt.h"

#define P mwt_page
#define N 8

FIXTURE(batch) {
	struct mwt m;
	char *buf;	/* N pages */
	struct mmuwatch_range r[N];	/* one page each, cookie 400 + i */
	long long act0;
};

FIXTURE_SETUP(batch)
{
	int i;

	MWT_OPEN_OR_SKIP(&self->m, 64, 64);
	self->buf = mwt_map(N);
	ASSERT_NE(NULL, self->buf);
	for (i = 0; i < N; i++)
		self->r[i] = (struct mmuwatch_range){
			.start = (uintptr_t)(self->buf + i * P),
			.len = P,
			.cookie = 400 + i };
	self->act0 = mwt_counter("watches_active");
}

FIXTURE_TEARDOWN(batch)
{
	mwt_close(&self->m);
}

/* One batch ioctl; 0 or -errno, and how many elements took effect. */
static int batch(struct mwt *m, unsigned long cmd, void *elems,
		 uint32_t count, uint32_t *done)
{
	struct mmuwatch_batch b = { .ptr = (uintptr_t)elems, .count = count };
	int ret = ioctl(m->fd, cmd, &b) ? -errno : 0;

	*done = b.done;
	return ret;
}

/* Element 5 has length 0: the five before it are watched, none after. */
TEST_F(batch, watch_stops_at_bad_element)
{
	uint32_t done = 99;
	int i;

	self->r[5].len = 0;
	EXPECT_EQ(-EINVAL, batch(&self->m, MMUWATCH_IOC_WATCH_BATCH, self->r,
				 N, &done));
	EXPECT_EQ(5U, done);
	for (i = 0; i < 5; i++)
		EXPECT_TRUE(mwt_valid(&self->m, &self->r[i]));
	EXPECT_EQ(self->act0 + 5, mwt_counter("watches_active"));
	/* The pages from the bad element on are not watched. */
	ASSERT_EQ(0, munmap(self->buf + 5 * P, 3 * P));
	MWT_EXPECT_NO_EVENT(&self->m);
}

TEST_F(batch, unwatch_batch)
{
	struct mmuwatch_unwatch u[5];
	uint32_t done = 0;
	int i;

	ASSERT_EQ(0, batch(&self->m, MMUWATCH_IOC_WATCH_BATCH, self->r, 5,
			   &done));
	ASSERT_EQ(5U, done);
	for (i = 0; i < 5; i++)
		u[i] = (struct mmuwatch_unwatch){ .slot = self->r[i].slot,
						  .token = self->r[i].token };
	EXPECT_EQ(0, batch(&self->m, MMUWATCH_IOC_UNWATCH_BATCH, u, 5, &done));
	EXPECT_EQ(5U, done);
	for (i = 0; i < 5; i++)
		EXPECT_EQ(self->r[i].token | MMUWATCH_WORD_INVALID,
			  self->m.words[self->r[i].slot]);
	EXPECT_EQ(self->act0, mwt_counter("watches_active"));
	/* Control: their munmap queues nothing, a watched neighbour's does. */
	ASSERT_EQ(0, mwt_watch(&self->m, self->buf + 5 * P, P, 405,
			       &self->r[5]));
	ASSERT_EQ(0, munmap(self->buf, 6 * P));
	MWT_EXPECT_ONE_EVENT(&self->m, 405, self->buf + 5 * P,
			     self->buf + 6 * P, MMUWATCH_REASON_UNMAP);
}

TEST_F(batch, whole_batch_fires)
{
	bool slot_used[64] = { false };
	struct mmuwatch_event e;
	uint32_t done = 0;
	int i;

	ASSERT_EQ(0, batch(&self->m, MMUWATCH_IOC_WATCH_BATCH, self->r, N,
			   &done));
	ASSERT_EQ((uint32_t)N, done);
	for (i = 0; i < N; i++) {
		ASSERT_TRUE(mwt_valid(&self->m, &self->r[i]));
		ASSERT_FALSE(slot_used[self->r[i].slot]);
		slot_used[self->r[i].slot] = true;
	}
	ASSERT_EQ(0, munmap(self->buf, N * P));
	for (i = 0; i < N; i++)
		ASSERT_TRUE(mwt_invalid(&self->m, &self->r[i]));
	/* One event each, in address order: the notifier walks its interval
	 * tree by start (ring_test's read_nonblocking relies on it too).
	 */
	ASSERT_EQ((uint32_t)N, mwt_pending(&self->m));
	for (i = 0; i < N; i++) {
		ASSERT_EQ(1, mwt_pop(&self->m, &e));
		EXPECT_EQ(400U + i, e.cookie);
		EXPECT_EQ(self->r[i].slot, e.slot);
		EXPECT_EQ(self->r[i].start, e.start);
		EXPECT_EQ(self->r[i].start + P, e.end);
		EXPECT_EQ((__u32)MMUWATCH_REASON_UNMAP, e.reason);
	}
	MWT_EXPECT_NO_EVENT(&self->m);
}

TEST_HARNESS_MAIN
