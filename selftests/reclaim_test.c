// SPDX-License-Identifier: GPL-2.0
/*
 * Invalidation by reclaim: MADV_PAGEOUT over a swap file on a loop
 * device, process_madvise(MADV_PAGEOUT) from another process, and memory
 * cgroup reclaim (memory.reclaim). The swapped-out pages must fire the
 * watch (CLEAR) and come back with their contents. Controls: PAGEOUT
 * without swap and MADV_COLD leave the pages mapped and the watch valid
 * with no event.
 * MWT_FIXTURES="name ..." runs only those fixtures ("global" for the
 * plain tests); the others skip, to run one part alone.
 * The tests change system settings and put them back; they run as root
 * in the VM only: on a host without /dev/mmuwatch they skip before
 * touching anything.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "sources.h"

#define CGROOT "/sys/fs/cgroup"

static size_t swapped_pages(const char *buf, size_t pages)
{
	size_t i, n = 0;

	for (i = 0; i < pages; i++)
		n += (mws_pagemap(buf + i * P) >> 62) & 1;
	return n;
}

static int swap_active(void)
{
	FILE *f = fopen("/proc/swaps", "re");
	char line[256];
	int n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n++;
	fclose(f);
	return n > 1;
}

/*
 * A 64 MiB swap file on /tmp through a loop device (a tmpfs file cannot
 * be swapped on directly). Returns 1 if this call turned swap on (the
 * caller turns it off with swap_off), 0 if swap was already on, -1 if it
 * cannot be had.
 */
#define SWAPFILE "/tmp/mwt-sources.swap"
static char swap_dev[64];

static int swap_on(void)
{
	char cmd[512];
	FILE *p;

	if (swap_active())
		return 0;
	snprintf(cmd, sizeof(cmd),
		 "modprobe -q loop 2>/dev/null; "
		 "rm -f %s && truncate -s 64M %s && "
		 "d=$(losetup -f --show %s) && "
		 "mkswap -q $d >/dev/null && swapon $d && echo $d",
		 SWAPFILE, SWAPFILE, SWAPFILE);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	if (!fgets(swap_dev, sizeof(swap_dev), p))
		swap_dev[0] = 0;
	if (pclose(p) || !swap_dev[0])
		return -1;
	swap_dev[strcspn(swap_dev, "\n")] = 0;
	return swap_active() ? 1 : -1;
}

static void swap_off(void)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "swapoff %s; losetup -d %s; rm -f %s",
		 swap_dev, swap_dev, SWAPFILE);
	if (system(cmd))
		fprintf(stderr, "# swap_off: '%s' failed\n", cmd);
}

/* ---- swap-out ---------------------------------------------------------- */

FIXTURE(swap) {
	struct mwt m;
	char *buf;
	struct mmuwatch_range r;
	int own_swap;
};

FIXTURE_SETUP(swap)
{
	ONLY_IF_SELECTED("swap");
	MWT_OPEN_OR_SKIP(&self->m, 0, 0);
	self->buf = mws_distinct_pages(8, 0x5a9);
	ASSERT_NE(NULL, self->buf);
	ASSERT_EQ(0, mwt_watch(&self->m, self->buf + P, 4 * P, 0x5a9,
			       &self->r));
}

FIXTURE_TEARDOWN(swap)
{
	if (self->own_swap == 1)
		swap_off();
	mwt_close(&self->m);
}

static void need_swap(struct __test_metadata *_metadata, int *own)
{
	*own = swap_on();
	if (*own < 0)
		SKIP(_exit(255), "cannot set up a swap file (loop device)");
}

/* MADV_PAGEOUT with swap: the pages are unmapped by reclaim
 * (try_to_unmap, MMU_NOTIFY_CLEAR) and written to swap.
 */
TEST_F(swap, pageout)
{
	struct mmuwatch_event e;

	need_swap(_metadata, &self->own_swap);
	ASSERT_EQ(0, madvise(self->buf, 8 * P, MADV_PAGEOUT));
	ASSERT_LT(0U, swapped_pages(self->buf + P, 4));
	EXPECT_ONE_INSIDE(&self->m, &self->r, MMUWATCH_REASON_CLEAR, &e);
	/* Reading the pages back brings them in: no further event. */
	EXPECT_TRUE(mws_has_pattern(self->buf + P, 0x5a9, 1));
	MWT_EXPECT_NO_EVENT(&self->m);
}

