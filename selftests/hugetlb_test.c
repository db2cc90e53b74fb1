// SPDX-License-Identifier: GPL-2.0
/*
 * Invalidation of hugetlbfs memory: munmap, MADV_DONTNEED and a truncate
 * of a shared hugetlb file (the reason differs between 6.1 and 6.12: the
 * README table says which). Control: faulting the huge page in is no
 * invalidation.
 * MWT_FIXTURES="name ..." runs only those fixtures ("global" for the
 * plain tests); the others skip, to run one part alone.
 * The tests change system settings and put them back; they run as root
 * in the VM only: on a host without /dev/mmuwatch they skip before
 * touching anything.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "sources.h"

#ifndef MFD_HUGETLB
#define MFD_HUGETLB 4U
#endif

static bool kernel_is_6_1(void)
{
	struct utsname u;

	return !uname(&u) && !strncmp(u.release, "6.1.", 4);
}

/* ---- hugetlbfs --------------------------------------------------------- */

FIXTURE(hugetlb) {
	struct mwt m;
	char *h;
	struct mmuwatch_range r;
	long pool;
};

FIXTURE_SETUP(hugetlb)
{
	ONLY_IF_SELECTED("hugetlb");
	MWT_OPEN_OR_SKIP(&self->m, 0, 0);
	self->pool = mwt_read_ll("/proc/sys/vm/nr_hugepages");
	if (self->pool < 0)
		SKIP(_exit(255), "no hugetlb");
	mws_write_long("/proc/sys/vm/nr_hugepages", self->pool + 2);
	self->h = mmap(NULL, HUGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (self->h == MAP_FAILED) {
		mws_write_long("/proc/sys/vm/nr_hugepages", self->pool);
		SKIP(_exit(255), "no 2 MiB huge page available");
	}
	ASSERT_EQ(0, mwt_watch(&self->m, self->h + P, 2 * P, 0x4e6e,
			       &self->r));
}

FIXTURE_TEARDOWN(hugetlb)
{
	mwt_close(&self->m);
	if (self->pool >= 0)
		mws_write_long("/proc/sys/vm/nr_hugepages", self->pool);
}

/* Faulting the huge page in (mapping it) is not an invalidation. */
TEST_F(hugetlb, control_fault_in)
{
	memset(self->h, 0x11, HUGE);
	EXPECT_UNTOUCHED(&self->m, &self->r);
}

/* munmap of a hugetlb mapping: UNMAP over the watch. */
TEST_F(hugetlb, munmap)
{
	memset(self->h, 0x11, HUGE);
	ASSERT_EQ(0, munmap(self->h, HUGE));
	MWT_EXPECT_ONE_EVENT(&self->m, 0x4e6e, self->h + P, self->h + 3 * P,
			     MMUWATCH_REASON_UNMAP);
}

/* MADV_DONTNEED on hugetlb (5.18+): CLEAR. */
TEST_F(hugetlb, dontneed)
{
	memset(self->h, 0x11, HUGE);
	ASSERT_EQ(0, madvise(self->h, HUGE, MADV_DONTNEED));
	MWT_EXPECT_ONE_EVENT(&self->m, 0x4e6e, self->h + P, self->h + 3 * P,
			     MMUWATCH_REASON_CLEAR);
}

/* A shared hugetlbfs file (memfd) truncated to 0. On 6.1 hugetlbfs removes
 * the pages with unmap_hugepage_range(), which notifies MMU_NOTIFY_UNMAP:
 * reason UNMAP (not CLEAR as for other files). 6.12 notifies
 * MMU_NOTIFY_CLEAR there: reason CLEAR. Both measured in the VM.
 */
TEST_F(hugetlb, truncate_shared)
{
	int fd = memfd_create("mwt-hugetlb", MFD_HUGETLB | MFD_CLOEXEC);
	char *s;
	struct mmuwatch_range r;

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ftruncate(fd, HUGE));
	s = mmap(NULL, HUGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, s);
	memset(s, 0x22, HUGE);
	ASSERT_EQ(0, mwt_watch(&self->m, s, 4 * P, 0x4e6f, &r));
	ASSERT_EQ(0, ftruncate(fd, 0));
	MWT_EXPECT_ONE_EVENT(&self->m, 0x4e6f, s, s + 4 * P,
			     kernel_is_6_1() ? MMUWATCH_REASON_UNMAP :
					       MMUWATCH_REASON_CLEAR);
	munmap(s, HUGE);
	close(fd);
}

TEST_HARNESS_MAIN
