// SPDX-License-Identifier: GPL-2.0
/*
 * 8 threads race for MWT_RACE_SECS (default 4) seconds, then on until
 * each kind of work reached its floor (more than 10 unwatches, private
 * events and shared-fd replacements), for at most 4 * MW_TIMEOUT_SCALE
 * times as long again (a debug kernel under TCG manages a few operations
 * a second); the floors are checked either way:
 * 5 workers watch/unwatch/munmap/madvise through a shared fd and through a
 * private context each, 1 thread keeps replacing the shared fd (dup2 of a
 * fresh open: the old context is released while the others use it),
 * 1 reads events and resets overflows on the shared fd, 1 watches ranges
 * that the workers unmap. Checks: only documented errnos, and on the
 * private contexts the exact outcome of every watch (valid after unwatch
 * attempt failures, invalid right after munmap, one event per munmap).
 */
#include <fcntl.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mwt.h"

#define P mwt_page
#define WORKERS 5

static int g_fd = -1;
static volatile int g_stop;
static volatile int g_bad;	/* first unexpected errno seen */
static char *g_shared_area;	/* 64 pages that workers remap */

struct worker {
	int id;
	unsigned int seed;
	long watched, unmapped, unwatched, events, word_errors, lost;
};

static void bad(int err, int line)
{
	if (!g_bad)
		g_bad = err ? err * 10000 + line : line;
}

static int shared_errno_ok(int e)
{
	/* The shared context may be replaced or full at any moment. */
	return e == 0 || e == ENOENT || e == ENOSPC || e == EBADF;
}

static void *worker(void *arg)
{
	struct worker *w = arg;
	struct mmuwatch_event e;
	struct mwt m;

	if (mwt_open(&m, 4096, 256)) {
		bad(errno, __LINE__);
		return NULL;
	}
	while (!g_stop) {
		struct mmuwatch_range r, rs;
		char *p = mwt_map(4);
		int op = rand_r(&w->seed) % 4, err;
		uint32_t pend;

		if (!p) {
			bad(errno, __LINE__);
			break;
		}
		if (mwt_watch(&m, p + P, 2 * P, w->id, &r)) {
			bad(errno, __LINE__);
			break;
		}
		w->watched++;
		err = ioctl(g_fd, MMUWATCH_IOC_WATCH, &(struct mmuwatch_range){
			.start = (uintptr_t)p, .len = 4 * P, .cookie = 9 }) ?
			errno : 0;
		if (!shared_errno_ok(err))
			bad(err, __LINE__);
		pend = mwt_pending(&m);
		switch (op) {
		case 0:
			if (mwt_unwatch(&m, &r))
				bad(errno, __LINE__);
			__atomic_fetch_add(&w->unwatched, 1, __ATOMIC_RELAXED);
			if (!mwt_invalid(&m, &r))
				w->word_errors++;
			munmap(p, 4 * P);
			if (mwt_pending(&m) != pend)
				w->word_errors++;
			break;
		case 1:
			munmap(p, 4 * P);
			w->unmapped++;
			if (!mwt_invalid(&m, &r))
				w->word_errors++;
			if (mwt_pending(&m) != pend + 1)
				w->word_errors++;
			break;
		case 2:
			madvise(p + 2 * P, P, MADV_DONTNEED);
			w->unmapped++;
			if (!mwt_invalid(&m, &r))
				w->word_errors++;
			munmap(p, 4 * P);
			if (mwt_pending(&m) != pend + 1)
				w->word_errors++;
			break;
		default:
			/* Shared watch on the common area too, then mprotect:
			 * filtered, the private word stays valid.
			 */
			rs = (struct mmuwatch_range){
				.start = (uintptr_t)g_shared_area +
					 (rand_r(&w->seed) % 60) * P,
				.len = 4 * P };
			err = ioctl(g_fd, MMUWATCH_IOC_WATCH, &rs) ? errno : 0;
			if (!shared_errno_ok(err))
				bad(err, __LINE__);
			mprotect(p, 4 * P, PROT_READ);
			if (!mwt_valid(&m, &r))
				w->word_errors++;
			munmap(p, 4 * P);
			w->unmapped++;
			if (!mwt_invalid(&m, &r))
				w->word_errors++;
			break;
		}
		while (mwt_pop(&m, &e)) {
			if (e.cookie != (uint64_t)w->id)
				w->word_errors++;
			__atomic_fetch_add(&w->events, 1, __ATOMIC_RELAXED);
		}
	}
	w->lost = m.ring->lost;
	mwt_close(&m);
	return NULL;
}

static void *replacer(void *arg)
{
	long *n = arg;

	while (!g_stop) {
		int fd = open(MMUWATCH_DEVICE, O_RDWR | O_NONBLOCK);
		struct mmuwatch_setup s = { .ring_entries = 16, .nr_words = 64 };

		if (fd < 0) {
			bad(errno, __LINE__);
			break;
		}
		if ((*n & 1) && ioctl(fd, MMUWATCH_IOC_SETUP, &s))
			bad(errno, __LINE__);
		if (dup2(fd, g_fd) != g_fd)
			bad(errno, __LINE__);
		close(fd);
		__atomic_fetch_add(n, 1, __ATOMIC_RELAXED);
		usleep(500);
	}
	return NULL;
}

