// SPDX-License-Identifier: GPL-2.0
/*
 * Every bad input gets its documented errno (include/uapi/mmuwatch.h) and
 * leaves the context usable: unknown ioctls, bad pointers, zero, wrapping
 * and out-of-range lengths, oversized batches, reserved fields, unknown or
 * stale slots, a second SETUP, writable word mappings, a forked child
 * using the parent's fd, and the watch limit.
 */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mwt.h"

#define P mwt_page
#define BAD_PTR ((void *)16)

FIXTURE(ctx) {
	struct mwt m;
	char *buf;
};

FIXTURE_SETUP(ctx)
{
	MWT_OPEN_OR_SKIP(&self->m, 64, 16);
	self->buf = mwt_map(4);
	ASSERT_NE(NULL, self->buf);
}

FIXTURE_TEARDOWN(ctx)
{
	mwt_close(&self->m);
}

static int ioc(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? errno : 0;
}

TEST_F(ctx, unknown_ioctl)
{
	int x = 0;

	EXPECT_EQ(ENOTTY, ioc(self->m.fd, _IO(MMUWATCH_IOC_MAGIC, 0x7f), &x));
	EXPECT_EQ(ENOTTY, ioc(self->m.fd, _IOR('x', 0x00, struct mmuwatch_info),
			      &x));
	/* Right number, wrong size encoded: not our ioctl either. */
	EXPECT_EQ(ENOTTY, ioc(self->m.fd, _IOR(MMUWATCH_IOC_MAGIC, 0x00, int),
			      &x));
	EXPECT_EQ(ENOTTY, ioc(self->m.fd, TCGETS, &x));
}

TEST_F(ctx, bad_pointers)
{
	struct mmuwatch_batch b = { .ptr = (uintptr_t)BAD_PTR, .count = 1 };

	EXPECT_EQ(EFAULT, ioc(self->m.fd, MMUWATCH_IOC_INFO, BAD_PTR));
	EXPECT_EQ(EFAULT, ioc(self->m.fd, MMUWATCH_IOC_SETUP, BAD_PTR));
	EXPECT_EQ(EFAULT, ioc(self->m.fd, MMUWATCH_IOC_WATCH, BAD_PTR));
	EXPECT_EQ(EFAULT, ioc(self->m.fd, MMUWATCH_IOC_UNWATCH, BAD_PTR));
	EXPECT_EQ(EFAULT, ioc(self->m.fd, MMUWATCH_IOC_WATCH_BATCH, BAD_PTR));
	EXPECT_EQ(EFAULT, ioc(self->m.fd, MMUWATCH_IOC_UNWATCH_BATCH, BAD_PTR));
	EXPECT_EQ(EFAULT, ioc(self->m.fd, MMUWATCH_IOC_RESET_OVERFLOW, BAD_PTR));
	EXPECT_EQ(EFAULT, ioc(self->m.fd, MMUWATCH_IOC_WATCH_BATCH, &b));
	EXPECT_EQ(0U, b.done);
	EXPECT_EQ(EFAULT, ioc(self->m.fd, MMUWATCH_IOC_UNWATCH_BATCH, &b));
	EXPECT_EQ(0U, b.done);
	/* Nothing was watched by any of it. */
	EXPECT_EQ(0, mwt_counter("watches_active"));
}

