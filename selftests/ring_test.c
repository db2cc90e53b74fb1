// SPDX-License-Identifier: GPL-2.0
/*
 * The event ring: overflow of a tiny ring (sticky flag, lost count, words
 * still exact, the oldest events kept and read before EOVERFLOW,
 * RESET_OVERFLOW), garbage written into the user-writable header, an event
 * counted lost under a corrupt tail, read() blocking and non-blocking
 * semantics and from a forked child, poll(), an fd closed
 * while another thread sleeps in poll(), sleepers in read()/poll() woken
 * when another reader finds a corrupt tail, and events of a process that
 * exited after passing its fd to another process (SCM_RIGHTS).
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mwt.h"
#include "victim.h"

#define P mwt_page
#define EVSZ sizeof(struct mmuwatch_event)

/* An address that is never mapped, hidden from the compiler's checks. */
static void *volatile bad_ptr = (void *)16;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Wait (up to 10 s) until thread tid sleeps in the kernel (state S). */
static bool wait_sleeping(pid_t tid)
{
	char path[64], buf[256], *st;
	int i, fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	for (i = 0; i < 10000; i++) {
		fd = open(path, O_RDONLY);
		if (fd < 0)
			return false;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			buf[n] = 0;
			st = strrchr(buf, ')');
			if (st && st[1] == ' ' && st[2] == 'S')
				return true;
		}
		usleep(1000);
	}
	return false;
}

static void set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

/* n fresh pages with one watch each (cookie cookie0 + i), or NULL. */
static char *watch_pages(struct mwt *m, int n, uint64_t cookie0,
			 struct mmuwatch_range *r)
{
	char *mem = mwt_map(n);
	int i;

	for (i = 0; mem && i < n; i++)
		if (mwt_watch(m, mem + i * P, P, cookie0 + i, &r[i]))
			return NULL;
	return mem;
}

/* RESET_OVERFLOW (what was lost in *lost); then the ring must be clean:
 * no flag, no lost count, nothing to poll for. 0, or which check failed.
 */
static int reset_overflow(struct mwt *m, uint64_t *lost)
{
	struct pollfd pfd = { .fd = m->fd, .events = POLLIN };

	if (ioctl(m->fd, MMUWATCH_IOC_RESET_OVERFLOW, lost))
		return 1;
	if (m->ring->flags)
		return 2;
	if (m->ring->lost)
		return 3;
	return poll(&pfd, 1, 0) ? 4 : 0;
}

TEST(overflow_tiny_ring)
{
	struct mmuwatch_range r[10];
	struct mmuwatch_event e, buf[4];
	bool seen[10] = { false };
	struct pollfd pfd;
	uint64_t lost = 0;
	struct mwt m;
	char *mem;
	int i;

	MWT_OPEN_OR_SKIP(&m, 4, 64);
	ASSERT_EQ(4U, m.info.ring_entries);
	mem = watch_pages(&m, 10, 1000, r);
	ASSERT_NE(NULL, mem);
	/* One munmap, ten invalidations, room for four. */
	ASSERT_EQ(0, munmap(mem, 10 * P));
	for (i = 0; i < 10; i++)
		ASSERT_TRUE(mwt_invalid(&m, &r[i]));
	ASSERT_EQ(4U, mwt_pending(&m));
	ASSERT_EQ(MMUWATCH_RING_F_OVERFLOW, m.ring->flags);
	ASSERT_EQ(6U, m.ring->lost);
	for (i = 0; i < 4; i++) {
		ASSERT_EQ(1, mwt_pop(&m, &e));
		ASSERT_GE(e.cookie, 1000U);
		ASSERT_LT(e.cookie, 1010U);
		ASSERT_FALSE(seen[e.cookie - 1000]);
		seen[e.cookie - 1000] = true;
		EXPECT_EQ((uintptr_t)(mem + (e.cookie - 1000) * P), e.start);
		EXPECT_EQ(e.start + P, e.end);
		EXPECT_EQ(r[e.cookie - 1000].slot, e.slot);
	}
	/* Sticky: still flagged after draining; read() says EOVERFLOW and
	 * poll() stays readable until the reset.
	 */
	ASSERT_EQ(MMUWATCH_RING_F_OVERFLOW, m.ring->flags);
	set_nonblock(m.fd, true);
	ASSERT_EQ(-1, read(m.fd, buf, sizeof(buf)));
	ASSERT_EQ(EOVERFLOW, errno);
	pfd = (struct pollfd){ .fd = m.fd, .events = POLLIN };
	ASSERT_EQ(1, poll(&pfd, 1, 0));
	ASSERT_EQ(0, reset_overflow(&m, &lost));
	ASSERT_EQ(6U, lost);
	ASSERT_EQ(-1, read(m.fd, buf, sizeof(buf)));
	ASSERT_EQ(EAGAIN, errno);
	ASSERT_EQ(0, ioctl(m.fd, MMUWATCH_IOC_RESET_OVERFLOW, &lost));
	ASSERT_EQ(0U, lost);
	/* The ring works again after the reset. */
	mem = mwt_map(1);
	ASSERT_EQ(0, mwt_watch(&m, mem, P, 77, &r[0]));
	ASSERT_EQ(0, munmap(mem, P));
	ASSERT_EQ((ssize_t)EVSZ, read(m.fd, buf, sizeof(buf)));
	EXPECT_EQ(77U, buf[0].cookie);
	EXPECT_EQ(0U, m.ring->flags);
	mwt_close(&m);
}

