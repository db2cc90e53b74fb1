// SPDX-License-Identifier: GPL-2.0
/*
 * What a context reports when its owner's address space goes away, as the
 * UAPI header documents it, seen from a process that holds the fd past the
 * owner's exit (passed with SCM_RIGHTS): one RELEASE over the whole watch
 * for every live one-shot watch (word token | 1); for a persistent watch
 * one RELEASE over the whole watch then UNMAP clipped to it, its word
 * unchanged (the fd polls readable, sysfs events_release counts them).
 * ioctl and mmap from the holder are EBADFD, read() works, and
 * closing the last fd frees the context and every watch (no leak). The
 * control: an already unwatched watch reports nothing at exit.
 */
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include "kselftest_harness.h"
#include "mwt.h"
#include "victim.h"

#define P mwt_page

struct exit_info {
	uint64_t a, b, words_off;
	uint32_t slot_a, slot_p, slot_u;
	uint64_t tok_a, tok_p, tok_u, plen;
};

/* Child: a one-shot, a persistent and an unwatched watch; pass the fd. */
static void owner(int sock, void *arg)
{
	struct mmuwatch_range a = {0}, p = {0}, u = {0};
	struct mmuwatch_unwatch uw;
	struct exit_info xi = {0};
	char *mem = mwt_map(4);
	int fd = open(MMUWATCH_DEVICE, O_RDWR);
	struct mmuwatch_setup s = {64, 64, 0, 0};

	(void)arg;
	if (!mem || fd < 0 || ioctl(fd, MMUWATCH_IOC_SETUP, &s))
		_exit(1);
	a = (struct mmuwatch_range){
		.start = (uintptr_t)mem, .len = P, .cookie = 0xa};
	p = (struct mmuwatch_range){.start = (uintptr_t)mem + P,
				    .len = 2 * P,
				    .cookie = 0xb,
				    .flags = MMUWATCH_WATCH_F_PERSISTENT};
	u = (struct mmuwatch_range){
		.start = (uintptr_t)mem + 3 * P, .len = P, .cookie = 0xc};
	if (ioctl(fd, MMUWATCH_IOC_WATCH, &a) ||
	    ioctl(fd, MMUWATCH_IOC_WATCH, &p) ||
	    ioctl(fd, MMUWATCH_IOC_WATCH, &u))
		_exit(2);
	uw = (struct mmuwatch_unwatch){.slot = u.slot, .token = u.token};
	if (ioctl(fd, MMUWATCH_IOC_UNWATCH, &uw))
		_exit(3);
	xi.a = a.start;
	xi.b = p.start;
	xi.plen = p.len;
	xi.slot_a = a.slot;
	xi.slot_p = p.slot;
	xi.slot_u = u.slot;
	xi.tok_a = a.token;
	xi.tok_p = p.token;
	xi.tok_u = u.token;
	if (mwt_send_fd_msg(sock, fd, &xi, sizeof(xi)))
		_exit(4);
	_exit(0); /* the address space goes with the child */
}