TEST_F(ctx, watch_result_unwritable)
{
	/* A read-only range struct: the watch cannot report its slot, so it
	 * must not stay behind either.
	 */
	struct mmuwatch_range *r = mmap(NULL, P, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	long long active = mwt_counter("watches_active");

	ASSERT_NE(MAP_FAILED, r);
	r->start = (uintptr_t)self->buf;
	r->len = P;
	ASSERT_EQ(0, mprotect(r, P, PROT_READ));
	EXPECT_EQ(EFAULT, ioc(self->m.fd, MMUWATCH_IOC_WATCH, r));
	EXPECT_EQ(active, mwt_counter("watches_active"));
}

TEST_F(ctx, lengths)
{
	struct mmuwatch_range r;

	EXPECT_EQ(-EINVAL, mwt_watch(&self->m, self->buf, 0, 1, &r));
	EXPECT_EQ(-EOVERFLOW, mwt_watch(&self->m, self->buf, UINT64_MAX, 1, &r));
	EXPECT_EQ(-EOVERFLOW, mwt_watch(&self->m, (void *)UINTPTR_MAX, 2, 1, &r));
	/* Past the top of user space (x86-64: 47 or 56 address bits). */
	EXPECT_EQ(-ERANGE, mwt_watch(&self->m, (void *)(1ULL << 57), P, 1, &r));
	EXPECT_EQ(-ERANGE, mwt_watch(&self->m, (void *)0xffff888000000000ULL,
				     P, 1, &r));
	EXPECT_EQ(-ERANGE, mwt_watch(&self->m, self->buf, 1ULL << 60, 1, &r));
	/* Control: a sane range is accepted. */
	EXPECT_EQ(0, mwt_watch(&self->m, self->buf, P, 1, &r));
}

TEST_F(ctx, reserved_fields)
{
	/* Bit 0 is MMUWATCH_WATCH_F_PERSISTENT; the next one is unknown. */
	struct mmuwatch_range r = { .start = (uintptr_t)self->buf, .len = P,
				    .flags = MMUWATCH_WATCH_F_PERSISTENT << 1 };
	struct mmuwatch_range ok = { .start = (uintptr_t)self->buf, .len = P };
	struct mmuwatch_batch b = { .ptr = (uintptr_t)&ok, .count = 1 };
	struct mmuwatch_unwatch u = { 0 };
	struct mmuwatch_setup s = { 0 };

	EXPECT_EQ(EINVAL, ioc(self->m.fd, MMUWATCH_IOC_WATCH, &r));
	r.flags = 0x80000000;
	EXPECT_EQ(EINVAL, ioc(self->m.fd, MMUWATCH_IOC_WATCH, &r));
	r.flags = ~MMUWATCH_WATCH_F_MASK;	/* every bit not defined */
	EXPECT_EQ(EINVAL, ioc(self->m.fd, MMUWATCH_IOC_WATCH, &r));
	b.flags = 1;
	EXPECT_EQ(EINVAL, ioc(self->m.fd, MMUWATCH_IOC_WATCH_BATCH, &b));
	EXPECT_EQ(EINVAL, ioc(self->m.fd, MMUWATCH_IOC_UNWATCH_BATCH, &b));
	b.flags = 0;
	b.reserved = 1;
	EXPECT_EQ(EINVAL, ioc(self->m.fd, MMUWATCH_IOC_WATCH_BATCH, &b));
	b.reserved = 0;
	b.count = 0;
	EXPECT_EQ(EINVAL, ioc(self->m.fd, MMUWATCH_IOC_WATCH_BATCH, &b));
	EXPECT_EQ(0, mwt_counter("watches_active"));
	/* Control: the same batch with clean fields is accepted. */
	b.count = 1;
	EXPECT_EQ(0, ioc(self->m.fd, MMUWATCH_IOC_WATCH_BATCH, &b));
	EXPECT_EQ(1U, b.done);
	EXPECT_TRUE(mwt_valid(&self->m, &ok));
	u.slot = ok.slot;
	u.token = ok.token;
	u.reserved = 1;
	EXPECT_EQ(EINVAL, ioc(self->m.fd, MMUWATCH_IOC_UNWATCH, &u));
	EXPECT_TRUE(mwt_valid(&self->m, &ok));
	u.reserved = 0;
	EXPECT_EQ(0, ioc(self->m.fd, MMUWATCH_IOC_UNWATCH, &u));
	s.flags = 1;
	EXPECT_EQ(EINVAL, ioc(self->m.fd, MMUWATCH_IOC_SETUP, &s));
	s.flags = 0;
	s.reserved = 1;
	EXPECT_EQ(EINVAL, ioc(self->m.fd, MMUWATCH_IOC_SETUP, &s));
}

TEST_F(ctx, oversized_batch)
{
	struct mmuwatch_batch b = { .ptr = (uintptr_t)self->buf };

	b.count = self->m.info.max_batch + 1;
	EXPECT_EQ(E2BIG, ioc(self->m.fd, MMUWATCH_IOC_WATCH_BATCH, &b));
	EXPECT_EQ(E2BIG, ioc(self->m.fd, MMUWATCH_IOC_UNWATCH_BATCH, &b));
	b.count = UINT32_MAX;
	EXPECT_EQ(E2BIG, ioc(self->m.fd, MMUWATCH_IOC_WATCH_BATCH, &b));
}

TEST_F(ctx, batch_stops_at_bad_element)
{
	struct mmuwatch_range r[3] = {
		{ .start = (uintptr_t)self->buf, .len = P, .cookie = 1 },
		{ .start = (uintptr_t)self->buf, .len = 0, .cookie = 2 },
		{ .start = (uintptr_t)self->buf, .len = P, .cookie = 3 },
	};
	struct mmuwatch_batch b = { .ptr = (uintptr_t)r, .count = 3 };
	struct mmuwatch_unwatch u[2];

	EXPECT_EQ(EINVAL, ioc(self->m.fd, MMUWATCH_IOC_WATCH_BATCH, &b));
	EXPECT_EQ(1U, b.done);
	EXPECT_TRUE(mwt_valid(&self->m, &r[0]));
	EXPECT_EQ(1, mwt_counter("watches_active"));
	/* Unwatch batch: second element stale, first goes. */
	u[0] = (struct mmuwatch_unwatch){ .slot = r[0].slot, .token = r[0].token };
	u[1] = u[0];
	b.ptr = (uintptr_t)u;
	b.count = 2;
	EXPECT_EQ(ENOENT, ioc(self->m.fd, MMUWATCH_IOC_UNWATCH_BATCH, &b));
	EXPECT_EQ(1U, b.done);
	EXPECT_TRUE(mwt_invalid(&self->m, &r[0]));
	EXPECT_EQ(0, mwt_counter("watches_active"));
}

TEST_F(ctx, unwatch_unknown_and_stale)
{
	struct mmuwatch_range r, r2;
	struct mmuwatch_unwatch u = { .slot = 100000, .token = 2 };
	int fd;

	EXPECT_EQ(ENOENT, ioc(self->m.fd, MMUWATCH_IOC_UNWATCH, &u));
	u.slot = UINT32_MAX;
	EXPECT_EQ(ENOENT, ioc(self->m.fd, MMUWATCH_IOC_UNWATCH, &u));
	u.slot = 3;	/* in range, never used */
	EXPECT_EQ(ENOENT, ioc(self->m.fd, MMUWATCH_IOC_UNWATCH, &u));
	ASSERT_EQ(0, mwt_watch(&self->m, self->buf, P, 9, &r));
	/* Wrong token for a live slot. */
	u.slot = r.slot;
	u.token = r.token + 2;
	EXPECT_EQ(ENOENT, ioc(self->m.fd, MMUWATCH_IOC_UNWATCH, &u));
	EXPECT_TRUE(mwt_valid(&self->m, &r));
	EXPECT_EQ(0, mwt_unwatch(&self->m, &r));
	EXPECT_TRUE(mwt_invalid(&self->m, &r));
	EXPECT_EQ(-ENOENT, mwt_unwatch(&self->m, &r));
	/* An invalidated (one-shot, already fired) watch is gone too. */
	ASSERT_EQ(0, mwt_watch(&self->m, self->buf + P, P, 10, &r2));
	ASSERT_EQ(0, madvise(self->buf + P, P, MADV_DONTNEED));
	EXPECT_TRUE(mwt_invalid(&self->m, &r2));
	EXPECT_EQ(-ENOENT, mwt_unwatch(&self->m, &r2));
	/* A context that was never set up has nothing to unwatch. */
	fd = open(MMUWATCH_DEVICE, O_RDWR);
	ASSERT_LE(0, fd);
	u.slot = 0;
	u.token = 2;
	EXPECT_EQ(ENOENT, ioc(fd, MMUWATCH_IOC_UNWATCH, &u));
	close(fd);
}

TEST_F(ctx, setup_twice_and_limits)
{
	struct mmuwatch_setup s = { .ring_entries = 8, .nr_words = 8 };
	struct mmuwatch_info info;
	int fd;

	EXPECT_EQ(EBUSY, ioc(self->m.fd, MMUWATCH_IOC_SETUP, &s));
	fd = open(MMUWATCH_DEVICE, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ioc(fd, MMUWATCH_IOC_INFO, &info));
	EXPECT_EQ(0U, info.ring_entries);
	s.nr_words = info.max_watches + 1;
	EXPECT_EQ(EINVAL, ioc(fd, MMUWATCH_IOC_SETUP, &s));
	s.nr_words = 8;
	s.ring_entries = info.max_ring_entries + 1;
	EXPECT_EQ(EINVAL, ioc(fd, MMUWATCH_IOC_SETUP, &s));
	/* Control: a sane SETUP works, with the ring rounded up to 2^n. */
	s.ring_entries = 5;
	EXPECT_EQ(0, ioc(fd, MMUWATCH_IOC_SETUP, &s));
	ASSERT_EQ(0, ioc(fd, MMUWATCH_IOC_INFO, &info));
	EXPECT_EQ(8U, info.ring_entries);
	EXPECT_EQ(8U, info.nr_words);
	close(fd);
}

TEST_F(ctx, info_contents)
{
	struct mmuwatch_info *i = &self->m.info;

	EXPECT_EQ((__u32)MMUWATCH_ABI_VERSION, i->abi_version);
	EXPECT_EQ(sizeof(struct mmuwatch_event), i->event_size);
	EXPECT_EQ(8U, i->word_size);
	EXPECT_EQ(64U, i->ring_entries);
	EXPECT_EQ(64U, self->m.ring->entries);
	EXPECT_EQ(16U, i->nr_words);
	/* After SETUP the word array is the watch limit. */
	EXPECT_EQ(16U, i->max_watches);
	EXPECT_GE(i->ring_events_offset, sizeof(struct mmuwatch_ring));
	EXPECT_GE(i->ring_mmap_size, i->ring_events_offset + 64ULL * 32);
	EXPECT_GE(i->words_mmap_size, 16ULL * 8);
	EXPECT_NE(0U, i->features & MMUWATCH_FEAT_BATCH);
	EXPECT_NE(0U, i->features & MMUWATCH_FEAT_RING);
}

TEST(info_before_setup)
{
	struct mmuwatch_setup s = { .ring_entries = 8, .nr_words = 4 };
	struct mmuwatch_info i;
	int fd = open(MMUWATCH_DEVICE, O_RDWR);

	if (fd < 0 && !getenv("MWT_REQUIRE_DEVICE"))
		SKIP(return, "no device");
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ioc(fd, MMUWATCH_IOC_INFO, &i));
	EXPECT_EQ((__u32)MMUWATCH_ABI_VERSION, i.abi_version);
	EXPECT_EQ(sizeof(struct mmuwatch_event), i.event_size);
	EXPECT_EQ(8U, i.word_size);
	EXPECT_LT(0U, i.max_batch);
	EXPECT_LT(0U, i.max_watches);
	EXPECT_LT(0U, i.max_ring_entries);
	/* Nothing is allocated before SETUP. */
	EXPECT_EQ(0U, i.ring_entries);
	EXPECT_EQ(0U, i.nr_words);
	EXPECT_EQ(0ULL, i.ring_mmap_size);
	EXPECT_EQ(0ULL, i.words_mmap_size);
	/* Control: the same fields after SETUP. */
	ASSERT_EQ(0, ioc(fd, MMUWATCH_IOC_SETUP, &s));
	ASSERT_EQ(0, ioc(fd, MMUWATCH_IOC_INFO, &i));
	EXPECT_EQ(8U, i.ring_entries);
	EXPECT_EQ(4U, i.nr_words);
	EXPECT_EQ(4U, i.max_watches);
	EXPECT_NE(0ULL, i.ring_mmap_size);
	EXPECT_NE(0ULL, i.words_mmap_size);
	close(fd);
}