/*
 * A full ring drops the new event, never an old one: five watches
 * invalidated one munmap at a time into a ring of two leave the first two
 * events, which read() hands out before it reports EOVERFLOW;
 * RESET_OVERFLOW returns the three lost. Control: the words of all five
 * say "changed", lost events included.
 */
TEST(overflow_keeps_oldest_read_first)
{
	struct mmuwatch_range r[5];
	struct mmuwatch_event ev[8];
	struct pollfd pfd;
	uint64_t lost = 0;
	struct mwt m;
	char *mem;
	int i;

	MWT_OPEN_OR_SKIP(&m, 2, 16);
	ASSERT_EQ(2U, m.info.ring_entries);
	ASSERT_EQ(16U, m.info.nr_words);
	mem = watch_pages(&m, 5, 600, r);
	ASSERT_NE(NULL, mem);
	for (i = 0; i < 5; i++)
		ASSERT_EQ(0, munmap(mem + i * P, P));
	for (i = 0; i < 5; i++)
		ASSERT_TRUE(mwt_invalid(&m, &r[i]));
	EXPECT_EQ(2U, m.ring->head);
	EXPECT_EQ(MMUWATCH_RING_F_OVERFLOW, m.ring->flags);
	EXPECT_EQ(3U, m.ring->lost);
	set_nonblock(m.fd, true);
	pfd = (struct pollfd){ .fd = m.fd, .events = POLLIN };
	ASSERT_EQ(1, poll(&pfd, 1, 0));
	ASSERT_EQ((ssize_t)(2 * EVSZ), read(m.fd, ev, sizeof(ev)));
	for (i = 0; i < 2; i++) {
		EXPECT_EQ(600U + i, ev[i].cookie);
		EXPECT_EQ(r[i].slot, ev[i].slot);
		EXPECT_EQ((uintptr_t)(mem + i * P), ev[i].start);
		EXPECT_EQ((uintptr_t)(mem + (i + 1) * P), ev[i].end);
		EXPECT_EQ((__u32)MMUWATCH_REASON_UNMAP, ev[i].reason);
	}
	ASSERT_EQ(-1, read(m.fd, ev, sizeof(ev)));
	ASSERT_EQ(EOVERFLOW, errno);
	ASSERT_EQ(0, reset_overflow(&m, &lost));
	EXPECT_EQ(3U, lost);
	mwt_close(&m);
}