static void *reader(void *arg)
{
	struct mmuwatch_event ev[8];
	long *n = arg;
	uint64_t lost;

	while (!g_stop) {
		ssize_t r = read(g_fd, ev, sizeof(ev));

		if (r > 0)
			*n += r / sizeof(ev[0]);
		else if (errno == EOVERFLOW)
			ioctl(g_fd, MMUWATCH_IOC_RESET_OVERFLOW, &lost);
		else if (errno != EAGAIN)
			bad(errno, __LINE__);
	}
	return NULL;
}

/* Keeps remapping the common area under the shared watches. */
static void *remapper(void *arg)
{
	long *n = arg;
	unsigned int seed = 99;

	while (!g_stop) {
		char *p = g_shared_area + (rand_r(&seed) % 60) * P;

		if (mmap(p, 4 * P, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != p)
			bad(errno, __LINE__);
		p[0] = 1;
		(*n)++;
	}
	return NULL;
}

#define FLOOR 10 /* each of unwatches, private events, replacements */

/* Whether the workers did enough of each kind of work to mean something. */
static bool floors_met(struct worker *w, long *replaced)
{
	long ev = 0, un = 0;
	int i;

	for (i = 0; i < WORKERS; i++) {
		ev += __atomic_load_n(&w[i].events, __ATOMIC_RELAXED);
		un += __atomic_load_n(&w[i].unwatched, __ATOMIC_RELAXED);
	}
	return ev > FLOOR && un > FLOOR &&
	       __atomic_load_n(replaced, __ATOMIC_RELAXED) > FLOOR;
}

TEST(eight_threads)
{
	const char *env = getenv("MWT_RACE_SECS");
	int secs = env ? atoi(env) : 4, i;
	long long ctx0 = mwt_counter("contexts");
	long long act0 = mwt_counter("watches_active");
	struct worker w[WORKERS];
	pthread_t th[WORKERS + 3];
	long replaced = 0, read_ev = 0, remaps = 0, total_ev = 0, total_un = 0;
	/* Threads open contexts of their own: past the default
	 * max_mm_contexts. Raised here (root), put back at the end.
	 */
	long long mmc = mwt_param("max_mm_contexts");

	if (mmc >= 0 && !geteuid())
		ASSERT_EQ(0, mwt_set_param("max_mm_contexts", 4096));
	g_fd = open(MMUWATCH_DEVICE, O_RDWR | O_NONBLOCK);
	if (g_fd < 0 && !getenv("MWT_REQUIRE_DEVICE"))
		SKIP(return, "no device");
	ASSERT_LE(0, g_fd);
	g_shared_area = mwt_map(64);
	ASSERT_NE(NULL, g_shared_area);
	for (i = 0; i < WORKERS; i++) {
		w[i] = (struct worker){ .id = i + 1, .seed = 17 * i + 1 };
		ASSERT_EQ(0, pthread_create(&th[i], NULL, worker, &w[i]));
	}
	ASSERT_EQ(0, pthread_create(&th[WORKERS], NULL, replacer, &replaced));
	ASSERT_EQ(0, pthread_create(&th[WORKERS + 1], NULL, reader, &read_ev));
	ASSERT_EQ(0, pthread_create(&th[WORKERS + 2], NULL, remapper, &remaps));
	sleep(secs);
	/* The floors are counts: a slow kernel gets more time, not less work. */
	for (i = 40 * secs * mwt_timeout_scale(); i > 0; i--) {
		if (floors_met(w, &replaced))
			break;
		usleep(100000);
	}
	g_stop = 1;
	for (i = 0; i < WORKERS + 3; i++)
		ASSERT_EQ(0, pthread_join(th[i], NULL));
	for (i = 0; i < WORKERS; i++) {
		TH_LOG("worker %d: %ld watched, %ld unmapped, %ld unwatched, %ld events",
		       i, w[i].watched, w[i].unmapped, w[i].unwatched, w[i].events);
		EXPECT_EQ(0, w[i].word_errors);
		EXPECT_EQ(0, w[i].lost);
		/* One event per invalidated private watch, none per unwatch. */
		EXPECT_EQ(w[i].unmapped, w[i].events);
		EXPECT_EQ(w[i].watched, w[i].unmapped + w[i].unwatched);
		total_ev += w[i].events;
		total_un += w[i].unwatched;
	}
	TH_LOG("shared fd replaced %ld times, %ld shared events read, %ld remaps",
	       replaced, read_ev, remaps);
	EXPECT_EQ(0, g_bad);
	EXPECT_LT(FLOOR, replaced);
	EXPECT_LT(FLOOR, total_ev);
	EXPECT_LT(FLOOR, total_un);
	close(g_fd);
	/* Every context and watch is gone again. */
	EXPECT_EQ(ctx0, mwt_counter("contexts"));
	EXPECT_EQ(act0, mwt_counter("watches_active"));
	if (mmc >= 0 && !geteuid())
		mwt_set_param("max_mm_contexts", mmc);
}

/* Up to 4 + 16 s at scale 1: the harness's 30 s, stretched alike. */
MWT_SCALE_TIMEOUT(eight_threads)

TEST_HARNESS_MAIN