TEST_F(ctx, mmap_rules)
{
	void *p;

	p = mmap(NULL, P, PROT_READ | PROT_WRITE, MAP_SHARED, self->m.fd,
		 MMUWATCH_MMAP_WORDS);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EACCES, errno);
	p = mmap(NULL, P, PROT_READ | PROT_WRITE, MAP_PRIVATE, self->m.fd,
		 MMUWATCH_MMAP_WORDS);
	EXPECT_EQ(MAP_FAILED, p);
	/* A read-only words mapping cannot be made writable later. */
	EXPECT_EQ(-1, mprotect((void *)self->m.words, self->m.words_size,
			       PROT_READ | PROT_WRITE));
	EXPECT_EQ(EACCES, errno);
	/* The ring must be shared (the tail is written by user space). */
	p = mmap(NULL, P, PROT_READ | PROT_WRITE, MAP_PRIVATE, self->m.fd,
		 MMUWATCH_MMAP_RING);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	/* Unknown offset, oversize mapping. */
	p = mmap(NULL, P, PROT_READ, MAP_SHARED, self->m.fd, 0x4000000);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	p = mmap(NULL, self->m.words_size + 16 * P, PROT_READ, MAP_SHARED,
		 self->m.fd, MMUWATCH_MMAP_WORDS);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	p = mmap(NULL, self->m.ring_size + P, PROT_READ, MAP_SHARED,
		 self->m.fd, MMUWATCH_MMAP_RING);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	/* Mappings cannot grow past the shared object (VM_DONTEXPAND). */
	p = mremap((void *)self->m.words, self->m.words_size,
		   self->m.words_size + P, MREMAP_MAYMOVE);
	EXPECT_EQ(MAP_FAILED, p);
	p = mremap(self->m.ring, self->m.ring_size, self->m.ring_size + P,
		   MREMAP_MAYMOVE);
	EXPECT_EQ(MAP_FAILED, p);
	/* Control: a second read-only words mapping shows the same words. */
	p = mmap(NULL, self->m.words_size, PROT_READ, MAP_SHARED, self->m.fd,
		 MMUWATCH_MMAP_WORDS);
	ASSERT_NE(MAP_FAILED, p);
	munmap(p, self->m.words_size);
}