TEST(garbage_in_ring_header)
{
	struct mmuwatch_range r;
	struct mmuwatch_event ev[8];
	struct pollfd pfd;
	uint64_t lost = 0;
	struct mwt m;
	uint32_t head;
	char *mem;
	int i;

	MWT_OPEN_OR_SKIP(&m, 8, 64);
	set_nonblock(m.fd, true);
	srand(1234);
	mem = mwt_map(40);
	ASSERT_NE(NULL, mem);
	/* Every field of the header is scribbled; the kernel must keep
	 * producing into its own bounds and keep the words exact.
	 */
	for (i = 0; i < 40; i++) {
		m.ring->tail = (i & 1) ? (uint32_t)rand() :
			       m.ring->head + 1 + (uint32_t)rand() % 64;
		m.ring->head = (uint32_t)rand();
		m.ring->entries = (uint32_t)rand();
		m.ring->flags = (uint32_t)rand();
		m.ring->lost = ((uint64_t)rand() << 32) | (uint32_t)rand();
		memset((void *)m.ring->reserved, 0xff, sizeof(m.ring->reserved));
		ASSERT_EQ(0, mwt_watch(&m, mem + i * P, P, i, &r));
		ASSERT_EQ(0, munmap(mem + i * P, P));
		ASSERT_TRUE(mwt_invalid(&m, &r));
		pfd = (struct pollfd){ .fd = m.fd, .events = POLLIN };
		ASSERT_EQ(1, poll(&pfd, 1, 0));
		/* read() refuses a corrupt tail instead of trusting it. */
		if (read(m.fd, ev, sizeof(ev)) < 0)
			ASSERT_TRUE(errno == EIO || errno == EOVERFLOW);
	}
	/* Repair: RESET_OVERFLOW puts a corrupt tail back to the kernel's
	 * head (the user-visible head may still hold our garbage until the
	 * next event is published).
	 */
	m.ring->tail = m.ring->head + 1000;
	ASSERT_EQ(0, ioctl(m.fd, MMUWATCH_IOC_RESET_OVERFLOW, &lost));
	ASSERT_LT(0U, lost);
	ASSERT_EQ(0U, m.ring->flags);
	head = m.ring->tail;
	mem = mwt_map(1);
	ASSERT_EQ(0, mwt_watch(&m, mem, P, 4242, &r));
	ASSERT_EQ(0, munmap(mem, P));
	ASSERT_EQ(head + 1, m.ring->head);
	ASSERT_EQ(1U, mwt_pending(&m));
	ASSERT_EQ((ssize_t)EVSZ, read(m.fd, ev, sizeof(ev)));
	EXPECT_EQ(4242U, ev[0].cookie);
	EXPECT_EQ(head + 1, m.ring->tail);
	mwt_close(&m);
}

TEST(read_nonblocking)
{
	struct mmuwatch_range r[3];
	struct mmuwatch_event ev[3];
	struct mwt m;
	char *mem;
	int fd, i;

	/* A context that was never set up has nothing to read. */
	fd = open(MMUWATCH_DEVICE, O_RDONLY | O_NONBLOCK);
	if (fd < 0 && !getenv("MWT_REQUIRE_DEVICE"))
		SKIP(return, "no device");
	ASSERT_LE(0, fd);
	ASSERT_EQ(-1, read(fd, ev, sizeof(ev)));
	ASSERT_EQ(EAGAIN, errno);
	close(fd);

	MWT_OPEN_OR_SKIP(&m, 16, 16);
	set_nonblock(m.fd, true);
	ASSERT_EQ(-1, read(m.fd, ev, sizeof(ev)));
	ASSERT_EQ(EAGAIN, errno);
	mem = watch_pages(&m, 3, 10, r);
	ASSERT_NE(NULL, mem);
	ASSERT_EQ(0, munmap(mem, 3 * P));
	/* Too small for one event. */
	ASSERT_EQ(-1, read(m.fd, ev, EVSZ - 1));
	ASSERT_EQ(EINVAL, errno);
	/* A bad buffer consumes nothing. */
	ASSERT_EQ(-1, read(m.fd, bad_ptr, sizeof(ev)));
	ASSERT_EQ(EFAULT, errno);
	ASSERT_EQ(3U, mwt_pending(&m));
	/* Whole events only: 2.5 events of room gives 2. */
	ASSERT_EQ((ssize_t)(2 * EVSZ), read(m.fd, ev, 2 * EVSZ + EVSZ / 2));
	ASSERT_EQ((ssize_t)EVSZ, read(m.fd, ev + 2, EVSZ));
	for (i = 0; i < 3; i++) {
		EXPECT_EQ(10U + i, ev[i].cookie);
		EXPECT_EQ((uintptr_t)(mem + i * P), ev[i].start);
		EXPECT_EQ((__u32)MMUWATCH_REASON_UNMAP, ev[i].reason);
	}
	ASSERT_EQ(-1, read(m.fd, ev, sizeof(ev)));
	ASSERT_EQ(EAGAIN, errno);
	ASSERT_EQ(0U, mwt_pending(&m));
	mwt_close(&m);
}

