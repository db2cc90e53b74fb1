// SPDX-License-Identifier: GPL-2.0
/*
 * What one user's watches can make others pay (kmod/watch.c, user.c): an
 * invalidation of a page costs one callback per context on that mm plus
 * the one-shot watches covering the page. max_watch_depth bounds the
 * latter per context (WATCH: ENOSPC, limit_hits_depth) and
 * max_mm_contexts the contexts of one user on one mm (open: EMFILE,
 * limit_hits_mm_contexts). Each refusal has its control: the same request
 * one step short of the limit, or after the limit moved, is accepted.
 */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "kselftest_harness.h"
#include "mwt.h"

#define P      mwt_page
#define NOBODY 65534

static const char *const names[] = {"max_watch_depth", "max_mm_contexts",
				    "root_exempt", "max_watches"};
#define NPARAMS 4

FIXTURE(depth)
{
	long long saved[NPARAMS];
	mode_t mode;
	struct mwt m;
	char *buf;
};

FIXTURE_SETUP(depth)
{
	struct stat st;
	int i;

	if (geteuid() || !mwt_module_loaded()) {
		if (getenv("MWT_REQUIRE_DEVICE"))
			ASSERT_TRUE(!geteuid() && mwt_module_loaded());
		SKIP(_exit(255), "needs root and the module");
	}
	for (i = 0; i < NPARAMS; i++) {
		self->saved[i] = mwt_param(names[i]);
		ASSERT_LE(0, self->saved[i]);
	}
	ASSERT_EQ(0, mwt_set_param("root_exempt", 0));
	ASSERT_EQ(0, stat(MMUWATCH_DEVICE, &st));
	self->mode = st.st_mode & 07777;
	ASSERT_EQ(0, chmod(MMUWATCH_DEVICE, 0666));
	self->buf = mwt_map(8);
	ASSERT_NE(NULL, self->buf);
}

FIXTURE_TEARDOWN(depth)
{
	int i;

	for (i = 0; i < NPARAMS; i++)
		if (self->saved[i] >= 0)
			mwt_set_param(names[i], self->saved[i]);
	chmod(MMUWATCH_DEVICE, self->mode);
}

static int w(struct mwt *m, char *buf, long first, long npages)
{
	struct mmuwatch_range r;

	return mwt_watch(m, buf + first * P, npages * P, first, &r);
}

/* The defaults an administrator gets, as README "Limits" states them. */
TEST_F(depth, defaults)
{
	EXPECT_EQ(3, self->saved[0]);
	EXPECT_EQ(2, self->saved[1]);
}

/* The same page: exactly max_watch_depth watches, then ENOSPC. */
TEST_F(depth, same_page)
{
	long long hits = mwt_counter("limit_hits_depth");
	int i;

	ASSERT_EQ(0, mwt_set_param("max_watch_depth", 3));
	MWT_OPEN_OR_SKIP(&self->m, 0, 0);
	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, w(&self->m, self->buf, 0, 1));
	EXPECT_EQ(-ENOSPC, w(&self->m, self->buf, 0, 1));
	EXPECT_EQ(hits + 1, mwt_counter("limit_hits_depth"));
	/* Control: the next page is free, and a raised limit takes one. */
	EXPECT_EQ(0, w(&self->m, self->buf, 1, 1));
	ASSERT_EQ(0, mwt_set_param("max_watch_depth", 4));
	EXPECT_EQ(0, w(&self->m, self->buf, 0, 1));
	EXPECT_EQ(-ENOSPC, w(&self->m, self->buf, 0, 2));
	mwt_close(&self->m);
}

/*
 * Nested ranges whose ends never meet: the depth peaks inside, where no
 * endpoint of the new range lies; a check at the ends would miss it.
 */
TEST_F(depth, peak_inside)
{
	ASSERT_EQ(0, mwt_set_param("max_watch_depth", 2));
	MWT_OPEN_OR_SKIP(&self->m, 0, 0);
	ASSERT_EQ(0, w(&self->m, self->buf, 3, 1));	/* [3,4) */
	ASSERT_EQ(0, w(&self->m, self->buf, 2, 3));	/* [2,5): 2 at page 3 */
	EXPECT_EQ(-ENOSPC, w(&self->m, self->buf, 1, 5));	/* 3 at page 3 */
	/* Control: beside the peak, depth 2 is allowed. */
	EXPECT_EQ(0, w(&self->m, self->buf, 1, 2));	/* [1,3): 2 at page 2 */
	EXPECT_EQ(0, w(&self->m, self->buf, 5, 2));	/* [5,7): 1 */
	EXPECT_EQ(-ENOSPC, w(&self->m, self->buf, 2, 1));
	mwt_close(&self->m);
}

/* A watch that dies (or is unwatched) stops counting at once. */
TEST_F(depth, death_frees_depth)
{
	struct mmuwatch_range r;

	ASSERT_EQ(0, mwt_set_param("max_watch_depth", 1));
	MWT_OPEN_OR_SKIP(&self->m, 0, 0);
	ASSERT_EQ(0, mwt_watch(&self->m, self->buf, P, 1, &r));
	EXPECT_EQ(-ENOSPC, w(&self->m, self->buf, 0, 1));
	ASSERT_EQ(0, madvise(self->buf, P, MADV_DONTNEED));
	ASSERT_TRUE(mwt_invalid(&self->m, &r));
	/* No reaper to wait for: the slot and the depth are free now. */
	ASSERT_EQ(0, mwt_watch(&self->m, self->buf, P, 2, &r));
	ASSERT_EQ(0, mwt_unwatch(&self->m, &r));
	EXPECT_EQ(0, w(&self->m, self->buf, 0, 1));
	mwt_close(&self->m);
}