TEST_F(ctx, forked_child_gets_ebadfd)
{
	struct mmuwatch_range r;
	int status;
	pid_t pid;

	ASSERT_EQ(0, mwt_watch(&self->m, self->buf, P, 5, &r));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct mmuwatch_info info;
		struct mmuwatch_unwatch u = { .slot = r.slot, .token = r.token };
		struct mmuwatch_range r2 = { .start = (uintptr_t)self->buf,
					     .len = P };
		int bad = 0;

		bad |= ioc(self->m.fd, MMUWATCH_IOC_INFO, &info) != EBADFD;
		bad |= (ioc(self->m.fd, MMUWATCH_IOC_WATCH, &r2) != EBADFD) << 1;
		bad |= (ioc(self->m.fd, MMUWATCH_IOC_UNWATCH, &u) != EBADFD) << 2;
		/* The ring is the owner's; its words may be read (the
		 * foreign_words test), never written. */
		bad |= (mmap(NULL, P, PROT_READ | PROT_WRITE, MAP_SHARED,
			     self->m.fd, MMUWATCH_MMAP_RING) != MAP_FAILED) << 3;
		bad |= (errno != EBADFD) << 4;
		bad |= (mmap(NULL, P, PROT_READ | PROT_WRITE, MAP_SHARED,
			     self->m.fd, MMUWATCH_MMAP_WORDS) != MAP_FAILED) << 5;
		bad |= (errno != EACCES) << 6;
		/* The child's own munmap must not touch the parent's watch. */
		munmap(self->buf, P);
		_exit(bad);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status));
	/* Parent's watch untouched; the fd still works here. */
	EXPECT_TRUE(mwt_valid(&self->m, &r));
	MWT_EXPECT_NO_EVENT(&self->m);
	EXPECT_EQ(0, mwt_unwatch(&self->m, &r));
}

