// SPDX-License-Identifier: GPL-2.0
/*
 * madvise on a watched range: DONTNEED, FREE, REMOVE drop the pages and
 * must fire exactly one CLEAR event for the advised part of the watch;
 * the same through io_uring (IORING_OP_MADVISE runs in an io-wq worker, not
 * in the calling task). Control: WILLNEED/NORMAL change nothing.
 */
#include <liburing.h>
#include <sys/mman.h>
#include "kselftest_harness.h"
#include "mwt.h"

#define P mwt_page

static void *shared_anon(size_t pages)
{
	char *p = mmap(NULL, pages * P, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memset(p, 0x33, pages * P);
	return p;
}

FIXTURE(adv) {
	struct mwt m;
	char *buf;
	struct mmuwatch_range r;
};

FIXTURE_VARIANT(adv) {
	bool shared;
};

FIXTURE_VARIANT_ADD(adv, private) { .shared = false };
FIXTURE_VARIANT_ADD(adv, shared) { .shared = true };

FIXTURE_SETUP(adv)
{
	MWT_OPEN_OR_SKIP(&self->m, 0, 0);
	self->buf = variant->shared ? shared_anon(6) : mwt_map(6);
	ASSERT_NE(NULL, self->buf);
	/* Watch pages 1..4. */
	ASSERT_EQ(0, mwt_watch(&self->m, self->buf + P, 4 * P, 0xad71ce,
			       &self->r));
	ASSERT_TRUE(mwt_valid(&self->m, &self->r));
}

FIXTURE_TEARDOWN(adv)
{
	mwt_close(&self->m);
}

TEST_F(adv, dontneed)
{
	ASSERT_EQ(0, madvise(self->buf + 2 * P, 2 * P, MADV_DONTNEED));
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	MWT_EXPECT_ONE_EVENT(&self->m, 0xad71ce, self->buf + 2 * P,
			     self->buf + 4 * P, MMUWATCH_REASON_CLEAR);
}

TEST_F(adv, free)
{
	if (variant->shared) {
		/* MADV_FREE is for private anonymous memory only. */
		ASSERT_EQ(-1, madvise(self->buf + P, P, MADV_FREE));
		ASSERT_EQ(EINVAL, errno);
		ASSERT_TRUE(mwt_valid(&self->m, &self->r));
		MWT_EXPECT_NO_EVENT(&self->m);
		return;
	}
	ASSERT_EQ(0, madvise(self->buf, 6 * P, MADV_FREE));
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	MWT_EXPECT_ONE_EVENT(&self->m, 0xad71ce, self->buf + P,
			     self->buf + 5 * P, MMUWATCH_REASON_CLEAR);
}

TEST_F(adv, remove)
{
	if (!variant->shared) {
		/* MADV_REMOVE needs a shared mapping: refused, no event. */
		ASSERT_EQ(-1, madvise(self->buf + P, P, MADV_REMOVE));
		ASSERT_TRUE(mwt_valid(&self->m, &self->r));
		MWT_EXPECT_NO_EVENT(&self->m);
		return;
	}
	ASSERT_EQ(0, madvise(self->buf + 4 * P, P, MADV_REMOVE));
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	MWT_EXPECT_ONE_EVENT(&self->m, 0xad71ce, self->buf + 4 * P,
			     self->buf + 5 * P, MMUWATCH_REASON_CLEAR);
}

TEST_F(adv, control_willneed_normal)
{
	ASSERT_EQ(0, madvise(self->buf, 6 * P, MADV_WILLNEED));
	ASSERT_EQ(0, madvise(self->buf, 6 * P, MADV_NORMAL));
	ASSERT_TRUE(mwt_valid(&self->m, &self->r));
	MWT_EXPECT_NO_EVENT(&self->m);
	/* Outside the watch: page 0 and page 5. */
	ASSERT_EQ(0, madvise(self->buf, P, MADV_DONTNEED));
	ASSERT_EQ(0, madvise(self->buf + 5 * P, P, MADV_DONTNEED));
	ASSERT_TRUE(mwt_valid(&self->m, &self->r));
	MWT_EXPECT_NO_EVENT(&self->m);
}

TEST_F(adv, io_uring_madvise)
{
	struct io_uring ring;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	int ret;

	ret = io_uring_queue_init(4, &ring, 0);
	if (ret == -ENOSYS)
		SKIP(return, "io_uring not built in");
	ASSERT_EQ(0, ret);
	sqe = io_uring_get_sqe(&ring);
	ASSERT_NE(NULL, sqe);
	io_uring_prep_madvise(sqe, self->buf + P, 3 * P, MADV_DONTNEED);
	sqe->user_data = 42;
	ASSERT_EQ(1, io_uring_submit(&ring));
	ASSERT_EQ(0, io_uring_wait_cqe(&ring, &cqe));
	ASSERT_EQ(42U, cqe->user_data);
	ASSERT_EQ(0, cqe->res);
	io_uring_cqe_seen(&ring, cqe);
	/* Completion posted: the word must already say "changed". */
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	MWT_EXPECT_ONE_EVENT(&self->m, 0xad71ce, self->buf + P,
			     self->buf + 4 * P, MMUWATCH_REASON_CLEAR);
	io_uring_queue_exit(&ring);
}

TEST_HARNESS_MAIN