/* A one-slot table: watch, kill, watch again, with no wait in between. */
TEST_F(depth, slot_free_after_kill)
{
	struct mmuwatch_range r;
	int i;

	MWT_OPEN_OR_SKIP(&self->m, 0, 1);
	for (i = 0; i < 100; i++) {
		ASSERT_EQ(0, mwt_watch(&self->m, self->buf, P, i, &r));
		/* Control: the table is full. */
		ASSERT_EQ(-ENOSPC, w(&self->m, self->buf, 1, 1));
		ASSERT_EQ(0, madvise(self->buf, P, MADV_DONTNEED));
		ASSERT_TRUE(mwt_invalid(&self->m, &r));
	}
	mwt_close(&self->m);
}

/* Persistent watches have their own limit: they do not count as depth. */
TEST_F(depth, persistent_apart)
{
	struct mmuwatch_range r = {.start = (uintptr_t)self->buf, .len = P,
				   .flags = MMUWATCH_WATCH_F_PERSISTENT};

	ASSERT_EQ(0, mwt_set_param("max_watch_depth", 1));
	MWT_OPEN_OR_SKIP(&self->m, 0, 0);
	if (!(self->m.info.features & MMUWATCH_FEAT_PERSISTENT))
		SKIP(return, "persistent watches off");
	ASSERT_EQ(0, ioctl(self->m.fd, MMUWATCH_IOC_WATCH, &r));
	EXPECT_EQ(0, w(&self->m, self->buf, 0, 1));
	EXPECT_EQ(-ENOSPC, w(&self->m, self->buf, 0, 1));
	mwt_close(&self->m);
}

/* Root is held to the depth too, unless root_exempt says otherwise. */
TEST_F(depth, root_exempt)
{
	struct mwt e;

	ASSERT_EQ(0, mwt_set_param("max_watch_depth", 1));
	MWT_OPEN_OR_SKIP(&self->m, 0, 0);
	ASSERT_EQ(0, w(&self->m, self->buf, 0, 1));
	EXPECT_EQ(-ENOSPC, w(&self->m, self->buf, 0, 1));
	/* Exemption is decided at open: a context opened with it is free. */
	ASSERT_EQ(0, mwt_set_param("root_exempt", 1));
	ASSERT_EQ(0, mwt_open(&e, 0, 0));
	EXPECT_EQ(0, w(&e, self->buf, 0, 1));
	EXPECT_EQ(0, w(&e, self->buf, 0, 1));
	mwt_close(&e);
	mwt_close(&self->m);
}

/*
 * WATCH walks at most 4096 overlapping watches under the context's lock;
 * a range over more is refused rather than hold the lock that long.
 */
TEST_F(depth, scan_bound)
{
	const long n = 4097;
	char *big = mwt_map(n + 1);
	long i;

	ASSERT_NE(NULL, big);
	MWT_OPEN_OR_SKIP(&self->m, 0, 8192);
	for (i = 0; i < n; i++)
		ASSERT_EQ(0, w(&self->m, big, i, 1));
	EXPECT_EQ(-ENOSPC, w(&self->m, big, 0, n));
	/* Control: over 4096 of them it is fine (depth 2 each). */
	EXPECT_EQ(0, w(&self->m, big, 0, n - 1));
	EXPECT_EQ(0, w(&self->m, big, n, 1));
	mwt_close(&self->m);
	munmap(big, (n + 1) * P);
}

/* As nobody, max_mm_contexts 2: two here, EMFILE, two in a child. */
static int nobody_mm(void)
{
	int a, b, c, st;
	pid_t pid;

	if (setgid(NOBODY) || setuid(NOBODY))
		return 100;
	a = open(MMUWATCH_DEVICE, O_RDWR);
	b = open(MMUWATCH_DEVICE, O_RDWR);
	if (a < 0 || b < 0)
		return 1;
	c = open(MMUWATCH_DEVICE, O_RDWR);
	if (c >= 0 || errno != EMFILE)
		return 2;
	/* Control: another mm of the same user has its own two ... */
	pid = fork();
	if (pid == 0) {
		/* (a and b came along, but they count on the parent's mm) */
		int x = open(MMUWATCH_DEVICE, O_RDWR);
		int y = open(MMUWATCH_DEVICE, O_RDWR);

		_exit(x >= 0 && y >= 0 && open(MMUWATCH_DEVICE, O_RDWR) < 0 &&
		      errno == EMFILE ? 0 : 1);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st))
		return 3;
	/* ... and closing one here makes room for one. */
	close(a);
	a = open(MMUWATCH_DEVICE, O_RDWR);
	return a >= 0 ? 0 : 4;
}

TEST_F(depth, mm_contexts)
{
	long long hits = mwt_counter("limit_hits_mm_contexts");
	int st;
	pid_t pid;

	ASSERT_EQ(0, mwt_set_param("max_mm_contexts", 2));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(nobody_mm());
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	EXPECT_EQ(hits + 2, mwt_counter("limit_hits_mm_contexts"));
	EXPECT_NE(0, mwt_set_param("max_mm_contexts", 0));
	EXPECT_NE(0, mwt_set_param("max_watch_depth", 33));
}

TEST_HARNESS_MAIN