TEST_F(ctx, word_limit_enospc)
{
	struct mmuwatch_range r[17];
	char *b = mwt_map(8);
	int i;

	/* SETUP asked for 16 words: two watches on each of 8 pages (under
	 * max_watch_depth), then the 17th is refused on a page of its own.
	 */
	ASSERT_NE(NULL, b);
	for (i = 0; i < 16; i++)
		ASSERT_EQ(0, mwt_watch(&self->m, b + (i % 8) * P, P, i, &r[i]));
	EXPECT_EQ(-ENOSPC, mwt_watch(&self->m, self->buf, P, 16, &r[16]));
	/* An invalidated watch gives its slot back at once, and the new
	 * generation's token differs.
	 */
	ASSERT_EQ(0, madvise(b + 3 * P, P, MADV_DONTNEED));
	for (i = 3; i < 16; i += 8)
		EXPECT_TRUE(mwt_invalid(&self->m, &r[i]));
	EXPECT_EQ(2U, mwt_pending(&self->m));
	ASSERT_EQ(0, mwt_watch(&self->m, self->buf, P, 16, &r[16]));
	EXPECT_TRUE(mwt_valid(&self->m, &r[16]));
	for (i = 3; i < 16; i += 8)
		if (r[i].slot == r[16].slot)
			EXPECT_NE(r[i].token, r[16].token);
	munmap(b, 8 * P);
}

TEST(max_watches_param)
{
	long long old = mwt_param("max_watches");
	struct mmuwatch_range r;
	struct mwt m;
	char *buf;
	int i, ret;

	if (old < 0)
		SKIP(return, "module not loaded");
	if (geteuid())
		SKIP(return, "needs root");
	ASSERT_EQ(0, mwt_set_param("max_watches", 8));
	ret = mwt_open(&m, 0, 0);
	buf = mwt_map(9);
	for (i = 0; !ret && i < 8; i++)
		ret = mwt_watch(&m, buf + i * P, P, i, &r);
	EXPECT_EQ(0, ret);
	EXPECT_EQ(8U, m.info.nr_words);
	EXPECT_EQ(-ENOSPC, mwt_watch(&m, buf + 8 * P, P, 8, &r));
	mwt_close(&m);
	/* Bad parameter values are refused. */
	EXPECT_NE(0, mwt_set_param("max_watches", 0));
	EXPECT_EQ(0, mwt_set_param("max_watches", old));
	EXPECT_EQ(old, mwt_param("max_watches"));
}

TEST_HARNESS_MAIN