/*
 * read() works from any process that holds the fd: a forked child, whose
 * ioctls get EBADFD, takes the parent's event with read(), and the parent
 * then finds it consumed. Control: before the fork the event is pending
 * and polls readable.
 */
TEST(read_from_forked_child)
{
	struct mmuwatch_event ev[4];
	struct mmuwatch_range r;
	struct pollfd pfd;
	struct mwt m;
	int status;
	char *mem;
	pid_t pid;

	MWT_OPEN_OR_SKIP(&m, 16, 16);
	set_nonblock(m.fd, true);
	mem = mwt_map(2);
	ASSERT_NE(NULL, mem);
	ASSERT_EQ(0, mwt_watch(&m, mem, 2 * P, 501, &r));
	ASSERT_EQ(0, munmap(mem, 2 * P));
	ASSERT_EQ(1U, mwt_pending(&m));
	pfd = (struct pollfd){ .fd = m.fd, .events = POLLIN };
	ASSERT_EQ(1, poll(&pfd, 1, 0));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct mmuwatch_info info;

		if (ioctl(m.fd, MMUWATCH_IOC_INFO, &info) != -1 ||
		    errno != EBADFD)
			_exit(2);
		if (read(m.fd, ev, sizeof(ev)) != (ssize_t)EVSZ)
			_exit(3);
		_exit(ev[0].cookie == 501 &&
		      ev[0].reason == MMUWATCH_REASON_UNMAP &&
		      ev[0].start == (uintptr_t)mem &&
		      ev[0].end == (uintptr_t)mem + 2 * P ? 0 : 4);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status));
	EXPECT_EQ(0U, mwt_pending(&m));
	ASSERT_EQ(-1, read(m.fd, ev, sizeof(ev)));
	ASSERT_EQ(EAGAIN, errno);
	ASSERT_EQ(0, poll(&pfd, 1, 0));
	mwt_close(&m);
}

TEST(watch_own_ring_mapping)
{
	struct mmuwatch_range r;
	struct mwt m;
	void *second;

	/* A second mapping of the ring itself, watched and then unmapped:
	 * the event is written through the kernel's own view of the ring.
	 */
	MWT_OPEN_OR_SKIP(&m, 16, 16);
	second = mmap(NULL, m.ring_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		      m.fd, MMUWATCH_MMAP_RING);
	ASSERT_NE(MAP_FAILED, second);
	ASSERT_EQ(0, mwt_watch(&m, second, m.ring_size, 0x41, &r));
	ASSERT_EQ(0, munmap(second, m.ring_size));
	ASSERT_TRUE(mwt_invalid(&m, &r));
	MWT_EXPECT_ONE_EVENT(&m, 0x41, second, (char *)second + m.ring_size,
			     MMUWATCH_REASON_UNMAP);
	mwt_close(&m);
}

struct reader {
	int fd;
	volatile pid_t tid;
	volatile int armed;	/* set just before the event is caused */
	int armed_at_return;
	ssize_t ret;
	int err;
	struct mmuwatch_event ev;
};