TEST(exit_events_seen_through_passed_fd)
{
	long long ctx0 = mwt_counter("contexts");
	long long w0 = mwt_counter("watches_active");
	long long rel0 = mwt_counter("events_release");
	bool rel_a = false, rel_p = false, unmap_p = false, other = false;
	struct mmuwatch_event ev[8];
	struct mmuwatch_info info;
	struct exit_info xi;
	struct pollfd pfd;
	int fd, i, n;

	MWT_SKIP_WITHOUT_DEVICE();
	fd = mwt_fd_of_exited(owner, NULL, &xi, sizeof(xi));
	ASSERT_LE(0, fd);
	/* The owner's exit made the events: the fd polls readable. */
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	ASSERT_EQ(1, poll(&pfd, 1, 0));
	ASSERT_EQ(POLLIN, pfd.revents & (POLLIN | POLLERR));
	/* One RELEASE per watch that got one (a and p): sysfs counts both. */
	EXPECT_EQ(rel0 + 2, mwt_counter("events_release"));
	/* Not our mm: ioctls and mmap are EBADFD; read() works. */
	ASSERT_EQ(-1, ioctl(fd, MMUWATCH_IOC_INFO, &info));
	ASSERT_EQ(EBADFD, errno);
	ASSERT_EQ(MAP_FAILED,
		  mmap(NULL, P, PROT_READ, MAP_SHARED, fd, MMUWATCH_MMAP_RING));
	ASSERT_EQ(0, fcntl(fd, F_SETFL, O_NONBLOCK));
	n = read(fd, ev, sizeof(ev));
	ASSERT_LT(0, n);
	n /= sizeof(ev[0]);
	for (i = 0; i < n; i++) {
		TH_LOG("event %d: cookie %#llx [%#llx, %#llx) reason %u", i,
		       (unsigned long long)ev[i].cookie,
		       (unsigned long long)ev[i].start,
		       (unsigned long long)ev[i].end, ev[i].reason);
		if (ev[i].cookie == 0xa && ev[i].slot == xi.slot_a &&
		    ev[i].reason == MMUWATCH_REASON_RELEASE &&
		    ev[i].start == xi.a && ev[i].end == xi.a + P && !rel_a)
			rel_a = true;
		else if (ev[i].cookie == 0xb && ev[i].slot == xi.slot_p &&
			 ev[i].reason == MMUWATCH_REASON_RELEASE &&
			 ev[i].start == xi.b && ev[i].end == xi.b + xi.plen &&
			 !rel_p && !unmap_p)
			rel_p = true;
		else if (ev[i].cookie == 0xb && ev[i].slot == xi.slot_p &&
			 ev[i].reason == MMUWATCH_REASON_UNMAP && rel_p &&
			 ev[i].start >= xi.b && ev[i].end <= xi.b + xi.plen &&
			 !unmap_p)
			unmap_p = true;
		else
			other = true;
	}
	EXPECT_TRUE(rel_a);
	EXPECT_TRUE(rel_p);
	EXPECT_TRUE(unmap_p);
	/* Control: nothing for the unwatched watch, nothing twice. */
	EXPECT_FALSE(other);
	EXPECT_EQ(-1, read(fd, ev, sizeof(ev)));
	EXPECT_EQ(EAGAIN, errno);
	/* The context lives while we hold the fd, and goes with it. */
	EXPECT_EQ(ctx0 + 1, mwt_counter("contexts"));
	close(fd);
	EXPECT_EQ(ctx0, mwt_counter("contexts"));
	EXPECT_EQ(w0, mwt_counter("watches_active"));
}

/* Kept by a forked child after the opener exits: same rules, no leak. */
TEST(fd_kept_after_opener_exit)
{
	long long ctx0 = mwt_counter("contexts");
	long long w0 = mwt_counter("watches_active");
	int p[2], res[2], st;
	pid_t opener, holder;
	char c;

	MWT_SKIP_WITHOUT_DEVICE();
	ASSERT_EQ(0, pipe(p));
	ASSERT_EQ(0, pipe(res));
	opener = fork();
	ASSERT_LE(0, opener);
	if (opener == 0) {
		struct mwt m;
		struct mmuwatch_range r;
		char *mem = mwt_map(1);

		if (mwt_open(&m, 16, 16) || mwt_watch(&m, mem, P, 7, &r))
			_exit(1);
		holder = fork();
		if (holder == 0) {
			struct mmuwatch_event e;
			struct mmuwatch_info info;

			/* Wait for the opener to exit. */
			close(p[1]);
			c = 0;
			if (read(p[0], &c, 1) != 0)
				c = 2;
			else if (ioctl(m.fd, MMUWATCH_IOC_INFO, &info) != -1 ||
				 errno != EBADFD)
				c = 3;
			else if (read(m.fd, &e, sizeof(e)) != sizeof(e) ||
				 e.cookie != 7 ||
				 e.reason != MMUWATCH_REASON_RELEASE)
				c = 4;
			/* Reparented: report through the pipe. */
			if (write(res[1], &c, 1) != 1)
				_exit(5);
			_exit(0);
		}
		_exit(0);
	}
	close(p[0]);
	close(res[1]);
	ASSERT_EQ(opener, waitpid(opener, &st, 0));
	ASSERT_EQ(0, st);
	/* The opener is gone: let the holder (its child) look. */
	close(p[1]);
	ASSERT_EQ(1, read(res[0], &c, 1));
	EXPECT_EQ(0, c);
	for (st = 0; st < 500 && mwt_counter("contexts") > ctx0; st++)
		usleep(10000);
	EXPECT_EQ(ctx0, mwt_counter("contexts"));
	EXPECT_EQ(w0, mwt_counter("watches_active"));
}

TEST_HARNESS_MAIN
