// SPDX-License-Identifier: GPL-2.0
/*
 * Changes that keep the physical pages must not invalidate: mprotect,
 * soft-dirty clearing, and fork of a process whose watched pages are pinned.
 * The module sees these notifications and counts them as filtered (sysfs
 * and fdinfo), exactly once per watch and notification.
 *
 * fork, as the kernel really does it: copy_page_range() sends a
 * PROTECTION_PAGE notification over every COW mapping of the parent. For
 * pinned anonymous pages (here: io_uring registered buffers, FOLL_LONGTERM)
 * the child gets a copy and the parent's PTEs stay writable, so the parent's
 * pages never move: no event. Control: without the pin, the parent's next
 * write after fork breaks COW onto a new page, and that is a real
 * invalidation (CLEAR) of exactly the written page.
 */
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mwt.h"

#define P mwt_page
#define PMD (2UL << 20)

/* A mapping of `pages` pages that does not cross a 2 MiB boundary. */
static char *map_in_one_pmd(size_t pages)
{
	char *raw = mmap(NULL, 2 * PMD, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *p;

	if (raw == MAP_FAILED)
		return NULL;
	p = (char *)(((uintptr_t)raw + PMD - 1) & ~(PMD - 1));
	munmap(raw, p - raw);
	munmap(p + pages * P, raw + 2 * PMD - (p + pages * P));
	/* No THP: keep it small pages so the counts are exact. */
	madvise(p, pages * P, MADV_NOHUGEPAGE);
	memset(p, 0x44, pages * P);
	return p;
}

/* Per-context filtered count from /proc/self/fdinfo, or -1. */
static long long fdinfo_filtered(int fd)
{
	return mwt_fdinfo(getpid(), fd, "mmuwatch-filtered");
}

TEST(mprotect_filtered)
{
	long long before, vma_before, total_before;
	struct mmuwatch_range r;
	struct mwt m;
	char *p;

	MWT_OPEN_OR_SKIP(&m, 0, 0);
	p = map_in_one_pmd(4);
	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, mwt_watch(&m, p, 4 * P, 1, &r));
	vma_before = mwt_counter("filtered_protection_vma");
	total_before = mwt_counter("filtered");
	before = fdinfo_filtered(m.fd);
	ASSERT_EQ(0, before);
	ASSERT_EQ(0, mprotect(p, 4 * P, PROT_READ));
	ASSERT_TRUE(mwt_valid(&m, &r));
	MWT_EXPECT_NO_EVENT(&m);
	ASSERT_EQ(1, fdinfo_filtered(m.fd));
	ASSERT_EQ(vma_before + 1, mwt_counter("filtered_protection_vma"));
	ASSERT_EQ(total_before + 1, mwt_counter("filtered"));
	/* Back to read-write: filtered again, still valid, same data. */
	ASSERT_EQ(0, mprotect(p, 4 * P, PROT_READ | PROT_WRITE));
	ASSERT_EQ(0x44, p[3 * P]);
	ASSERT_TRUE(mwt_valid(&m, &r));
	MWT_EXPECT_NO_EVENT(&m);
	ASSERT_EQ(2, fdinfo_filtered(m.fd));
	ASSERT_EQ(total_before + 2, mwt_counter("filtered"));
	/* Control: the same watch does fire on a real unmap. */
	ASSERT_EQ(0, munmap(p, 4 * P));
	MWT_EXPECT_ONE_EVENT(&m, 1, p, p + 4 * P, MMUWATCH_REASON_UNMAP);
	mwt_close(&m);
}

TEST(soft_dirty_filtered)
{
	struct mmuwatch_range r;
	long long before;
	struct mwt m;
	int fd;
	char *p;

	MWT_OPEN_OR_SKIP(&m, 0, 0);
	p = mwt_map(2);
	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, mwt_watch(&m, p, 2 * P, 2, &r));
	fd = open("/proc/self/clear_refs", O_WRONLY);
	if (fd < 0)
		SKIP(return, "no /proc/self/clear_refs");
	before = mwt_counter("filtered_soft_dirty");
	if (write(fd, "4", 1) != 1)
		SKIP(return, "soft-dirty tracking not available");
	close(fd);
	ASSERT_TRUE(mwt_valid(&m, &r));
	MWT_EXPECT_NO_EVENT(&m);
	ASSERT_EQ(1, fdinfo_filtered(m.fd));
	ASSERT_EQ(before + 1, mwt_counter("filtered_soft_dirty"));
	mwt_close(&m);
}

/* Fork, let the parent write page 1 while the child is alive, then end
 * the child. Returns the child's exit status.
 */
static int fork_and_write(char *p)
{
	int pfd[2], status;
	char c = 0;
	pid_t pid;

	if (pipe(pfd))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(pfd[1]);
		/* The child sees the pre-fork data. */
		if (read(pfd[0], &c, 1) != 1 || p[P] != 0x44)
			_exit(3);
		_exit(0);
	}
	close(pfd[0]);
	p[P] = 0x55;
	if (write(pfd[1], &c, 1) != 1)
		return -1;
	close(pfd[1]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

FIXTURE(forked) {
	struct mwt m;
	char *p;
	struct mmuwatch_range r;
};

FIXTURE_VARIANT(forked) {
	bool pinned;
};

FIXTURE_VARIANT_ADD(forked, pinned) { .pinned = true };
FIXTURE_VARIANT_ADD(forked, unpinned_control) { .pinned = false };

FIXTURE_SETUP(forked)
{
	MWT_OPEN_OR_SKIP(&self->m, 0, 0);
	self->p = map_in_one_pmd(4);
	ASSERT_NE(NULL, self->p);
	ASSERT_EQ(0, mwt_watch(&self->m, self->p, 4 * P, 3, &self->r));
}

FIXTURE_TEARDOWN(forked)
{
	mwt_close(&self->m);
}

TEST_F(forked, fork_write)
{
	struct iovec iov = { .iov_base = self->p, .iov_len = 4 * P };
	uint64_t pfn_before, pfn_after;
	long long prot_before;
	struct io_uring ring;

	if (variant->pinned) {
		ASSERT_EQ(0, io_uring_queue_init(2, &ring, 0));
		ASSERT_EQ(0, io_uring_register_buffers(&ring, &iov, 1));
	}
	pfn_before = mwt_pfn(self->p + P);
	prot_before = mwt_counter("filtered_protection_page");
	ASSERT_EQ(0, fork_and_write(self->p));
	pfn_after = mwt_pfn(self->p + P);
	ASSERT_EQ(0x55, self->p[P]);
	/* fork's COW pass over the watched mapping: one filtered call. */
	ASSERT_EQ(1, fdinfo_filtered(self->m.fd));
	ASSERT_EQ(prot_before + 1, mwt_counter("filtered_protection_page"));
	if (variant->pinned) {
		/* Pinned pages stay put in the parent: nothing to report. */
		ASSERT_TRUE(mwt_valid(&self->m, &self->r));
		MWT_EXPECT_NO_EVENT(&self->m);
		if (pfn_before)
			ASSERT_EQ(pfn_before, pfn_after);
		io_uring_queue_exit(&ring);
	} else {
		/* The parent's write moved page 1 to a new frame. */
		ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
		MWT_EXPECT_ONE_EVENT(&self->m, 3, self->p + P,
				     self->p + 2 * P, MMUWATCH_REASON_CLEAR);
		if (pfn_before)
			ASSERT_NE(pfn_before, pfn_after);
	}
}

TEST_HARNESS_MAIN