/* Control: without swap, anonymous pages cannot be paged out; reclaim
 * gives up before unmapping them.
 */
TEST_F(swap, control_pageout_without_swap)
{
	if (swap_active())
		SKIP(return, "swap is on in this system");
	ASSERT_EQ(0, madvise(self->buf, 8 * P, MADV_PAGEOUT));
	EXPECT_EQ(0U, swapped_pages(self->buf, 8));
	EXPECT_UNTOUCHED(&self->m, &self->r);
}

/* ---- process_madvise from another process ---------------------------- */

/* A child (not sharing the pages: MADV_DONTFORK) applies advice to the
 * parent's watched range through a pidfd. Child exit status: 0 ok, 1 the
 * call failed (errno printed).
 */
static int advise_parent(void *addr, size_t len, int advice)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (!pid) {
		struct iovec iov = { .iov_base = addr, .iov_len = len };
		int pfd = (int)syscall(SYS_pidfd_open, getppid(), 0);
		long n;

		if (pfd < 0)
			_exit(1);
		n = syscall(SYS_process_madvise, pfd, &iov, 1UL, advice, 0U);
		if (n != (long)len) {
			fprintf(stderr, "# process_madvise(%d): %ld (%s)\n",
				advice, n, strerror(errno));
			_exit(1);
		}
		_exit(0);
	}
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST_F(swap, process_madvise_pageout)
{
	struct mmuwatch_event e;

	need_swap(_metadata, &self->own_swap);
	ASSERT_EQ(0, madvise(self->buf, 8 * P, MADV_DONTFORK));
	ASSERT_EQ(0, advise_parent(self->buf, 8 * P, MADV_PAGEOUT));
	ASSERT_LT(0U, swapped_pages(self->buf + P, 4));
	EXPECT_ONE_INSIDE(&self->m, &self->r, MMUWATCH_REASON_CLEAR, &e);
}

/* MADV_COLD only ages the pages: they stay mapped, nothing fires. */
TEST_F(swap, control_process_madvise_cold)
{
	ASSERT_EQ(0, madvise(self->buf, 8 * P, MADV_DONTFORK));
	ASSERT_EQ(0, advise_parent(self->buf, 8 * P, MADV_COLD));
	EXPECT_EQ(0U, swapped_pages(self->buf, 8));
	EXPECT_UNTOUCHED(&self->m, &self->r);
}

/* ---- memory cgroup reclaim -------------------------------------------- */

/* The test process moves into its own cgroup, so the pages it touches
 * afterwards are charged there, and asks that cgroup to reclaim
 * (memory.reclaim, 5.19+). With swap, anonymous pages go out: CLEAR.
 */
TEST_F(swap, memcg_reclaim)
{
	char cg[128], path[192];
	char *buf;
	struct mmuwatch_range r;
	struct mmuwatch_event e;
	int rc;

	if (access(CGROOT "/cgroup.controllers", R_OK))
		SKIP(return, "no cgroup v2");
	need_swap(_metadata, &self->own_swap);
	mwt_write_str(CGROOT "/cgroup.subtree_control", "+memory");
	snprintf(cg, sizeof(cg), CGROOT "/mwt-reclaim-%d", getpid());
	ASSERT_EQ(0, mkdir(cg, 0755));
	snprintf(path, sizeof(path), "%s/memory.reclaim", cg);
	if (access(path, W_OK)) {
		rmdir(cg);
		SKIP(return, "no memory.reclaim");
	}
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	ASSERT_EQ(0, mws_write_long(path, getpid()));
	buf = mws_distinct_pages(64, 0x3e3c);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, mwt_watch(&self->m, buf, 64 * P, 0x3e3c, &r));
	snprintf(path, sizeof(path), "%s/memory.reclaim", cg);
	/* Ask for half of what the buffer holds: more than the cgroup has
	 * makes the kernel retry (slow on the debug kernel) and end with
	 * EAGAIN, which is fine here too.
	 */
	rc = mwt_write_str(path, "128K");
	EXPECT_TRUE(rc == 0 || rc == -EAGAIN);
	mws_write_long(CGROOT "/cgroup.procs", getpid());
	rmdir(cg);
	ASSERT_LT(0U, swapped_pages(buf, 64));
	EXPECT_ONE_INSIDE(&self->m, &r, MMUWATCH_REASON_CLEAR, &e);
}

TEST_HARNESS_MAIN
