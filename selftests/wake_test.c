// SPDX-License-Identifier: GPL-2.0
/*
 * Wake-ups of ring readers (include/uapi/mmuwatch.h, poll()): batched like
 * a pipe's, and never lost.
 *  - batch: an munmap over many one-shot watches runs one notifier
 *    callback per watch; a reader asleep in epoll_wait (edge-triggered)
 *    that does not consume is woken exactly once over 16 such munmaps:
 *    only the callback that finds the ring empty wakes (one wake-up per
 *    watch, as before batching, re-reports each time). Control (same program,
 *    MWT_WAKE_CONTROL=1): the reader consumes after every wake-up, so the
 *    ring is empty again at each next callback and the reader must count
 *    more than one wake-up; an exact-one check on it fails, which proves
 *    the count can see extra wake-ups.
 *  - no lost wake-up: a writer thread kills watches one munmap at a time
 *    while a reader drains the mapped ring to empty and sleeps in
 *    epoll_wait (edge-triggered) again, many thousand times. A reader
 *    left asleep with events pending (the producer decided "not empty"
 *    from a stale tail) times out: failure. Control (MWT_WAKE_CONTROL=1):
 *    the reader takes one event per wake-up and goes back to sleep with
 *    the rest pending, which edge-triggered epoll never reports again:
 *    the same check must see it.
 * Each test asserts its normal outcome; with MWT_WAKE_CONTROL=1 both must
 * fail (vm/tests.d/12-selftests-controls.sh checks that).
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mwt.h"

#define P mwt_page

static bool control(void)
{
	const char *s = getenv("MWT_WAKE_CONTROL");

	return s && *s == '1';
}

static int epoll_for(int fd)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0)
		return -1;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)) {
		close(ep);
		return -1;
	}
	return ep;
}

/* Consume every pending event; the number consumed. */
static unsigned int drain(struct mwt *m)
{
	struct mmuwatch_event e;
	unsigned int n = 0;

	while (mwt_pop(m, &e))
		n++;
	return n;
}

struct counter {
	struct mwt *m;
	int ep;
	volatile bool stop;
	unsigned int wakes;
	unsigned int consumed;
};

/* Count epoll reports until told to stop (and 0.5 s pass quietly). */
static void *count_wakes(void *arg)
{
	struct counter *c = arg;
	struct epoll_event ev;
	int n;

	for (;;) {
		n = epoll_wait(c->ep, &ev, 1, 500);
		if (n > 0) {
			c->wakes++;
			if (control())
				c->consumed += drain(c->m);
		} else if (c->stop) {
			return NULL;
		}
	}
}

#define BATCH 2048U
#define CHUNKS 16U

TEST(batch_one_wake)
{
	struct counter c = { 0 };
	struct mmuwatch_range r;
	pthread_t tid;
	struct mwt m;
	char *mem;
	unsigned int i;

	MWT_OPEN_OR_SKIP(&m, 2 * BATCH, 2 * BATCH);
	mem = mwt_map(BATCH);
	ASSERT_NE(NULL, mem);
	for (i = 0; i < BATCH; i++)
		ASSERT_EQ(0, mwt_watch(&m, mem + i * P, P, i, &r));
	c.m = &m;
	c.ep = epoll_for(m.fd);
	ASSERT_LE(0, c.ep);
	ASSERT_EQ(0, pthread_create(&tid, NULL, count_wakes, &c));
	usleep(200000); /* the reader is asleep in epoll_wait */
	/* CHUNKS munmaps, apart: a reader that consumes catches up between. */
	for (i = 0; i < CHUNKS; i++) {
		ASSERT_EQ(0, munmap(mem + i * (BATCH / CHUNKS) * P,
				    BATCH / CHUNKS * P));
		usleep(20000);
	}
	c.stop = true;
	pthread_join(tid, NULL);
	c.consumed += drain(&m);
	TH_LOG("%u callbacks, %u events, %u wake-ups", BATCH, c.consumed,
	       c.wakes);
	EXPECT_EQ(BATCH, c.consumed);
	EXPECT_EQ(1U, c.wakes);
	close(c.ep);
	mwt_close(&m);
}