static void *reader_thread(void *arg)
{
	struct reader *rd = arg;

	rd->tid = gettid();
	rd->ret = read(rd->fd, &rd->ev, sizeof(rd->ev));
	rd->err = errno;
	rd->armed_at_return = rd->armed;
	return NULL;
}

static void on_usr1(int sig)
{
	(void)sig;
}

TEST(read_blocking)
{
	struct reader rd = { 0 };
	struct mmuwatch_range r;
	struct sigaction sa = { .sa_handler = on_usr1 };
	pthread_t th;
	struct mwt m;
	char *mem;

	MWT_OPEN_OR_SKIP(&m, 16, 16);
	mem = mwt_map(1);
	ASSERT_EQ(0, mwt_watch(&m, mem, P, 0xb10c, &r));
	rd.fd = m.fd;
	ASSERT_EQ(0, pthread_create(&th, NULL, reader_thread, &rd));
	while (!rd.tid)
		usleep(1000);
	ASSERT_TRUE(wait_sleeping(rd.tid));
	rd.armed = 1;
	ASSERT_EQ(0, munmap(mem, P));
	ASSERT_EQ(0, pthread_join(th, NULL));
	ASSERT_EQ(1, rd.armed_at_return);	/* it did block until then */
	ASSERT_EQ((ssize_t)EVSZ, rd.ret);
	EXPECT_EQ(0xb10cU, rd.ev.cookie);
	EXPECT_EQ((uintptr_t)mem, rd.ev.start);

	/* A signal interrupts a blocked read (no SA_RESTART): EINTR. */
	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
	rd.armed = 0;
	rd.tid = 0;
	ASSERT_EQ(0, pthread_create(&th, NULL, reader_thread, &rd));
	while (!rd.tid)
		usleep(1000);
	ASSERT_TRUE(wait_sleeping(rd.tid));
	rd.armed = 1;
	ASSERT_EQ(0, pthread_kill(th, SIGUSR1));
	ASSERT_EQ(0, pthread_join(th, NULL));
	ASSERT_EQ(1, rd.armed_at_return);
	ASSERT_EQ(-1, rd.ret);
	ASSERT_EQ(EINTR, rd.err);
	mwt_close(&m);
}

TEST(poll_states)
{
	struct mmuwatch_range r;
	struct pollfd pfd;
	struct mwt m;
	char *mem;

	MWT_OPEN_OR_SKIP(&m, 16, 16);
	mem = mwt_map(1);
	ASSERT_EQ(0, mwt_watch(&m, mem, P, 1, &r));
	pfd = (struct pollfd){ .fd = m.fd, .events = POLLIN };
	ASSERT_EQ(0, poll(&pfd, 1, 0));
	ASSERT_EQ(0, munmap(mem, P));
	ASSERT_EQ(1, poll(&pfd, 1, 0));
	ASSERT_EQ(POLLIN, pfd.revents & (POLLIN | POLLERR));
	MWT_EXPECT_ONE_EVENT(&m, 1, mem, mem + P, MMUWATCH_REASON_UNMAP);
	ASSERT_EQ(0, poll(&pfd, 1, 0));
	mwt_close(&m);
}

struct poller {
	int fd;
	volatile pid_t tid;
	int timeout_ms;
	int ret;
	short revents;
	double secs;
};

static void *poll_thread(void *arg)
{
	struct poller *p = arg;
	struct pollfd pfd = { .fd = p->fd, .events = POLLIN };
	double t0 = now();

	p->tid = gettid();
	p->ret = poll(&pfd, 1, p->timeout_ms);
	p->revents = pfd.revents;
	p->secs = now() - t0;
	return NULL;
}

