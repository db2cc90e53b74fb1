// SPDX-License-Identifier: GPL-2.0
/*
 * fork() with watches on both sides, the two processes exiting in either
 * order. Each process watches its own copy of the same buffer through its
 * own context; the child also holds the parent's fd (inherited). Whoever
 * exits first must not disturb the other: its exit tears down only its
 * own mm and its own watches, the survivor's watch stays valid and still
 * reports an munmap exactly, an inherited fd whose mm is gone answers
 * EBADFD, and once both are gone every context and watch is released
 * (the sysfs counters return to where they were). The debug kernel
 * (make check-debug) runs this under KASAN, lockdep and kmemleak, which
 * is where an exit-order bug (use after free, leak) would show.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mwt.h"

#define P mwt_page

/* Child-side checks report the first failure through the exit status. */
#define CHECK(cond, code) do { \
	if (!(cond)) { \
		fprintf(stderr, "# %s:%d: %s failed\n", __FILE__, __LINE__, \
			#cond); \
		_exit(code); \
	} \
} while (0)

/* Watch a copy of buf in a context of our own and check that munmap of
 * it gives exactly one UNMAP event: the context works after the other
 * process left. Exit status 0 if all holds.
 */
static int own_watch_survives(char *buf, struct mwt *m,
			      struct mmuwatch_range *r)
{
	struct mmuwatch_event e;

	CHECK(mwt_valid(m, r), 10);
	CHECK(buf[0] == 0x5a && buf[4 * P - 1] == 0x5a, 11);
	CHECK(mwt_pending(m) == 0, 12);
	CHECK(munmap(buf, 4 * P) == 0, 13);
	CHECK(mwt_invalid(m, r), 14);
	CHECK(mwt_pop(m, &e) == 1, 15);
	CHECK(e.cookie == r->cookie && e.reason == MMUWATCH_REASON_UNMAP &&
		      e.start == (uintptr_t)buf &&
		      e.end == (uintptr_t)buf + 4 * P, 16);
	CHECK(mwt_pending(m) == 0, 17);
	return 0;
}

static void wait_counter(const char *name, long long want)
{
	int i;

	/* Context release may finish in deferred work after the last close. */
	for (i = 0; i < 500 && mwt_counter(name) != want; i++)
		usleep(10000);
}

/* The child exits first; the parent's watch and context are unaffected. */
TEST(child_exits_first)
{
	struct mwt m;
	struct mmuwatch_range r;
	long long ctx0 = mwt_counter("contexts");
	long long act0 = mwt_counter("watches_active");
	char *buf;
	pid_t pid;
	int st;

	MWT_OPEN_OR_SKIP(&m, 0, 0);
	buf = mwt_map(4);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, mwt_watch(&m, buf, 4 * P, 0xf0c1, &r));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct mwt mc;
		struct mmuwatch_range rc;
		struct mmuwatch_info info;

		/* The inherited fd describes the parent's mm. */
		memset(&rc, 0, sizeof(rc));
		rc.start = (uintptr_t)buf;
		rc.len = P;
		CHECK(ioctl(m.fd, MMUWATCH_IOC_WATCH, &rc) == -1 &&
			      errno == EBADFD, 2);
		CHECK(mwt_open(&mc, 0, 0) == 0, 3);
		CHECK(mwt_watch(&mc, buf, 4 * P, 0xf0c2, &rc) == 0, 4);
		CHECK(ioctl(mc.fd, MMUWATCH_IOC_INFO, &info) == 0, 5);
		/* Exit with the watch, both fds and the mappings live. */
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	ASSERT_EQ(0, WEXITSTATUS(st));
	wait_counter("contexts", ctx0 + 1);
	EXPECT_EQ(ctx0 + 1, mwt_counter("contexts"));
	EXPECT_EQ(0, own_watch_survives(buf, &m, &r));
	mwt_close(&m);
	wait_counter("contexts", ctx0);
	EXPECT_EQ(ctx0, mwt_counter("contexts"));
	wait_counter("watches_active", act0);
	EXPECT_EQ(act0, mwt_counter("watches_active"));
}

/* The parent exits first (the test process is the grandparent and the
 * child's subreaper). The child keeps the parent's fd open past the
 * parent's exit: it answers EBADFD and its context goes at close.
 */
TEST(parent_exits_first)
{
	long long ctx0 = mwt_counter("contexts");
	long long act0 = mwt_counter("watches_active");
	struct mwt probe;
	int ready[2], st, done = 0;
	pid_t parent, w;

	MWT_OPEN_OR_SKIP(&probe, 0, 0);
	mwt_close(&probe);
	ASSERT_EQ(0, prctl(PR_SET_CHILD_SUBREAPER, 1));
	ASSERT_EQ(0, pipe(ready));
	parent = fork();
	ASSERT_LE(0, parent);
	if (!parent) {
		struct mwt m;
		struct mmuwatch_range r;
		int gone[2];
		char c;
		pid_t child;
		char *buf = mwt_map(4);

		CHECK(buf && mwt_open(&m, 0, 0) == 0, 20);
		CHECK(mwt_watch(&m, buf, 4 * P, 0xf0c3, &r) == 0, 21);
		/* The child sees EOF on gone[0] when this process is gone. */
		CHECK(pipe(gone) == 0, 22);
		child = fork();
		CHECK(child >= 0, 23);
		if (!child) {
			struct mwt mc;
			struct mmuwatch_range rc, rx;
			struct pollfd pfd = { .events = POLLIN };

			close(gone[1]);
			CHECK(mwt_open(&mc, 0, 0) == 0, 30);
			CHECK(mwt_watch(&mc, buf, 4 * P, 0xf0c4, &rc) == 0, 31);
			CHECK(write(ready[1], "r", 1) == 1, 32);
			pfd.fd = gone[0];
			CHECK(poll(&pfd, 1, 60000) == 1, 33);
			CHECK(read(gone[0], &c, 1) == 0, 34);
			/* The parent's mm is gone; its context is still
			 * open here.
			 */
			memset(&rx, 0, sizeof(rx));
			rx.start = (uintptr_t)buf;
			rx.len = P;
			CHECK(ioctl(m.fd, MMUWATCH_IOC_WATCH, &rx) == -1 &&
				      errno == EBADFD, 35);
			CHECK(own_watch_survives(buf, &mc, &rc) == 0, 36);
			mwt_close(&m);
			mwt_close(&mc);
			_exit(0);
		}
		close(gone[0]);
		/* Wait until the child has its watch, then leave with our
		 * watch, context and mappings live.
		 */
		CHECK(read(ready[0], &c, 1) == 1, 24);
		_exit(0);
	}
	close(ready[1]);
	close(ready[0]);
	/* Reap the parent and then the reparented child. */
	while ((w = wait(&st)) > 0) {
		EXPECT_TRUE(WIFEXITED(st));
		if (WIFEXITED(st))
			EXPECT_EQ(0, WEXITSTATUS(st));
		done++;
	}
	EXPECT_EQ(2, done);
	wait_counter("contexts", ctx0);
	EXPECT_EQ(ctx0, mwt_counter("contexts"));
	wait_counter("watches_active", act0);
	EXPECT_EQ(act0, mwt_counter("watches_active"));
}

TEST_HARNESS_MAIN