#define LOST_ROUNDS 4000U
/*
 * Work floor and time budget: at least LOST_MIN rounds, then stop at
 * LOST_SECS (a debug kernel under TCG does a few hundred rounds in that
 * time; a Debian kernel all 4000 in a few seconds).
 */
#define LOST_MIN 400U
#define LOST_SECS 20

struct writer {
	char *mem;
	unsigned int n;
	unsigned int done;	/* munmaps so far (atomic) */
	int finished;		/* atomic */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One munmap (one callback, one event) at a time, with short pauses. */
static void *kill_one_by_one(void *arg)
{
	struct writer *w = arg;
	double end = now_s() + LOST_SECS;
	unsigned int i;

	for (i = 0; i < w->n; i++) {
		if (i >= LOST_MIN && now_s() > end)
			break;
		munmap(w->mem + 2 * (size_t)i * P, P);
		__atomic_store_n(&w->done, i + 1, __ATOMIC_RELEASE);
		/* Let the reader catch up and sleep often. */
		usleep(20);
	}
	__atomic_store_n(&w->finished, 1, __ATOMIC_RELEASE);
	return NULL;
}

TEST(no_lost_wakeup)
{
	struct writer w = { .n = LOST_ROUNDS };
	struct mmuwatch_event e;
	struct epoll_event ev;
	unsigned int got = 0, sleeps = 0, stuck = 0, i;
	struct mmuwatch_range r;
	pthread_t tid;
	struct mwt m;
	int ep, n;

	MWT_OPEN_OR_SKIP(&m, 2 * LOST_ROUNDS, 2 * LOST_ROUNDS);
	/*
	 * Watched pages with PROT_NONE pages between them: a VMA each, so
	 * that an munmap never splits a VMA over a whole 2 MiB block (which
	 * notifies CLEAR over the block: one burst instead of one event).
	 */
	w.mem = mwt_map(2 * LOST_ROUNDS);
	ASSERT_NE(NULL, w.mem);
	for (i = 0; i < LOST_ROUNDS; i++) {
		ASSERT_EQ(0, mprotect(w.mem + (2 * (size_t)i + 1) * P, P,
				      PROT_NONE));
		ASSERT_EQ(0, mwt_watch(&m, w.mem + 2 * (size_t)i * P, P, i,
				       &r));
	}
	ep = epoll_for(m.fd);
	ASSERT_LE(0, ep);
	ASSERT_EQ(0, pthread_create(&tid, NULL, kill_one_by_one, &w));
	for (;;) {
		int fin = __atomic_load_n(&w.finished, __ATOMIC_ACQUIRE);

		if (fin && got >= __atomic_load_n(&w.done, __ATOMIC_ACQUIRE))
			break;
		/* Empty (or, in the control, one taken): sleep. */
		n = epoll_wait(ep, &ev, 1, 3000 * mwt_timeout_scale());
		sleeps++;
		if (n == 0 && mwt_pending(&m)) {
			/* Asleep with events waiting: a lost wake-up. */
			stuck++;
			break;
		}
		ASSERT_LE(0, n);
		if (control())
			got += mwt_pop(&m, &e);
		else
			got += drain(&m);
	}
	pthread_join(tid, NULL);
	for (i = 0; i < LOST_ROUNDS; i++)
		munmap(w.mem + (2 * (size_t)i + 1) * P, P);
	TH_LOG("%u events, %u sleeps, %u lost wake-ups", got, sleeps, stuck);
	EXPECT_EQ(w.done, got);
	EXPECT_LE(LOST_MIN, got);
	/* The reader went to sleep on an empty ring often enough. */
	EXPECT_LE(LOST_MIN / 4, sleeps);
	EXPECT_EQ(0U, stuck);
	close(ep);
	mwt_close(&m);
}
/* 4000 munmaps outlast the harness's 30 s under the debug kernel. */
MWT_SCALE_TIMEOUT(no_lost_wakeup)

TEST_HARNESS_MAIN