/* A bare context (no mappings, which would hold the file open). */
static int bare_ctx(void *mem, struct mmuwatch_range *r)
{
	int fd = open(MMUWATCH_DEVICE, O_RDWR);

	if (fd < 0)
		return -1;
	memset(r, 0, sizeof(*r));
	r->start = (uintptr_t)mem;
	r->len = P;
	r->cookie = 5;
	if (ioctl(fd, MMUWATCH_IOC_WATCH, r)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A bare context watching one new page (*mem), polled by a new thread
 * (*th) that sleeps in poll() when this returns 0.
 */
static int start_bare_poller(struct poller *p, char **mem, pthread_t *th)
{
	struct mmuwatch_range r;

	*mem = mwt_map(1);
	p->fd = *mem ? bare_ctx(*mem, &r) : -1;
	if (p->fd < 0 || pthread_create(th, NULL, poll_thread, p))
		return -1;
	while (!p->tid)
		usleep(1000);
	return wait_sleeping(p->tid) ? 0 : -1;
}

/* A bare context polled by another thread; the tests close its fd. */
FIXTURE(closing) {
	long long ctx0;
	struct poller p;
	pthread_t th;
	char *mem;
};

FIXTURE_SETUP(closing)
{
	if (access(MMUWATCH_DEVICE, F_OK) && !getenv("MWT_REQUIRE_DEVICE"))
		SKIP(_exit(255), "no device");
	self->ctx0 = mwt_counter("contexts");
}

FIXTURE_TEARDOWN(closing)
{
}

TEST_F(closing, close_while_polling)
{
	self->p.timeout_ms = 10000;
	ASSERT_EQ(0, start_bare_poller(&self->p, &self->mem, &self->th));
	ASSERT_EQ(self->ctx0 + 1, mwt_counter("contexts"));
	/* The poller holds the file: closing the fd only drops the number. */
	ASSERT_EQ(0, close(self->p.fd));
	ASSERT_EQ(self->ctx0 + 1, mwt_counter("contexts"));
	/* An event on the still-live context wakes the poller, which then
	 * finds its fd gone.
	 */
	ASSERT_EQ(0, munmap(self->mem, P));
	ASSERT_EQ(0, pthread_join(self->th, NULL));
	EXPECT_LT(self->p.secs, 5.0);
	EXPECT_EQ(1, self->p.ret);
	EXPECT_EQ(POLLNVAL, self->p.revents);
	/* Context released once the poller let go of the file. */
	EXPECT_EQ(self->ctx0, mwt_counter("contexts"));
}

TEST_F(closing, close_while_polling_timeout)
{
	self->p.timeout_ms = 1000;
	ASSERT_EQ(0, start_bare_poller(&self->p, &self->mem, &self->th));
	ASSERT_EQ(0, close(self->p.fd));
	ASSERT_EQ(0, pthread_join(self->th, NULL));
	/* Woken by the timeout, poll's last scan finds the fd gone. */
	EXPECT_GE(self->p.secs, 0.9);
	EXPECT_EQ(1, self->p.ret);
	EXPECT_EQ(POLLNVAL, self->p.revents);
	EXPECT_EQ(self->ctx0, mwt_counter("contexts"));
	/* The released context's watch is gone: munmap is harmless. */
	ASSERT_EQ(0, munmap(self->mem, P));
}

/* Join th within secs seconds; nonzero if it is still running. */
static int join_within(pthread_t th, int secs)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += secs;
	return pthread_timedjoin_np(th, NULL, &ts);
}

/*
 * The tail is user memory: the kernel learns it is corrupt only when a
 * reader looks. That reader must wake the others sleeping in read() or
 * poll() at once (EIO / EPOLLERR), not leave them until the next event.
 * If the wakeup is missing, the sleeper outlives the join deadline and the
 * test fails (the harness child then exits, taking the thread with it).
 */
TEST(corrupt_tail_wakes_sleepers)
{
	struct poller p = { .timeout_ms = 60000 };
	struct mmuwatch_event ev;
	struct reader rd = { 0 };
	struct pollfd pfd;
	uint64_t lost = 0;
	pthread_t th;
	struct mwt m;

	MWT_OPEN_OR_SKIP(&m, 16, 16);

	/* A reader sleeps in read(); this thread corrupts the tail, polls. */
	rd.fd = m.fd;
	ASSERT_EQ(0, pthread_create(&th, NULL, reader_thread, &rd));
	while (!rd.tid)
		usleep(1000);
	ASSERT_TRUE(wait_sleeping(rd.tid));
	rd.armed = 1;
	m.ring->tail = m.ring->head + 1000;
	pfd = (struct pollfd){ .fd = m.fd, .events = POLLIN };
	ASSERT_EQ(1, poll(&pfd, 1, 0));
	ASSERT_EQ(POLLERR, pfd.revents & POLLERR);
	ASSERT_EQ(0, join_within(th, 10));
	ASSERT_EQ(1, rd.armed_at_return);
	ASSERT_EQ(-1, rd.ret);
	ASSERT_EQ(EIO, rd.err);

	/* Repaired, then a poller sleeps; this thread corrupts, reads. */
	ASSERT_EQ(0, ioctl(m.fd, MMUWATCH_IOC_RESET_OVERFLOW, &lost));
	ASSERT_EQ(m.ring->head, m.ring->tail);
	p.fd = m.fd;
	ASSERT_EQ(0, pthread_create(&th, NULL, poll_thread, &p));
	while (!p.tid)
		usleep(1000);
	ASSERT_TRUE(wait_sleeping(p.tid));
	m.ring->tail = m.ring->head - 17;	/* more than entries behind */
	set_nonblock(m.fd, true);
	ASSERT_EQ(-1, read(m.fd, &ev, sizeof(ev)));
	ASSERT_EQ(EIO, errno);
	ASSERT_EQ(0, join_within(th, 10));
	EXPECT_EQ(1, p.ret);
	EXPECT_EQ(POLLERR, p.revents & POLLERR);
	EXPECT_LT(p.secs, 30.0);

	/* Repaired again: the ring works as before. */
	ASSERT_EQ(0, ioctl(m.fd, MMUWATCH_IOC_RESET_OVERFLOW, &lost));
	pfd = (struct pollfd){ .fd = m.fd, .events = POLLIN };
	ASSERT_EQ(0, poll(&pfd, 1, 0));
	ASSERT_EQ(-1, read(m.fd, &ev, sizeof(ev)));
	ASSERT_EQ(EAGAIN, errno);
	mwt_close(&m);
}

/*
 * An event that arrives while the user-written tail is corrupt is counted
 * lost (the producer treats the ring as full) and never written anywhere;
 * the word is still exact. RESET_OVERFLOW repairs the tail and returns
 * the one lost event. Control: the next event is delivered as usual.
 */
TEST(corrupt_tail_event_counted_lost)
{
	struct mmuwatch_event ev;
	struct mmuwatch_range r;
	struct pollfd pfd;
	uint64_t lost = 0;
	struct mwt m;
	char *mem;

	MWT_OPEN_OR_SKIP(&m, 16, 16);
	set_nonblock(m.fd, true);
	mem = mwt_map(2);
	ASSERT_NE(NULL, mem);
	ASSERT_EQ(0, mwt_watch(&m, mem, P, 700, &r));
	m.ring->tail = m.ring->head + 1000;
	ASSERT_EQ(0, munmap(mem, P));
	ASSERT_TRUE(mwt_invalid(&m, &r));
	EXPECT_EQ(MMUWATCH_RING_F_OVERFLOW, m.ring->flags);
	EXPECT_EQ(1U, m.ring->lost);
	EXPECT_EQ(0U, m.ring->head);
	pfd = (struct pollfd){ .fd = m.fd, .events = POLLIN };
	ASSERT_EQ(1, poll(&pfd, 1, 0));
	EXPECT_EQ(POLLERR, pfd.revents & POLLERR);
	ASSERT_EQ(-1, read(m.fd, &ev, sizeof(ev)));
	ASSERT_EQ(EIO, errno);
	ASSERT_EQ(0, ioctl(m.fd, MMUWATCH_IOC_RESET_OVERFLOW, &lost));
	EXPECT_EQ(1U, lost);
	EXPECT_EQ(m.ring->head, m.ring->tail);
	ASSERT_EQ(-1, read(m.fd, &ev, sizeof(ev)));
	ASSERT_EQ(EAGAIN, errno);
	ASSERT_EQ(0, mwt_watch(&m, mem + P, P, 701, &r));
	ASSERT_EQ(0, munmap(mem + P, P));
	MWT_EXPECT_ONE_EVENT(&m, 701, mem + P, mem + 2 * P,
			     MMUWATCH_REASON_UNMAP);
	mwt_close(&m);
}

struct exit_info {
	uint64_t a, b;	/* watched starts */
	uint64_t token_a, token_b;
	uint32_t slot_a, slot_b;
};

/* Child: two watches on a context set up by the first WATCH; pass the fd
 * and exit (the address space goes with the child).
 */
static void exit_owner(int sock, void *arg)
{
	struct mmuwatch_range r1 = { 0 }, r2 = { 0 };
	char *mem = mwt_map(3);
	int cfd = open(MMUWATCH_DEVICE, O_RDWR);
	struct exit_info xi;

	(void)arg;
	if (!mem || cfd < 0)
		_exit(1);
	r1.start = (uintptr_t)mem;
	r1.len = P;
	r1.cookie = 0xe1;
	r2.start = (uintptr_t)mem + P;
	r2.len = 2 * P;
	r2.cookie = 0xe2;
	if (ioctl(cfd, MMUWATCH_IOC_WATCH, &r1) ||
	    ioctl(cfd, MMUWATCH_IOC_WATCH, &r2))
		_exit(2);
	xi.a = r1.start;
	xi.b = r2.start;
	xi.token_a = r1.token;
	xi.token_b = r2.token;
	xi.slot_a = r1.slot;
	xi.slot_b = r2.slot;
	if (mwt_send_fd_msg(sock, cfd, &xi, sizeof(xi)))
		_exit(3);
}

TEST(process_exit_events)
{
	struct mmuwatch_event ev[4];
	struct mmuwatch_info info;
	struct exit_info xi;
	const volatile __u64 *w;
	bool got_a = false, got_b = false;
	int fd, i;

	MWT_SKIP_WITHOUT_DEVICE();
	fd = mwt_fd_of_exited(exit_owner, NULL, &xi, sizeof(xi));
	ASSERT_LE(0, fd);
	/* Not our mm: ioctls and the ring refused, read() works; the
	 * words map read-only and say the exit killed both watches. */
	ASSERT_EQ(-1, ioctl(fd, MMUWATCH_IOC_INFO, &info));
	ASSERT_EQ(EBADFD, errno);
	ASSERT_EQ(MAP_FAILED, mmap(NULL, P, PROT_READ | PROT_WRITE, MAP_SHARED,
				   fd, MMUWATCH_MMAP_RING));
	ASSERT_EQ(EBADFD, errno);
	w = mmap(NULL, P, PROT_READ, MAP_SHARED, fd, MMUWATCH_MMAP_WORDS);
	ASSERT_NE(MAP_FAILED, w);
	EXPECT_EQ(xi.token_a | MMUWATCH_WORD_INVALID, w[xi.slot_a]);
	EXPECT_EQ(xi.token_b | MMUWATCH_WORD_INVALID, w[xi.slot_b]);
	munmap((void *)w, P);
	set_nonblock(fd, true);
	ASSERT_EQ((ssize_t)(2 * EVSZ), read(fd, ev, sizeof(ev)));
	for (i = 0; i < 2; i++) {
		EXPECT_EQ((__u32)MMUWATCH_REASON_RELEASE, ev[i].reason);
		if (ev[i].cookie == 0xe1) {
			got_a = true;
			EXPECT_EQ(xi.a, ev[i].start);
			EXPECT_EQ(xi.a + P, ev[i].end);
		} else if (ev[i].cookie == 0xe2) {
			got_b = true;
			EXPECT_EQ(xi.b, ev[i].start);
			EXPECT_EQ(xi.b + 2 * P, ev[i].end);
		}
	}
	EXPECT_TRUE(got_a && got_b);
	ASSERT_EQ(-1, read(fd, ev, sizeof(ev)));
	ASSERT_EQ(EAGAIN, errno);
	close(fd);
}

TEST_HARNESS_MAIN
