// SPDX-License-Identifier: GPL-2.0
/*
 * Invalidation by userfaultfd: UFFDIO_MOVE (6.8+; skipped before) takes
 * the source page out of the watched source range (CLEAR) and fills an
 * empty destination, which is no invalidation.
 * MWT_FIXTURES="name ..." runs only those fixtures ("global" for the
 * plain tests); the others skip, to run one part alone.
 * The tests change system settings and put them back; they run as root
 * in the VM only: on a host without /dev/mmuwatch they skip before
 * touching anything.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "sources.h"

/* UFFDIO_MOVE is 6.8+; Debian 12's uapi headers (6.1) do not have it. */
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1 << 16)
#define _UFFDIO_MOVE 0x05
struct uffdio_move {
	__u64 dst;
	__u64 src;
	__u64 len;
	__u64 mode;
	__s64 move;
};
#define UFFDIO_MOVE _IOWR(UFFDIO, _UFFDIO_MOVE, struct uffdio_move)
#endif

static int uffd_open(uint64_t features, uint64_t *have)
{
	struct uffdio_api api = { .api = UFFD_API, .features = features };
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return -errno;
	if (ioctl(fd, UFFDIO_API, &api)) {
		int err = -errno;

		close(fd);
		return err;
	}
	if (have)
		*have = api.features;
	return fd;
}

/* The source page of a move leaves the source range (MMU_NOTIFY_CLEAR on
 * it): the watch on the source fires. The destination was empty, so
 * filling it is no invalidation.
 */
TEST(uffdio_move)
{
	struct mwt m;
	uint64_t have = 0;
	int probe, fd;
	char *src, *dst;
	struct uffdio_register reg;
	struct uffdio_move mv;
	struct mmuwatch_range rs, rd;

	ONLY_IF_SELECTED("global");
	MWT_OPEN_OR_SKIP(&m, 0, 0);
	probe = uffd_open(0, &have);
	if (probe < 0)
		SKIP(return, "no userfaultfd (%d)", probe);
	close(probe);
	if (!(have & UFFD_FEATURE_MOVE))
		SKIP(return, "no UFFDIO_MOVE (kernel before 6.8)");
	fd = uffd_open(UFFD_FEATURE_MOVE, NULL);
	ASSERT_LE(0, fd);
	src = mws_distinct_pages(4, 0x0ffd);
	dst = mmap(NULL, 4 * P, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(NULL, src);
	ASSERT_NE(MAP_FAILED, dst);
	reg.range.start = (uintptr_t)dst;
	reg.range.len = 4 * P;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	ASSERT_EQ(0, ioctl(fd, UFFDIO_REGISTER, &reg));
	ASSERT_EQ(0, mwt_watch(&m, src, 4 * P, 0x5c, &rs));
	ASSERT_EQ(0, mwt_watch(&m, dst, 4 * P, 0xd5, &rd));
	memset(&mv, 0, sizeof(mv));
	mv.dst = (uintptr_t)dst + P;
	mv.src = (uintptr_t)src + P;
	mv.len = P;
	ASSERT_EQ(0, ioctl(fd, UFFDIO_MOVE, &mv));
	ASSERT_EQ((long long)P, (long long)mv.move);
	ASSERT_TRUE(mws_has_pattern(dst + P, 0x0ffd, 1));
	ASSERT_TRUE(mwt_valid(&m, &rd));
	MWT_EXPECT_ONE_EVENT(&m, 0x5c, src + P, src + 2 * P,
			     MMUWATCH_REASON_CLEAR);
	close(fd);
	mwt_close(&m);
}

TEST_HARNESS_MAIN
